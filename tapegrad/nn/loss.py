"""Loss layers (PyTorch's names) over the ``tg`` loss functions, each with ``reduction=``."""

from __future__ import annotations

from typing import Any

from tapegrad import ops
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module

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
    """``tg.cross_entropy(logits, labels, reduction=..., label_smoothing=...)``.

    Args:
        reduction: ``"mean"`` over the batch, ``"sum"``, or ``"none"`` (one loss per row).
        label_smoothing: mix the one-hot target with the uniform distribution.
    """

    def __init__(self, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        self.label_smoothing = float(label_smoothing)

    def forward(self, logits: Tensor, labels: Any) -> Tensor:
        """The loss of ``logits`` ``(..., C)`` against integer ``labels`` ``(...)``."""
        return ops.cross_entropy(
            logits, labels, reduction=self.reduction, label_smoothing=self.label_smoothing
        )


class NLLLoss(_Loss):
    """``tg.nll_loss(log_probs, labels, reduction=...)``: minus the log-probability of each
    label."""

    def forward(self, log_probs: Tensor, labels: Any) -> Tensor:
        """The loss of ``log_probs`` ``(..., C)`` against integer ``labels`` ``(...)``."""
        return ops.nll_loss(log_probs, labels, reduction=self.reduction)


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
