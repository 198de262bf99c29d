"""Comparisons: never recorded; their outputs are boolean and never require grad."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tapegrad.op import broadcast_check, defop

__all__ = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]


@defop(differentiable=False, check=broadcast_check)
def less(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a < b."""
    return jnp.less(a, b), ()


@defop(differentiable=False, check=broadcast_check)
def less_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a <= b."""
    return jnp.less_equal(a, b), ()


@defop(differentiable=False, check=broadcast_check)
def greater(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a > b."""
    return jnp.greater(a, b), ()


@defop(differentiable=False, check=broadcast_check)
def greater_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a >= b."""
    return jnp.greater_equal(a, b), ()


@defop(differentiable=False, check=broadcast_check)
def equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a == b."""
    return jnp.equal(a, b), ()


@defop(differentiable=False, check=broadcast_check)
def not_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a != b."""
    return jnp.not_equal(a, b), ()
