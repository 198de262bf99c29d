"""Indexing ``t[...]``: basic slices, integer arrays (repeats accumulate) and boolean masks."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tapegrad.op import defop

__all__ = ["getitem", "normalize_index"]

Shape = tuple[int, ...]


def normalize_index(index: Any, shape: tuple[int, ...] | None = None) -> tuple[Any, ...]:
    """Turn a user index into what jnp indexing takes, with boolean masks made integer.

    Tensors give their arrays, lists and ``range``s become NumPy arrays, and NumPy arrays stay
    on the host (so their bounds are checked without a device round trip); a boolean mask
    becomes its integer coordinates (eagerly, as NumPy does; under a JAX trace a mask raises
    JAX's own error). With ``shape``, an index holding a mask is checked against it as NumPy
    checks it: a mask whose shape does not match the axes it indexes raises ``IndexError``
    (its coordinates alone would silently select wrong rows). Integers are checked by
    ``getitem`` itself.

    Raises:
        IndexError: (with ``shape``) a mask of the wrong length, or an integer out of range
            beside a mask.
        TypeError: an index element of an unsupported type (a float, a float array, ...).
    """
    from tapegrad.tensor import Tensor

    items = index if isinstance(index, tuple) else (index,)
    out: list[Any] = []
    host: list[Any] = []  # the index as NumPy sees it, masks kept whole
    masked = False
    for item in items:
        if isinstance(item, Tensor):
            item = item._data
        elif isinstance(item, (list, range)):
            item = np.asarray(item)
            if item.size == 0:
                item = item.astype(np.intp)  # NumPy reads an empty list as an integer index
        if isinstance(item, (np.ndarray, jax.Array)):
            if item.dtype == np.bool_:
                if isinstance(item, jax.core.Tracer):
                    out.append(item)  # jnp raises its NonConcreteBooleanIndexError
                    continue
                mask = np.asarray(item)
                out.extend(np.nonzero(mask))
                host.append(mask)
                masked = True
                continue
            if not np.issubdtype(item.dtype, np.integer):
                raise TypeError(
                    f"Index arrays must be integer or boolean, got {item.dtype}; cast with "
                    ".astype(tg.int32)."
                )
            out.append(item)
            host.append(item)
        elif item is None or item is Ellipsis or isinstance(item, (int, slice, np.integer)):
            out.append(item)
            host.append(item)
        else:
            raise TypeError(
                f"Unsupported index element of type {type(item).__name__}; use ints, slices, "
                "None, Ellipsis, integer arrays, ranges or boolean masks."
            )
    if masked and shape is not None:
        _check_bounds(shape, tuple(host))
    return tuple(out)


def _check_bounds(shape: tuple[int, ...], index: tuple[Any, ...]) -> None:
    """Raise ``IndexError`` as NumPy does for an out-of-range integer on the host.

    Indexes a zero-stride view of ``shape`` (no allocation of the indexed array). Indices on
    the device (``jax.Array``s, tracers) are not read back, which would wait for the device:
    out of range, they select fill values (NaN for floats), as ``mode="fill"`` does.
    """
    if any(isinstance(i, jax.Array) for i in index):
        return
    view = np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), shape, (0,) * len(shape))
    try:
        view[index]
    except IndexError as err:
        raise IndexError(f"{err} (tensor of shape {shape}); JAX would clamp it silently.") from None


Plan = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _slice_plan(shape: tuple[int, ...], index: tuple[Any, ...]) -> Plan | None:
    """``(starts, sizes, squeezed axes)`` when ``index`` holds only ints and step-1 slices.

    Such an index is one ``lax.dynamic_slice`` whose starts are arguments, so every start
    (``text[j : j + 8]`` for each ``j``) reuses one compiled kernel. ``None`` otherwise.

    Raises:
        IndexError: an integer is out of range (NumPy's rule; JAX would clamp it).
    """
    if len(index) > len(shape):
        return None
    starts: list[int] = []
    sizes: list[int] = []
    squeezed: list[int] = []
    for axis, item in enumerate(index):
        n = shape[axis]
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            if step != 1 or stop <= start:
                return None
            starts.append(start)
            sizes.append(stop - start)
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            i = int(item)
            if not -n <= i < n:
                raise IndexError(
                    f"index {i} is out of bounds for axis {axis} with size {n} (tensor of "
                    f"shape {shape}); JAX would clamp it silently."
                )
            starts.append(i % n)
            sizes.append(1)
            squeezed.append(axis)
        else:
            return None
    rest = shape[len(index) :]
    return (*starts, *(0,) * len(rest)), (*sizes, *rest), tuple(squeezed)


def _is_gather(shape: tuple[int, ...], index: tuple[Any, ...]) -> bool:
    """Whether ``index`` is integer arrays only, one per leading axis (``table[ids]``)."""
    return 0 < len(index) <= len(shape) and all(
        isinstance(i, (np.ndarray, jax.Array)) for i in index
    )


@partial(jax.jit, static_argnames=("sizes", "squeezed"))
def _slice(x: jax.Array, starts: tuple[int, ...], sizes: Shape, squeezed: Shape) -> jax.Array:
    return jnp.squeeze(lax.dynamic_slice(x, starts, sizes), squeezed)


@partial(jax.jit, static_argnames=("shape", "sizes"))
def _slice_vjp(g: jax.Array, starts: tuple[int, ...], shape: Shape, sizes: Shape) -> jax.Array:
    return lax.dynamic_update_slice(jnp.zeros(shape, g.dtype), g.reshape(sizes), starts)


@jax.jit
def _gather(x: jax.Array, index: tuple[jax.Array, ...]) -> jax.Array:
    return x.at[index].get(mode="fill")


@partial(jax.jit, static_argnames=("shape",))
def _scatter_add(g: jax.Array, index: tuple[Any, ...], shape: Shape) -> jax.Array:
    return jnp.zeros(shape, g.dtype).at[index].add(g, mode="drop")


@defop
def getitem(x: jax.Array, *, index: tuple[Any, ...]) -> tuple[jax.Array, tuple[Any, ...]]:
    """``x[index]`` with ``index`` from ``normalize_index`` (a parameter, not a tensor input).

    Ints and step-1 slices run one compiled ``dynamic_slice`` per (shape, sizes), whatever
    the starts; integer arrays on the leading axes one compiled gather per shape; other
    indices go through ``jnp`` indexing. Integer arrays on the device are not checked on the
    host: out of range, they select fill values (NaN for floats).

    Raises:
        IndexError: an integer index on the host is out of range.
    """
    shape = x.shape
    plan = _slice_plan(shape, index)
    if plan is not None:
        starts, sizes, squeezed = plan
        return _slice(x, starts, sizes, squeezed), (shape,)
    _check_bounds(shape, index)
    if _is_gather(shape, index):
        return _gather(x, index), (shape,)
    return x.at[index].get(mode="fill"), (shape,)


@getitem.defvjp
def _getitem_vjp(res: tuple[Any, ...], g: jax.Array, *, index: tuple[Any, ...]) -> tuple[jax.Array]:
    """Scatter-add g into zeros of the input shape (repeated indices accumulate; device
    indices out of range receive nothing); a slice's is one ``dynamic_update_slice``."""
    (shape,) = res
    plan = _slice_plan(shape, index)
    if plan is not None:
        starts, sizes, _ = plan
        return (_slice_vjp(g, starts, shape, sizes),)
    if _is_gather(shape, index):
        return (_scatter_add(g, index, shape),)
    return (jnp.zeros(shape, g.dtype).at[index].add(g, mode="drop"),)
