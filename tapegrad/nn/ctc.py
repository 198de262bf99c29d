"""Connectionist temporal classification loss (Graves et al. 2006), PyTorch's
``F.ctc_loss`` and ``nn.CTCLoss``, computed by ``optax.ctc_loss`` (its forward-backward
recursion over the alignments) as one op whose VJP JAX derives (``tg.jax_op``: compiled
once per shape)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from tapegrad._args import integer
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError
from tapegrad.jax_op import jax_op
from tapegrad.nn._inputs import as_input
from tapegrad.nn.loss import _check_reduction, _Loss
from tapegrad.nn.utils.rnn import host_lengths

__all__ = ["ctc_loss", "CTCLoss"]


def _ctc(
    log_probs: jax.Array,
    targets: jax.Array,
    input_lengths: jax.Array,
    target_lengths: jax.Array,
    *,
    blank: int,
    reduction: str,
    zero_infinity: bool,
) -> jax.Array:
    """The loss from ``log_probs`` ``(T, N, C)``, padded ``targets`` ``(N, S)`` and the
    lengths ``(N,)``: optax's per-sequence negative log likelihood (``log_probs`` taken as
    logits: a log-softmax leaves log probabilities unchanged, and its derivative is
    PyTorch's), ``inf`` (``zero_infinity``: 0) where the target cannot be aligned (fewer
    steps than labels plus repeated neighbours), NaN where a label within its target lies
    outside ``[0, C)``, reduced as PyTorch's (``"mean"``: each loss over its target length,
    then the batch mean)."""
    steps, labels, classes = log_probs.shape[0], targets.shape[1], log_probs.shape[2]
    logits = jnp.transpose(log_probs, (1, 0, 2))
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
    pad_steps = (jnp.arange(steps)[None, :] >= input_lengths[:, None]).astype(logits.dtype)
    pad_labels = (jnp.arange(labels)[None, :] >= target_lengths[:, None]).astype(logits.dtype)
    per = optax.ctc_loss(logits, pad_steps, targets, pad_labels, blank_id=blank)
    inside = jnp.arange(labels - 1)[None, :] < target_lengths[:, None] - 1
    repeats = jnp.sum((targets[:, 1:] == targets[:, :-1]) & inside, axis=1)
    feasible = input_lengths >= target_lengths + repeats
    per = jnp.where(feasible, per, 0.0 if zero_infinity else jnp.inf)
    outside = (targets < 0) | (targets >= classes)
    per = jnp.where(jnp.any(outside & (pad_labels == 0), axis=1), jnp.nan, per)
    if reduction == "sum":
        per = jnp.sum(per)
    elif reduction == "mean":
        per = jnp.mean(per / jnp.maximum(target_lengths, 1).astype(per.dtype))
    return per.astype(log_probs.dtype)


_ctc.__name__ = "ctc_loss"  # the op's name in leak reports and snapshots
_ctc_op = jax_op(_ctc)


def _padded_targets(targets: Any, lengths: np.ndarray, n: int, classes: int) -> jax.Array:
    """The targets as ``(N, S)`` int32 on the device: PyTorch's padded form as it is, or its
    concatenated 1-D form (the ``N`` targets one after the other) cut by ``lengths``.

    Raises:
        TypeError: targets that are not integers.
        ShapeError: a padded form of another batch or shorter than a length; a 1-D form
            whose length is not the lengths' sum.
        ValueError: host targets (a NumPy array) with a label outside ``[0, classes)``
            within its target (padding past a length may hold anything); targets on the
            device are not read back (that would stall JAX's dispatch).
    """
    t = as_input(targets, "ctc_loss").data
    if not jnp.issubdtype(t.dtype, jnp.integer):
        raise TypeError(f"ctc_loss: targets must be integers (class indices), got {t.dtype}.")
    if t.ndim == 2:
        if t.shape[0] != n or (n and lengths.max() > t.shape[1]):
            raise ShapeError(
                f"ctc_loss: padded targets {t.shape} must be (N={n}, S) with S at least the "
                f"longest target length ({int(lengths.max()) if n else 0})."
            )
        padded = t.astype(jnp.int32)
    else:
        if t.ndim != 1 or t.shape[0] != int(lengths.sum()):
            raise ShapeError(
                f"ctc_loss: targets of shape {t.shape} must be padded (N, S) or the targets "
                f"concatenated, 1-D of length sum(target_lengths) = {int(lengths.sum())}."
            )
        longest = int(lengths.max()) if n else 0
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        at = starts[:, None] + np.arange(longest)[None, :]
        inside = np.arange(longest)[None, :] < lengths[:, None]
        padded = jnp.where(inside, t[np.where(inside, at, 0)], 0).astype(jnp.int32)
    if isinstance(targets, np.ndarray):
        host = targets if t.ndim == 1 else targets[np.arange(t.shape[1]) < lengths[:, None]]
        bad = int(np.count_nonzero((host < 0) | (host >= classes)))
        if bad:
            raise ValueError(
                f"ctc_loss: {bad} target labels are outside [0, {classes}); each label is a "
                f"class index below {classes} (padding past a target length may be anything)."
            )
    return padded


def ctc_loss(
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The CTC loss of label sequences under per-step class log probabilities (PyTorch's
    ``F.ctc_loss``).

    Args:
        log_probs: ``(T, N, C)`` (or unbatched ``(T, C)``) log probabilities over ``C``
            classes, blank included (``tg.log_softmax`` of a model's outputs); float.
            Scores that are not log probabilities are normalised first (optax's
            log-softmax), where PyTorch takes them as they are: for log probabilities the
            two agree, gradients included.
        targets: the label sequences: padded ``(N, S)``, or all concatenated, 1-D of length
            ``sum(target_lengths)`` (unbatched: ``(S,)``); integers in ``[0, C)``, never
            ``blank``. Targets on the device are not read back: a label outside ``[0, C)``
            makes its sequence's loss NaN.
        input_lengths: ``N`` ints in ``[1, T]``, each sequence's steps (an int unbatched).
        target_lengths: ``N`` ints, at least 0, each target's length.
        blank: the blank class.
        reduction: ``"mean"`` (each loss divided by its target length, then averaged),
            ``"sum"`` or ``"none"`` (``(N,)``).
        zero_infinity: an impossible alignment (a target longer than its input allows) gives
            0 and no gradient instead of ``inf``.

    Returns:
        The loss, ``log_probs``' dtype: 0-d, or ``(N,)`` for ``"none"``. Its VJP is JAX's
        derivative of ``optax.ctc_loss`` (equal to PyTorch's); an ``inf`` loss sends no
        gradient.

    Raises:
        ShapeError: ``log_probs`` not 2-D or 3-D, lengths or targets of other shapes
            (unbatched targets not ``(S,)``), an input length beyond ``T``.
        TypeError: float targets or lengths, integer ``log_probs``.
        ValueError: an unknown ``reduction``, ``blank`` outside ``[0, C)``, an input length
            below 1, a target length below 0, a host (NumPy) label outside ``[0, C)``.
    """
    _check_reduction("ctc_loss", reduction)
    lp = as_input(log_probs, "ctc_loss")
    check_float(lp.dtype, "ctc_loss: log_probs")
    unbatched = lp.ndim == 2
    if unbatched:
        lp = lp.reshape(lp.shape[0], 1, lp.shape[1])
        one = targets if isinstance(targets, np.ndarray) else as_input(targets, "ctc_loss")
        if not (one.ndim == 1 or one.ndim == 2 and one.shape[0] == 1):
            raise ShapeError(
                f"ctc_loss: unbatched targets must be (S,) (or (1, S)) for log_probs (T, C), "
                f"got shape {one.shape}; a batch's log_probs are (T, N, C)."
            )
        targets = one.reshape(1, -1)
    if lp.ndim != 3:
        raise ShapeError(
            f"ctc_loss: log_probs must be (T, N, C) or unbatched (T, C), got shape {lp.shape}."
        )
    steps, n, classes = lp.shape
    blank = integer(blank, "ctc_loss: blank")
    if not 0 <= blank < classes:
        raise ValueError(f"ctc_loss: blank={blank} must be a class index in [0, {classes}).")
    il = host_lengths(input_lengths, n, "ctc_loss", "input_lengths", minimum=0)
    tl = host_lengths(target_lengths, n, "ctc_loss", "target_lengths", minimum=0)
    if n and (il.max() > steps or il.min() < 1):
        raise (ShapeError if il.max() > steps else ValueError)(
            f"ctc_loss: input_lengths {il.tolist()} must lie in [1, T={steps}]."
        )
    padded = _padded_targets(targets, tl, n, classes)
    kind = jnp.int32
    loss: Tensor = _ctc_op(
        lp,
        padded,
        jnp.asarray(il, kind),
        jnp.asarray(tl, kind),
        blank=blank,
        reduction=reduction,
        zero_infinity=bool(zero_infinity),
    )
    if unbatched and reduction == "none":
        return loss.reshape(())
    return loss


class CTCLoss(_Loss):
    """``ctc_loss`` as a layer (PyTorch's ``nn.CTCLoss(blank=0, reduction="mean",
    zero_infinity=False)``): ``forward(log_probs, targets, input_lengths,
    target_lengths)``; arguments, result and errors as ``ctc_loss``'s.

    Raises:
        ValueError: an unknown ``reduction`` (at construction).
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction)
        self.blank = integer(blank, "CTCLoss: blank")
        self.zero_infinity = bool(zero_infinity)

    def forward(
        self, log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any
    ) -> Tensor:
        return ctc_loss(
            log_probs,
            targets,
            input_lengths,
            target_lengths,
            self.blank,
            self.reduction,
            self.zero_infinity,
        )

    def extra_repr(self) -> str:
        return f"blank={self.blank}, reduction={self.reduction!r}" + (
            ", zero_infinity=True" if self.zero_infinity else ""
        )
