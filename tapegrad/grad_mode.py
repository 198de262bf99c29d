"""Grad mode: whether ops record nodes, per context (no_grad / enable_grad / set_grad_enabled).

Grad mode is a ``contextvars`` variable, like the current tape (``tapegrad.current``): each
thread starts with it on, and a copied context carries it.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Generator
from contextlib import ContextDecorator
from contextvars import ContextVar
from types import TracebackType
from typing import Any, TypeVar

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "grad_enabled"]

_F = TypeVar("_F", bound=Callable[..., Any])

_ENABLED: ContextVar[bool] = ContextVar("tapegrad_grad_enabled", default=True)
_set = _ENABLED.set

grad_enabled = _ENABLED.get
"""``is_grad_enabled`` without a Python frame, for the engine's hot path."""


def is_grad_enabled() -> bool:
    """Return whether ops in this context (thread) record nodes for tensors that require grad."""
    return _ENABLED.get()


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
        self._prev.append(_ENABLED.get())
        _set(self._target)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _set(self._prev.pop())

    def __call__(self, func: _F) -> _F:
        """Decorate ``func``: each call runs in this mode. A generator function's body runs in
        it at every step (each ``next``, ``send``, ``throw``, ``close``), and the caller's mode
        is back between steps, as PyTorch's decorators do; wrapping only the call that makes
        the generator would run its body in whatever mode the consumer has."""
        if inspect.isgeneratorfunction(func):
            return _in_mode_at_each_step(func, self._target)  # type: ignore[return-value]
        return super().__call__(func)


def _in_mode_at_each_step(
    func: Callable[..., Generator[Any, Any, Any]], mode: bool
) -> Callable[..., Generator[Any, Any, Any]]:
    """``func`` (a generator function) with grad mode ``mode`` around each step of its body."""

    def step(call: Callable[..., Any], *args: Any) -> Any:
        prev = _ENABLED.get()
        _set(mode)
        try:
            return call(*args)
        finally:
            _set(prev)

    @functools.wraps(func)
    def generator(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        gen = func(*args, **kwargs)  # runs none of the body yet
        try:
            value = step(gen.send, None)
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    step(gen.close)
                    raise
                except BaseException as exc:  # thrown in by the consumer: the body's to handle
                    value = step(gen.throw, exc)
                else:
                    value = step(gen.send, sent)
        except StopIteration as stop:
            return stop.value

    return generator


class _BareDecorator(_GradModeContext):
    """A grad-mode context that also decorates without parentheses (``@tg.no_grad``), as
    PyTorch's does."""

    def __new__(cls, func: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        if func is None:
            return self
        if not callable(func):
            raise TypeError(
                f"{cls.__name__} takes no arguments; use `with tg.{cls.__name__}():` or "
                f"decorate a function (@tg.{cls.__name__}), got {type(func).__name__}."
            )
        _GradModeContext.__init__(self)
        return self(func)

    def __init__(self, func: None = None) -> None:  # a function went to __new__ instead
        super().__init__()


class no_grad(_BareDecorator):  # noqa: N801 - PyTorch's name, used as a context manager
    """Context manager and decorator (``@tg.no_grad()`` or ``@tg.no_grad``): ops inside
    record nothing (this thread only).

    Raises:
        TypeError: an argument that is not a function to decorate.
    """

    _target = False


class enable_grad(_BareDecorator):  # noqa: N801 - PyTorch's name
    """Context manager and decorator (``@tg.enable_grad()`` or ``@tg.enable_grad``): ops
    inside record nodes again (this thread only).

    Raises:
        TypeError: an argument that is not a function to decorate.
    """

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
        self._prev.append(_ENABLED.get())
        _set(mode)
        self._entered_by_init = True

    def __call__(self, func: _F) -> _F:
        # Used as a decorator: undo the switch __init__ made; each call sets the mode itself.
        if getattr(self, "_entered_by_init", False):
            _set(self._prev.pop())
            self._entered_by_init = False
        return super().__call__(func)

    def __enter__(self) -> None:
        if getattr(self, "_entered_by_init", False):
            self._entered_by_init = False  # __init__ already switched the mode
            return
        super().__enter__()
