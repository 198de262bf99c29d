"""Bags of embedding rows reduced to one vector each: PyTorch's ``embedding_bag``."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import integer, torch_keywords
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop
from tapegrad.ops.indexing import (
    EMBEDDING_ADVICE,
    EMBEDDING_DEFAULTS,
    _host_indices,
    _integer_input,
)

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["embedding_bag"]

MODES = ("sum", "mean", "max")


def _bag_ids(n: int, offsets: jax.Array, width: int | None, bags: int, last: bool) -> jax.Array:
    """The bag of each of the ``n`` flattened positions, ``bags`` where it is in none (before
    ``offsets[0]``, or from ``offsets[-1]`` on with ``last``): PyTorch's ``offset2bag``, the
    number of bag starts at or before the position, less one (one scatter and a cumsum)."""
    pos = jnp.arange(n)
    if width is not None:  # a 2-D input: bags of equal width
        return pos // max(width, 1)
    starts = offsets[:bags]
    marks = jnp.zeros(n + 1, jnp.int32).at[jnp.where(starts < 0, n + 1, starts)].add(1, mode="drop")
    seg = jnp.cumsum(marks)[:n] - 1
    if last:
        seg = jnp.where(pos < offsets[bags], seg, bags)
    return jnp.where(seg < 0, bags, seg)


@partial(kernel, static_argnames=("mode", "width", "last", "padding_idx"))
def _bag_fn(
    indices: jax.Array,
    offsets: jax.Array,
    weight: jax.Array,
    psw: jax.Array,
    *,
    mode: str,
    width: int | None,
    last: bool,
    padding_idx: int | None = None,
) -> jax.Array:
    """The jnp forward: rows of ``weight`` summed, averaged or maximised per bag; padding
    entries (``padding_idx``) and positions in no bag take no part; empty bags give zeros.
    Max follows PyTorch's fold over each bag (a strictly larger value replaces the current
    one: the first of equal values wins, and a NaN is kept only where it comes first) and
    reads its result back from the winning rows, so JAX's derivative sends g to them."""
    idx = indices.reshape(-1)
    n, num = idx.shape[0], weight.shape[0]
    if width is not None:
        bags = indices.shape[0]
    else:
        bags = offsets.shape[0] - (1 if last else 0)
    seg = _bag_ids(n, offsets, width, bags, last)
    valid = seg < bags
    if padding_idx is not None:
        valid &= idx != padding_idx
    seg = jnp.where(valid, seg, bags)  # dropped by the segment reductions
    rows_at = jnp.where(idx < 0, num, idx)  # out of range, not wrapped
    rows = jnp.take(weight, rows_at, axis=0, mode="fill")  # NaN rows out of range
    if mode != "max":
        acc = jnp.promote_types(weight.dtype, jnp.float32)  # float16 sums in float32
        flat = jnp.reshape(psw, (-1,) if jnp.ndim(psw) else ())
        w = jnp.broadcast_to(flat if mode == "sum" else 1, idx.shape).astype(acc)
        contrib = jnp.where(valid[:, None], rows.astype(acc) * jnp.reshape(w, (-1, 1)), 0)
        total = jax.ops.segment_sum(contrib, seg, bags)
        if mode == "mean":
            count = jax.ops.segment_sum(valid.astype(acc), seg, bags)
            total = total / jnp.maximum(count, 1)[:, None]
        return total.astype(weight.dtype)
    pos = jnp.arange(n)
    first = jax.ops.segment_min(jnp.where(valid, pos, n), seg, bags)  # n: an empty bag
    nan = jnp.isnan(rows)
    top = jax.ops.segment_max(jnp.where(nan, -jnp.inf, rows), seg, bags)
    at = jnp.take(top, seg, axis=0, mode="fill", fill_value=jnp.nan)
    hit = valid[:, None] & ~nan & (rows == at)
    win = jax.ops.segment_min(jnp.where(hit, pos[:, None], n), seg, bags)
    first_nan = jnp.take(nan, jnp.minimum(first, n - 1), axis=0, mode="clip") & (first < n)[:, None]
    win = jnp.where(first_nan, first[:, None], win)
    row = jnp.where(win < n, jnp.take(rows_at, jnp.minimum(win, n - 1), mode="clip"), num)
    picked = jnp.take_along_axis(weight, row, axis=0, mode="fill", fill_value=jnp.nan)
    return jnp.where(win < n, picked, 0).astype(weight.dtype)


@defop(name="embedding_bag")
def _embedding_bag(
    indices: jax.Array,
    offsets: jax.Array,
    weight: jax.Array,
    psw: jax.Array,
    *,
    mode: str,
    width: int | None,
    last: bool,
    padding_idx: int | None = None,
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """Rows of ``weight`` (num, dim) picked by ``indices`` and reduced per bag: (bags, dim).
    Bags are the rows of a 2-D ``indices`` (``width`` its second axis) or, for a 1-D one,
    the runs starting at ``offsets``; ``psw`` weighs each index (mode ``sum``; ``1.0``
    otherwise)."""
    _integer_input("embedding_bag", indices)
    _integer_input("embedding_bag", offsets)
    params = {"mode": mode, "width": width, "last": last, "padding_idx": padding_idx}
    return _bag_fn(indices, offsets, weight, psw, **params), (indices, offsets, weight, psw)


_embedding_bag.defvjp(derived_vjp(_bag_fn))


def _host_offsets(offsets: Any, n: int, last: bool) -> Any:
    """Offsets given on the host (a list or NumPy array) are checked as PyTorch checks them:
    1-D integers starting at 0, not decreasing, none beyond ``n``; those on the device are not
    read back (that would wait for the device every call)."""
    if not isinstance(offsets, (list, tuple, np.ndarray)):
        return offsets
    host = np.asarray(offsets)
    if host.size == 0:
        host = host.astype(np.int32)
    if host.ndim != 1:
        raise ShapeError(
            f"embedding_bag: offsets must be 1-D (where each bag starts), got shape {host.shape}."
        )
    if not np.issubdtype(host.dtype, np.integer):
        raise TypeError(f"embedding_bag: offsets must be integers, got dtype {host.dtype}.")
    if host.size and host[0] != 0:
        raise ValueError(
            f"embedding_bag: offsets[0] is {int(host[0])}; the first bag must start at "
            "position 0 (PyTorch's rule)."
        )
    if (np.diff(host) < 0).any():
        raise ValueError(f"embedding_bag: offsets {host.tolist()} decrease; bags run in order.")
    if host.size and host[-1] > n:
        raise ValueError(f"embedding_bag: offsets[-1] is {int(host[-1])}, beyond the {n} indices.")
    return host


_ORDER = "F.embedding_bag's fourth parameter is max_norm, its mode the seventh"


@torch_keywords(EMBEDDING_ADVICE, defaults=EMBEDDING_DEFAULTS, order=_ORDER)
def embedding_bag(
    indices: Any,
    weight: Any,
    offsets: Any = None,
    *,
    mode: str = "mean",
    per_sample_weights: Any = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """Sums, means or maxima of bags of embedding rows, without making the rows' tensor
    (PyTorch's ``F.embedding_bag``).

    Args:
        indices: integer indices in ``[0, num_embeddings)``: 2-D (B, L), B bags of L each
            (no ``offsets``), or 1-D (N,) with ``offsets``.
        weight: a float tensor of shape (num_embeddings, embedding_dim).
        offsets: for a 1-D ``indices``, 1-D integers: where each bag starts (the first at 0,
            not decreasing); a bag runs to the next start, the last to the end. Bags may be
            empty (a zero vector, in every mode).
        mode: ``"sum"``, ``"mean"`` (PyTorch's default) or ``"max"`` (per feature).
        per_sample_weights: with ``mode="sum"`` only, as PyTorch: a weight per index, of
            ``indices``'s shape and ``weight``'s dtype, multiplying its row.
        include_last_offset: ``offsets`` holds B + 1 entries, the last one where the last bag
            ends (indices from there on are in no bag); ignored for a 2-D ``indices``.
        padding_idx: a row (negative counts from the end) whose entries are left out of
            their bags: not summed, not counted in a mean, never a maximum.

    Returns:
        A tensor (B, embedding_dim) of ``weight``'s dtype (float16 and bfloat16 sum in
        float32).

    Gradient (JAX's derivative of the jnp forward, as PyTorch's): each used row receives its
    bag's g (times its per-sample weight in ``sum``, over the bag's count in ``mean``); in
    ``max`` each feature's g goes to the row that gave the maximum (the first of equal
    ones); ``per_sample_weights`` receive ``g . row`` (0 for padding entries).

    Offsets and indices on the device are not read back (that would wait for the device
    every call): the number of bags comes from ``offsets``'s shape.

    Raises:
        IndexError: host indices (a list or NumPy array) outside ``[0, num_embeddings)``; a
            ``padding_idx`` outside ``[-num_embeddings, num_embeddings)``. Indices already on
            the device are not read back: an out-of-range one, negative ones included, reads
            a row of NaN (JAX's fill convention, as ``tg.embedding``) and gets no gradient.
        ValueError: an unknown ``mode``; ``offsets`` missing for a 1-D ``indices`` or given
            for a 2-D one; ``per_sample_weights`` with a mode other than ``sum``; host offsets
            not starting at 0, decreasing, or beyond the indices (device ones are not checked:
            positions before ``offsets[0]`` are then in no bag).
        ShapeError: ``weight`` not 2-D, ``indices`` not 1-D or 2-D, ``offsets`` not 1-D,
            ``per_sample_weights`` not of ``indices``'s shape.
        TypeError: integer arguments that are not integers, ``per_sample_weights`` of another
            dtype than ``weight``; PyTorch's ``max_norm=``, ``sparse=``, ... (not supported:
            the message says what to do); more than three positional arguments (PyTorch's
            fourth is ``max_norm``).
    """
    if mode not in MODES:
        raise ValueError(f"embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}.")
    shape = tuple(getattr(weight, "shape", np.shape(weight)))
    if len(shape) != 2:
        raise ShapeError(
            f"embedding_bag: weight must be (num_embeddings, embedding_dim), got shape {shape}."
        )
    num = shape[0]
    indices = _host_indices(indices, "embedding_bag", 0, num, f"the table has shape {shape}")
    index_shape = tuple(getattr(indices, "shape", np.shape(indices)))
    if len(index_shape) not in (1, 2):
        raise ShapeError(
            f"embedding_bag: indices must be 1-D (with offsets) or 2-D (bags of equal length), "
            f"got shape {index_shape}."
        )
    width: int | None = None
    if len(index_shape) == 2:
        if offsets is not None:
            raise ValueError(
                "embedding_bag: offsets given for 2-D indices, whose rows are the bags; pass "
                "offsets=None, or flatten the indices to 1-D to give bags by offsets."
            )
        width, offsets, include_last_offset = index_shape[1], np.zeros(1, np.int32), False
    elif offsets is None:
        raise ValueError(
            "embedding_bag: 1-D indices need offsets (where each bag starts), or give 2-D "
            "indices (B, L) for B bags of L."
        )
    else:
        offsets = _host_offsets(offsets, index_shape[0], bool(include_last_offset))
        offsets_shape = tuple(getattr(offsets, "shape", ()))
        if len(offsets_shape) != 1:
            raise ShapeError(
                "embedding_bag: offsets must be 1-D (where each bag starts), got shape "
                f"{offsets_shape}."
            )
        if include_last_offset and offsets_shape[0] == 0:
            raise ValueError(
                "embedding_bag: include_last_offset=True needs offsets with at least one entry "
                "(where the last bag ends)."
            )
    psw: Any = 1.0
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError(
                f"embedding_bag: per_sample_weights is supported with mode='sum' only (got "
                f"mode={mode!r}), as in PyTorch."
            )
        psw_shape = tuple(getattr(per_sample_weights, "shape", np.shape(per_sample_weights)))
        if psw_shape != index_shape:
            raise ShapeError(
                f"embedding_bag: per_sample_weights of shape {psw_shape} must have the "
                f"indices' shape {index_shape}."
            )
        psw_dtype = np.dtype(getattr(per_sample_weights, "dtype", weight.dtype))
        if psw_dtype != np.dtype(weight.dtype):
            raise TypeError(
                f"embedding_bag: per_sample_weights has dtype {psw_dtype} and weight "
                f"{np.dtype(weight.dtype)}; they must be the same (as in PyTorch)."
            )
        psw = per_sample_weights
    pad: int | None = None
    if padding_idx is not None:
        pad = integer(padding_idx, "embedding_bag: padding_idx")
        if not -num <= pad < num:
            raise IndexError(
                f"embedding_bag: padding_idx={pad} is outside [{-num}, {num}) for a table of "
                f"shape {shape}."
            )
        pad %= num
    return _embedding_bag(
        indices,
        offsets,
        weight,
        psw,
        mode=mode,
        width=width,
        last=bool(include_last_offset),
        padding_idx=pad,
    )
