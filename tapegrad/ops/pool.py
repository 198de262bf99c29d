"""Pooling over fixed windows with PyTorch's arguments: max_pool2d and avg_pool2d over NCHW
inputs (and max_pool1d/avg_pool1d over NCL ones, max_pool3d/avg_pool3d over NCDHW ones, the
same two ops over one or three spatial axes)."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import torch_keywords
from tapegrad._dtypes import summed_in
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel as compiled
from tapegrad.op import defop, operand_shape
from tapegrad.ops._window import Ints, check_window, layout, spatial

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = [
    "max_pool1d",
    "avg_pool1d",
    "max_pool2d",
    "avg_pool2d",
    "max_pool3d",
    "avg_pool3d",
]


def _window(x: jax.Array, kernel: Ints, stride: Ints, padding: Ints) -> dict[str, Any]:
    """``lax.reduce_window``'s arguments over the last ``len(kernel)`` axes (1 to 3)."""
    lead = (1,) * (x.ndim - len(kernel))
    return {
        "window_dimensions": lead + kernel,
        "window_strides": lead + stride,
        "padding": ((0, 0),) * len(lead) + tuple((p, p) for p in padding),
    }


@partial(compiled, static_argnames=("kernel", "stride", "padding"))
def _max_pool_fn(x: jax.Array, *, kernel: Ints, stride: Ints, padding: Ints) -> jax.Array:
    """The jnp forward: ``lax.reduce_window`` with max, padding with -inf (never chosen)."""
    y: jax.Array = jax.lax.reduce_window(
        x, -jnp.inf, jax.lax.max, **_window(x, kernel, stride, padding)
    )
    return y


@partial(compiled, static_argnames=("kernel", "stride", "padding", "count_include_pad"))
def _avg_pool_fn(
    x: jax.Array, *, kernel: Ints, stride: Ints, padding: Ints, count_include_pad: bool = True
) -> jax.Array:
    """The jnp forward: window sums over zero padding divided by the window size (PyTorch's
    ``count_include_pad=True``) or by the input elements each window covers (``False``: the
    window sums of ones over the same zero padding)."""
    dtype = x.dtype
    x = x.astype(summed_in(dtype))  # float16/bfloat16 window sums in float32, as PyTorch
    total = jax.lax.reduce_window(x, 0.0, jax.lax.add, **_window(x, kernel, stride, padding))
    if count_include_pad:
        count: Any = math.prod(kernel)
    else:
        ones = jnp.ones(x.shape[-len(kernel) :], x.dtype)
        count = jax.lax.reduce_window(
            ones, 0.0, jax.lax.add, **_window(ones, kernel, stride, padding)
        )
    y: jax.Array = (total / count).astype(dtype)
    return y


@defop(name="max_pool2d")
def _max_pool2d(
    x: jax.Array, *, kernel: Ints, stride: Ints, padding: Ints
) -> tuple[jax.Array, tuple[jax.Array]]:
    """The maximum of each (kernel) window over the last ``len(kernel)`` axes (two; one for
    ``max_pool1d``, three for ``max_pool3d``)."""
    return _max_pool_fn(x, kernel=kernel, stride=stride, padding=padding), (x,)


@partial(compiled, static_argnames=("kernel", "stride", "padding"))
def _max_pool_pullback(
    x: jax.Array, g: jax.Array, *, kernel: Ints, stride: Ints, padding: Ints
) -> jax.Array:
    """JAX's derivative of ``_max_pool_fn`` (each window's g to its maximum), taken where
    PyTorch's goes: at a point where a NaN is the maximum (the forward reports it), and a
    -inf beats the -inf padding (padding is never chosen: a window of -inf inputs gives its
    g to an input). A window holding NaNs gives its g to its last NaN in row-major order, as
    PyTorch's scan (``val > max || isnan(val)``): a second pass over the NaN windows, on the
    NaNs' positions, taken only when the input holds a NaN (``lax.cond``)."""
    pool = partial(_max_pool_fn, kernel=kernel, stride=stride, padding=padding)

    def route(picked: jax.Array, cotangent: jax.Array) -> jax.Array:
        _, pull = jax.vjp(pool, picked)
        (gx,) = pull(cotangent)
        out: jax.Array = gx
        return out

    lowest = np.finfo(x.dtype).min  # the lowest finite value: above the -inf padding
    picked = jnp.where(jnp.isnan(x), jnp.inf, jnp.where(x == -jnp.inf, lowest, x))

    def with_nans(_: Any) -> jax.Array:
        in_nan_window = jnp.isnan(pool(x))
        n = len(kernel)
        index = jnp.arange(math.prod(x.shape[-n:]), dtype=jnp.float32).reshape(x.shape[-n:])
        order = jnp.where(jnp.isnan(x), index, -jnp.inf)  # float32: exact to 2**24 positions
        rest = route(picked, jnp.where(in_nan_window, 0, g))
        last = route(order, jnp.where(in_nan_window, g, 0).astype(jnp.float32))
        return rest + last.astype(rest.dtype)

    out: jax.Array = jax.lax.cond(
        jnp.any(jnp.isnan(x)), with_nans, lambda _: route(picked, g), None
    )
    return out


@_max_pool2d.defvjp
def _max_pool_vjp(
    res: tuple[jax.Array], g: jax.Array, needs: tuple[bool, ...], **params: Any
) -> tuple[jax.Array]:
    """``_max_pool_pullback`` of the input (the one residual)."""
    return (_max_pool_pullback(res[0], g, **params),)


@defop(name="avg_pool2d")
def _avg_pool2d(
    x: jax.Array, *, kernel: Ints, stride: Ints, padding: Ints, count_include_pad: bool = True
) -> tuple[jax.Array, tuple[jax.Array]]:
    """The mean of each (kernel) window over the last ``len(kernel)`` axes (two; one for
    ``avg_pool1d``, three for ``avg_pool3d``)."""
    y = _avg_pool_fn(
        x, kernel=kernel, stride=stride, padding=padding, count_include_pad=count_include_pad
    )
    return y, (x,)


_avg_pool2d.defvjp(derived_vjp(_avg_pool_fn))


def _pool_args(
    name: str, x: Any, kernel: Any, stride: Any, padding: Any, n: int = 2
) -> dict[str, Ints]:
    """The checked kernel, stride and padding of pooling over the last ``n`` axes."""
    shape = operand_shape(x, name)
    if len(shape) not in (n + 1, n + 2):
        raise ShapeError(f"{name}: input of shape {shape} must be {layout(n)}.")
    k = spatial(kernel, n, name, "kernel")
    s = k if stride is None else spatial(stride, n, name, "stride")
    p = spatial(padding, n, name, "padding", low=0)
    if any(2 * pi > ki for pi, ki in zip(p, k, strict=True)):
        raise ValueError(
            f"{name}: padding {p} must be at most half the kernel {k} (as in PyTorch)."
        )
    check_window(name, shape, k, (1,) * n, tuple((pi, pi) for pi in p), "window")
    return {"kernel": k, "stride": s, "padding": p}


_CEIL_MODE = (
    "only floor mode is supported (PyTorch's default ceil_mode=False). To keep a last partial "
    "window, tg.pad the input on the bottom and right first (with -inf for max pooling) so it "
    "fits."
)
MAX_ADVICE = {
    "ceil_mode": _CEIL_MODE,
    "dilation": "dilated pooling is not supported: remove it (PyTorch's default dilation=1).",
    "return_indices": "there are no indices to return (and no MaxUnpool2d): remove it; to find "
    "the maxima, compare the input with the pooled output upsampled.",
}
AVG_ADVICE = {
    "ceil_mode": _CEIL_MODE,
    "divisor_override": "not supported: divide the window sums yourself, e.g. "
    "tg.avg_pool2d(x, k) * (kh * kw / divisor).",
}
_CEIL_MODE1 = (
    "only floor mode is supported (PyTorch's default ceil_mode=False). To keep a last partial "
    "window, tg.pad the input at the end of its last axis first (with -inf for max pooling) so "
    "it fits."
)
MAX1_ADVICE = {**MAX_ADVICE, "ceil_mode": _CEIL_MODE1}
AVG1_ADVICE = {"ceil_mode": _CEIL_MODE1}  # PyTorch's avg_pool1d has no divisor_override
_CEIL_MODE3 = (
    "only floor mode is supported (PyTorch's default ceil_mode=False). To keep a last partial "
    "window, tg.pad the input at the end of each pooled axis first (with -inf for max pooling) "
    "so it fits."
)
MAX3_ADVICE = {**MAX_ADVICE, "ceil_mode": _CEIL_MODE3}
AVG3_ADVICE = {
    "ceil_mode": _CEIL_MODE3,
    "divisor_override": "not supported: divide the window sums yourself, e.g. "
    "tg.avg_pool3d(x, k) * (kd * kh * kw / divisor).",
}
"""PyTorch options the pooling layers and functions do not take, and what to do instead;
given PyTorch's default values (``*_DEFAULTS``) they are dropped."""
MAX_DEFAULTS = {"ceil_mode": False, "dilation": 1, "return_indices": False}
AVG_DEFAULTS = {"ceil_mode": False, "divisor_override": None}
AVG1_DEFAULTS = {"ceil_mode": False}
_KERNEL_SIZE = {
    "kernel_size": "the function's name for it is kernel= (or pass it by position, second, "
    "after the input); the layers take kernel_size= as PyTorch's."
}


@torch_keywords(
    {**MAX_ADVICE, **_KERNEL_SIZE}, defaults=MAX_DEFAULTS, order="its fifth parameter is dilation"
)
def max_pool2d(
    x: Any, kernel: int | Ints, stride: int | Ints | None = None, padding: int | Ints = 0
) -> Tensor:
    """Max pooling over the last two axes, PyTorch's ``F.max_pool2d`` (floor mode, no
    dilation).

    Args:
        x: (N, C, H, W) or (C, H, W).
        kernel: window size, an int or (kh, kw).
        stride: step between windows (default: the kernel, as PyTorch).
        padding: implicit -inf padding on both sides, at most half the kernel.

    Returns:
        (N, C, H', W') with ``H' = (H + 2 p - kh) // sh + 1``.

    The VJP is JAX's derivative of ``lax.reduce_window`` (the gradient goes to the maximum
    of each window), compiled and cached per shape, dtype and parameters.

    Raises:
        ShapeError: the input is not 3- or 4-D, or the window is larger than the padded input.
        ValueError: malformed kernel, stride or padding, or padding over half the kernel.
        TypeError: a kernel, stride or padding that is not an int or ints (a float).
    """
    return _max_pool2d(x, **_pool_args("max_pool2d", x, kernel, stride, padding))


@torch_keywords(
    {**AVG_ADVICE, **_KERNEL_SIZE},
    defaults=AVG_DEFAULTS,
    order="its fifth parameter is ceil_mode",
)
def avg_pool2d(
    x: Any,
    kernel: int | Ints,
    stride: int | Ints | None = None,
    padding: int | Ints = 0,
    *,
    count_include_pad: bool = True,
) -> Tensor:
    """Average pooling over the last two axes, PyTorch's ``F.avg_pool2d`` (floor mode;
    ``count_include_pad=True``, the default, counts padded zeros in the mean, ``False`` divides
    by the input elements of each window). Arguments, result and errors as ``max_pool2d``; the
    VJP is JAX's derivative of the forward (each window's g spread over what it averaged)."""
    args = _pool_args("avg_pool2d", x, kernel, stride, padding)
    return _avg_pool2d(x, **args, count_include_pad=bool(count_include_pad))


@torch_keywords(
    {**MAX1_ADVICE, **_KERNEL_SIZE}, defaults=MAX_DEFAULTS, order="its fifth parameter is dilation"
)
def max_pool1d(
    x: Any, kernel: int | Ints, stride: int | Ints | None = None, padding: int | Ints = 0
) -> Tensor:
    """Max pooling over the last axis, PyTorch's ``F.max_pool1d`` (floor mode, no dilation).

    Args:
        x: (N, C, L) or (C, L).
        kernel: window length, an int or ``(k,)``.
        stride: step between windows (default: the kernel, as PyTorch).
        padding: implicit -inf padding on both ends, at most half the kernel.

    Returns:
        (N, C, L') or (C, L') in ``x``'s dtype, ``L' = (L + 2 p - k) // s + 1``.

    The same op as ``max_pool2d`` over one spatial axis (its forward is ``lax.reduce_window``
    over the last ``len(kernel)`` axes, so no unit axis is added); the gradient goes to the
    maximum of each window.

    Raises:
        ShapeError: the input is not 2- or 3-D, or the window is longer than the padded input.
        ValueError: malformed kernel, stride or padding, or padding over half the kernel.
        TypeError: a kernel, stride or padding that is not an int (a float); PyTorch's
            ``ceil_mode=True``, ``dilation``, ``return_indices=True`` or ``kernel_size=``
            (the message says what to write).
    """
    return _max_pool2d(x, **_pool_args("max_pool1d", x, kernel, stride, padding, n=1))


@torch_keywords(
    {**AVG1_ADVICE, **_KERNEL_SIZE},
    defaults=AVG1_DEFAULTS,
    order="its fifth parameter is ceil_mode",
)
def avg_pool1d(
    x: Any,
    kernel: int | Ints,
    stride: int | Ints | None = None,
    padding: int | Ints = 0,
    *,
    count_include_pad: bool = True,
) -> Tensor:
    """Average pooling over the last axis, PyTorch's ``F.avg_pool1d`` (floor mode;
    ``count_include_pad=True``, the default, counts padded zeros in the mean, ``False`` divides
    by the input elements of each window). Arguments, result and errors as ``max_pool1d``
    (zero padding); the same op as ``avg_pool2d`` over one spatial axis, its VJP JAX's
    derivative of the forward (each window's g spread over what it averaged)."""
    args = _pool_args("avg_pool1d", x, kernel, stride, padding, n=1)
    return _avg_pool2d(x, **args, count_include_pad=bool(count_include_pad))


@torch_keywords(
    {**MAX3_ADVICE, **_KERNEL_SIZE}, defaults=MAX_DEFAULTS, order="its fifth parameter is dilation"
)
def max_pool3d(
    x: Any, kernel: int | Ints, stride: int | Ints | None = None, padding: int | Ints = 0
) -> Tensor:
    """Max pooling over the last three axes, PyTorch's ``F.max_pool3d`` (floor mode, no
    dilation).

    Args:
        x: (N, C, D, H, W) or (C, D, H, W).
        kernel: window size, an int or (kd, kh, kw).
        stride: step between windows (default: the kernel, as PyTorch).
        padding: implicit -inf padding on both sides, at most half the kernel.

    Returns:
        (N, C, D', H', W') or (C, D', H', W') in ``x``'s dtype, ``D' = (D + 2 p - kd) // sd
        + 1`` (and so for H', W').

    The same op as ``max_pool2d`` over three spatial axes; the gradient goes to the maximum
    of each window, where PyTorch's does (a NaN reported as the maximum; an input, never the
    padding, in a window of -inf).

    Raises:
        ShapeError: the input is not 4- or 5-D, or the window is larger than the padded input.
        ValueError: malformed kernel, stride or padding, or padding over half the kernel.
        TypeError: a kernel, stride or padding that is not an int (a float); PyTorch's
            ``ceil_mode=True``, ``dilation``, ``return_indices=True`` or ``kernel_size=``
            (the message says what to write).
    """
    return _max_pool2d(x, **_pool_args("max_pool3d", x, kernel, stride, padding, n=3))


@torch_keywords(
    {**AVG3_ADVICE, **_KERNEL_SIZE},
    defaults=AVG_DEFAULTS,
    order="its fifth parameter is ceil_mode",
)
def avg_pool3d(
    x: Any,
    kernel: int | Ints,
    stride: int | Ints | None = None,
    padding: int | Ints = 0,
    *,
    count_include_pad: bool = True,
) -> Tensor:
    """Average pooling over the last three axes, PyTorch's ``F.avg_pool3d`` (floor mode;
    ``count_include_pad=True``, the default, counts padded zeros in the mean, ``False`` divides
    by the input elements of each window). Arguments, result and errors as ``max_pool3d``
    (zero padding; ``divisor_override`` is refused with advice, not ``dilation``); the same op
    as ``avg_pool2d`` over three spatial axes, its VJP JAX's derivative of the forward."""
    args = _pool_args("avg_pool3d", x, kernel, stride, padding, n=3)
    return _avg_pool2d(x, **args, count_include_pad=bool(count_include_pad))
