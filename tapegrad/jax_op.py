"""``tg.jax_op``: a user's jnp function becomes an op whose VJP JAX derives (compiled, cached)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from tapegrad._tensor import Tensor
from tapegrad.derived import compiled_vjp
from tapegrad.op import Op

__all__ = ["jax_op"]


def jax_op(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    """Decorator: a function of ``jax.Array``s becomes a differentiable op on Tensors.

    The forward runs ``fn`` eagerly; the VJP is ``jax.vjp`` of ``fn``, compiled with
    ``jax.jit`` and cached per function object and keyword parameters (at most 512 entries,
    least recently used dropped); it differentiates only the inputs that need a gradient.
    With ``create_graph=True`` that VJP is recorded as an op whose VJP JAX derives in turn, so
    a ``jax_op`` is differentiable to any order. Keyword arguments are static parameters (hashable);
    positional arguments are the tensor inputs. Exceptions raised by ``fn`` (forward or VJP)
    propagate unchanged. The op never enters the built-in registry, so redefining it in a
    notebook cell just works.

    Args:
        fn: ``(*arrays, **params) -> jax.Array``, written with ``jax.numpy``.

    Returns:
        A callable ``(*tensors, **params) -> Tensor`` with ``fn``'s name and docstring.
    """

    def forward(*xs: jax.Array, **params: Any) -> tuple[jax.Array, tuple[jax.Array, ...]]:
        for name, value in params.items():
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"{op.name}: keyword parameter {name}={type(value).__name__} is not "
                    "hashable; keyword arguments of a jax_op are static (compiled into its "
                    "VJP). Pass arrays positionally as inputs instead."
                ) from None
        return fn(*xs, **params), xs

    def vjp(
        saved: tuple[jax.Array, ...], g: jax.Array, needs: tuple[bool, ...], **params: Any
    ) -> tuple[Any, ...]:
        return compiled_vjp(fn, tuple(sorted(params.items())))(saved, g, needs)

    op = Op(forward, name=getattr(fn, "__name__", "jax_op"))
    op.defvjp(vjp)
    functools.update_wrapper(op, fn)
    return op
