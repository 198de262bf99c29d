"""Comparisons: never recorded; their outputs are boolean and never require grad."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tapegrad.op import broadcast_check, defop

__all__ = ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]


_less = jax.jit(jnp.less)


@defop(differentiable=False, check=broadcast_check)
def less(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a < b."""
    return _less(a, b), ()


_less_equal = jax.jit(jnp.less_equal)


@defop(differentiable=False, check=broadcast_check)
def less_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a <= b."""
    return _less_equal(a, b), ()


_greater = jax.jit(jnp.greater)


@defop(differentiable=False, check=broadcast_check)
def greater(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a > b."""
    return _greater(a, b), ()


_greater_equal = jax.jit(jnp.greater_equal)


@defop(differentiable=False, check=broadcast_check)
def greater_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a >= b."""
    return _greater_equal(a, b), ()


_equal = jax.jit(jnp.equal)


@defop(differentiable=False, check=broadcast_check)
def equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a == b."""
    return _equal(a, b), ()


_not_equal = jax.jit(jnp.not_equal)


@defop(differentiable=False, check=broadcast_check)
def not_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a != b."""
    return _not_equal(a, b), ()
