"""Elementwise functions whose derivative is a closed form of the inputs or the output: with
one tensor input, trigonometric and hyperbolic functions and their inverses, exponentials and
logarithms in other bases, the reciprocal, and the special functions ``erfc``, ``erfinv``,
``lgamma``, ``digamma``, ``sinc``; with two (NumPy broadcasting), ``logaddexp``, ``hypot``,
``xlogy``, ``fmod`` and ``copysign``, each gradient PyTorch's formula.

Each op is declared by ``_elementwise`` from its jnp forward and its derivative ``d(x, y)``
(the VJP is ``g * d(x, y)``, one compiled kernel per shape and dtype). Outside its domain an
op gives what PyTorch and JAX give (NaN for ``arcsin(2)``, ``inf`` for ``log2(0)``), and so
does its gradient. An integer input is computed in JAX's default float dtype, as PyTorch
promotes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy import special as jsp

from tapegrad._arrays import sum_to
from tapegrad._tensor import Tensor
from tapegrad.kernels import kernel
from tapegrad.op import Op, as_operand, broadcast_check, defop

__all__ = [
    "tan",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "arcsinh",
    "arccosh",
    "arctanh",
    "exp2",
    "expm1",
    "log2",
    "log10",
    "reciprocal",
    "erfc",
    "erfinv",
    "lgamma",
    "digamma",
    "sinc",
    "deg2rad",
    "rad2deg",
    "logaddexp",
    "hypot",
    "xlogy",
    "fmod",
    "copysign",
]

Derivative = Callable[[jax.Array], jax.Array]


def _elementwise(
    name: str,
    forward: Callable[[jax.Array], jax.Array],
    derivative: Derivative,
    doc: str,
    of_output: bool = False,
) -> Op:
    """The op ``name``: ``y = forward(x)``, VJP ``g * derivative(r)``, where the one residual
    ``r`` is the input ``x``, or the output ``y`` when ``of_output`` (``tan``, ``exp2``:
    cheaper from ``y``). Either is a tensor's own array, so a node holds nothing more."""
    run = kernel(forward)

    def op_forward(x: jax.Array) -> tuple[jax.Array, tuple[jax.Array]]:
        y = run(x)
        return y, (y if of_output else x,)

    op_forward.__name__ = op_forward.__qualname__ = name
    op_forward.__doc__ = doc
    op = defop(op_forward)

    def vjp(res: tuple[jax.Array], g: jax.Array) -> tuple[jax.Array]:
        return ((g * derivative(res[0])).astype(g.dtype),)

    vjp.__name__ = vjp.__qualname__ = f"_{name}_vjp"  # the kernel store's name for it
    vjp.__doc__ = f"The VJP of {name}: g * ({derivative.__doc__})."
    op.defvjp(kernel(vjp))
    return op


def _d(doc: str) -> Callable[[Derivative], Derivative]:
    """Name a derivative's formula (its docstring, which the VJP's docstring quotes)."""

    def named(fn: Derivative) -> Derivative:
        fn.__doc__ = doc
        return fn

    return named


def _sinc_derivative(x: jax.Array) -> jax.Array:
    """(cos(pi x) - sinc(x)) / x; below |x| = 0.1 its Taylor series
    -pi^2 x / 3 + pi^4 x^3 / 30 - pi^6 x^5 / 840 (the quotient cancels there), so 0 at x = 0
    as PyTorch's, and the second derivative is right there too (JAX's -pi^2 / 3)."""
    small = jnp.abs(x) < 0.1
    safe = jnp.where(small, 1, x)
    z = jnp.pi * jnp.pi * x * x
    series = x * (jnp.pi * jnp.pi) * (-1 / 3 + z * (1 / 30 - z / 840))
    return jnp.where(small, series, (jnp.cos(jnp.pi * safe) - jnp.sinc(safe)) / safe)


_LN2, _LN10 = math.log(2.0), math.log(10.0)

tan = _elementwise(
    "tan",
    jnp.tan,
    _d("1 + tan(x)^2")(lambda y: 1 + y * y),
    "Elementwise tangent.",
    of_output=True,
)
arcsin = _elementwise(
    "arcsin",
    jnp.arcsin,
    _d("1 / sqrt(1 - x^2)")(lambda x: jax.lax.rsqrt(1 - x * x)),
    "Elementwise inverse sine, in [-pi/2, pi/2] (PyTorch's asin); NaN outside [-1, 1].",
)
arccos = _elementwise(
    "arccos",
    jnp.arccos,
    _d("-1 / sqrt(1 - x^2)")(lambda x: -jax.lax.rsqrt(1 - x * x)),
    "Elementwise inverse cosine, in [0, pi] (PyTorch's acos); NaN outside [-1, 1].",
)
arctan = _elementwise(
    "arctan",
    jnp.arctan,
    _d("1 / (1 + x^2)")(lambda x: 1 / (1 + x * x)),
    "Elementwise inverse tangent, in (-pi/2, pi/2) (PyTorch's atan).",
)
sinh = _elementwise(
    "sinh", jnp.sinh, _d("cosh(x)")(lambda x: jnp.cosh(x)), "Elementwise hyperbolic sine."
)
cosh = _elementwise(
    "cosh", jnp.cosh, _d("sinh(x)")(lambda x: jnp.sinh(x)), "Elementwise hyperbolic cosine."
)
arcsinh = _elementwise(
    "arcsinh",
    jnp.arcsinh,
    _d("1 / sqrt(x^2 + 1)")(lambda x: jax.lax.rsqrt(x * x + 1)),
    "Elementwise inverse hyperbolic sine (PyTorch's asinh).",
)
arccosh = _elementwise(
    "arccosh",
    jnp.arccosh,
    _d("1 / sqrt(x^2 - 1)")(lambda x: jax.lax.rsqrt(x * x - 1)),
    "Elementwise inverse hyperbolic cosine (PyTorch's acosh); NaN below 1.",
)
arctanh = _elementwise(
    "arctanh",
    jnp.arctanh,
    _d("1 / (1 - x^2)")(lambda x: 1 / (1 - x * x)),
    "Elementwise inverse hyperbolic tangent (PyTorch's atanh); +-inf at +-1, NaN beyond.",
)
exp2 = _elementwise(
    "exp2",
    jnp.exp2,
    _d("2^x ln 2")(lambda y: y * _LN2),
    "Elementwise 2**x.",
    of_output=True,
)
expm1 = _elementwise(
    "expm1",
    jnp.expm1,
    _d("exp(x) = expm1(x) + 1")(lambda y: y + 1),
    "Elementwise exp(x) - 1, accurate where x is small.",
    of_output=True,
)
log2 = _elementwise(
    "log2",
    jnp.log2,
    _d("1 / (x ln 2)")(lambda x: 1 / (x * _LN2)),
    "Elementwise base-2 logarithm.",
)
log10 = _elementwise(
    "log10",
    jnp.log10,
    _d("1 / (x ln 10)")(lambda x: 1 / (x * _LN10)),
    "Elementwise base-10 logarithm.",
)
reciprocal = _elementwise(
    "reciprocal",
    jnp.reciprocal,
    _d("-1 / x^2 = -y^2")(lambda y: -(y * y)),
    "Elementwise 1 / x.",
    of_output=True,
)
erfc = _elementwise(
    "erfc",
    jsp.erfc,
    _d("-2 / sqrt(pi) exp(-x^2)")(lambda x: (-2 / math.sqrt(math.pi)) * jnp.exp(-x * x)),
    "Elementwise complementary error function 1 - erf(x), accurate where erf(x) is near 1.",
)
erfinv = _elementwise(
    "erfinv",
    jsp.erfinv,
    _d("sqrt(pi) / 2 exp(erfinv(x)^2)")(lambda y: (math.sqrt(math.pi) / 2) * jnp.exp(y * y)),
    "Elementwise inverse error function; +-inf at +-1, NaN beyond.",
    of_output=True,
)


def _digamma(x: jax.Array) -> jax.Array:
    """``jsp.digamma``, with PyTorch's -inf at +0 (+inf at -0) where JAX gives NaN."""
    return jnp.where(x == 0, -jnp.copysign(jnp.inf, x), jsp.digamma(x))


lgamma = _elementwise(
    "lgamma",
    jsp.gammaln,
    _d("digamma(x)")(_digamma),
    "Elementwise log |Gamma(x)| (JAX's gammaln); inf at 0 and the negative integers.",
)
digamma = _elementwise(
    "digamma",
    _digamma,
    _d("polygamma(1, x), the trigamma function")(lambda x: jsp.polygamma(1, x)),
    "Elementwise digamma psi(x) = d/dx lgamma(x); -inf at 0 (PyTorch's), NaN at the negative "
    "integers.",
)
sinc = _elementwise(
    "sinc",
    jnp.sinc,
    _d("(cos(pi x) - sinc(x)) / x, its Taylor series near 0")(_sinc_derivative),
    "Elementwise normalised sinc sin(pi x) / (pi x), 1 at x = 0 (NumPy's and PyTorch's).",
)


def deg2rad(x: Any) -> Tensor:
    """Elementwise degrees to radians, ``x * pi / 180`` (a multiply: its gradient is the
    constant). An integer tensor gives floats, as PyTorch.

    Raises:
        OperandTypeError: ``x`` is not a tensor, an array or a number.
    """
    return _scaled(x, math.pi / 180, "deg2rad")


def rad2deg(x: Any) -> Tensor:
    """Elementwise radians to degrees, ``x * 180 / pi`` (a multiply). An integer tensor gives
    floats, as PyTorch.

    Raises:
        OperandTypeError: ``x`` is not a tensor, an array or a number.
    """
    return _scaled(x, 180 / math.pi, "rad2deg")


def _scaled(x: Any, factor: float, name: str) -> Tensor:
    t = x if isinstance(x, Tensor) else Tensor(as_operand(x, name))
    if not jnp.issubdtype(t.dtype, jnp.inexact):
        t = t.astype(jnp.result_type(float))
    out: Tensor = t * factor
    return out


Pair = tuple[jax.Array, jax.Array]
Cts = tuple[jax.Array | None, jax.Array | None]
_VJP2 = partial(kernel, static_argnames=("needs",))


def _two(name: str, forward: Callable[[jax.Array, jax.Array], jax.Array], doc: str) -> Op:
    """The op ``name``: ``y = forward(a, b)`` with NumPy broadcasting, residuals ``(a, b)``
    (a VJP that needs ``y`` computes it again, in its own kernel); its VJP is declared after
    it (``defvjp``)."""
    run = kernel(forward)

    def op_forward(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, ...]]:
        return run(a, b), (a, b)

    op_forward.__name__ = op_forward.__qualname__ = name
    op_forward.__doc__ = doc
    return defop(check=broadcast_check)(op_forward)


def _summed(needs: tuple[bool, ...], ga: Any, gb: Any, a: jax.Array, b: jax.Array) -> Cts:
    """The needed cotangents, each summed to its input's shape (broadcasting)."""
    return (
        sum_to(ga, a.shape) if needs[0] else None,
        sum_to(gb, b.shape) if needs[1] else None,
    )


logaddexp = _two(
    "logaddexp",
    jnp.logaddexp,
    "Elementwise log(exp(a) + exp(b)), without overflow.",
)


@logaddexp.defvjp
@_VJP2
def _logaddexp_vjp(res: Pair, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g / (1 + exp(b - a)), gb = g / (1 + exp(a - b)) (PyTorch's: the softmax of the
    pair; NaN where both are the same infinity)."""
    a, b = res
    return _summed(needs, g / (1 + jnp.exp(b - a)), g / (1 + jnp.exp(a - b)), a, b)


hypot = _two("hypot", jnp.hypot, "Elementwise sqrt(a^2 + b^2), without overflow.")


@hypot.defvjp
@_VJP2
def _hypot_vjp(res: Pair, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g a / y, gb = g b / y (PyTorch's; NaN at a = b = 0)."""
    a, b = res
    y = jnp.hypot(a, b)
    return _summed(needs, g * a / y, g * b / y, a, b)


xlogy = _two(
    "xlogy",
    jax.scipy.special.xlogy,
    "Elementwise x * log(y), 0 where x is 0 (PyTorch's and SciPy's xlogy).",
)


@xlogy.defvjp
@_VJP2
def _xlogy_vjp(res: Pair, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """gx = g log(y), 0 where x = 0 and y <= 0; gy = g x / y (PyTorch's formulas)."""
    x, y = res
    gx = jnp.where((x == 0) & (y <= 0), 0, jax.scipy.special.xlogy(g, y))
    return _summed(needs, gx, g * x / y, x, y)


fmod = _two(
    "fmod",
    jnp.fmod,
    "Elementwise remainder of a / b with the sign of a (C's fmod; ``%`` is Python's, with "
    "the sign of b).",
)


@fmod.defvjp
@_VJP2
def _fmod_vjp(res: Pair, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g, gb = -g trunc(a / b) (PyTorch's)."""
    a, b = res
    return _summed(needs, g, -g * jnp.trunc(a / b), a, b)


copysign = _two("copysign", jnp.copysign, "Elementwise |a| with the sign of b.")


@copysign.defvjp
@_VJP2
def _copysign_vjp(res: Pair, g: jax.Array, needs: tuple[bool, ...]) -> Cts:
    """ga = g y / a (+-g), 0 where a = 0; gb = 0 (PyTorch's)."""
    a, b = res
    y = jnp.copysign(a, b)
    ratio = jnp.where(a == 0, 0, y / jnp.where(a == 0, 1, a))
    return _summed(needs, g * ratio, jnp.zeros_like(g), a, b)
