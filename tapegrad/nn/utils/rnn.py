"""Padded and packed batches of sequences of different lengths, PyTorch's
``torch.nn.utils.rnn``: ``pad_sequence``, ``pack_padded_sequence``, ``pad_packed_sequence``,
``pack_sequence``, ``unpad_sequence``, ``unpack_sequence`` and ``PackedSequence``, which
``nn.RNN``, ``nn.LSTM`` and ``nn.GRU`` take and return.

Every function here is differentiable: moving steps between the padded and the packed
layouts is one gather (``getitem`` with index arrays made on the host from the lengths), so
gradients flow back to the sequences. Lengths are read on the host, as PyTorch reads them
(its ``lengths`` are a CPU tensor): a length on an accelerator is copied back first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from tapegrad import ops
from tapegrad._args import integer
from tapegrad._tensor import Tensor
from tapegrad.creation import full_like
from tapegrad.errors import ShapeError, TracerError
from tapegrad.nn._inputs import as_input

__all__ = [
    "PackedSequence",
    "pad_sequence",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pack_sequence",
    "unpad_sequence",
    "unpack_sequence",
]


class _PackedFields(NamedTuple):
    """``PackedSequence``'s fields (its constructor fills ``unsorted_indices``)."""

    data: Tensor
    batch_sizes: np.ndarray
    sorted_indices: np.ndarray | None = None
    unsorted_indices: np.ndarray | None = None


class PackedSequence(_PackedFields):
    """A batch of sequences of different lengths, packed time step by time step (PyTorch's
    ``PackedSequence``; make one with ``pack_padded_sequence`` or ``pack_sequence``, or
    around new data as PyTorch code does: ``PackedSequence(f(p.data), p.batch_sizes,
    p.sorted_indices, p.unsorted_indices)``).

    Attributes:
        data: ``(sum of lengths, *)``: the first step of every sequence, then the second
            step of every sequence that has one, and so on, the sequences in decreasing
            order of length.
        batch_sizes: ``(longest length,)`` int64 NumPy array: how many sequences have a
            step ``t`` (PyTorch's CPU tensor).
        sorted_indices: int64 NumPy array, the batch positions in decreasing order of
            length (``None``: the batch was sorted already, ``enforce_sorted=True``).
        unsorted_indices: its inverse permutation (``None`` likewise); made from
            ``sorted_indices`` when only that is given, as PyTorch's constructor does.
    """

    __slots__ = ()

    def __new__(
        cls,
        data: Tensor,
        batch_sizes: np.ndarray,
        sorted_indices: np.ndarray | None = None,
        unsorted_indices: np.ndarray | None = None,
    ) -> PackedSequence:
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _inverse(np.asarray(sorted_indices, np.int64))
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def lengths(self) -> np.ndarray:
        """The length of each sequence, in the order of the sorted batch (int64)."""
        return _lengths_of(self.batch_sizes)


def _lengths_of(batch_sizes: np.ndarray) -> np.ndarray:
    """Each sorted sequence's length from the batch sizes per step."""
    n = int(batch_sizes[0]) if len(batch_sizes) else 0
    return np.asarray((batch_sizes[None, :] > np.arange(n)[:, None]).sum(axis=1), np.int64)


def host_lengths(
    lengths: Any, n: int, name: str, what: str = "lengths", minimum: int = 1
) -> np.ndarray:
    """``lengths`` (a list, a NumPy array or a tensor, one per sequence; a 0-d one for one
    sequence) as int64 on the host: the one check of sequence lengths (here and
    ``ctc_loss``); ``what`` names them in the errors.

    Raises:
        TracerError: a tensor traced by a ``tg.jit`` step (no value on the host yet).
        TypeError: not integers.
        ShapeError: not one length per sequence.
        ValueError: a length below ``minimum`` (1: PyTorch's sequences have a first step).
    """
    value = lengths.data if isinstance(lengths, Tensor) else lengths
    if isinstance(value, jax.core.Tracer):
        raise TracerError(
            f"{name}: {what} are read on the host (PyTorch's CPU lengths), but these are "
            "traced by a tg.jit step, with no value yet; make them a static argument of the "
            "step (a tuple, with static_argnames=: each new set of lengths compiles it once), "
            "or use them outside the step."
        )
    host = np.asarray(value)
    if host.dtype.kind not in "iu" and not (host.dtype.kind == "f" and host.size == 0):
        raise TypeError(f"{name}: {what} must be integers, got dtype {host.dtype}.")
    host = host.reshape(1) if host.ndim == 0 else host
    if host.shape != (n,):
        raise ShapeError(
            f"{name}: {what} must hold one length per sequence, shape ({n},), got shape "
            f"{host.shape}."
        )
    if n and host.min() < minimum:
        raise ValueError(
            f"{name}: {what} {host.tolist()} must be at least {minimum} each"
            + ("; leave empty sequences out of the batch." if minimum else ".")
        )
    return host.astype(np.int64)


def _packed_steps(batch_sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The time and sorted batch position of each row of a packed ``data``, in PyTorch's
    order (time-major), from the batch sizes per step."""
    times = np.repeat(np.arange(len(batch_sizes)), batch_sizes)
    rows = np.concatenate([np.arange(b) for b in batch_sizes]) if len(batch_sizes) else times
    return times, rows


def _padded_rows(batch_sizes: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, mask)``, each ``(total, N)`` in the sorted batch order: the row of a packed
    ``data`` that each padded step is, ``sum(batch_sizes)`` (one past the last row: a
    padding row) for the steps past a sequence's length, which ``mask`` marks false."""
    n = int(batch_sizes[0])
    sizes = np.zeros(total, np.int64)
    sizes[: len(batch_sizes)] = batch_sizes
    mask = np.arange(n)[None, :] < sizes[:, None]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rows = np.where(mask, offsets[:, None] + np.arange(n)[None, :], int(sizes.sum()))
    return rows, mask


def _padded_and_lengths(
    padded: Any, lengths: Any, batch_first: bool, name: str, what: str
) -> tuple[Tensor, np.ndarray]:
    """A padded batch ``(L, N, *)`` (``(N, L, *)`` with ``batch_first``) as a tensor and its
    ``N`` lengths on the host, checked; ``what``: the argument's name in the errors.

    Raises:
        ShapeError: fewer than 2 axes, a length beyond ``L``, or not one length per sequence.
        TypeError, ValueError, TracerError: as ``host_lengths``.
    """
    x = as_input(padded, name)
    if x.ndim < 2:
        raise ShapeError(f"{name}: {what} must be (L, N, *) or (N, L, *), got shape {x.shape}.")
    steps, n = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    host = host_lengths(lengths, n, name)
    if n and host.max() > steps:
        raise ShapeError(
            f"{name}: a length ({int(host.max())}) exceeds the {steps} steps of the {what}"
            + (" (batch_first: the second axis)" if batch_first else " (its first axis)")
            + "; pass batch_first=True for (N, L, *) batches."
        )
    return x, host


def _permutation(
    lengths: np.ndarray, enforce_sorted: bool, name: str
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(sorted_indices, unsorted_indices)`` for ``lengths``: ``None`` for sorted ones.

    Raises:
        ValueError: ``enforce_sorted`` and the lengths are not in decreasing order.
    """
    if enforce_sorted:
        if np.any(lengths[1:] > lengths[:-1]):
            raise ValueError(
                f"{name}: lengths must be sorted in decreasing order when enforce_sorted is "
                f"True, got {lengths.tolist()}; pass enforce_sorted=False (the batch is then "
                "sorted, and unsorted in the results)."
            )
        return None, None
    order = np.argsort(-lengths, kind="stable").astype(np.int64)
    return order, _inverse(order)


def _inverse(order: np.ndarray) -> np.ndarray:
    """The inverse of the permutation ``order``."""
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return inverse


def pack_padded_sequence(
    input: Any,  # noqa: A002 - PyTorch's name
    lengths: Any,
    batch_first: bool = False,
    enforce_sorted: bool = True,
) -> PackedSequence:
    """Pack a padded batch: keep each sequence's first ``lengths[b]`` steps (PyTorch's).

    Args:
        input: ``(L, N, *)`` (``(N, L, *)`` with ``batch_first``), steps past a sequence's
            length ignored.
        lengths: ``N`` ints in ``[1, L]`` (a list, NumPy array or tensor).
        batch_first: the batch axis comes first.
        enforce_sorted: the lengths must be in decreasing order; ``False`` sorts the batch
            (``sorted_indices``) and the layers and ``pad_packed_sequence`` restore its order.

    Returns:
        a ``PackedSequence`` whose ``data`` is a differentiable gather of ``input``.

    Raises:
        ShapeError: ``input`` has fewer than 2 axes, or a length beyond ``L`` or not one
            length per sequence.
        TypeError: lengths that are not integers.
        ValueError: a length below 1; unsorted lengths with ``enforce_sorted``.
        TracerError: lengths that are a tensor traced by a ``tg.jit`` step.
    """
    name = "pack_padded_sequence"
    x, host = _padded_and_lengths(input, lengths, batch_first, name, "input")
    n = len(host)
    sorted_indices, unsorted_indices = _permutation(host, enforce_sorted, name)
    order = np.arange(n) if sorted_indices is None else sorted_indices
    longest = int(host.max()) if n else 0
    batch_sizes = (host[None, :] > np.arange(longest)[:, None]).sum(axis=1).astype(np.int64)
    times, rows = _packed_steps(batch_sizes)
    batch = order[rows]
    data = x[batch, times] if batch_first else x[times, batch]
    return PackedSequence(data, batch_sizes, sorted_indices, unsorted_indices)


def _check_packed(sequence: Any, name: str) -> PackedSequence:
    """``sequence`` if it is a ``PackedSequence``.

    Raises:
        TypeError: anything else (a padded tensor: pack it first).
    """
    if not isinstance(sequence, PackedSequence):
        raise TypeError(
            f"{name}: expected a PackedSequence (from pack_padded_sequence or pack_sequence), "
            f"got {type(sequence).__name__}."
        )
    return sequence


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Undo ``pack_padded_sequence``: the padded batch in its original order and the lengths
    (PyTorch's).

    Args:
        sequence: a ``PackedSequence``.
        batch_first: return ``(N, T, *)`` instead of ``(T, N, *)``.
        padding_value: the value of the steps past each sequence's length.
        total_length: pad to this many steps (``T``; default: the longest length).

    Returns:
        ``(padded, lengths)``: the steps (a differentiable gather of ``sequence.data``) and
        an integer tensor of the ``N`` lengths.

    Raises:
        TypeError: ``sequence`` is not a ``PackedSequence``, or a ``total_length`` that is
            not an integer (8.5 is not truncated).
        ValueError: ``total_length`` below the longest length.
    """
    name = "pad_packed_sequence"
    sequence = _check_packed(sequence, name)
    longest = len(sequence.batch_sizes)
    total = longest if total_length is None else integer(total_length, f"{name}: total_length")
    if total < longest:
        raise ValueError(
            f"{name}: total_length ({total}) must be at least the length of the longest "
            f"sequence ({longest})."
        )
    rows = _padded_rows(sequence.batch_sizes, total)[0]
    if sequence.unsorted_indices is not None:
        rows = rows[:, sequence.unsorted_indices]
    padded = _gather(sequence.data, rows.T if batch_first else rows, padding_value)
    lengths = _lengths_of(sequence.batch_sizes)
    if sequence.unsorted_indices is not None:
        lengths = lengths[sequence.unsorted_indices]
    return padded, Tensor(lengths.astype(jax.dtypes.canonicalize_dtype(np.int64)))


def pad_sequence(
    sequences: Sequence[Any],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stack sequences of different lengths ``(L_i, *)``, padded to the longest (PyTorch's).

    Args:
        sequences: tensors (or arrays) ``(L_i, *)`` with the same trailing shape and dtype.
        batch_first: return ``(N, L, *)`` instead of ``(L, N, *)``.
        padding_value: the value of the padding steps.
        padding_side: ``"right"`` (steps first, padding after) or ``"left"``.

    Returns:
        ``(L, N, *)`` (``(N, L, *)`` with ``batch_first``), a differentiable gather of the
        sequences.

    Raises:
        ValueError: no sequences, or an unknown ``padding_side``.
        ShapeError: a 0-d sequence, or trailing shapes that differ.
    """
    name = "pad_sequence"
    if padding_side not in ("right", "left"):
        raise ValueError(f"{name}: padding_side must be 'right' or 'left', got {padding_side!r}.")
    seqs = [as_input(s, name) for s in sequences]
    if not seqs:
        raise ValueError(f"{name}: received an empty list of sequences.")
    trailing = {tuple(s.shape[1:]) for s in seqs if s.ndim}
    if any(s.ndim == 0 for s in seqs) or len(trailing) > 1:
        raise ShapeError(
            f"{name}: each sequence must be (L_i, *) with the same trailing shape, got shapes "
            f"{[tuple(s.shape) for s in seqs]}."
        )
    lengths = np.array([s.shape[0] for s in seqs], np.int64)
    longest = int(lengths.max())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pad_row = int(lengths.sum())
    steps = np.arange(longest)[:, None]
    shift = (longest - lengths)[None, :] if padding_side == "left" else 0
    at = steps - shift
    pos = np.where((at >= 0) & (at < lengths[None, :]), starts[None, :] + at, pad_row)
    return _gather(ops.concatenate(seqs, axis=0), pos.T if batch_first else pos, padding_value)


def pack_sequence(sequences: Sequence[Any], enforce_sorted: bool = True) -> PackedSequence:
    """Pack sequences ``(L_i, *)`` of different lengths (PyTorch's): ``pad_sequence`` then
    ``pack_padded_sequence`` with their lengths; errors as theirs."""
    padded = pad_sequence(sequences)
    lengths = [int(as_input(s, "pack_sequence").shape[0]) for s in sequences]
    return pack_padded_sequence(padded, lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded: Any, lengths: Any, batch_first: bool = False) -> list[Tensor]:
    """The sequences of a padded batch, each cut to its length (PyTorch's): a list of
    ``(lengths[b], *)`` tensors, slices of ``padded``.

    Raises:
        ShapeError, TypeError, ValueError: as ``pack_padded_sequence``'s for the lengths.
    """
    x, host = _padded_and_lengths(padded, lengths, batch_first, "unpad_sequence", "padded")
    return [x[b, : int(k)] if batch_first else x[: int(k), b] for b, k in enumerate(host)]


def unpack_sequence(packed: PackedSequence) -> list[Tensor]:
    """The sequences of a ``PackedSequence``, in the batch's original order (PyTorch's).

    Raises:
        TypeError: ``packed`` is not a ``PackedSequence``.
    """
    padded, lengths = pad_packed_sequence(_check_packed(packed, "unpack_sequence"))
    return unpad_sequence(padded, lengths.numpy())


def sorted_padded(sequence: PackedSequence) -> tuple[Tensor, np.ndarray]:
    """For the recurrent layers: ``sequence`` as a padded ``(L, N, *)`` batch in its sorted
    order (the padding steps zeros) and the ``(L, N)`` mask of the steps that are the
    sequences' own."""
    rows, mask = _padded_rows(sequence.batch_sizes, len(sequence.batch_sizes))
    return _gather(sequence.data, rows, 0.0), mask


def packed_like(padded: Tensor, sequence: PackedSequence) -> PackedSequence:
    """For the recurrent layers: the steps of ``padded`` ``(L, N, *)`` (in the sorted order)
    that are ``sequence``'s own, packed as it is."""
    times, rows = _packed_steps(sequence.batch_sizes)
    return sequence._replace(data=padded[times, rows])


def _gather(rows: Tensor, index: np.ndarray, padding_value: float) -> Tensor:
    """``rows`` ``(R, *)`` gathered at ``index`` (any shape of ints in ``[0, R]``), ``R``
    being a row of ``padding_value``: one differentiable gather."""
    pad = full_like(rows.detach()[:1], padding_value)  # detached: no node
    return ops.concatenate([rows, pad], axis=0)[index]
