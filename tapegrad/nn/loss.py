"""Loss layers (PyTorch's names) over the ``tg`` loss functions (or, for the L1 family, tensor
ops), each with ``reduction=``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad import ops
from tapegrad._args import integer, torch_keywords
from tapegrad._tensor import Tensor
from tapegrad.creation import tensor
from tapegrad.nn.module import Module
from tapegrad.ops.nn import LOSS_ADVICE, LOSS_ORDER, warn_broadcast_loss

__all__ = [
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "HuberLoss",
    "BCEWithLogitsLoss",
    "BCELoss",
    "KLDivLoss",
]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(name: str, reduction: Any, weighted: bool = False) -> None:
    """Raise ``ValueError`` unless ``reduction`` is ``"mean"``, ``"sum"`` or ``"none"``
    (``weighted``: the loss takes ``weight=``, PyTorch's first positional argument)."""
    if not isinstance(reduction, str) or reduction not in _REDUCTIONS:
        first = (
            "; PyTorch's first positional argument is weight: pass weight= by keyword"
            if not isinstance(reduction, str) and weighted
            else ""
        )
        raise ValueError(
            f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}{first}."
        )


class _Loss(Module):
    _weighted = False  # takes weight= (PyTorch's first positional argument)

    @torch_keywords(LOSS_ADVICE)
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        _check_reduction(type(self).__name__, reduction, self._weighted)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


def _float_buffer(values: Any) -> Tensor:
    """A loss's weights as a float tensor (float32 unless they are floats already)."""
    w = np.asarray(values)
    return tensor(w if w.dtype.kind == "f" else w.astype(np.float32))


class _LabelLoss(_Loss):
    """A loss of integer labels: ``weight`` (a buffer, as PyTorch's), ``ignore_index``,
    ``axis``."""

    weight: Tensor | None
    _weighted = True

    def __init__(
        self, reduction: str, weight: Any, ignore_index: int, axis: int, name: str
    ) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else _float_buffer(weight))
        self.ignore_index = integer(ignore_index, f"{name}: ignore_index")
        self.axis = integer(axis, f"{name}: axis")


class CrossEntropyLoss(_LabelLoss):
    """``tg.cross_entropy(logits, labels, weight, reduction=..., label_smoothing=...,
    ignore_index=..., axis=...)``.

    Args:
        reduction: ``"mean"`` over the labels not ignored (weighted), ``"sum"``, or ``"none"``
            (one loss per label).
        label_smoothing: mix the one-hot target with the uniform distribution.
        weight: optional per-class weights (C,), by keyword (PyTorch's first positional
            argument); kept as a buffer, saved in ``state_dict()`` as PyTorch's.
        ignore_index: labels equal to it (PyTorch's padding label -100) count for nothing.
        axis: the class axis of the logits: -1 (the last, tapegrad's default); 1 for
            PyTorch's (N, C, d1, ...) layout.
    """

    @torch_keywords(LOSS_ADVICE)
    def __init__(
        self,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        *,
        weight: Any = None,
        ignore_index: int = -100,
        axis: int = -1,
    ) -> None:
        super().__init__(reduction, weight, ignore_index, axis, "CrossEntropyLoss")
        self.label_smoothing = float(label_smoothing)

    def forward(self, logits: Tensor, labels: Any) -> Tensor:
        """The loss of ``logits`` ``(..., C)`` (classes on ``axis``) against integer ``labels``
        (the logits' shape without the class axis) or float class probabilities (the
        logits' shape; the mean is over the rows; an ``ignore_index >= 0`` is refused)."""
        return ops.cross_entropy(
            logits,
            labels,
            self.weight,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            ignore_index=self.ignore_index,
            axis=self.axis,
        )


class NLLLoss(_LabelLoss):
    """``tg.nll_loss(log_probs, labels, weight, reduction=..., ignore_index=..., axis=...)``:
    minus the log-probability of each label (arguments as :class:`CrossEntropyLoss`)."""

    @torch_keywords(LOSS_ADVICE)
    def __init__(
        self,
        reduction: str = "mean",
        *,
        weight: Any = None,
        ignore_index: int = -100,
        axis: int = -1,
    ) -> None:
        super().__init__(reduction, weight, ignore_index, axis, "NLLLoss")

    def forward(self, log_probs: Tensor, labels: Any) -> Tensor:
        """The loss of ``log_probs`` ``(..., C)`` (classes on ``axis``) against integer
        ``labels``."""
        return ops.nll_loss(
            log_probs,
            labels,
            self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            axis=self.axis,
        )


class MSELoss(_Loss):
    """``tg.mse_loss(a, b, reduction=...)``: the squared error."""

    def forward(self, a: Tensor, b: Any) -> Tensor:
        """The loss between ``a`` and ``b`` (same shape)."""
        return ops.mse_loss(a, b, reduction=self.reduction)


def _difference(name: str, a: Tensor, b: Any) -> Tensor:
    """``a - b``, warning as ``mse_loss`` (and PyTorch) does when the shapes differ but
    broadcast."""
    warn_broadcast_loss(name, a, b)
    diff: Tensor = a - b
    return diff


def _absolute(d: Tensor) -> Tensor:
    """``|d|`` with PyTorch's gradient ``sign(d)``: 0 where ``d == 0`` (a prediction equal to
    its target gets no push), where ``Tensor.abs`` follows JAX's subgradient (1 at 0)."""
    sign = (d > 0).astype(d.dtype) - (d < 0).astype(d.dtype)
    out: Tensor = d * sign
    return out


def _reduced(per: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return per.mean()
    return per.sum() if reduction == "sum" else per


def _l1(name: str, a: Tensor, b: Any, reduction: str) -> Tensor:
    return _reduced(_absolute(_difference(name, a, b)), reduction)


def _smooth_l1(name: str, a: Tensor, b: Any, reduction: str, beta: float) -> Tensor:
    d = _difference(name, a, b)
    size = _absolute(d)
    if beta == 0.0:
        return _reduced(size, reduction)
    small = size < beta
    dq = ops.where(small, d, 0.0)  # the square of the branch not taken stays finite
    per = ops.where(small, dq * dq * (0.5 / beta), size - 0.5 * beta)
    return _reduced(per, reduction)


def _huber(name: str, a: Tensor, b: Any, reduction: str, delta: float) -> Tensor:
    d = _difference(name, a, b)
    size = _absolute(d)
    small = size <= delta
    dq = ops.where(small, d, 0.0)  # no 0 * inf = nan gradient at an infinite error
    per = ops.where(small, dq * dq * 0.5, (size - 0.5 * delta) * delta)
    return _reduced(per, reduction)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def l1_loss(a: Tensor, b: Any, *, reduction: str = "mean") -> Tensor:
    """The absolute error ``|a - b|``, reduced: ``"mean"`` over all elements, ``"sum"`` or
    ``"none"`` (PyTorch's ``F.l1_loss``; :class:`L1Loss`). Its gradient at ``a == b`` is 0,
    as PyTorch's.

    Raises:
        ValueError: an unknown reduction.

    Warns:
        TapegradWarning: ``a`` and ``b`` of different shapes that broadcast (as PyTorch).
    """
    _check_reduction("l1_loss", reduction)
    return _l1("l1_loss", a, b, reduction)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def smooth_l1_loss(a: Tensor, b: Any, *, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``, for ``d = a - b``,
    reduced (PyTorch's ``F.smooth_l1_loss``; :class:`SmoothL1Loss`; ``beta=0`` is the L1
    loss).

    Raises:
        ValueError: an unknown reduction or a negative ``beta``.
    """
    _check_reduction("smooth_l1_loss", reduction)
    if not beta >= 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}.")
    return _smooth_l1("smooth_l1_loss", a, b, reduction, float(beta))


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def huber_loss(a: Tensor, b: Any, *, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """``0.5 d**2`` where ``|d| <= delta``, else ``delta (|d| - 0.5 delta)``, for
    ``d = a - b``, reduced (PyTorch's ``F.huber_loss``; :class:`HuberLoss`).

    Raises:
        ValueError: an unknown reduction or a ``delta`` that is not positive.
    """
    _check_reduction("huber_loss", reduction)
    if not delta > 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}.")
    return _huber("huber_loss", a, b, reduction, float(delta))


class L1Loss(_Loss):
    """The absolute error ``|a - b|``, reduced (PyTorch's ``L1Loss``); the gradient at
    ``a == b`` is 0, as PyTorch's.

    Args:
        reduction: ``"mean"`` over all elements, ``"sum"``, or ``"none"``.

    Raises:
        ValueError: an unknown reduction.

    Warns:
        TapegradWarning: ``a`` and ``b`` of different shapes that broadcast (as PyTorch).
    """

    def forward(self, a: Tensor, b: Any) -> Tensor:
        """The loss between ``a`` and ``b`` (same shape)."""
        return _l1("L1Loss", a, b, self.reduction)


class SmoothL1Loss(_Loss):
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``, for ``d = a - b``,
    reduced (PyTorch's ``SmoothL1Loss``; ``beta=0`` is the L1 loss).

    Args:
        reduction: ``"mean"`` over all elements, ``"sum"``, or ``"none"``.
        beta: where the loss turns from quadratic to linear, ``>= 0``.

    Raises:
        ValueError: an unknown reduction or a negative ``beta``.
    """

    @torch_keywords(LOSS_ADVICE)
    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        if not beta >= 0:
            raise ValueError(f"SmoothL1Loss: beta must be >= 0, got {beta}.")
        self.beta = float(beta)

    def forward(self, a: Tensor, b: Any) -> Tensor:
        """The loss between ``a`` and ``b`` (same shape)."""
        return _smooth_l1("SmoothL1Loss", a, b, self.reduction, self.beta)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, beta={self.beta}"


class HuberLoss(_Loss):
    """``0.5 d**2`` where ``|d| <= delta``, else ``delta (|d| - 0.5 delta)``, for
    ``d = a - b``, reduced (PyTorch's ``HuberLoss``: ``delta`` times ``SmoothL1Loss`` with
    ``beta = delta``).

    Args:
        reduction: ``"mean"`` over all elements, ``"sum"``, or ``"none"``.
        delta: where the loss turns from quadratic to linear, ``> 0``.

    Raises:
        ValueError: an unknown reduction or a ``delta`` that is not positive.
    """

    @torch_keywords(LOSS_ADVICE)
    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        if not delta > 0:
            raise ValueError(f"HuberLoss: delta must be > 0, got {delta}.")
        self.delta = float(delta)

    def forward(self, a: Tensor, b: Any) -> Tensor:
        """The loss between ``a`` and ``b`` (same shape)."""
        return _huber("HuberLoss", a, b, self.reduction, self.delta)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, delta={self.delta}"


class BCEWithLogitsLoss(_Loss):
    """``tg.binary_cross_entropy_with_logits(logits, targets, weight, reduction=...,
    pos_weight=...)``.

    Args:
        reduction: ``"mean"`` over the elements, ``"sum"``, or ``"none"``.
        weight: optional rescaling of each element's loss, broadcast against them; by
            keyword (PyTorch's first positional argument). A buffer, as PyTorch's.
        pos_weight: optional weight of the positive term, broadcast against the targets
            (``(C,)``: one per class on the last axis). A buffer, as PyTorch's.
    """

    weight: Tensor | None
    pos_weight: Tensor | None
    _weighted = True

    @torch_keywords(LOSS_ADVICE)
    def __init__(
        self, reduction: str = "mean", *, weight: Any = None, pos_weight: Any = None
    ) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else _float_buffer(weight))
        self.register_buffer(
            "pos_weight", None if pos_weight is None else _float_buffer(pos_weight)
        )

    def forward(self, logits: Tensor, targets: Any) -> Tensor:
        """The loss of ``logits`` against targets in ``[0, 1]`` of the same shape."""
        return ops.binary_cross_entropy_with_logits(
            logits, targets, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )


class BCELoss(_Loss):
    """``tg.binary_cross_entropy(p, targets, weight, reduction=...)``: the binary cross
    entropy of probabilities, each log clamped at -100 (PyTorch's ``BCELoss``; on logits,
    :class:`BCEWithLogitsLoss` is the stable choice).

    Args:
        reduction: ``"mean"`` over the elements, ``"sum"``, or ``"none"``.
        weight: optional rescaling of each element's loss, broadcast against them; by
            keyword (PyTorch's first positional argument). A buffer, as PyTorch's.

    Raises:
        ValueError: an unknown reduction (or a weight given by position: the message says
            to pass ``weight=``).
    """

    weight: Tensor | None
    _weighted = True

    @torch_keywords(LOSS_ADVICE)
    def __init__(self, reduction: str = "mean", *, weight: Any = None) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else _float_buffer(weight))

    def forward(self, p: Tensor, targets: Any) -> Tensor:
        """The loss of probabilities ``p`` against targets in ``[0, 1]`` of the same shape."""
        return ops.binary_cross_entropy(p, targets, self.weight, reduction=self.reduction)


class KLDivLoss(Module):
    """``tg.kl_div(input, target, reduction=..., log_target=...)``: the Kullback-Leibler
    divergence of ``target`` from the distribution whose log-probabilities are ``input``
    (PyTorch's ``KLDivLoss``).

    Args:
        reduction: ``"mean"`` over every element (PyTorch's default), ``"batchmean"`` (the
            sum divided by the batch size, the mathematical KL per sample), ``"sum"`` or
            ``"none"``.
        log_target: ``target`` holds log-probabilities.

    Raises:
        ValueError: an unknown reduction.
    """

    @torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__()
        if reduction not in ("mean", "batchmean", "sum", "none"):
            raise ValueError(
                f"KLDivLoss: reduction={reduction!r}; use 'mean', 'batchmean', 'sum' or 'none'."
            )
        self.reduction = reduction
        self.log_target = bool(log_target)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        """The divergence of ``target`` from ``input`` (log-probabilities), broadcast."""
        return ops.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" + (", log_target=True" if self.log_target else "")
