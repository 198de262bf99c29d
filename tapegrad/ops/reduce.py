"""Reductions over axes: sum, mean, max, min, logsumexp, var, std, and the scans cumsum and
cumprod."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from tapegrad._arrays import normalize_axes
from tapegrad._dtypes import summed_in
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop

__all__ = [
    "sum",
    "mean",
    "prod",
    "max",
    "min",
    "logsumexp",
    "var",
    "std",
    "cumsum",
    "cumprod",
    "all",
    "any",
]

Axis = int | tuple[int, ...] | None
Res1 = tuple[jax.Array]


def _expand(g: jax.Array, in_shape: tuple[int, ...], axis: Axis, keepdims: bool) -> jax.Array:
    """Give ``g`` the reduced axes back as length-one axes."""
    if keepdims or not in_shape:
        return g
    return g.reshape(
        tuple(1 if i in normalize_axes(axis, len(in_shape)) else s for i, s in enumerate(in_shape))
    )


def _axes(axis: Axis, ndim: int) -> Axis:
    """``axis`` checked against an ``ndim``-dimensional input and spelled as jnp takes it: a 0-d
    input's axis 0 or -1 (PyTorch's) becomes ``()``, nothing to reduce (jnp refuses both).

    Raises:
        ShapeError: an axis out of range, or one listed twice.
    """
    if axis is None:
        return None
    if axis.__class__ is int and -ndim <= axis < ndim:  # one axis in range: the usual case
        return axis
    axes = normalize_axes(axis, ndim)
    return axis if ndim else axes


_static = partial(kernel, static_argnames=("axis", "keepdims"))
_jsum = _static(jnp.sum)
_jmean = _static(jnp.mean)
# the whole-array reductions (``loss.sum()``, ``loss.mean()``: the usual case) without static
# arguments, which JAX's dispatch hashes on every call (~0.7 us)
_jsum_all = kernel(jnp.sum)
_jmean_all = kernel(jnp.mean)
_jmax = _static(jnp.max)
_jmin = _static(jnp.min)
_jall = _static(jnp.all)
_jany = _static(jnp.any)


@partial(kernel, static_argnames=("in_shape", "axis", "keepdims", "count"))
def _spread(
    g: jax.Array, in_shape: tuple[int, ...], axis: Axis, keepdims: bool, count: int = 1
) -> jax.Array:
    """Broadcast a reduction's cotangent (divided by ``count``) back over the reduced axes."""
    if count != 1:
        g = g / count
    return jnp.broadcast_to(_expand(g, in_shape, axis, keepdims), in_shape)


@defop
def sum(  # noqa: A001 - jnp's name
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[tuple[int, ...]]]:
    """Sum over ``axis`` (``None``: all axes)."""
    if axis is None and not keepdims:
        return _jsum_all(x), (x.shape,)
    axis = _axes(axis, x.ndim)
    return _jsum(x, axis=axis, keepdims=keepdims), (x.shape,)


@sum.defvjp
def _sum_vjp(
    res: tuple[tuple[int, ...]], g: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array]:
    """Every summed element receives g: broadcast g back to the input shape."""
    (in_shape,) = res
    return (_spread(g, in_shape, axis, keepdims),)


@defop
def mean(
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[tuple[int, ...], int]]:
    """Mean over ``axis`` (``None``: all axes)."""
    if axis is None and not keepdims:
        return _jmean_all(x), (x.shape, math.prod(x.shape))
    axis = _axes(axis, x.ndim)
    if axis.__class__ is int:
        count = x.shape[axis]
    else:
        count = math.prod(x.shape[a] for a in normalize_axes(axis, x.ndim))
    return _jmean(x, axis=axis, keepdims=keepdims), (x.shape, count)


@mean.defvjp
def _mean_vjp(
    res: tuple[tuple[int, ...], int], g: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array]:
    """Each averaged element receives g / count."""
    in_shape, count = res
    return (_spread(g, in_shape, axis, keepdims, count),)


def _chooser_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, axis: Axis, keepdims: bool
) -> tuple[jax.Array]:
    """g is shared equally by the elements equal to the extremum (JAX's reduce_max rule)."""
    x, y = res
    axis = _axes(axis, x.ndim)
    y = _expand(y, x.shape, axis, keepdims)
    g = _expand(g, x.shape, axis, keepdims)
    hit = (x == y).astype(g.dtype)
    count = jnp.sum(hit, axis=axis, keepdims=True)
    return (g * hit / count,)


def _extremum_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    """``max``'s and ``min``'s ``check``: a ``ShapeError`` for an axis out of range, or for
    reduced axes with no element (JAX's error is NumPy's "zero-size array" message)."""
    shape = tuple(jnp.shape(arrays[0]))
    axes = normalize_axes(params.get("axis"), len(shape))
    if 0 in [shape[a] for a in axes]:  # (this module's ``any`` is the op)
        raise ShapeError(
            f"{name}: a tensor of shape {shape} has no elements along the reduced "
            f"axes {axes}, so there is no {name} (PyTorch raises too); check the size first, or "
            "reduce along an axis that is not empty."
        )


@defop(check=_extremum_check)
def max(  # noqa: A001 - jnp's name
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Maximum over ``axis``."""
    axis = _axes(axis, x.ndim)
    y = _jmax(x, axis=axis, keepdims=keepdims)
    return y, (x, y)


@max.defvjp
def _max_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array]:
    """d max / dx = [x == max] / (number of ties)."""
    return _chooser_vjp(res, g, axis, keepdims)


@defop(check=_extremum_check)
def min(  # noqa: A001 - jnp's name
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Minimum over ``axis``."""
    axis = _axes(axis, x.ndim)
    y = _jmin(x, axis=axis, keepdims=keepdims)
    return y, (x, y)


@min.defvjp
def _min_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array]:
    """d min / dx = [x == min] / (number of ties)."""
    return _chooser_vjp(res, g, axis, keepdims)


def _prod_fn(x: jax.Array, *, axis: Axis = None, keepdims: bool = False) -> jax.Array:
    return jnp.prod(x, axis=_axes(axis, x.ndim), keepdims=keepdims)


_jprod = _static(jnp.prod)


@defop
def prod(x: jax.Array, *, axis: Axis = None, keepdims: bool = False) -> tuple[jax.Array, Res1]:
    """The product over ``axis`` (``None``: all elements)."""
    return _jprod(x, axis=_axes(axis, x.ndim), keepdims=keepdims), (x,)


prod.defvjp(derived_vjp(_prod_fn))  # JAX's: exact where entries are 0 (no division by x)


_jlogsumexp = _static(jax.nn.logsumexp)


@defop
def logsumexp(
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[jax.Array]]:
    """``log(sum(exp(x)))`` over ``axis``, computed stably (shift by the maximum)."""
    axis = _axes(axis, x.ndim)
    return _jlogsumexp(x, axis=axis, keepdims=keepdims), (x,)


@logsumexp.defvjp
@partial(kernel, static_argnames=("axis", "keepdims"))
def _logsumexp_vjp(
    res: tuple[jax.Array], g: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array]:
    """d/dx_i logsumexp(x) = softmax(x)_i over ``axis`` (shifted by the maximum, so exact even
    where y itself rounds; an infinite maximum shifts by 0, as ``jax.nn.logsumexp``: a +inf
    entry's gradient is NaN, the others' 0): gx = g * softmax(x)."""
    (x,) = res
    axis = _axes(axis, x.ndim)
    m = jnp.max(x, axis=axis, keepdims=True, initial=-jnp.inf)  # empty axes: no entries
    e = jnp.exp(x - jnp.where(jnp.isfinite(m), m, 0))
    return (_expand(g, x.shape, axis, keepdims) * (e / jnp.sum(e, axis=axis, keepdims=True)),)


def _count(x: jax.Array, axis: Axis, ddof: int) -> int:
    n = math.prod(x.shape[a] for a in normalize_axes(axis, x.ndim))
    return n - ddof


@partial(kernel, static_argnames=("axis", "keepdims", "ddof", "root"))
def _moments(x: jax.Array, axis: Axis, keepdims: bool, ddof: int, root: bool) -> jax.Array:
    """The variance (or its square root), in one dispatch; real for a complex ``x``:
    ``|x - mean|**2``, as NumPy and PyTorch. float16 and bfloat16 are summed in float32
    (``summed_in``) and rounded back."""
    xs = x.astype(summed_in(x.dtype))
    d = xs - jnp.mean(xs, axis=axis, keepdims=True)
    v = jnp.sum(jnp.real(d * jnp.conj(d)), axis=axis, keepdims=keepdims) / _count(x, axis, ddof)
    v = jnp.sqrt(v) if root else v
    return v.astype(jnp.real(x).dtype)  # real, in x's precision


@defop
def var(
    x: jax.Array, *, axis: Axis = None, ddof: int = 0, keepdims: bool = False
) -> tuple[jax.Array, tuple[jax.Array]]:
    """Variance over ``axis``: ``sum(|x - mean|**2) / (N - ddof)``, real for a complex ``x``;
    ``ddof=0`` by default (NumPy's convention; PyTorch's ``var`` defaults to the unbiased
    ``ddof=1``)."""
    axis = _axes(axis, x.ndim)
    y = _moments(x, axis, keepdims, ddof, False)
    return y, (x,)  # the input (not x - mean): create_graph differentiates through it


@var.defvjp
@partial(kernel, static_argnames=("axis", "ddof", "keepdims"))
def _var_vjp(
    res: tuple[jax.Array], g: jax.Array, *, axis: Axis = None, ddof: int = 0, keepdims: bool = False
) -> tuple[jax.Array]:
    """d var / dx_i = 2 (x_i - mean) / (N - ddof) (the mean's own derivative sums to zero);
    for a complex x, conj(x_i - mean) in its place, as ``jax.vjp`` of ``jnp.var``. A float16
    or bfloat16 x and g are computed in float32 (``summed_in``, as the forward and PyTorch:
    g (x_i - mean) overflows float16 for g ~ 1000) and gx rounded back to x's dtype."""
    (x,) = res
    axis = _axes(axis, x.ndim)
    xs = x.astype(summed_in(x.dtype))
    d = jnp.conj(xs - jnp.mean(xs, axis=axis, keepdims=True))
    n = _count(d, axis, ddof)  # 0 when ddof is N: d / 0 as IEEE divides (PyTorch's NaN, inf)
    gs = _expand(g.astype(summed_in(g.dtype)), d.shape, axis, keepdims)
    return ((gs * d * (2.0 / n if n else math.inf)).astype(x.dtype),)


@defop
def std(
    x: jax.Array, *, axis: Axis = None, ddof: int = 0, keepdims: bool = False
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Standard deviation over ``axis``: ``sqrt(var(x, ddof))``, ``ddof=0`` by default
    (NumPy's; PyTorch's ``std`` defaults to ``ddof=1``)."""
    axis = _axes(axis, x.ndim)
    y = _moments(x, axis, keepdims, ddof, True)
    return y, (x, y)  # input and output: create_graph differentiates through them


@std.defvjp
@partial(kernel, static_argnames=("axis", "ddof", "keepdims"))
def _std_vjp(
    res: tuple[jax.Array, jax.Array],
    g: jax.Array,
    *,
    axis: Axis = None,
    ddof: int = 0,
    keepdims: bool = False,
) -> tuple[jax.Array]:
    """d std / dx_i = (x_i - mean) / ((N - ddof) std), and 0 where std is 0 (PyTorch's; JAX's
    is NaN there: 0 / 0, which a constant feature or a blank image would spread through a
    whole model's gradients); for a complex x, conj(x_i - mean) in its place, as ``jax.vjp``
    of ``jnp.std``. A float16 or bfloat16 x, y and g are computed in float32 (``summed_in``,
    as ``var``'s) and gx rounded back to x's dtype."""
    x, y = res
    axis = _axes(axis, x.ndim)
    xs, y, g = (a.astype(summed_in(a.dtype)) for a in (x, y, g))
    d = jnp.conj(xs - jnp.mean(xs, axis=axis, keepdims=True))
    scale = _expand(jnp.where(y == 0, 0, g / jnp.where(y == 0, 1, y)), d.shape, axis, keepdims)
    return ((scale * d / _count(d, axis, ddof)).astype(x.dtype),)


_jcumsum = partial(kernel, static_argnames=("axis",))(jnp.cumsum)


@defop
def cumsum(x: jax.Array, *, axis: int | None = None) -> tuple[jax.Array, tuple[tuple[int, ...]]]:
    """Running sum along ``axis`` (``None``: over the flattened input, as NumPy; a 0-d input's
    axis 0 or -1 is its one element, as PyTorch)."""
    if _axes(axis, x.ndim) == ():
        return x, (x.shape,)
    return _jcumsum(x, axis=axis), (x.shape,)


@partial(kernel, static_argnums=(1, 2))
def _reverse_cumsum(g: jax.Array, axis: int | None, in_shape: tuple[int, ...]) -> jax.Array:
    a = 0 if axis is None else axis
    g = jnp.atleast_1d(g)  # a 0-d input's axis 0 or -1: its one element
    return jnp.flip(jnp.cumsum(jnp.flip(g, a), axis=a), a).reshape(in_shape)


@cumsum.defvjp
def _cumsum_vjp(
    res: tuple[tuple[int, ...]], g: jax.Array, *, axis: int | None = None
) -> tuple[jax.Array]:
    """y_j = sum_{i <= j} x_i, so gx_i = sum_{j >= i} g_j: a reversed cumulative sum."""
    (in_shape,) = res
    return (_reverse_cumsum(g, axis, in_shape),)


@partial(kernel, static_argnames=("axis",))
def _cumprod_fn(x: jax.Array, *, axis: int | None = None) -> jax.Array:
    if x.ndim == 0:  # a 0-d input's axis 0 or -1: its one element
        return x
    return jnp.cumprod(x, axis=axis)


@defop(name="cumprod")
def cumprod(x: jax.Array, *, axis: int | None = None) -> tuple[jax.Array, tuple[jax.Array]]:
    """Running product along ``axis`` (``None``: over the flattened input, as NumPy; a 0-d
    input's axis 0 or -1 is its one element, as PyTorch). The VJP is JAX's derivative of the
    scan (compiled per shape): right where the input holds zeros, as PyTorch's, unlike the
    quotient ``g * y / x``."""
    _axes(axis, x.ndim)  # checks the axis
    return _cumprod_fn(x, axis=axis), (x,)


cumprod.defvjp(derived_vjp(_cumprod_fn))


@defop(differentiable=False)
def all(  # noqa: A001 - jnp's name
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[()]]:
    """Whether every element along ``axis`` (``None``: all axes) is nonzero; boolean. Not
    differentiable: never recorded."""
    axis = _axes(axis, x.ndim)
    return _jall(x, axis=axis, keepdims=keepdims), ()


@defop(differentiable=False)
def any(  # noqa: A001 - jnp's name
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[()]]:
    """Whether some element along ``axis`` (``None``: all axes) is nonzero; boolean. Not
    differentiable: never recorded."""
    axis = _axes(axis, x.ndim)
    return _jany(x, axis=axis, keepdims=keepdims), ()
