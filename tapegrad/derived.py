"""VJPs that JAX derives: ``jax.vjp`` of a jnp function, compiled once and cached.

Used by ``tg.jax_op`` (a user's jnp function) and by ``create_graph=True`` (each application
of a VJP rule is recorded as one node whose own VJP JAX derives from that rule). The compiled
pullback is cached per (function, keyword parameters) and ``jax.jit`` caches it per input
shapes, dtypes and ``needs``, so a call after the first never retraces; so is a ``jax_op``'s
forward (one kernel per call instead of one per jnp operation in it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from tapegrad.kernels import static_key
from tapegrad.op import Op

__all__ = [
    "compiled_forward",
    "compiled_vjp",
    "derived_op",
    "derived_vjp",
    "static_params",
]

_CACHE_SIZE = 512


class _Static(tuple[tuple[str, Any], ...]):
    """Keyword parameters ``((name, value), ...)`` as a cache key: two are equal when their
    values are equal and of the same types (``static_key``), so a function compiled for
    ``i=1`` is never reused for ``i=True`` (the caches below are keyed on it)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Static) and static_key(tuple(self)) == static_key(tuple(other))

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(static_key(tuple(self)))


def static_params(params: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Keyword parameters as the ``static`` key of ``compiled_vjp``/``compiled_forward``:
    sorted by name, compared by type and value (``_Static``); hashing it raises
    ``TypeError`` when a value is not hashable."""
    return _Static(sorted(params.items())) if params else ()


Pullback = Callable[[tuple[jax.Array, ...], jax.Array, tuple[bool, ...]], tuple[Any, ...]]


@functools.lru_cache(maxsize=_CACHE_SIZE)
def compiled_vjp(fn: Callable[..., Any], static: tuple[tuple[str, Any], ...] = ()) -> Pullback:
    """The jitted pullback of ``fn`` with keyword parameters ``static`` (bounded LRU cache;
    ``static_params`` makes the key, so parameters equal in value but not in type, ``1`` and
    ``True``, get pullbacks of their own).

    The result maps ``(primals, g, needs)`` to one cotangent per primal, ``None`` where
    ``needs`` is false: JAX differentiates with respect to the needed primals only.
    """
    params = dict(static)

    def pullback(
        primals: tuple[jax.Array, ...], g: jax.Array, needs: tuple[bool, ...]
    ) -> tuple[Any, ...]:
        keep = [i for i, n in enumerate(needs) if n]

        def part(*sub: jax.Array) -> Any:
            full = list(primals)
            for i, s in zip(keep, sub, strict=True):
                full[i] = s
            return fn(*full, **params)

        _, pull = jax.vjp(part, *(primals[i] for i in keep))
        out: list[Any] = [None] * len(primals)
        for i, ct in zip(keep, pull(g), strict=True):
            out[i] = ct
        return tuple(out)

    return jax.jit(pullback, static_argnames=("needs",))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def compiled_forward(fn: Callable[..., Any], static: tuple[tuple[str, Any], ...] = ()) -> list[Any]:
    """``[jax.jit(fn with keyword parameters static)]`` (bounded LRU cache, one holder per
    function and parameters): the caller sets the holder's item to ``None`` when ``fn`` turned
    out to need concrete values (Python control flow on array values), so it runs eagerly
    from then on without tracing again."""
    params = dict(static)

    def forward(*xs: jax.Array) -> Any:
        return fn(*xs, **params)

    return [jax.jit(forward)]


def derived_op(fn: Callable[..., jax.Array], name: str) -> Op:
    """An op (outside the registry) computing ``fn`` compiled, whose VJP JAX derives.

    Its residuals are its inputs, so under ``create_graph=True`` its VJP is recorded in
    turn as a derived op of the pullback: differentiable to any order.

    Args:
        fn: ``(*arrays) -> array``, jnp code without keyword parameters.
        name: the op name shown in ``repr``, snapshots and leak reports.
    """
    compiled = jax.jit(fn)

    def forward(*xs: jax.Array) -> tuple[jax.Array, tuple[jax.Array, ...]]:
        return compiled(*xs), xs

    def vjp(saved: tuple[jax.Array, ...], g: jax.Array, needs: tuple[bool, ...]) -> Any:
        return compiled_vjp(fn)(saved, g, needs)

    op = Op(forward, name=name)
    op.defvjp(vjp)
    op.jax_vjp = True  # JAX's derivative: a compiled backward may trace it
    return op


def derived_vjp(fn: Callable[..., Any]) -> Callable[..., tuple[Any, ...]]:
    """A VJP rule for a built-in op whose residuals are its inputs, taken from ``jax.vjp`` of
    ``fn`` (docs/design.md "New ops": conv, pooling, einsum), compiled per keyword parameters.

    Args:
        fn: ``(*arrays, **params) -> array``, the op's jnp function (traceable).

    Returns:
        ``rule(res, g, needs, **params)`` for ``Op.defvjp``.
    """

    def rule(res: tuple[Any, ...], g: Any, needs: tuple[bool, ...], **params: Any) -> Any:
        return compiled_vjp(fn, static_params(params))(res, g, needs)

    rule.__doc__ = f"JAX's derivative of {getattr(fn, '__name__', 'the forward')} (jax.vjp)."
    return rule
