"""Activations of neural networks: gelu, silu, softplus, leaky_relu, elu, selu, hardtanh,
relu6, mish, log_sigmoid, hardswish, hardsigmoid, softsign, celu, hardshrink, softshrink,
tanhshrink, threshold (elementwise, one input), softmin and glu (along an axis)."""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from tapegrad._args import integer
from tapegrad._arrays import axis_check
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop

__all__ = [
    "gelu",
    "silu",
    "softplus",
    "leaky_relu",
    "elu",
    "selu",
    "hardtanh",
    "relu6",
    "mish",
    "log_sigmoid",
    "hardswish",
    "hardsigmoid",
    "softsign",
    "celu",
    "hardshrink",
    "softshrink",
    "tanhshrink",
    "threshold",
    "softmin",
    "glu",
]

Res = tuple[jax.Array, ...]

_APPROXIMATIONS = ("none", "tanh")
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@partial(kernel, static_argnames=("approximate",))
def _gelu(x: jax.Array, approximate: str) -> jax.Array:
    return jax.nn.gelu(x, approximate=approximate == "tanh")


@defop
def gelu(x: jax.Array, *, approximate: str = "none") -> tuple[jax.Array, Res]:
    """Gaussian error linear unit, PyTorch's convention: ``approximate="none"`` (the default)
    is the exact ``x * Phi(x)`` with the erf-based normal CDF (JAX's default is the tanh
    form); ``"tanh"`` is ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``.

    Raises:
        ValueError: ``approximate`` is neither ``"none"`` nor ``"tanh"``.
    """
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}.")
    return _gelu(x, approximate), (x,)


@gelu.defvjp
@partial(kernel, static_argnames=("approximate",))
def _gelu_vjp(res: Res, g: jax.Array, *, approximate: str = "none") -> tuple[jax.Array]:
    """Exact: d/dx x Phi(x) = Phi(x) + x phi(x). Tanh form, with u = sqrt(2/pi)(x + 0.044715
    x**3) and t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t**2) sqrt(2/pi) (1 + 3 * 0.044715 x**2)."""
    (x,) = res
    if approximate == "tanh":
        t = jnp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    else:
        cdf = 0.5 * (1 + jax.lax.erf(x / math.sqrt(2.0)))
        pdf = jnp.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        d = cdf + x * pdf
    return (g * d,)


_silu = kernel(jax.nn.silu)


@defop
def silu(x: jax.Array) -> tuple[jax.Array, Res]:
    """Sigmoid linear unit (swish): ``x * sigmoid(x)``.

    Raises:
        TypeError: ``x`` holds booleans or integers (JAX's sigmoid refuses them; PyTorch's
            too): cast it to floats first.
    """
    return _silu(x), (x,)


@silu.defvjp
@kernel
def _silu_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx x s(x) = s(x) (1 + x (1 - s(x))), s the logistic sigmoid."""
    (x,) = res
    s = jax.nn.sigmoid(x)
    return (g * s * (1 + x * (1 - s)),)


@partial(kernel, static_argnames=("beta", "threshold"))
def _softplus(x: jax.Array, beta: float, threshold: float) -> jax.Array:
    bx = x * beta if beta != 1.0 else x
    y = jax.nn.softplus(bx) / beta if beta != 1.0 else jax.nn.softplus(bx)
    return jnp.where(bx > threshold, x, y)


@defop
def softplus(x: jax.Array, *, beta: float = 1.0, threshold: float = 20.0) -> tuple[jax.Array, Res]:
    """PyTorch's softplus: ``log(1 + exp(beta * x)) / beta``, computed stably
    (``jax.nn.softplus``), and ``x`` itself where ``beta * x > threshold`` (the linear
    regime)."""
    return _softplus(x, beta=float(beta), threshold=float(threshold)), (x,)


@softplus.defvjp
@partial(kernel, static_argnames=("beta", "threshold"))
def _softplus_vjp(
    res: Res, g: jax.Array, *, beta: float = 1.0, threshold: float = 20.0
) -> tuple[jax.Array]:
    """d/dx log(1 + e**(beta x)) / beta = sigmoid(beta x); 1 in the linear regime."""
    (x,) = res
    bx = x * beta
    return (g * jnp.where(bx > threshold, 1.0, jax.nn.sigmoid(bx)).astype(g.dtype),)


@partial(kernel, static_argnames=("negative_slope",))
def _leaky_relu(x: jax.Array, negative_slope: float) -> jax.Array:
    return jnp.where(x > 0, x, x * negative_slope)


@defop
def leaky_relu(x: jax.Array, *, negative_slope: float = 0.01) -> tuple[jax.Array, Res]:
    """``x`` where ``x > 0``, else ``negative_slope * x`` (PyTorch's ``leaky_relu``)."""
    return _leaky_relu(x, negative_slope=float(negative_slope)), (x,)


@leaky_relu.defvjp
@partial(kernel, static_argnames=("negative_slope",))
def _leaky_relu_vjp(res: Res, g: jax.Array, *, negative_slope: float = 0.01) -> tuple[jax.Array]:
    """1 where x > 0, else ``negative_slope`` (at 0 too: PyTorch's and JAX's)."""
    (x,) = res
    return (jnp.where(x > 0, g, g * negative_slope),)


@partial(kernel, static_argnames=("alpha",))
def _elu(x: jax.Array, alpha: float) -> jax.Array:
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.minimum(x, 0)))


@defop
def elu(x: jax.Array, *, alpha: float = 1.0) -> tuple[jax.Array, Res]:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (PyTorch's ``elu``)."""
    return _elu(x, alpha=float(alpha)), (x,)


@elu.defvjp
@partial(kernel, static_argnames=("alpha",))
def _elu_vjp(res: Res, g: jax.Array, *, alpha: float = 1.0) -> tuple[jax.Array]:
    """1 where x > 0, else ``alpha * exp(x)`` (at 0 too, as PyTorch's)."""
    (x,) = res
    return (jnp.where(x > 0, g, g * (alpha * jnp.exp(jnp.minimum(x, 0)))).astype(g.dtype),)


# PyTorch's constants (torch.nn.SELU; Klambauer et al. 2017), as jax.nn.selu's
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946
_selu = kernel(jax.nn.selu)


@defop
def selu(x: jax.Array) -> tuple[jax.Array, Res]:
    """Scaled ELU, PyTorch's ``F.selu``: ``scale * x`` where ``x > 0``, else ``scale * alpha
    * (exp(x) - 1)``, with ``alpha ~ 1.6733`` and ``scale ~ 1.0507``; the shape and dtype of
    ``x`` (integers give float32, as ``jax.nn.selu``).
    """
    return _selu(x), (x,)


@selu.defvjp
@kernel
def _selu_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """``scale`` where x > 0, else ``scale * alpha * exp(x)`` (at 0 too, as PyTorch's)."""
    (x,) = res
    neg = _SELU_SCALE * _SELU_ALPHA * jnp.exp(jnp.minimum(x, 0))
    return (g * jnp.where(x > 0, _SELU_SCALE, neg).astype(g.dtype),)


@partial(kernel, static_argnames=("low", "high"))
def _clip(x: jax.Array, low: float, high: float) -> jax.Array:
    return jnp.clip(x, low, high)


@partial(kernel, static_argnames=("low", "high"))
def _inside_vjp(res: Res, g: jax.Array, low: float, high: float) -> tuple[jax.Array]:
    """g strictly inside (low, high), 0 elsewhere, the bounds included (PyTorch's)."""
    (x,) = res
    return (jnp.where((x > low) & (x < high), g, jnp.zeros_like(g)),)


@defop
def hardtanh(x: jax.Array, *, min_val: float = -1.0, max_val: float = 1.0) -> tuple[jax.Array, Res]:
    """PyTorch's ``F.hardtanh``: ``x`` clipped to ``[min_val, max_val]``; the shape and dtype
    of ``x``.

    Raises:
        ValueError: ``min_val > max_val`` (PyTorch's check).
    """
    if min_val > max_val:
        raise ValueError(
            f"hardtanh: min_val={min_val} is greater than max_val={max_val}; pass "
            "min_val <= max_val."
        )
    return _clip(x, float(min_val), float(max_val)), (x,)


@hardtanh.defvjp
def _hardtanh_vjp(
    res: Res, g: jax.Array, *, min_val: float = -1.0, max_val: float = 1.0
) -> tuple[jax.Array]:
    """1 strictly inside ``(min_val, max_val)``, 0 outside and at the bounds (PyTorch's)."""
    gx: tuple[jax.Array] = _inside_vjp(res, g, float(min_val), float(max_val))
    return gx


@defop
def relu6(x: jax.Array) -> tuple[jax.Array, Res]:
    """``min(max(x, 0), 6)`` (PyTorch's ``F.relu6``, ``hardtanh(x, 0, 6)``); the shape and
    dtype of ``x``."""
    return _clip(x, 0.0, 6.0), (x,)


@relu6.defvjp
def _relu6_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """1 strictly inside (0, 6), 0 elsewhere, at 0 and 6 too (PyTorch's)."""
    gx: tuple[jax.Array] = _inside_vjp(res, g, 0.0, 6.0)
    return gx


_mish = kernel(jax.nn.mish)


@defop
def mish(x: jax.Array) -> tuple[jax.Array, Res]:
    """``x * tanh(softplus(x))`` (Misra 2019; PyTorch's ``F.mish``); the shape and dtype of
    ``x`` (integers give float32, as jax.nn's).
    """
    return _mish(x), (x,)


@mish.defvjp
@kernel
def _mish_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """With t = tanh(softplus(x)): t + x sigmoid(x) (1 - t**2)."""
    (x,) = res
    t = jnp.tanh(jax.nn.softplus(x))
    return (g * (t + x * jax.nn.sigmoid(x) * (1 - t * t)),)


_log_sigmoid = kernel(jax.nn.log_sigmoid)


@defop
def log_sigmoid(x: jax.Array) -> tuple[jax.Array, Res]:
    """``log(sigmoid(x)) = -softplus(-x)``, computed stably (finite for large ``|x|``;
    PyTorch's ``F.logsigmoid``); the shape and dtype of ``x`` (integers give float32, as
    jax.nn's).
    """
    return _log_sigmoid(x), (x,)


@log_sigmoid.defvjp
@kernel
def _log_sigmoid_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx log sigmoid(x) = 1 - sigmoid(x) = sigmoid(-x)."""
    (x,) = res
    return (g * jax.nn.sigmoid(-x),)


@kernel
def _hardswish(x: jax.Array) -> jax.Array:
    return x * jnp.clip(x + 3, 0, 6) / 6


@defop
def hardswish(x: jax.Array) -> tuple[jax.Array, Res]:
    """``x * relu6(x + 3) / 6`` (Howard et al. 2019; PyTorch's ``F.hardswish``); the shape
    and dtype of ``x``."""
    return _hardswish(x), (x,)


@hardswish.defvjp
@kernel
def _hardswish_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """0 up to -3, ``x / 3 + 1/2`` strictly inside (-3, 3), 1 from 3 on: PyTorch's (0 at -3,
    1 at 3)."""
    (x,) = res
    d = jnp.where(x <= -3, 0.0, jnp.where(x < 3, x / 3 + 0.5, 1.0))
    return (g * d.astype(g.dtype),)


@kernel
def _hardsigmoid(x: jax.Array) -> jax.Array:
    return jnp.clip(x + 3, 0, 6) / 6


@defop
def hardsigmoid(x: jax.Array) -> tuple[jax.Array, Res]:
    """``relu6(x + 3) / 6`` (PyTorch's ``F.hardsigmoid``); the shape and dtype of ``x``."""
    return _hardsigmoid(x), (x,)


@hardsigmoid.defvjp
@kernel
def _hardsigmoid_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """1/6 strictly inside (-3, 3), 0 elsewhere, at -3 and 3 too (PyTorch's)."""
    (x,) = res
    return (jnp.where((x > -3) & (x < 3), g / 6, jnp.zeros_like(g)),)


_softsign = kernel(jax.nn.soft_sign)


@defop
def softsign(x: jax.Array) -> tuple[jax.Array, Res]:
    """``x / (1 + |x|)`` (PyTorch's ``F.softsign``); the shape and dtype of ``x`` (integers
    give float32, as jax.nn's)."""
    return _softsign(x), (x,)


@softsign.defvjp
@kernel
def _softsign_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx x / (1 + |x|) = 1 / (1 + |x|)**2."""
    (x,) = res
    d = 1 + jnp.abs(x)
    return (g / (d * d),)


@partial(kernel, static_argnames=("alpha",))
def _celu(x: jax.Array, alpha: float) -> jax.Array:
    return jnp.where(x > 0, x, alpha * jnp.expm1(jnp.minimum(x, 0) / alpha))


@defop
def celu(x: jax.Array, *, alpha: float = 1.0) -> tuple[jax.Array, Res]:
    """PyTorch's ``F.celu``: ``x`` where ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``;
    the shape and dtype of ``x``.

    Raises:
        ValueError: ``alpha == 0`` (PyTorch refuses it too: the exponent divides by it).
    """
    if alpha == 0:
        raise ValueError("celu: alpha=0 divides x by zero; pass a nonzero alpha (default 1.0).")
    return _celu(x, alpha=float(alpha)), (x,)


@celu.defvjp
@partial(kernel, static_argnames=("alpha",))
def _celu_vjp(res: Res, g: jax.Array, *, alpha: float = 1.0) -> tuple[jax.Array]:
    """1 where x > 0, else ``exp(x / alpha)`` (at 0 too, as PyTorch's)."""
    (x,) = res
    return (jnp.where(x > 0, g, g * jnp.exp(jnp.minimum(x, 0) / alpha)).astype(g.dtype),)


def _check_lambd(name: str, lambd: float) -> None:
    if not lambd >= 0:
        raise ValueError(
            f"{name}: lambd={lambd} is negative; the band [-lambd, lambd] needs lambd >= 0."
        )


@partial(kernel, static_argnames=("lambd",))
def _hardshrink(x: jax.Array, lambd: float) -> jax.Array:
    return jnp.where((x >= -lambd) & (x <= lambd), jnp.zeros_like(x), x)


@partial(kernel, static_argnames=("lambd",))
def _outside_vjp(res: Res, g: jax.Array, lambd: float) -> tuple[jax.Array]:
    """g outside [-lambd, lambd], 0 inside it, its ends included (PyTorch's)."""
    (x,) = res
    return (jnp.where((x >= -lambd) & (x <= lambd), jnp.zeros_like(g), g),)


@defop
def hardshrink(x: jax.Array, *, lambd: float = 0.5) -> tuple[jax.Array, Res]:
    """PyTorch's ``F.hardshrink``: 0 where ``|x| <= lambd``, else ``x``; the shape and dtype
    of ``x``.

    Raises:
        ValueError: ``lambd < 0``.
    """
    _check_lambd("hardshrink", lambd)
    return _hardshrink(x, float(lambd)), (x,)


@hardshrink.defvjp
def _hardshrink_vjp(res: Res, g: jax.Array, *, lambd: float = 0.5) -> tuple[jax.Array]:
    """1 where ``|x| > lambd``, 0 inside the band and at its ends (PyTorch's)."""
    gx: tuple[jax.Array] = _outside_vjp(res, g, float(lambd))
    return gx


@partial(kernel, static_argnames=("lambd",))
def _softshrink(x: jax.Array, lambd: float) -> jax.Array:
    return jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, jnp.zeros_like(x)))


@defop
def softshrink(x: jax.Array, *, lambd: float = 0.5) -> tuple[jax.Array, Res]:
    """PyTorch's ``F.softshrink``: ``x - lambd`` above ``lambd``, ``x + lambd`` below
    ``-lambd``, 0 between; the shape and dtype of ``x``.

    Raises:
        ValueError: ``lambd < 0`` (PyTorch's check).
    """
    _check_lambd("softshrink", lambd)
    return _softshrink(x, float(lambd)), (x,)


@softshrink.defvjp
def _softshrink_vjp(res: Res, g: jax.Array, *, lambd: float = 0.5) -> tuple[jax.Array]:
    """1 where ``|x| > lambd``, 0 inside the band and at its ends (PyTorch's)."""
    gx: tuple[jax.Array] = _outside_vjp(res, g, float(lambd))
    return gx


_tanhshrink = kernel(lambda x: x - jnp.tanh(x))


@defop
def tanhshrink(x: jax.Array) -> tuple[jax.Array, Res]:
    """PyTorch's ``F.tanhshrink``: ``x - tanh(x)``; the shape and dtype of ``x``."""
    return _tanhshrink(x), (x,)


@tanhshrink.defvjp
@kernel
def _tanhshrink_vjp(res: Res, g: jax.Array) -> tuple[jax.Array]:
    """d/dx (x - tanh x) = tanh(x)**2 (written so, not 1 - (1 - tanh**2): no cancellation)."""
    (x,) = res
    t = jnp.tanh(x)
    return (g * t * t,)


@partial(kernel, static_argnames=("threshold", "value"))
def _threshold(x: jax.Array, threshold: float, value: float) -> jax.Array:
    return jnp.where(x > threshold, x, jnp.asarray(value, x.dtype))


@defop
def threshold(x: jax.Array, *, threshold: float, value: float) -> tuple[jax.Array, Res]:
    """PyTorch's ``F.threshold``: ``x`` where ``x > threshold``, else ``value``; the shape and
    dtype of ``x``. Both numbers are required (as PyTorch's)."""
    return _threshold(x, float(threshold), float(value)), (x,)


@threshold.defvjp
@partial(kernel, static_argnames=("threshold", "value"))
def _threshold_vjp(res: Res, g: jax.Array, *, threshold: float, value: float) -> tuple[jax.Array]:
    """1 where ``x > threshold``, 0 elsewhere, at the threshold too (PyTorch's)."""
    (x,) = res
    return (jnp.where(x > threshold, g, jnp.zeros_like(g)),)


def _over(x: jax.Array, axis: int) -> int | None:
    """``axis``, or ``None`` for a 0-d ``x`` with axis 0 or -1 (over its one element, as
    PyTorch's softmin of a 0-d tensor)."""
    return None if x.ndim == 0 and axis in (0, -1) else axis


@partial(kernel, static_argnames=("axis",))
def _softmin(x: jax.Array, axis: int) -> jax.Array:
    return jax.nn.softmax(-x, axis=_over(x, axis))


@defop(check=axis_check)
def softmin(x: jax.Array, *, axis: int = -1) -> tuple[jax.Array, Res]:
    """PyTorch's ``F.softmin`` (``axis`` its ``dim``): ``softmax(-x)`` along ``axis``,
    computed stably; the shape and dtype of ``x``.

    Raises:
        ShapeError: ``axis`` out of range. TypeError: PyTorch's ``dim=`` (write ``axis=``).
    """
    y = _softmin(x, axis=axis)
    return y, (y,)


@softmin.defvjp
@partial(kernel, static_argnames=("axis",))
def _softmin_vjp(res: Res, g: jax.Array, *, axis: int = -1) -> tuple[jax.Array]:
    """gx = -y * (g - sum(g * y, axis)): the softmax Jacobian, times d(-x)/dx = -1."""
    (y,) = res
    return (-y * (g - jnp.sum(g * y, axis=_over(y, axis), keepdims=True)),)


@partial(kernel, static_argnames=("axis",))
def _glu(x: jax.Array, axis: int) -> jax.Array:
    a, b = jnp.split(x, 2, axis=axis)
    return a * jax.nn.sigmoid(b)


@defop
def glu(x: jax.Array, *, axis: int = -1) -> tuple[jax.Array, Res]:
    """Gated linear unit (Dauphin et al. 2017; PyTorch's ``F.glu``, ``axis`` its ``dim``):
    ``x`` split in halves ``a, b`` along ``axis``, ``a * sigmoid(b)``; the shape of ``x``
    with ``axis`` halved, its dtype (floats).

    Raises:
        ShapeError: ``axis`` out of range, or of odd length (PyTorch's check).
        TypeError: ``axis`` is not an integer; PyTorch's ``dim=`` (write ``axis=``); an
            integer ``x`` (cast it to floats).
    """
    ax = integer(axis, "glu: axis")
    shape = tuple(x.shape)
    if not -len(shape) <= ax < len(shape):
        raise ShapeError(f"glu: axis {ax} is out of range for an input of shape {shape}.")
    if shape[ax] % 2:
        raise ShapeError(
            f"glu: axis {ax} of the input of shape {shape} has odd length {shape[ax]}; glu "
            "splits it into two equal halves (value and gate), so it must be even."
        )
    return _glu(x, ax % len(shape)), (x,)


@glu.defvjp
@partial(kernel, static_argnames=("axis",))
def _glu_vjp(res: Res, g: jax.Array, *, axis: int = -1) -> tuple[jax.Array]:
    """With s = sigmoid(b): ga = g s, gb = g a s (1 - s), joined along ``axis``."""
    (x,) = res
    a, b = jnp.split(x, 2, axis=axis)
    s = jax.nn.sigmoid(b)
    ga = g * s
    return (jnp.concatenate([ga, ga * a * (1 - s)], axis=axis),)
