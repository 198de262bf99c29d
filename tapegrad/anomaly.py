"""Anomaly mode: a backward that produces NaN or inf stops at the first VJP that did, naming it.

``with tg.detect_anomaly(): loss.backward()`` checks every cotangent a VJP returns (and the
starting gradient) for NaN and inf, and raises ``AnomalyError`` (a ``RuntimeError``) naming
the op, its origin (file:line) and function, and which input's gradient went bad. VJPs run in
reverse order of creation, so the first VJP that produces a non-finite value is the one
closest to the loss: the op to look at. The check reads each cotangent back to the host, so it
slows a backward pass down; it is off unless asked for, per context (``contextvars``).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np

from tapegrad.errors import AnomalyError

if TYPE_CHECKING:
    from tapegrad.node import Node

__all__ = ["detect_anomaly", "checker", "is_anomaly_enabled"]

_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("tapegrad_anomaly", default=False)

Check = Callable[["Node", Sequence[Any]], None]


@contextmanager
def detect_anomaly() -> Iterator[None]:
    """Context manager (and decorator): every backward inside it raises ``AnomalyError`` at
    the first VJP whose output holds NaN or inf, naming that op and its origin.

    Raises:
        AnomalyError: (inside the block) a backward produced NaN or inf; the exception
            propagates as a VJP's would (no ``.grad`` is written).
    """
    token = _ENABLED.set(True)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def is_anomaly_enabled() -> bool:
    """Whether anomaly mode is on in this context."""
    return _ENABLED.get()


def _bad(a: Any) -> str | None:
    """``"NaN"``, ``"inf"`` or ``None`` for a float array (non-float arrays are never bad)."""
    if not isinstance(a, jnp.ndarray) or not jnp.issubdtype(a.dtype, jnp.inexact):
        return None
    host = np.asarray(a)
    if np.isnan(host).any():
        return "NaN"
    if np.isinf(host).any():
        return "inf"
    return None


def _check_seed(seeds: Sequence[Any]) -> None:
    for i, g in enumerate(seeds):
        bad = _bad(g)
        if bad is not None:
            raise AnomalyError(
                f"detect_anomaly: the gradient backward() started from (root {i}) already "
                f"holds {bad}; check the value passed as grad=, or the loss itself."
            )


def _check_vjp(node: Node, cotangents: Sequence[Any]) -> None:
    for i, ct in enumerate(cotangents):
        bad = _bad(ct)
        if bad is not None:
            func = node.code.co_qualname if node.code is not None else "<unknown>"
            raise AnomalyError(
                f"detect_anomaly: the VJP of op {node.name!r} created at {node.origin} (in "
                f"{func}) produced {bad} in the gradient of its input {i} (shape "
                f"{tuple(np.shape(ct))}). It is the first op of this backward to do so; look "
                "at its inputs there (log or sqrt of 0, division by 0, overflow)."
            )


def checker(seeds: Sequence[Any]) -> Check | None:
    """The per-VJP check when anomaly mode is on (after checking ``seeds``), else ``None``."""
    if not _ENABLED.get():
        return None
    _check_seed(seeds)
    return _check_vjp
