"""Elementwise primitives with one tensor input (and scalar parameters)."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._tensor import Tensor
from tapegrad.kernels import kernel
from tapegrad.op import Op, as_operand, defop

__all__ = [
    "exp",
    "log",
    "log1p",
    "tanh",
    "relu",
    "sigmoid",
    "sqrt",
    "square",
    "rsqrt",
    "erf",
    "abs",
    "sin",
    "cos",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sign",
    "negative",
    "integer_pow",
    "copy",
    "astype",
    "clip",
]

Res = tuple[jax.Array, ...]


_exp = kernel(jnp.exp)


@defop
def exp(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise e**x."""
    y = _exp(x)
    return y, (y,)


@exp.defvjp
@kernel
def _exp_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx exp(x) = exp(x): gx = g * y."""
    (y,) = res
    return (g * y,)


_log = kernel(jnp.log)


@defop
def log(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise natural logarithm."""
    return _log(x), (x,)


@log.defvjp
@kernel
def _log_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx log(x) = 1/x: gx = g / x."""
    (x,) = res
    return (g / x,)


_log1p = kernel(jnp.log1p)


@defop
def log1p(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise log(1 + x), accurate where x is small."""
    return _log1p(x), (x,)


@log1p.defvjp
@kernel
def _log1p_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx log(1 + x) = 1 / (1 + x): gx = g / (1 + x)."""
    (x,) = res
    return (g / (1 + x),)


_tanh = kernel(jnp.tanh)


@defop
def tanh(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise hyperbolic tangent."""
    y = _tanh(x)
    return y, (y,)


@tanh.defvjp
@kernel
def _tanh_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx tanh(x) = 1 - tanh(x)**2: gx = g * (1 - y*y)."""
    (y,) = res
    return (g * (1 - y * y),)


_relu = kernel(jax.nn.relu)  # compiled: eagerly its custom_jvp costs ~100 us a call


@defop
def relu(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise max(x, 0)."""
    y = _relu(x)
    return y, (y,)


@relu.defvjp
@kernel
def _relu_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx relu(x) = [x > 0] (0 at x = 0, as jax.nn.relu): gx = where(y > 0, g, 0)."""
    (y,) = res
    return (jnp.where(y > 0, g, 0),)


_sigmoid = kernel(jax.nn.sigmoid)


@defop
def sigmoid(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise logistic sigmoid 1 / (1 + e**-x)."""
    y = _sigmoid(x)
    return y, (y,)


@sigmoid.defvjp
@kernel
def _sigmoid_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx sigmoid(x) = y (1 - y): gx = g * y * (1 - y)."""
    (y,) = res
    return (g * (y * (1 - y)),)


_sqrt = kernel(jnp.sqrt)


@defop
def sqrt(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise square root."""
    y = _sqrt(x)
    return y, (y,)


@sqrt.defvjp
@kernel
def _sqrt_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx sqrt(x) = 1 / (2 sqrt(x)): gx = g * 0.5 / y."""
    (y,) = res
    return (g * 0.5 / y,)


def square(x: Any) -> Tensor:
    """Elementwise ``x * x``: ``x ** 2``, the ``integer_pow`` op (its VJP ``2 x g``)."""
    t: Tensor = (x if isinstance(x, Tensor) else Tensor(x)) ** 2
    return t


_rsqrt = kernel(jax.lax.rsqrt)


@defop
def rsqrt(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise ``1 / sqrt(x)`` (PyTorch's ``rsqrt``, ``lax.rsqrt``)."""
    y = _rsqrt(x)
    return y, (y,)


@rsqrt.defvjp
@kernel
def _rsqrt_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx x^(-1/2) = -x^(-3/2) / 2 = -y^3 / 2 (JAX's rule for lax.rsqrt)."""
    (y,) = res
    return (g * (-0.5 * y * y * y),)


_erf = kernel(jax.scipy.special.erf)


@defop
def erf(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise Gauss error function ``2 / sqrt(pi) * integral_0^x exp(-t^2) dt``."""
    return _erf(x), (x,)


@erf.defvjp
@kernel
def _erf_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx erf(x) = 2 / sqrt(pi) * exp(-x^2)."""
    (x,) = res
    return (g * (2 / np.sqrt(np.pi) * jnp.exp(-x * x)).astype(g.dtype),)


_abs = kernel(jnp.abs)


@defop
def abs(x: jax.Array) -> tuple[jax.Array, Res]:  # noqa: A001 - jnp's name
    """Elementwise absolute value."""
    return _abs(x), (x,)


@abs.defvjp
@kernel
def _abs_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx |x| = sign(x), taken as +1 at x = 0 like JAX's rule select(x >= 0, g, -g); for a
    complex x, JAX's cotangent g * conj(x) / |x| (0 at x = 0; PyTorch's is its conjugate)."""
    (x,) = res
    if jnp.iscomplexobj(x):
        safe = jnp.where(x == 0, 1, x)
        return (jnp.where(x == 0, 0, g * (jnp.conj(safe) / jnp.abs(safe))).astype(x.dtype),)
    return (jnp.where(x >= 0, g, -g),)


_sin = kernel(jnp.sin)


@defop
def sin(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise sine."""
    return _sin(x), (x,)


@sin.defvjp
@kernel
def _sin_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx sin(x) = cos(x)."""
    (x,) = res
    return (g * jnp.cos(x),)


_cos = kernel(jnp.cos)


@defop
def cos(x: jax.Array) -> tuple[jax.Array, Res]:
    """Elementwise cosine."""
    return _cos(x), (x,)


@cos.defvjp
@kernel
def _cos_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx cos(x) = -sin(x)."""
    (x,) = res
    return (-g * jnp.sin(x),)


_negative = kernel(jnp.negative)


@defop(dtype_advice="write ~x")
def negative(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise -x."""
    return _negative(x), ()


@negative.defvjp
@kernel
def _negative_vjp(res: tuple[()], g: jax.Array) -> tuple[jax.Array]:
    """d/dx (-x) = -1."""
    return (-g,)


_integer_pow = kernel(jax.lax.integer_pow, static_argnums=1)


@defop
def integer_pow(x: jax.Array, *, n: int) -> tuple[jax.Array, Res]:
    """Elementwise ``x ** n`` for a Python int ``n`` (``Tensor.__pow__`` of a float tensor and
    an int): ``lax.integer_pow``, repeated multiplication, as ``jnp.power(x, 2)`` computes it
    (a general ``power`` with the exponent as an array is a float pow, ~2x the time)."""
    return _integer_pow(x, n), (x,)


@integer_pow.defvjp
@partial(kernel, static_argnames=("n",))
def _integer_pow_vjp(res: Res, g: jax.Array, *, n: int) -> tuple[jax.Array]:
    """d/dx x**n = n * x**(n-1), 0 for n == 0 (lax.integer_pow's JVP rule)."""
    (x,) = res
    if n == 0:
        return (jnp.zeros_like(g),)
    return (g * (n * jax.lax.integer_pow(x, n - 1)).astype(g.dtype),)


_zeros_like = kernel(jnp.zeros_like)


def _zero_vjp(res: tuple[()], g: jax.Array, **params: Any) -> tuple[jax.Array]:
    """A piecewise constant function's derivative: 0 (almost everywhere; at the jumps too,
    as JAX's and PyTorch's rules for floor, ceil, round, trunc and sign give), whatever its
    parameters (``decimals``)."""
    return (_zeros_like(g),)


def _piecewise_constant(fn: Any, name: str, doc: str, **static: Any) -> Op:
    """A registered op computing ``fn`` (compiled, its keyword parameters ``static``) whose
    VJP is ``_zero_vjp``: the output requires grad when the input does, as in PyTorch, and
    gradients through it are zeros."""
    compiled = kernel(fn, static_argnames=tuple(static)) if static else kernel(fn)

    def forward(x: jax.Array, **params: Any) -> tuple[jax.Array, tuple[()]]:
        if params.get("decimals", 0) < 0 and x.dtype.kind in "iu":
            raise TypeError(
                f"{name}: decimals < 0 on an integer tensor is not supported (JAX rounds "
                "integers to decimals >= 0 only); cast it first: x.astype(tg.float32)."
            )
        return compiled(x, **params), ()

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = doc
    op = defop(forward)
    op.defvjp(_zero_vjp)
    return op


floor = _piecewise_constant(jnp.floor, "floor", "Elementwise floor (round toward -inf).")
ceil = _piecewise_constant(jnp.ceil, "ceil", "Elementwise ceiling (round toward +inf).")
round = _piecewise_constant(  # noqa: A001 - jnp's and PyTorch's name
    jnp.round,
    "round",
    "Elementwise rounding to ``decimals`` decimal places (a keyword, default 0), halves to "
    "even (NumPy's, JAX's and PyTorch's rule: ``round(2.5) == 2``).",
    decimals=0,
)
trunc = _piecewise_constant(jnp.trunc, "trunc", "Elementwise rounding toward 0.")
sign = _piecewise_constant(jnp.sign, "sign", "Elementwise sign: -1, 0 or 1 (0 at 0).")


_copy = kernel(jnp.copy)


@defop
def copy(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """A copy of x (``Tensor.clone``): the identity with a node of its own."""
    return _copy(x), ()


@copy.defvjp
def _copy_vjp(res: tuple[()], g: jax.Array) -> tuple[jax.Array]:
    """The identity: gx = g."""
    return (g,)


@partial(kernel, static_argnums=1)
def _astype(x: jax.Array, dtype: np.dtype) -> jax.Array:
    """``x.astype(dtype)`` compiled (eager, it takes a primitive's slower path); jnp's rules,
    so complex to bool is ``x != 0`` (``lax.convert_element_type`` reads the real part)."""
    return x.astype(dtype)


@defop
def astype(x: jax.Array, *, dtype: np.dtype) -> tuple[jax.Array, tuple[()]]:
    """Cast to ``dtype``; recorded only when the result is a float dtype."""
    if x.dtype == dtype and not x.weak_type:
        return x, ()  # as ``x.astype``: the same array, no kernel
    return _astype(x, dtype), ()


@astype.defvjp
def _astype_vjp(res: tuple[()], g: jax.Array, *, dtype: np.dtype) -> tuple[jax.Array]:
    """The identity on values; the engine casts g back to the input's dtype."""
    return (g,)


_clip = kernel(jnp.clip)  # the bounds are arguments: a new bound value compiles nothing


def _bound(value: float | None) -> Any:
    """A clip bound as a kernel argument: ``None``, or a cached weakly typed constant.

    Raises:
        TypeError: a tensor bound (a static parameter here: ``x.clip`` takes one).
    """
    if isinstance(value, Tensor):
        raise TypeError(
            "tg.clip takes number bounds; for a tensor bound write x.clip(min, max) or "
            "tg.minimum(tg.maximum(x, min), max), whose gradient also reaches the bound."
        )
    return None if value is None else as_operand(value, "clip")


@defop
def clip(
    x: jax.Array,
    *,
    min: float | None = None,
    max: float | None = None,  # noqa: A002
) -> tuple[jax.Array, Res]:
    """Clamp to ``[min, max]`` (either bound may be ``None``), as ``jnp.clip``. At a bound the
    gradient is half (JAX's rule for a tie of max/min); PyTorch's ``clamp`` passes all of it
    there: values that sit exactly on a bound (pixels at 0 or 1) get half their gradient."""
    return _clip(x, _bound(min), _bound(max)), (x,)


@kernel
def _clip_grad(x: jax.Array, g: jax.Array, lo: Any, hi: Any) -> jax.Array:
    """jnp.clip is maximum(x, lo) then minimum(., hi); each passes g where x wins and g/2 at
    a tie (JAX's balanced rule for lax.max/lax.min)."""
    scale = jnp.ones_like(g)
    if lo is not None:
        scale = scale * jnp.where(x > lo, 1.0, jnp.where(x == lo, 0.5, 0.0))
        x = jnp.maximum(x, lo)
    if hi is not None:
        scale = scale * jnp.where(x < hi, 1.0, jnp.where(x == hi, 0.5, 0.0))
    return g * scale.astype(g.dtype)


@clip.defvjp
def _clip_vjp(
    res: Res,
    g: jax.Array,
    *,
    min: float | None = None,
    max: float | None = None,  # noqa: A002
) -> tuple[jax.Array]:
    """g where x is inside the bounds, 0 outside, g/2 at a bound (``_clip_grad``)."""
    return (_clip_grad(res[0], g, _bound(min), _bound(max)),)
