"""Activations of neural networks: gelu, silu, softplus, leaky_relu, elu (elementwise, one
input)."""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from tapegrad.kernels import kernel
from tapegrad.op import defop

__all__ = ["gelu", "silu", "softplus", "leaky_relu", "elu"]

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
