"""``tg.jax_op``: a user's jnp function becomes an op whose VJP JAX derives (compiled, cached)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._tensor import Tensor
from tapegrad.derived import compiled_forward, compiled_vjp, static_params
from tapegrad.op import Op

__all__ = ["jax_op"]

_NEEDS_VALUES = (
    jax.errors.ConcretizationTypeError,  # bool() or float() of a traced value, among others
    jax.errors.NonConcreteBooleanIndexError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerIntegerConversionError,
)
"""What tracing a forward that needs concrete values raises: that forward then runs eagerly."""


def jax_op(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    """Decorator: a function of ``jax.Array``s becomes a differentiable op on Tensors.

    The forward runs ``fn`` compiled with ``jax.jit`` (one kernel per call, traced once per
    input shapes and dtypes: Python side effects in ``fn`` run when it is traced, as under
    ``jax.jit``); a ``fn`` that needs concrete values (``if x.sum() > 0``) runs eagerly
    instead, from its first call on. The VJP is ``jax.vjp`` of ``fn``, compiled with
    ``jax.jit``. Both are cached per function object and keyword parameters, by type and
    value (``i=1`` and ``i=True`` compile apart; at most 512 entries each, least recently
    used dropped); the VJP differentiates only the inputs that
    need a gradient.
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
        holder = compiled_forward(fn, static_params(params))
        compiled = holder[0]
        if compiled is not None:
            try:
                return _one_array(compiled(*xs), op.name), xs
            except _NEEDS_VALUES:
                holder[0] = None  # Python control flow on values: eager from now on
        return _one_array(fn(*xs, **params), op.name), xs

    def vjp(
        saved: tuple[jax.Array, ...], g: jax.Array, needs: tuple[bool, ...], **params: Any
    ) -> tuple[Any, ...]:
        return compiled_vjp(fn, static_params(params))(saved, g, needs)

    op = Op(forward, name=getattr(fn, "__name__", "jax_op"))
    op.defvjp(vjp)
    op.jax_vjp = True  # JAX's derivative, compiled already: a compiled backward may trace it
    functools.update_wrapper(op, fn)
    return op


def _one_array(y: Any, name: str) -> jax.Array:
    """The output of a ``jax_op``'s function as one array (a number or NumPy array becomes one).

    Raises:
        TypeError: it returned something else (a tuple of arrays, ``None``), naming the type.
    """
    if isinstance(y, jax.Array):
        return y
    if isinstance(y, (np.ndarray, np.generic, int, float)):
        return jnp.asarray(y)
    raise TypeError(
        f"{name}: a jax_op's function returns one array, this one returned a "
        f"{type(y).__name__}; make one jax_op per output (or return jnp.stack/concatenate of "
        "them and index the result)."
    )
