"""Small helpers and inputs shared by the test modules (one copy each; import, don't redefine).

- ``X``, ``M``: fixed float32 inputs, a vector of shape (3,) and a matrix of shape (2, 3), with
  negative, fractional and non-unit values; read-only, so no test can change them for another.
- ``error_of``: call a function that must raise and get the exception back with its tracebacks
  cleared, so no frame cycle keeps a test's tensors alive past the test (``pytest.raises``'s
  ``ExceptionInfo`` holds the frames).
- ``without_frames``: the same for a block expected to fail (``xfail``).
- ``grad_of``, ``assert_close``: a tensor's gradient as NumPy, and an elementwise comparison.
- ``origin_path``, ``origin_here``: file paths and ``"path:line"`` origins as tapegrad spells
  them in snapshot records and error messages, computed independently of the engine.
- ``gc_off``: a block in which only reference counting frees objects.
- ``compiles``: a block that records every XLA compile JAX runs inside it.

Graph-memory recounts live in ``_recount`` (docs/design.md's definitions, brute force); the shared
fixtures ``base`` and ``start`` in ``conftest.py``; notebook execution in ``_notebooks``.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import jax
import numpy as np
import pytest

import tapegrad as tg

__all__ = [
    "X",
    "M",
    "error_of",
    "without_frames",
    "grad_of",
    "assert_close",
    "origin_path",
    "origin_here",
    "gc_off",
]

E = TypeVar("E", bound=BaseException)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


X = _read_only(np.array([0.5, -1.0, 2.0], np.float32))
"""A float32 vector, shape (3,)."""

M = _read_only(np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32))
"""A float32 matrix, shape (2, 3)."""


def error_of(exc_type: type[E], fn: Callable[..., object], *args: Any, **kw: Any) -> E:
    """Call ``fn(*args, **kw)``; return the ``exc_type`` it raised with tracebacks cleared.

    The tracebacks of the exception and of every exception in its ``__context__`` chain are
    dropped, so no frame cycle keeps a test's tensors alive past the test (the tape guard
    would count them).

    Raises:
        pytest.fail.Exception: ``fn`` returned normally. Any exception that is not an
            ``exc_type`` propagates unchanged.
    """
    try:
        fn(*args, **kw)
    except exc_type as err:
        e: BaseException | None = err
        while e is not None:
            e.__traceback__ = None
            e = e.__context__
        return err
    pytest.fail(f"{fn} did not raise {exc_type.__name__}")


def without_frames(body: Callable[[], None]) -> None:
    """Run ``body``; turn any failure into a bare AssertionError that holds no frame of it.

    For a test marked ``xfail``: the expected failure keeps none of its tensors alive after the
    test, while its type and message still show in the report.

    Raises:
        AssertionError: ``body`` raised (an ``Exception`` or ``pytest.fail``); the message is
            ``"<type name>: <message>"``.
    """
    try:
        body()
    except (Exception, pytest.fail.Exception) as err:  # any failure, by type and message
        msg = f"{type(err).__name__}: {err}"
    else:
        return
    raise AssertionError(msg)


def grad_of(t: tg.Tensor) -> np.ndarray:
    """``t.grad`` as a NumPy array (same shape and dtype); fails the test if ``t.grad`` is None."""
    assert t.grad is not None, "no gradient was written"
    return t.grad.numpy()


def assert_close(actual: Any, expected: Any, rtol: float = 1e-6, atol: float = 1e-6) -> None:
    """Assert ``actual`` and ``expected`` (arrays, tensors' ``.numpy()``, scalars, nested lists)
    are elementwise equal within ``atol + rtol * |expected|``, after NumPy broadcasting."""
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=atol)


def origin_path(path: str) -> str:
    """``path`` (absolute, like ``__file__``) as tapegrad spells origins: relative to the
    current directory when it lies under it, else unchanged."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def origin_here(offset: int = 0) -> str:
    """The caller's origin, ``"path:line"`` as tapegrad formats it, ``offset`` lines below the
    calling line (``-1``: the line above)."""
    frame = sys._getframe(1)
    return f"{origin_path(frame.f_code.co_filename)}:{frame.f_lineno + offset}"


@contextmanager
def gc_off() -> Iterator[None]:
    """Disable the cycle collector for the block, so whatever is freed inside is freed by
    reference counting alone; re-enabled on exit, also on error."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@contextmanager
def compiles() -> Iterator[list[float]]:
    """Record the seconds of every XLA backend compile run inside the block on this thread
    (JAX's monitoring event; a persistent-cache hit is not a compile; what compiles ahead on
    tapegrad's background thread does not count): ``with compiles() as seen: ...``, then
    ``assert seen == []``."""
    seen: list[float] = []
    here = threading.get_ident()

    def listen(event: str, duration_secs: float, **_: str | int) -> None:
        if event == _COMPILE_EVENT and threading.get_ident() == here:
            seen.append(duration_secs)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
