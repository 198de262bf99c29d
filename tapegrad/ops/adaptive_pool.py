"""Adaptive pooling with PyTorch's windows to a fixed output size: ``adaptive_avg_pool1d``/
``2d``/``3d`` and ``adaptive_max_pool1d``/``2d``."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._dtypes import summed_in
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel as compiled
from tapegrad.op import defop, operand_shape
from tapegrad.ops._window import Ints, layout, spatial

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
]


def _windows(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's adaptive windows along one axis: output i pools the inputs
    ``floor(i * n_in / n_out)`` to ``ceil((i + 1) * n_in / n_out)`` (exclusive). Returns the
    ``(n_out, k)`` indices of each window (``k`` its longest; past a window's end its last
    index again), the ``(n_out, k)`` mask of its own entries and the ``(n_out,)`` counts."""
    i = np.arange(n_out)
    start, stop = (i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)
    counts = stop - start
    idx = start[:, None] + np.arange(int(counts.max()))
    return np.minimum(idx, stop[:, None] - 1).astype(np.int32), idx < stop[:, None], counts


@partial(compiled, static_argnames=("size",))
def _adaptive_avg_fn(x: jax.Array, *, size: Ints) -> jax.Array:
    """The jnp forward over the last ``len(size)`` axes, one at a time: equal windows (the
    size divides) as a reshape and a mean, others gathered ``(n_out, k)`` (constant indices:
    memory ~k / (n_in / n_out) times x's, not an (n_out, n_in) matrix) and summed over
    their own entries; float16 and bfloat16 in float32 (``summed_in``), as PyTorch."""
    dtype = x.dtype
    x = x.astype(summed_in(dtype))
    n = len(size)
    for k, n_out in enumerate(size):
        axis = x.ndim - n + k
        n_in, after = x.shape[axis], (1,) * (n - k - 1)
        if n_in % n_out == 0:
            split = (*x.shape[:axis], n_out, n_in // n_out, *x.shape[axis + 1 :])
            x = jnp.mean(x.reshape(split), axis=axis + 1)
            continue
        idx, own, counts = _windows(n_in, n_out)
        picked = jnp.take(x, jnp.asarray(idx), axis=axis)  # (..., n_out, k, ...)
        total = jnp.sum(jnp.where(own.reshape(own.shape + after), picked, 0), axis=axis + 1)
        x = total / jnp.asarray(counts.reshape(counts.shape + after), x.dtype)
    return x.astype(dtype)


@defop(name="adaptive_avg_pool")
def _adaptive_avg_pool(x: jax.Array, *, size: Ints) -> tuple[jax.Array, tuple[jax.Array]]:
    """The mean of PyTorch's adaptive windows over the last ``len(size)`` axes."""
    return _adaptive_avg_fn(x, size=size), (x,)


_adaptive_avg_pool.defvjp(derived_vjp(_adaptive_avg_fn))


@partial(compiled, static_argnames=("size",))
def _adaptive_max_fn(x: jax.Array, *, size: Ints) -> jax.Array:
    """The jnp forward over the last ``len(size)`` axes, one at a time from the last: each
    window gathered ``(n_out, k)`` (its last index repeated past its end, which changes no
    maximum) and its chosen entry taken, where PyTorch's loop (in row-major order over the
    window, ``val > max || isnan(val)``) chooses: the last NaN if any, else the first
    maximum (a window of -inf its first entry). Reducing the last axis first keeps that
    order across axes (the first row holding the maximum, then its first column), so the
    derivative JAX takes of the ``take_along_axis`` sends each g to PyTorch's index."""
    n = len(size)
    for k in reversed(range(n)):
        axis = x.ndim - n + k
        idx, _, _ = _windows(x.shape[axis], size[k])
        picked = jnp.take(x, jnp.asarray(idx), axis=axis)  # (..., n_out, k, ...)
        width = idx.shape[1]
        nan = jnp.isnan(picked)
        last_nan = width - 1 - jnp.argmax(jnp.flip(nan, axis + 1), axis=axis + 1, keepdims=True)
        first_max = jnp.argmax(
            jnp.where(nan, -jnp.inf, picked), axis=axis + 1, keepdims=True
        )  # argmax gives the first of ties
        choice = jnp.where(jnp.any(nan, axis=axis + 1, keepdims=True), last_nan, first_max)
        x = jnp.take_along_axis(picked, choice, axis=axis + 1).squeeze(axis + 1)
    return x


@defop(name="adaptive_max_pool")
def _adaptive_max_pool(x: jax.Array, *, size: Ints) -> tuple[jax.Array, tuple[jax.Array]]:
    """The maximum of PyTorch's adaptive windows over the last ``len(size)`` axes."""
    return _adaptive_max_fn(x, size=size), (x,)


_adaptive_max_pool.defvjp(derived_vjp(_adaptive_max_fn))


def _adaptive(name: str, x: Any, output_size: Any, n: int) -> dict[str, Ints]:
    """The checked output size of adaptive pooling over the last ``n`` axes (``None``
    entries keep the input's size)."""
    shape = operand_shape(x, name)
    if len(shape) not in (n + 1, n + 2) or 0 in shape[-n:]:
        raise ShapeError(f"{name}: input of shape {shape} must be {layout(n)}, spatial sizes > 0.")
    dtype = x.dtype if hasattr(x, "dtype") else np.result_type(x)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(
            f"{name}: a {dtype} input is not pooled (PyTorch refuses it too); cast it first: "
            "x.astype(tg.float32)."
        )
    given = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * n
    if len(given) != n:
        raise ValueError(f"{name}: output_size={output_size!r} must be an int or {n} ints.")
    keep = tuple(shape[-n + k] if v is None else v for k, v in enumerate(given))  # None: as is
    return {"size": spatial(keep, n, name, "output_size")}


def adaptive_avg_pool1d(x: Any, output_size: int) -> Tensor:
    """Adaptive average pooling over the last axis, PyTorch's ``F.adaptive_avg_pool1d``:
    output element i averages inputs ``floor(i L / L_out)`` to ``ceil((i + 1) L / L_out)``.

    Args:
        x: (N, C, L) or (C, L).
        output_size: ``L_out``, an int >= 1.

    Returns:
        (N, C, L_out) or (C, L_out), in ``x``'s dtype.

    The forward averages equal windows with a reshape and a mean, others by gathering them
    (float16 and bfloat16 in float32, as PyTorch); the VJP is JAX's derivative of it (each
    output's g spread evenly over its window), compiled per shape.

    Raises:
        ShapeError: the input is not 2- or 3-D, or its length is 0.
        ValueError: ``output_size`` below 1 or of the wrong count.
        TypeError: ``output_size`` not an int; an input that is not floating point.
    """
    return _adaptive_avg_pool(x, **_adaptive("adaptive_avg_pool1d", x, output_size, 1))


def adaptive_avg_pool2d(x: Any, output_size: int | tuple[int | None, int | None]) -> Tensor:
    """Adaptive average pooling over the last two axes, PyTorch's ``F.adaptive_avg_pool2d``
    (``adaptive_avg_pool1d``'s windows along each; ``(1, 1)`` is global average pooling).

    Args:
        x: (N, C, H, W) or (C, H, W).
        output_size: ``(H_out, W_out)`` or one int for both; ``None`` keeps that size.

    Returns:
        (N, C, H_out, W_out) or (C, H_out, W_out), in ``x``'s dtype.

    Raises:
        ShapeError: the input is not 3- or 4-D, or a spatial size is 0.
        ValueError: an output size below 1 or of the wrong count.
        TypeError: an output size that is not an int or ``None``; an input that is not
            floating point.
    """
    return _adaptive_avg_pool(x, **_adaptive("adaptive_avg_pool2d", x, output_size, 2))


def adaptive_avg_pool3d(
    x: Any, output_size: int | tuple[int | None, int | None, int | None]
) -> Tensor:
    """Adaptive average pooling over the last three axes, PyTorch's ``F.adaptive_avg_pool3d``
    (``adaptive_avg_pool1d``'s windows along each).

    Args:
        x: (N, C, D, H, W) or (C, D, H, W).
        output_size: ``(D_out, H_out, W_out)`` or one int for all; ``None`` keeps that size.

    Returns:
        (N, C, D_out, H_out, W_out) or (C, D_out, H_out, W_out), in ``x``'s dtype.

    Raises:
        ShapeError: the input is not 4- or 5-D, or a spatial size is 0.
        ValueError: an output size below 1 or of the wrong count.
        TypeError: an output size that is not an int or ``None``; an input that is not
            floating point.
    """
    return _adaptive_avg_pool(x, **_adaptive("adaptive_avg_pool3d", x, output_size, 3))


def no_indices(owner: str, return_indices: Any) -> None:
    """Refuse PyTorch's ``return_indices=True`` of adaptive max pooling (taken, in PyTorch's
    position, so that ``False`` is a no-op), as ``max_pool2d`` refuses it.

    Raises:
        TypeError: ``return_indices`` is true, naming ``owner`` and what to do instead.
    """
    if return_indices:
        raise TypeError(
            f"{owner} got return_indices={return_indices!r}: there are no indices to return "
            "(as for tg.max_pool2d; no MaxUnpool): remove it; to find the maxima, compare "
            "the input with the pooled output."
        )


def adaptive_max_pool1d(x: Any, output_size: int, return_indices: bool = False) -> Tensor:
    """Adaptive max pooling over the last axis, PyTorch's ``F.adaptive_max_pool1d``: output
    element i is the maximum of inputs ``floor(i L / L_out)`` to ``ceil((i + 1) L / L_out)``.

    Args:
        x: (N, C, L) or (C, L), floating point.
        output_size: ``L_out``, an int >= 1.
        return_indices: PyTorch's; only ``False`` (no indices are returned).

    Returns:
        (N, C, L_out) or (C, L_out), in ``x``'s dtype (a NaN in a window is its maximum).

    The VJP is JAX's derivative of the forward (a gather of each window and a
    ``take_along_axis`` of its chosen entry), compiled per shape: each g goes to the entry
    PyTorch's index names (the first maximum; the last NaN), as ``max_pool1d``'s.

    Raises:
        ShapeError: the input is not 2- or 3-D, or its length is 0.
        ValueError: ``output_size`` below 1 or of the wrong count.
        TypeError: ``output_size`` not an int; an input that is not floating point;
            ``return_indices=True`` (the message says what to do).
    """
    no_indices("adaptive_max_pool1d()", return_indices)
    return _adaptive_max_pool(x, **_adaptive("adaptive_max_pool1d", x, output_size, 1))


def adaptive_max_pool2d(
    x: Any, output_size: int | tuple[int | None, int | None], return_indices: bool = False
) -> Tensor:
    """Adaptive max pooling over the last two axes, PyTorch's ``F.adaptive_max_pool2d``
    (``adaptive_max_pool1d``'s windows along each; ``1`` is global max pooling).

    Args:
        x: (N, C, H, W) or (C, H, W), floating point.
        output_size: ``(H_out, W_out)`` or one int for both; ``None`` keeps that size.
        return_indices: PyTorch's; only ``False`` (no indices are returned).

    Returns:
        (N, C, H_out, W_out) or (C, H_out, W_out), in ``x``'s dtype.

    The VJP is JAX's derivative of the forward: each g goes to the entry PyTorch's index
    names (the first maximum in row-major order; the last NaN).

    Raises:
        ShapeError: the input is not 3- or 4-D, or a spatial size is 0.
        ValueError: an output size below 1 or of the wrong count.
        TypeError: an output size that is not an int or ``None``; an input that is not
            floating point; ``return_indices=True``.
    """
    no_indices("adaptive_max_pool2d()", return_indices)
    return _adaptive_max_pool(x, **_adaptive("adaptive_max_pool2d", x, output_size, 2))
