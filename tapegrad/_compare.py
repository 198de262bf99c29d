"""Helpers of the gradient checkers: tolerances, random cotangents and elementwise comparison."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad.current import graph_cleanup, graph_stats

__all__ = [
    "default_tolerances",
    "is_float",
    "wrt_indices",
    "cotangent",
    "compare",
    "compare_all",
    "surviving_nodes",
    "check_tape",
]

_TOLERANCES: dict[np.dtype[Any], tuple[float, float]] = {
    np.dtype(jnp.bfloat16): (2e-2, 2e-2),
    np.dtype(np.float16): (1e-2, 1e-2),
    np.dtype(np.float32): (1e-5, 1e-5),
    np.dtype(np.float64): (1e-10, 1e-10),
}


def default_tolerances(*arrays: Any) -> tuple[float, float]:
    """The ``(rtol, atol)`` the checkers use for the least precise floating dtype given.

    Args:
        arrays: arrays or dtypes; non-floating ones are ignored.

    Returns:
        ``(1e-5, 1e-5)`` for float32, ``(1e-10, 1e-10)`` for float64, ``(1e-2, 1e-2)`` for
        float16 and ``(2e-2, 2e-2)`` for bfloat16; float32's when no floating dtype is given.
    """
    rtol, atol = _TOLERANCES[np.dtype(np.float64)]
    found = False
    for a in arrays:
        dtype = np.dtype(getattr(a, "dtype", a))
        if dtype in _TOLERANCES:
            found = True
            r, t = _TOLERANCES[dtype]
            rtol, atol = max(rtol, r), max(atol, t)
    return (rtol, atol) if found else _TOLERANCES[np.dtype(np.float32)]


def is_float(a: Any) -> bool:
    return bool(jnp.issubdtype(a.dtype, jnp.floating))


def wrt_indices(wrt: Sequence[int] | None, floats: tuple[int, ...], label: str) -> tuple[int, ...]:
    if wrt is None:
        return floats
    idx = tuple(int(i) for i in wrt)
    bad = [i for i in idx if i not in floats]
    if bad:
        raise ValueError(
            f"{label}: wrt={list(idx)} names inputs {bad} that are not floating; only "
            f"inputs {list(floats)} can require grad."
        )
    return idx


def cotangent(like: Any, seed: int) -> jax.Array:
    """A standard normal array in ``like``'s shape and dtype (NumPy draws it: no compile)."""
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.standard_normal(like.shape), dtype=like.dtype)


def compare(what: str, got: jax.Array, want: jax.Array, rtol: float, atol: float) -> None:
    """Raise ``AssertionError`` unless ``got`` matches ``want`` in shape, dtype and values."""
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(
            f"{what} has shape {tuple(got.shape)} and dtype {got.dtype}, JAX gives shape "
            f"{tuple(want.shape)} and dtype {want.dtype}."
        )
    if not is_float(want):
        mismatch = np.asarray(got) != np.asarray(want)
        if mismatch.any():
            first = tuple(int(i) for i in np.argwhere(mismatch)[0])
            raise AssertionError(
                f"{what} differs from JAX at {int(mismatch.sum())} of {mismatch.size} "
                f"elements (first at {first}: got {np.asarray(got)[first]}, want "
                f"{np.asarray(want)[first]})."
            )
        return
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    both_nan = np.isnan(g) & np.isnan(w)
    same_inf = np.isinf(w) & (g == w)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.where(both_nan | same_inf, 0.0, np.abs(g - w))
    err = np.where(np.isnan(err), np.inf, err)  # a NaN on one side only
    bad = err > atol + rtol * np.where(np.isfinite(w), np.abs(w), 0.0)
    if bad.any():
        rel = err / np.maximum(np.abs(np.where(np.isfinite(w), w, 0.0)), np.finfo(np.float64).tiny)
        worst = tuple(
            int(i) for i in np.unravel_index(int(np.argmax(np.where(bad, err, -1.0))), err.shape)
        )
        raise AssertionError(
            f"{what} differs from JAX at {int(bad.sum())} of {bad.size} elements: max abs "
            f"error {float(err.max()):.3g}, max rel error {float(rel[bad].max()):.3g} "
            f"(worst at index {worst}: got {float(g[worst])!r}, want {float(w[worst])!r}; "
            f"rtol={rtol:g}, "
            f"atol={atol:g})."
        )


def compare_all(
    label: str,
    got: jax.Array,
    want: jax.Array,
    got_grads: dict[int, jax.Array],
    want_grads: dict[int, jax.Array],
    arrays: tuple[jax.Array, ...],
    rtol: float | None,
    atol: float | None,
) -> None:
    """Compare the output and each wanted gradient (``None`` tolerances: the defaults)."""
    d_rtol, d_atol = default_tolerances(*arrays)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    compare(f"{label}: the output", got, want, rtol, atol)
    for i, want_g in want_grads.items():
        x = arrays[i]
        what = f"{label}: the gradient of input {i} (shape {tuple(x.shape)}, dtype {x.dtype})"
        got_g = got_grads[i]
        if got_g.shape != x.shape or got_g.dtype != x.dtype:
            raise AssertionError(
                f"{what} has shape {tuple(got_g.shape)} and dtype {got_g.dtype}; a gradient "
                "must have its input's shape and dtype."
            )
        compare(what, got_g, want_g, rtol, atol)


def surviving_nodes() -> int:
    """The nodes a ``graph_cleanup()`` would leave on the tape now."""
    stats = graph_stats()
    return stats.nodes - stats.hanging_nodes


def check_tape(expected: int, label: str) -> None:
    """Clean up and raise ``AssertionError`` when more than ``expected`` nodes remain."""
    graph_cleanup()
    after = graph_stats()
    if after.nodes != expected:
        raise AssertionError(
            f"{label}: the tape holds {after.nodes - expected} more node(s) after "
            f"tg.graph_cleanup() than before the check ({after}); the op or program keeps "
            "tensors that require grad alive (a leak)."
        )
