"""Loss layers of margins, embeddings and likelihoods (PyTorch's names) over the ``tg`` loss
functions, each with ``reduction=``."""

from __future__ import annotations

from typing import Any

from tapegrad import ops
from tapegrad._args import number_of, torch_keywords
from tapegrad._tensor import Tensor
from tapegrad.nn.loss import _float_buffer, _Loss
from tapegrad.ops.nn import LOSS_ADVICE, LOSS_ORDER

__all__ = [
    "MarginRankingLoss",
    "HingeEmbeddingLoss",
    "SoftMarginLoss",
    "MultiLabelSoftMarginLoss",
    "CosineEmbeddingLoss",
    "TripletMarginLoss",
    "GaussianNLLLoss",
    "PoissonNLLLoss",
]


class _MarginLoss(_Loss):
    """A loss with a ``margin`` (PyTorch's first positional argument) and ``reduction``."""

    _margin = 0.0

    @torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
    def __init__(self, margin: float | None = None, *, reduction: str = "mean") -> None:
        super().__init__(reduction)
        name = type(self).__name__
        self.margin = float(
            number_of(self._margin if margin is None else margin, f"{name}: margin")
        )

    def extra_repr(self) -> str:
        return f"margin={self.margin}, reduction={self.reduction!r}"


class MarginRankingLoss(_MarginLoss):
    """``tg.margin_ranking_loss(a, b, target, margin=..., reduction=...)``: ``max(0,
    -target (a - b) + margin)``, ``target`` 1 or -1 (PyTorch's ``MarginRankingLoss``).

    Args:
        margin: the margin (PyTorch's default 0).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``, by keyword.
    """

    def forward(self, a: Tensor, b: Any, target: Any) -> Tensor:
        """The loss of ranking ``a`` above ``b`` where ``target`` is 1 (below where -1)."""
        return ops.margin_ranking_loss(a, b, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """``tg.hinge_embedding_loss(x, target, margin=..., reduction=...)``: ``x`` where
    ``target`` is 1, ``max(0, margin - x)`` where it is -1 (PyTorch's default margin 1).
    """

    _margin = 1.0

    def forward(self, x: Tensor, target: Any) -> Tensor:
        """The loss of distances ``x`` against targets 1 (similar) or -1 (dissimilar)."""
        return ops.hinge_embedding_loss(x, target, margin=self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    """``tg.cosine_embedding_loss(a, b, target, margin=..., reduction=...)``: ``1 - cos``
    where ``target`` is 1, ``max(0, cos - margin)`` where it is -1, per row."""

    def forward(self, a: Tensor, b: Any, target: Any) -> Tensor:
        """The loss of rows ``a``, ``b`` ``(N, D)`` (or ``(D,)``) against ``target`` ``(N,)``."""
        return ops.cosine_embedding_loss(a, b, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``tg.soft_margin_loss(x, target, reduction=...)``: ``log(1 + exp(-target x))``."""

    def forward(self, x: Tensor, target: Any) -> Tensor:
        """The loss of scores ``x`` against targets 1 or -1."""
        return ops.soft_margin_loss(x, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """``tg.multilabel_soft_margin_loss(x, target, weight, reduction=...)``: per row the mean
    over the classes of the binary cross entropy of ``sigmoid(x)``.

    Args:
        reduction: ``"mean"`` over the rows, ``"sum"``, or ``"none"`` (one loss per row).
        weight: optional per-class weights ``(C,)``, by keyword (PyTorch's first positional
            argument); a buffer, as PyTorch's.
    """

    weight: Tensor | None
    _weighted = True

    @torch_keywords(LOSS_ADVICE)
    def __init__(self, reduction: str = "mean", *, weight: Any = None) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else _float_buffer(weight))

    def forward(self, x: Tensor, target: Any) -> Tensor:
        """The loss of scores ``x`` ``(N, C)`` against 0/1 targets of the same shape."""
        return ops.multilabel_soft_margin_loss(x, target, self.weight, reduction=self.reduction)


class TripletMarginLoss(_MarginLoss):
    """``tg.triplet_margin_loss(anchor, positive, negative, margin=..., p=..., eps=...,
    swap=..., reduction=...)`` (PyTorch's ``TripletMarginLoss``).

    Args:
        margin: the margin, ``> 0`` (default 1).
        p: the norm of the distances (default 2).
        eps: added to the differences, keeping the gradient at zero distance finite.
        swap: use the smaller of ``d(anchor, negative)`` and ``d(positive, negative)``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``, by keyword.

    Raises:
        ValueError: ``margin <= 0`` or an unknown reduction.
    """

    _margin = 1.0

    @torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        *,
        reduction: str = "mean",
    ) -> None:
        super().__init__(margin, reduction=reduction)
        if not self.margin > 0:
            raise ValueError(f"TripletMarginLoss: margin must be > 0, got {margin}.")
        self.p = float(number_of(p, "TripletMarginLoss: p"))
        self.eps = float(number_of(eps, "TripletMarginLoss: eps"))
        self.swap = bool(swap)

    def forward(self, anchor: Tensor, positive: Any, negative: Any) -> Tensor:
        """The loss of the triplets, rows ``(N, D)`` or one ``(D,)``."""
        return ops.triplet_margin_loss(
            anchor,
            positive,
            negative,
            margin=self.margin,
            p=self.p,
            eps=self.eps,
            swap=self.swap,
            reduction=self.reduction,
        )

    def extra_repr(self) -> str:
        return (
            f"margin={self.margin}, p={self.p}, eps={self.eps}, swap={self.swap}, "
            f"reduction={self.reduction!r}"
        )


class GaussianNLLLoss(_Loss):
    """``tg.gaussian_nll_loss(x, target, var, full=..., eps=..., reduction=...)``: the
    Gaussian negative log-likelihood of ``target`` under mean ``x`` and variance ``var``.

    Args:
        full: add the constant ``0.5 log(2 pi)``.
        eps: the least variance (the clamp passes the gradient through, as PyTorch's).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
    """

    @torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.full = bool(full)
        self.eps = float(number_of(eps, "GaussianNLLLoss: eps"))

    def forward(self, x: Tensor, target: Any, var: Any) -> Tensor:
        """The loss of ``target`` under ``N(x, var)`` (``var`` shapes as the function's)."""
        return ops.gaussian_nll_loss(
            x, target, var, full=self.full, eps=self.eps, reduction=self.reduction
        )

    def extra_repr(self) -> str:
        return f"full={self.full}, eps={self.eps}, reduction={self.reduction!r}"


class PoissonNLLLoss(_Loss):
    """``tg.poisson_nll_loss(x, target, log_input=..., full=..., eps=..., reduction=...)``.

    Args:
        log_input: ``x`` is a log-rate (``exp(x) - target x``), else a rate (``x - target
            log(x + eps)``).
        full: add the Stirling term where ``target > 1``.
        eps: keeps ``log(x + eps)`` finite at a zero rate, by keyword.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``, by keyword.
    """

    @torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        *,
        eps: float = 1e-8,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        self.log_input, self.full = bool(log_input), bool(full)
        self.eps = float(number_of(eps, "PoissonNLLLoss: eps"))

    def forward(self, x: Tensor, target: Any) -> Tensor:
        """The loss of counts ``target`` under the Poisson rates ``x``."""
        return ops.poisson_nll_loss(
            x,
            target,
            log_input=self.log_input,
            full=self.full,
            eps=self.eps,
            reduction=self.reduction,
        )

    def extra_repr(self) -> str:
        return (
            f"log_input={self.log_input}, full={self.full}, eps={self.eps}, "
            f"reduction={self.reduction!r}"
        )
