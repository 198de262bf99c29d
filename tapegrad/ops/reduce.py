"""Reductions over axes: sum, mean, max, min."""

from __future__ import annotations

import builtins
import math
from functools import partial

import jax
import jax.numpy as jnp

from tapegrad.errors import ShapeError
from tapegrad.op import defop

__all__ = ["sum", "mean", "max", "min"]

Axis = int | tuple[int, ...] | None


def _axes(axis: Axis, ndim: int) -> tuple[int, ...]:
    """Normalise ``axis`` to sorted non-negative axes of an ``ndim``-dimensional input."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else axis
    out = []
    for a in axes:
        if not -ndim <= a < builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise ShapeError(
                f"axis {a} is out of range for a tensor with {ndim} dimensions; use an axis "
                f"in [{-ndim}, {ndim - 1}]."
            )
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ShapeError(f"axis {axis} repeats an axis; list each axis once.")
    return tuple(sorted(out))


def _expand(g: jax.Array, in_shape: tuple[int, ...], axis: Axis, keepdims: bool) -> jax.Array:
    """Give ``g`` the reduced axes back as length-one axes."""
    if keepdims or not in_shape:
        return g
    return g.reshape(
        tuple(1 if i in _axes(axis, len(in_shape)) else s for i, s in enumerate(in_shape))
    )


def _check(x: jax.Array, axis: Axis) -> None:
    if axis is not None:
        _axes(axis, x.ndim)


_static = partial(jax.jit, static_argnames=("axis", "keepdims"))
_jsum = _static(jnp.sum)
_jmean = _static(jnp.mean)
_jmax = _static(jnp.max)
_jmin = _static(jnp.min)


@partial(jax.jit, static_argnames=("in_shape", "axis", "keepdims", "count"))
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
    _check(x, axis)
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
    _check(x, axis)
    count = math.prod(x.shape[a] for a in _axes(axis, x.ndim))
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
    y = _expand(y, x.shape, axis, keepdims)
    g = _expand(g, x.shape, axis, keepdims)
    hit = (x == y).astype(g.dtype)
    count = jnp.sum(hit, axis=axis, keepdims=True)
    return (g * hit / count,)


@defop
def max(  # noqa: A001 - jnp's name
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Maximum over ``axis``."""
    _check(x, axis)
    y = _jmax(x, axis=axis, keepdims=keepdims)
    return y, (x, y)


@max.defvjp
def _max_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array]:
    """d max / dx = [x == max] / (number of ties)."""
    return _chooser_vjp(res, g, axis, keepdims)


@defop
def min(  # noqa: A001 - jnp's name
    x: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Minimum over ``axis``."""
    _check(x, axis)
    y = _jmin(x, axis=axis, keepdims=keepdims)
    return y, (x, y)


@min.defvjp
def _min_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, *, axis: Axis = None, keepdims: bool = False
) -> tuple[jax.Array]:
    """d min / dx = [x == min] / (number of ties)."""
    return _chooser_vjp(res, g, axis, keepdims)
