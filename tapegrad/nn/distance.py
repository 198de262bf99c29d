"""Distance layers (PyTorch's names): PairwiseDistance and CosineSimilarity."""

from __future__ import annotations

from typing import Any

from tapegrad import ops
from tapegrad._args import integer, number_of, numpy_keywords, torch_keywords
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module

__all__ = ["PairwiseDistance", "CosineSimilarity"]


class PairwiseDistance(Module):
    """``tg.pairwise_distance(a, b, p, eps, keepdims)``: the ``p``-norm of ``a - b + eps``
    along the last axis (PyTorch's ``PairwiseDistance``; ``keepdims`` its ``keepdim``)."""

    @torch_keywords()
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdims: bool = False) -> None:
        super().__init__()
        self.norm = float(number_of(p, "PairwiseDistance: p"))
        self.eps = float(number_of(eps, "PairwiseDistance: eps"))
        self.keepdims = bool(keepdims)

    def forward(self, a: Tensor, b: Any) -> Tensor:
        """The distances of the rows of ``a`` and ``b`` (broadcast)."""
        return ops.pairwise_distance(a, b, self.norm, self.eps, self.keepdims)

    def extra_repr(self) -> str:
        return f"p={self.norm}, eps={self.eps}" + (", keepdims=True" if self.keepdims else "")


class CosineSimilarity(Module):
    """``tg.cosine_similarity(a, b, axis, eps)``: the cosine along ``axis`` (PyTorch's
    ``dim``, whose default is 1; tapegrad's is the last axis, the features of ``(N, D)``
    rows either way).

    Raises:
        TypeError: ``axis`` is not an integer; PyTorch's ``dim=`` (names ``axis=``).
    """

    @numpy_keywords
    def __init__(self, axis: int = -1, eps: float = 1e-8) -> None:
        super().__init__()
        self.axis = integer(axis, "CosineSimilarity: axis")
        self.eps = float(number_of(eps, "CosineSimilarity: eps"))

    def forward(self, a: Tensor, b: Any) -> Tensor:
        """The cosine similarity of ``a`` and ``b`` along ``axis``."""
        return ops.cosine_similarity(a, b, self.axis, self.eps)

    def extra_repr(self) -> str:
        return f"axis={self.axis}, eps={self.eps}"
