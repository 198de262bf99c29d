"""``tg.jax_op``: a user's jnp function becomes an op whose VJP JAX derives (compiled, cached)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from tapegrad._tensor import Tensor
from tapegrad.op import Op

__all__ = ["jax_op"]

_CACHE_SIZE = 256


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compiled_vjp(fn: Callable[..., Any], static: tuple[tuple[str, Any], ...]) -> Any:
    """The jitted VJP of ``fn`` for one set of keyword parameters (bounded LRU cache)."""
    params = dict(static)

    def vjp(primals: tuple[jax.Array, ...], g: jax.Array) -> tuple[jax.Array, ...]:
        _, pullback = jax.vjp(lambda *xs: fn(*xs, **params), *primals)
        return tuple(pullback(g))

    return jax.jit(vjp)


def jax_op(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    """Decorator: a function of ``jax.Array``s becomes a differentiable op on Tensors.

    The forward runs ``fn`` eagerly; the VJP is ``jax.vjp`` of ``fn``, compiled with
    ``jax.jit`` and cached per function object and keyword parameters (at most 256 entries,
    least recently used dropped). Keyword arguments are static parameters (hashable);
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

    def vjp(saved: tuple[jax.Array, ...], g: jax.Array, **params: Any) -> tuple[jax.Array, ...]:
        return _compiled_vjp(fn, tuple(sorted(params.items())))(saved, g)  # type: ignore[no-any-return]

    op = Op(forward, name=getattr(fn, "__name__", "jax_op"))
    op.defvjp(vjp)
    functools.update_wrapper(op, fn)
    return op
