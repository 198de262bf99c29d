"""Grad mode: whether ops record nodes, per thread (no_grad / enable_grad / set_grad_enabled)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ContextDecorator
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"]

_F = TypeVar("_F", bound=Callable[..., Any])


class _Mode(threading.local):
    enabled: bool = True


_MODE = _Mode()


def is_grad_enabled() -> bool:
    """Return whether ops on this thread record nodes for tensors that require grad."""
    return _MODE.enabled


class _GradModeContext(ContextDecorator):
    """Sets grad mode on entry and restores the previous mode on exit (per thread)."""

    _target: bool

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def _prev(self) -> list[bool]:
        """The modes this thread saved on entry (one instance may be entered on several)."""
        prev: list[bool] | None = getattr(self._local, "prev", None)
        if prev is None:
            prev = self._local.prev = []
        return prev

    def _recreate_cm(self) -> _GradModeContext:
        # A decorated function may run on several threads at once: one context per call.
        return type(self).__new__(type(self)).__init_from(self)

    def __init_from(self, other: _GradModeContext) -> _GradModeContext:
        self._local = threading.local()
        self._target = other._target
        return self

    def __enter__(self) -> None:
        self._prev.append(_MODE.enabled)
        _MODE.enabled = self._target

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _MODE.enabled = self._prev.pop()


class no_grad(_GradModeContext):  # noqa: N801 - PyTorch's name, used as a context manager
    """Context manager and decorator: ops inside record nothing (this thread only)."""

    _target = False


class enable_grad(_GradModeContext):  # noqa: N801 - PyTorch's name
    """Context manager and decorator: ops inside record nodes again (this thread only)."""

    _target = True


class set_grad_enabled(_GradModeContext):  # noqa: N801 - PyTorch's name
    """Set grad mode to ``mode`` now; as a context manager, restore the previous mode on exit.

    Args:
        mode: ``True`` to record nodes, ``False`` to record none.

    Raises:
        TypeError: ``mode`` is not a bool.
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled expects a bool, got {type(mode).__name__}.")
        super().__init__()
        self._target = mode
        self._prev.append(_MODE.enabled)
        _MODE.enabled = mode
        self._entered_by_init = True

    def __call__(self, func: _F) -> _F:
        # Used as a decorator: undo the switch __init__ made; each call sets the mode itself.
        if getattr(self, "_entered_by_init", False):
            _MODE.enabled = self._prev.pop()
            self._entered_by_init = False
        return super().__call__(func)

    def __enter__(self) -> None:
        if getattr(self, "_entered_by_init", False):
            self._entered_by_init = False  # __init__ already switched the mode
            return
        super().__enter__()
