"""Elementwise primitives with several tensor inputs and NumPy broadcasting."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from tapegrad._arrays import sum_to
from tapegrad._dtypes import summed_in
from tapegrad.kernels import kernel
from tapegrad.op import broadcast_check, defop

__all__ = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "floor_divide",
    "remainder",
    "power",
    "maximum",
    "minimum",
    "where",
    "arctan2",
    "lerp",
]

Res = tuple[jax.Array, ...]
Cts = tuple[jax.Array | None, ...]


_add = kernel(jnp.add)


@defop(check=broadcast_check)
def add(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a + b."""
    return _add(a, b), ()


@add.defvjp
def _add_vjp(res: tuple[()], g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g, gb = g (broadcast shape; the engine sums down)."""
    return (g if needs[0] else None, g if needs[1] else None)


_subtract = kernel(jnp.subtract)


@defop(check=broadcast_check)
def subtract(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a - b."""
    return _subtract(a, b), ()


_negative = kernel(jnp.negative)


@subtract.defvjp
def _subtract_vjp(res: tuple[()], g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g (no kernel), gb = -g."""
    return (g if needs[0] else None, _negative(g) if needs[1] else None)


_multiply = kernel(jnp.multiply)


@defop(check=broadcast_check)
def multiply(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise a * b."""
    return _multiply(a, b), (a, b)


@multiply.defvjp
@partial(kernel, static_argnames=("needs",))
def _multiply_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g * b, gb = g * a; only what is needed, each summed to its input's shape here."""
    a, b = res
    return (
        sum_to(g * b, a.shape) if needs[0] else None,
        sum_to(g * a, b.shape) if needs[1] else None,
    )


_divide = kernel(jnp.divide)


@defop(check=broadcast_check)
def divide(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise true division a / b."""
    return _divide(a, b), (a, b)


@divide.defvjp
@partial(kernel, static_argnames=("needs",))
def _divide_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g / b, gb = -g * a / b**2, computed as -g * ((a / b) / b) (PyTorch's
    ``div_tensor_other_backward``: b * b overflows float16 from b = 256 on and underflows it
    below b = 2e-4, g * (a / b) overflows before the division by b), each summed to its
    input's shape here."""
    a, b = res
    return (
        sum_to(g / b, a.shape) if needs[0] else None,
        sum_to(-g * ((a / b) / b), b.shape) if needs[1] else None,
    )


_floor_divide = kernel(jnp.floor_divide)
_holds_zero = kernel(lambda b: jnp.any(b == 0))


def _integer_zero(y: Any, b: Any, symbol: str) -> None:
    """Refuse an integer result ``y`` of ``a // b`` or ``a % b`` where the divisor ``b`` holds
    a 0, as Python and PyTorch do (XLA returns meaningless numbers: 7 // 0 gave -2). A divisor
    array's check waits for its value; inside a trace (``tg.jit``: ``y`` is a tracer) nothing
    is checked, and an empty result divided nothing (PyTorch returns it).

    Raises:
        ZeroDivisionError: the result is integer (or boolean), not empty, and ``b`` holds a 0.
    """
    if y.dtype.kind not in "iub" or isinstance(y, jax.core.Tracer) or not y.size:
        return  # floats divide to inf/NaN, as in PyTorch
    if b == 0 if isinstance(b, int) else bool(_holds_zero(b)):
        raise ZeroDivisionError(
            f"integer division or modulo by zero (a {symbol} b, with a 0 in b): XLA would give "
            "meaningless numbers; divide by nonzero values, or cast to float first for inf/NaN."
        )


@defop(check=broadcast_check)
def floor_divide(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise ``a // b``, rounded toward -inf (Python's, NumPy's and PyTorch's ``//``).
    Integers: a 0 in ``b`` raises ``ZeroDivisionError`` (``_integer_zero``)."""
    y = _floor_divide(a, b)
    _integer_zero(y, b, "//")
    return y, ()


@floor_divide.defvjp
@partial(kernel, static_argnames=("needs",))
def _floor_divide_vjp(res: tuple[()], g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """Piecewise constant in both inputs: zeros (JAX's derivative; PyTorch raises instead)."""
    zero = jnp.zeros_like(g)
    return (zero if needs[0] else None, zero if needs[1] else None)


_remainder = kernel(jnp.remainder)


@defop(check=broadcast_check)
def remainder(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise ``a % b`` with the sign of ``b`` (Python's, NumPy's and PyTorch's ``%``;
    ``a - floor(a / b) * b``). Integers: a 0 in ``b`` raises ``ZeroDivisionError``."""
    y = _remainder(a, b)
    _integer_zero(y, b, "%")
    return y, (a, b)


@remainder.defvjp
@partial(kernel, static_argnames=("needs",))
def _remainder_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g, gb = -g * floor(a / b) (PyTorch's ``remainder`` rule, from
    ``a - floor(a / b) * b`` with the floor constant); each summed to its input's shape."""
    a, b = res
    ga = sum_to(g, a.shape) if needs[0] else None
    gb = sum_to(-g * jnp.floor_divide(a, b).astype(g.dtype), b.shape) if needs[1] else None
    return (ga, gb)


@kernel
def _power(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a ** b``; for integers, a negative exponent gives PyTorch's truncated result (1 for
    a base of 1, +-1 for -1, else 0), where a compiled ``jnp.power`` gives garbage."""
    y = jnp.power(a, b)
    if jnp.issubdtype(y.dtype, jnp.integer) and jnp.issubdtype(
        jnp.result_type(b), jnp.signedinteger
    ):
        one = jnp.where(b % 2 == 0, 1, -1)
        small = jnp.where(a == 1, 1, jnp.where(a == -1, one, 0)).astype(y.dtype)
        y = jnp.where(b < 0, small, jnp.power(a, jnp.maximum(b, 0)))
    return y


@defop(check=broadcast_check)
def power(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise a ** b."""
    y = _power(a, b)
    return y, (a, b, y)


@power.defvjp
@partial(kernel, static_argnames=("needs",))
def _power_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g * b * a**(b-1) (0 where b == 0); gb = g * log(a) * y with log(0) read as 0
    (JAX's pow JVP rules, except that an exponent 0 gives 0 for a float exponent too, where
    JAX 0.10 gives NaN at a = 0: PyTorch's value); each summed to its input's shape here.

    Where b is 0 or 1, a**(b-1) is computed from a base of 1, so the rule itself has the
    derivative 0 in a there (the factor is constant in a), not JAX's ``0 * 0**-1`` = NaN at
    a = 0: the second derivatives of ``x ** 0.0`` and ``x ** 1.0`` at 0 are 0, PyTorch's."""
    a, b, y = res
    ga = gb = None
    if needs[0]:
        flat = (b == 0) | (b == 1)
        factor = b * jnp.power(jnp.where(flat, jnp.ones_like(a), a), b - 1)
        ga = sum_to(g * jnp.where(b == 0, 0.0, factor).astype(g.dtype), a.shape)
    if needs[1]:
        gb = sum_to(g * jnp.log(jnp.where(a == 0, 1.0, a)) * y, b.shape)
    return (ga, gb)


def _balanced(x: jax.Array, y: jax.Array, other: jax.Array, dtype: Any) -> jax.Array:
    """1 where x alone gave y, 0.5 at a tie, 0 elsewhere (JAX's rule for lax.max/lax.min)."""
    return jnp.where(x == y, jnp.where(other == y, 0.5, 1.0), 0.0).astype(dtype)


_maximum = kernel(jnp.maximum)


@defop(check=broadcast_check)
def maximum(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise maximum."""
    y = _maximum(a, b)
    return y, (a, b, y)


@maximum.defvjp
@partial(kernel, static_argnames=("needs",))
def _maximum_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """g goes to the larger input; ties split it in halves (as jax.grad of jnp.maximum)."""
    a, b, y = res
    return (
        g * _balanced(a, y, b, g.dtype) if needs[0] else None,
        g * _balanced(b, y, a, g.dtype) if needs[1] else None,
    )


_minimum = kernel(jnp.minimum)


@defop(check=broadcast_check)
def minimum(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise minimum."""
    y = _minimum(a, b)
    return y, (a, b, y)


@minimum.defvjp
@partial(kernel, static_argnames=("needs",))
def _minimum_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """g goes to the smaller input; ties split it in halves (as jax.grad of jnp.minimum)."""
    a, b, y = res
    return (
        g * _balanced(a, y, b, g.dtype) if needs[0] else None,
        g * _balanced(b, y, a, g.dtype) if needs[1] else None,
    )


_where = kernel(jnp.where)


@defop(check=broadcast_check)
def where(cond: jax.Array, a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise ``a`` where ``cond`` is true, else ``b`` (``cond`` is not differentiated)."""
    return _where(cond, a, b), (cond,)


@where.defvjp
@partial(kernel, static_argnames=("needs",))
def _where_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = where(cond, g, 0), gb = where(cond, 0, g)."""
    (cond,) = res
    return (
        None,
        jnp.where(cond, g, 0) if needs[1] else None,
        jnp.where(cond, 0, g) if needs[2] else None,
    )


_arctan2 = kernel(jnp.arctan2)


@defop(check=broadcast_check)
def arctan2(a: jax.Array, b: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise angle of the point ``(b, a)`` in radians, in ``[-pi, pi]``: ``arctan(a / b)``
    in the right quadrant (NumPy's ``arctan2(y, x)``, PyTorch's ``atan2``). Broadcasts as
    NumPy; integer inputs give floats.

    Raises:
        ShapeError: the shapes do not broadcast.
    """
    return _arctan2(a, b), (a, b)


@arctan2.defvjp
@partial(kernel, static_argnames=("needs",))
def _arctan2_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """With r = a**2 + b**2: ga = g * b / r, gb = -g * a / r (d atan2(a, b) = (b da - a db) / r;
    JAX's and PyTorch's rule), 0 at a = b = 0 as PyTorch's (JAX's is NaN there), each summed
    to its input's shape."""
    a, b = res
    r = a * a + b * b
    origin = r == 0
    r = jnp.where(origin, 1, r)
    return (
        sum_to(jnp.where(origin, 0, g * (b / r)), a.shape) if needs[0] else None,
        sum_to(jnp.where(origin, 0, -g * (a / r)), b.shape) if needs[1] else None,
    )


@kernel
def _lerp(start: jax.Array, end: jax.Array, weight: jax.Array) -> jax.Array:
    dtype = jnp.result_type(start, end, weight)
    wide = summed_in(dtype)  # float16/bfloat16 in float32, as PyTorch: end - start overflows
    start, end, weight = start.astype(wide), end.astype(wide), weight.astype(wide)
    d = end - start  # PyTorch's two forms: exact at weight 0 (start) and at weight 1 (end)
    out = jnp.where(jnp.abs(weight) < 0.5, start + weight * d, end - d * (1 - weight))
    return out.astype(dtype)


@defop(check=broadcast_check)
def lerp(start: jax.Array, end: jax.Array, weight: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise linear interpolation ``start + weight * (end - start)`` (PyTorch's
    ``lerp``; computed as ``end - (end - start) * (1 - weight)`` where ``|weight| >= 0.5``, as
    PyTorch does, so weight 1 gives ``end`` exactly). ``weight`` is a tensor or a number; the
    three broadcast as NumPy, and the result takes their promoted dtype.

    Raises:
        ShapeError: the shapes do not broadcast.
    """
    return _lerp(start, end, weight), (start, end, weight)


@lerp.defvjp
@partial(kernel, static_argnames=("needs",))
def _lerp_vjp(res: Res, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """gstart = g * (1 - weight), gend = g * weight, gweight = g * (end - start) (PyTorch's
    ``lerp`` rule); each summed to its input's shape here."""
    start, end, weight = res
    return (
        sum_to(g * (1 - weight), start.shape) if needs[0] else None,
        sum_to(g * weight, end.shape) if needs[1] else None,
        sum_to(g * (end - start), weight.shape) if needs[2] else None,
    )
