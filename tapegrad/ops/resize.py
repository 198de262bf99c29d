"""Resizing in PyTorch's conventions: ``interpolate`` (``F.interpolate``'s nearest,
nearest-exact, linear, bilinear, trilinear, bicubic and area modes) and ``pixel_shuffle`` /
``pixel_unshuffle``.

``interpolate`` is one op: each resized axis is a gather (nearest modes) or a product with a
small ``(out, in)`` matrix of interpolation weights (linear and cubic modes), built from the static
sizes when the kernel compiles (a constant of the compiled program, never per call), with
PyTorch's source-index rules computed in the input's float dtype as PyTorch's CPU kernels
compute them (so the chosen pixels and weights are PyTorch's). Its VJP is the transpose of
that forward (the transposed matrices, or a scatter-add of the gathered pixels), compiled
per shape; a node keeps only the input's shape.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import integer
from tapegrad._dtypes import summed_in
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import as_operand, defop, operand_shape
from tapegrad.ops.adaptive_pool import adaptive_avg_pool1d, adaptive_avg_pool2d

__all__ = ["interpolate", "pixel_shuffle", "pixel_unshuffle"]

_LINEAR = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
"""The interpolating modes and the input rank each takes (PyTorch's)."""
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic", "area")
_CUBIC_A = -0.75
"""The cubic convolution's parameter (Keys 1981), PyTorch's and OpenCV's."""


def _sources(
    mode: str, n_in: int, n_out: int, scale: float | None, align: bool, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PyTorch's source indices and weights along one axis: ``(i0, i1, w1)``, output ``j``
    being ``(1 - w1[j]) x[i0[j]] + w1[j] x[i1[j]]`` (a nearest mode: ``w1`` all zeros).
    ``scale`` is the user's ``1 / scale_factor`` when given (PyTorch's rule), else
    ``n_in / n_out``. The arithmetic is PyTorch's CPU kernels' (``nearest_idx``,
    ``area_pixel_compute_source_index``): the nearest modes' step in float32 whatever the
    dtype, the linear modes' in float64 for float64 inputs and float32 for the others
    (float16 and bfloat16 included), so the same pixels and weights are picked."""
    nearest = mode in ("nearest", "nearest-exact")
    t: Any = np.float64 if dtype == np.float64 and not nearest else np.float32
    dst = np.arange(n_out)
    step: Any = t(scale) if scale is not None else t(n_in) / t(n_out)
    if nearest:
        if mode == "nearest":
            src = np.floor(dst.astype(np.float32) * step)
        else:  # (dst + 0.5) * step in double, rounded to float, as PyTorch's
            src = np.floor(((dst + 0.5) * float(step)).astype(np.float32))
        i0 = np.minimum(src.astype(np.int64), n_in - 1)
        return i0, i0, np.zeros(n_out, t)
    if n_in == n_out:  # PyTorch copies the axis (whatever scale_factor gave this size)
        return dst, dst, np.zeros(n_out, t)
    if align:
        step = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        src = step * dst.astype(t)
    else:
        src = ((dst + 0.5) * float(step) - 0.5).astype(t)
        src = np.maximum(src, t(0))
    i0 = src.astype(np.int64)  # src >= 0: truncation is floor
    i1 = np.where(i0 < n_in - 1, i0 + 1, i0)
    return i0, i1, (src - i0.astype(t)).astype(t)


def _cubic_matrix(
    n_in: int, n_out: int, scale: float | None, align: bool, dtype: np.dtype
) -> np.ndarray:
    """PyTorch's bicubic weights along one axis as an ``(out, in)`` matrix: output ``j``
    reads the four pixels ``floor(s) - 1 .. floor(s) + 2`` around its source ``s`` (clamped
    to the axis: the border pixels repeat), weighted by the cubic convolution of the
    distance with ``A = -0.75`` (``get_cubic_upsample_coefficients``); ``s`` is not clamped
    to 0 as the linear modes' is, and is computed in float32 (float64 for float64 inputs)."""
    t: Any = np.float64 if dtype == np.float64 else np.float32
    dst = np.arange(n_out)
    if align:
        step = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        src = step * dst.astype(t)
    else:
        step = t(scale) if scale is not None else t(n_in) / t(n_out)
        src = (step * (dst.astype(t) + t(0.5)) - t(0.5)).astype(t)
    base = np.floor(src)
    frac = (src - base).astype(t)
    a = t(_CUBIC_A)

    def near(x: Any) -> Any:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Any) -> Any:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    taps = (far(frac + 1), near(frac), near(1 - frac), far(2 - frac))
    weights = np.zeros((n_out, n_in), t)
    for k, w in enumerate(taps):
        at = np.clip(base.astype(np.int64) - 1 + k, 0, n_in - 1)
        np.add.at(weights, (dst, at), w)
    return weights


@partial(kernel, static_argnames=("mode", "sizes", "scales", "align"))
def _resize_fn(
    x: jax.Array,
    *,
    mode: str,
    sizes: tuple[int, ...],
    scales: tuple[float | None, ...],
    align: bool,
) -> jax.Array:
    """Resize the trailing ``len(sizes)`` axes of ``x`` one after the other."""
    n = len(sizes)
    dtype = np.dtype(x.dtype)
    out_dtype = x.dtype
    if mode not in ("nearest", "nearest-exact"):
        x = x.astype(summed_in(dtype))  # float16/bfloat16 weighted in float32, as PyTorch
    for k, (n_out, scale) in enumerate(zip(sizes, scales, strict=True)):
        axis = x.ndim - n + k
        if mode == "bicubic":
            weights = _cubic_matrix(x.shape[axis], n_out, scale, align, dtype)
        else:
            i0, i1, w1 = _sources(mode, x.shape[axis], n_out, scale, align, dtype)
            if mode in ("nearest", "nearest-exact"):
                x = jnp.take(x, jnp.asarray(i0), axis=axis)
                continue
            weights = np.zeros((n_out, x.shape[axis]), w1.dtype)
            rows = np.arange(n_out)
            np.add.at(weights, (rows, i0), 1 - w1)
            np.add.at(weights, (rows, i1), w1)
        y = jnp.tensordot(jnp.asarray(weights, x.dtype), x, axes=([1], [axis]))
        x = jnp.moveaxis(y, 0, axis)
    return x.astype(out_dtype)


@defop(name="interpolate")
def _interpolate(
    x: jax.Array,
    *,
    mode: str,
    sizes: tuple[int, ...],
    scales: tuple[float | None, ...],
    align: bool,
) -> tuple[jax.Array, tuple[tuple[int, ...]]]:
    """``x`` (N, C, *S) resized to (N, C, *sizes); the residual is ``x``'s shape."""
    return _resize_fn(x, mode=mode, sizes=sizes, scales=scales, align=align), (x.shape,)


@partial(kernel, static_argnames=("shape", "mode", "sizes", "scales", "align"))
def _resize_transpose(
    g: jax.Array,
    *,
    shape: tuple[int, ...],
    mode: str,
    sizes: tuple[int, ...],
    scales: tuple[float | None, ...],
    align: bool,
) -> jax.Array:
    """The transpose of the (linear) resize of an input of ``shape``, applied to ``g``."""
    resize = partial(_resize_fn, mode=mode, sizes=sizes, scales=scales, align=align)
    (gx,) = jax.linear_transpose(resize, jax.ShapeDtypeStruct(shape, g.dtype))(g)  # type: ignore[no-untyped-call]
    out: jax.Array = gx
    return out


@_interpolate.defvjp
def _interpolate_vjp(res: tuple[tuple[int, ...]], g: jax.Array, **params: Any) -> tuple[jax.Array]:
    """Resizing is linear: gx is its transpose applied to g (JAX's ``linear_transpose`` of
    the forward: the transposed interpolation matrices, or a scatter-add into the source
    pixels), so a node keeps the input's shape, not the input."""
    (shape,) = res
    return (_resize_transpose(g, shape=shape, **params),)


def _per_axis(value: Any, n: int, what: str) -> tuple[Any, ...]:
    """``value`` (one number, or one per spatial axis) as a tuple of ``n``.

    Raises:
        ValueError: a sequence of another length (PyTorch's message, and what to pass).
    """
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(
                f"interpolate: the input has {n} spatial axes but {what} has {len(value)} "
                f"entries ({list(value)}); give one per spatial axis, for an input "
                "(N, C, d1, ..., dK) and sizes or factors (o1, ..., oK)."
            )
        return tuple(value)
    return (value,) * n


def interpolate(
    input: Any,  # noqa: A002 - PyTorch's name
    size: int | tuple[int, ...] | None = None,
    scale_factor: float | tuple[float, ...] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial axes of ``input`` (PyTorch's ``F.interpolate``).

    Args:
        input: (N, C, *S) with 1, 2 or 3 spatial axes S.
        size: the output's spatial sizes: an int for every axis or one per axis.
        scale_factor: instead of ``size``: a multiplier per axis (or one for all); the
            output size is ``floor(S * scale_factor)``, and the source index of an output
            pixel uses ``1 / scale_factor`` unless ``recompute_scale_factor`` (PyTorch's
            rule: the two differ when ``S * scale_factor`` is not an integer).
        mode: ``"nearest"`` (PyTorch's default: source ``floor(j * scale)``, which shifts
            the image by half a pixel; ``"nearest-exact"`` is ``floor((j + 0.5) * scale)``,
            as PIL and scikit-image), ``"linear"`` (3-D input), ``"bilinear"`` (4-D),
            ``"trilinear"`` (5-D), ``"bicubic"`` (4-D: the four pixels around each source
            position, weighted by the cubic convolution with ``A = -0.75``, the border
            pixels repeated; PyTorch's and OpenCV's; values may overshoot the input's
            range), or ``"area"`` (adaptive average pooling; 3-D and 4-D).
        align_corners: for the linear and cubic modes: ``True`` maps the corner pixels'
            centres onto each other, ``False`` (the default) their outer edges; refused for
            the other modes, as PyTorch does.
        recompute_scale_factor: with ``scale_factor``: compute the source indices from the
            output size instead (``S / out``).
        antialias: only ``False`` (tapegrad does not low-pass filter when downsampling).

    Returns:
        (N, C, *sizes), ``input``'s dtype. The VJP is the forward's transpose (JAX's): the
        transposed interpolation matrices (linear and cubic modes) or a scatter-add into the
        source pixels (nearest modes), equal to PyTorch's (except where PyTorch's bicubic
        backward copies the gradient because every size is kept, while its forward
        interpolated with a ``scale_factor`` other than 1).

    Raises:
        ShapeError: an input that is not 3-, 4- or 5-D, or a mode that needs another rank.
        ValueError: neither or both of ``size`` and ``scale_factor``; a size or factor per
            axis of the wrong length or not positive; ``align_corners`` with a nearest or
            area mode; ``recompute_scale_factor`` with ``size``; an unknown mode;
            ``antialias=True``.
        TypeError: a size that is not an integer.
    """
    shape = operand_shape(input, "interpolate")
    n = len(shape) - 2
    if mode not in _MODES:
        raise ValueError(
            f"interpolate: mode={mode!r} is not one of {', '.join(map(repr, _MODES))}."
        )
    if n not in (1, 2, 3):
        raise ShapeError(
            f"interpolate: input of shape {shape} must be (N, C, *spatial) with 1, 2 or 3 "
            "spatial axes; add the batch axis of an unbatched image with x[None]."
        )
    if mode in _LINEAR and len(shape) != _LINEAR[mode]:
        want = {3: "linear", 4: "bilinear", 5: "trilinear"}[len(shape)]
        raise ShapeError(
            f"interpolate: got a {len(shape)}-D input, but mode {mode!r} needs a "
            f"{_LINEAR[mode]}-D one; for this input use mode={want!r}."
        )
    if antialias:
        raise ValueError("interpolate: antialias=True is not supported; pass antialias=False.")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError(
            "interpolate: align_corners can only be set with the interpolating modes linear, "
            f"bilinear, bicubic and trilinear, not {mode!r}; leave it out."
        )
    if (size is None) == (scale_factor is None):
        raise ValueError(
            "interpolate: give exactly one of size and scale_factor"
            + (" (both were given)." if size is not None else ".")
        )
    scales: tuple[float | None, ...] = (None,) * n
    if size is not None:
        if recompute_scale_factor is not None:
            raise ValueError(
                "interpolate: recompute_scale_factor is not meaningful with an explicit size; "
                "leave it out."
            )
        sizes = tuple(integer(s, "interpolate: size") for s in _per_axis(size, n, "size"))
    else:
        factors = tuple(float(f) for f in _per_axis(scale_factor, n, "scale_factor"))
        if min(factors) <= 0 or not all(map(math.isfinite, factors)):
            raise ValueError(f"interpolate: scale_factor={scale_factor!r} must be positive.")
        sizes = tuple(math.floor(s * f) for s, f in zip(shape[2:], factors, strict=True))
        if not recompute_scale_factor:
            scales = tuple(1.0 / f for f in factors)
    if min(sizes) <= 0:
        raise ValueError(
            f"interpolate: the output size {sizes} of input {shape} must be positive on every "
            "axis; use a larger size or scale_factor."
        )
    if mode == "area":
        if n == 3:
            raise ShapeError("interpolate: mode 'area' takes 3-D and 4-D inputs here.")
        if n == 1:
            return adaptive_avg_pool1d(input, sizes[0])
        return adaptive_avg_pool2d(input, (sizes[0], sizes[1]))
    return _interpolate(input, mode=mode, sizes=sizes, scales=scales, align=bool(align_corners))


def _factor(name: str, value: Any) -> int:
    r = integer(value, f"{name}: the factor")
    if r <= 0:
        raise ValueError(f"{name}: the factor must be positive, got {r}.")
    return r


def pixel_shuffle(x: Any, upscale_factor: int) -> Tensor:
    """Rearrange (*, C r^2, H, W) into (*, C, H r, W r) (PyTorch's ``F.pixel_shuffle``: a
    sub-pixel convolution's upsampling); a reshape and a transpose, differentiable.

    Raises:
        ShapeError: fewer than 3 axes, or channels not divisible by ``r^2``.
        ValueError: a factor that is not positive.
        TypeError: a factor that is not an integer.
    """
    r = _factor("pixel_shuffle", upscale_factor)
    t = x if isinstance(x, Tensor) else Tensor(as_operand(x, "pixel_shuffle"))
    if t.ndim < 3 or t.shape[-3] % (r * r):
        raise ShapeError(
            f"pixel_shuffle: input of shape {t.shape} must be (*, C * {r * r}, H, W): at least "
            f"3 axes and channels divisible by upscale_factor^2 = {r * r}."
        )
    *lead, c, h, w = t.shape
    k = len(lead)
    y = t.reshape(*lead, c // (r * r), r, r, h, w)
    y = y.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    out: Tensor = y.reshape(*lead, c // (r * r), h * r, w * r)
    return out


def pixel_unshuffle(x: Any, downscale_factor: int) -> Tensor:
    """Rearrange (*, C, H r, W r) into (*, C r^2, H, W) (PyTorch's ``F.pixel_unshuffle``,
    the inverse of ``pixel_shuffle``).

    Raises:
        ShapeError: fewer than 3 axes, or a height or width not divisible by ``r``.
        ValueError: a factor that is not positive.
        TypeError: a factor that is not an integer.
    """
    r = _factor("pixel_unshuffle", downscale_factor)
    t = x if isinstance(x, Tensor) else Tensor(as_operand(x, "pixel_unshuffle"))
    if t.ndim < 3 or t.shape[-2] % r or t.shape[-1] % r:
        raise ShapeError(
            f"pixel_unshuffle: input of shape {t.shape} must be (*, C, H, W) with H and W "
            f"divisible by downscale_factor = {r}."
        )
    *lead, c, h, w = t.shape
    k = len(lead)
    y = t.reshape(*lead, c, h // r, r, w // r, r)
    y = y.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    out: Tensor = y.reshape(*lead, c * r * r, h // r, w // r)
    return out
