"""Indexing ``t[...]``: basic slices, integer arrays (repeats accumulate) and boolean masks."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad.op import defop

__all__ = ["getitem", "normalize_index"]


def normalize_index(index: Any) -> tuple[Any, ...]:
    """Turn a user index into what jnp indexing takes, with boolean masks made integer.

    Tensors and lists become arrays; a boolean mask becomes its integer coordinates
    (eagerly, as NumPy does; under a JAX trace a mask raises JAX's own error).

    Raises:
        TypeError: an index element of an unsupported type.
    """
    from tapegrad._tensor import Tensor

    items = index if isinstance(index, tuple) else (index,)
    out: list[Any] = []
    for item in items:
        if isinstance(item, Tensor):
            item = item._data
        elif isinstance(item, list):
            item = np.asarray(item)
        if isinstance(item, (np.ndarray, jax.Array)):
            if item.dtype == np.bool_:
                if isinstance(item, jax.core.Tracer):
                    out.append(item)  # jnp raises its NonConcreteBooleanIndexError
                    continue
                out.extend(jnp.asarray(c) for c in np.nonzero(np.asarray(item)))
                continue
            if not np.issubdtype(item.dtype, np.integer):
                raise TypeError(
                    f"Index arrays must be integer or boolean, got {item.dtype}; cast with "
                    ".astype(tg.int32)."
                )
            out.append(jnp.asarray(item))
        elif item is None or item is Ellipsis or isinstance(item, (int, slice, np.integer)):
            out.append(item)
        else:
            raise TypeError(
                f"Unsupported index element of type {type(item).__name__}; use ints, slices, "
                "None, Ellipsis, integer arrays or boolean masks."
            )
    return tuple(out)


def _check_bounds(shape: tuple[int, ...], index: tuple[Any, ...]) -> None:
    """Raise ``IndexError`` as NumPy does for an out-of-range integer (JAX would clamp).

    Indexes a zero-stride view of ``shape`` (no allocation of the indexed array); skipped
    when an index is a tracer (the bounds are unknown until run time).
    """
    if any(isinstance(i, jax.core.Tracer) for i in index):
        return
    view = np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), shape, (0,) * len(shape))
    host = tuple(np.asarray(i) if isinstance(i, jax.Array) else i for i in index)
    try:
        view[host]
    except IndexError as err:
        raise IndexError(f"{err} (tensor of shape {shape}); JAX would clamp it silently.") from None


@defop
def getitem(x: jax.Array, *, index: tuple[Any, ...]) -> tuple[jax.Array, tuple[Any, ...]]:
    """``x[index]`` with ``index`` from ``normalize_index`` (a parameter, not a tensor input).

    Raises:
        IndexError: an integer index is out of range (checked on concrete indices).
    """
    _check_bounds(x.shape, index)
    return x[index], (x.shape,)


@getitem.defvjp
def _getitem_vjp(res: tuple[Any, ...], g: jax.Array, *, index: tuple[Any, ...]) -> tuple[jax.Array]:
    """Scatter-add g into zeros of the input shape (repeated indices accumulate)."""
    (shape,) = res
    return (jnp.zeros(shape, g.dtype).at[index].add(g),)
