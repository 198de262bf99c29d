"""Loss layers (PyTorch's names) over the ``tg`` loss functions, each with ``reduction=``."""

from __future__ import annotations

from typing import Any

from tapegrad import ops
from tapegrad._args import integer, torch_keywords
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module
from tapegrad.ops.nn import LOSS_ADVICE as _LOSS_ADVICE

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "BCEWithLogitsLoss"]

_REDUCTIONS = ("mean", "sum", "none")


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, got {reduction!r}."
            )
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class CrossEntropyLoss(_Loss):
    """``tg.cross_entropy(logits, labels, reduction=..., label_smoothing=..., ignore_index=...,
    axis=...)``.

    Args:
        reduction: ``"mean"`` over the labels not ignored, ``"sum"``, or ``"none"`` (one loss
            per label).
        label_smoothing: mix the one-hot target with the uniform distribution.
        ignore_index: labels equal to it (PyTorch's padding label -100) count for nothing.
        axis: the class axis of the logits: -1 (the last, tapegrad's default); 1 for
            PyTorch's (N, C, d1, ...) layout.

    Raises:
        TypeError: ``weight=`` (not supported: the message shows the weighted mean to write).
    """

    @torch_keywords(_LOSS_ADVICE)
    def __init__(
        self,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        *,
        ignore_index: int = -100,
        axis: int = -1,
    ) -> None:
        super().__init__(reduction)
        self.label_smoothing = float(label_smoothing)
        self.ignore_index = integer(ignore_index, "CrossEntropyLoss: ignore_index")
        self.axis = integer(axis, "CrossEntropyLoss: axis")

    def forward(self, logits: Tensor, labels: Any) -> Tensor:
        """The loss of ``logits`` ``(..., C)`` (classes on ``axis``) against integer ``labels``
        (the logits' shape without the class axis)."""
        return ops.cross_entropy(
            logits,
            labels,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
            ignore_index=self.ignore_index,
            axis=self.axis,
        )


class NLLLoss(_Loss):
    """``tg.nll_loss(log_probs, labels, reduction=..., ignore_index=..., axis=...)``: minus the
    log-probability of each label (arguments as :class:`CrossEntropyLoss`)."""

    @torch_keywords(_LOSS_ADVICE)
    def __init__(
        self, reduction: str = "mean", *, ignore_index: int = -100, axis: int = -1
    ) -> None:
        super().__init__(reduction)
        self.ignore_index = integer(ignore_index, "NLLLoss: ignore_index")
        self.axis = integer(axis, "NLLLoss: axis")

    def forward(self, log_probs: Tensor, labels: Any) -> Tensor:
        """The loss of ``log_probs`` ``(..., C)`` (classes on ``axis``) against integer
        ``labels``."""
        return ops.nll_loss(
            log_probs,
            labels,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            axis=self.axis,
        )


class MSELoss(_Loss):
    """``tg.mse_loss(a, b, reduction=...)``: the squared error."""

    def forward(self, a: Tensor, b: Any) -> Tensor:
        """The loss between ``a`` and ``b`` (same shape)."""
        return ops.mse_loss(a, b, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """``tg.binary_cross_entropy_with_logits(logits, targets, reduction=...)``."""

    def forward(self, logits: Tensor, targets: Any) -> Tensor:
        """The loss of ``logits`` against targets in ``[0, 1]`` of the same shape."""
        return ops.binary_cross_entropy_with_logits(logits, targets, reduction=self.reduction)
