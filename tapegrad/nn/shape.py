"""Shape layers: ``Flatten``."""

from __future__ import annotations

from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module

__all__ = ["Flatten"]


class Flatten(Module):
    """Merge axes ``start_dim..end_dim`` into one (PyTorch's defaults keep the batch axis).

    Args:
        start_dim: first axis merged (negative counts from the end).
        end_dim: last axis merged, inclusive.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with the axes merged, e.g. ``(N, C, H, W)`` -> ``(N, C*H*W)``."""
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
