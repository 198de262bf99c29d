"""Shape layers: ``Flatten``, ``Unflatten``."""

from __future__ import annotations

from collections.abc import Sequence

from tapegrad._args import integer
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError
from tapegrad.nn.module import Module

__all__ = ["Flatten", "Unflatten"]


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


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size`` (PyTorch's ``Unflatten``; the inverse of
    ``Flatten``): ``Unflatten(1, (C, H, W))`` turns ``(N, C*H*W)`` into ``(N, C, H, W)``.

    Args:
        dim: the axis split (negative counts from the end).
        unflattened_size: the sizes it becomes; their product is the axis's length (one
            may be -1, inferred).

    Raises:
        ShapeError: (at the call) the sizes do not multiply to the axis's length, or ``dim``
            is out of range.
    """

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        self.dim = integer(dim, "Unflatten: dim")
        self.unflattened_size = tuple(integer(n, "Unflatten: size") for n in unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        """``x`` with axis ``dim`` split into ``unflattened_size``."""
        shape = x.shape
        if not -len(shape) <= self.dim < len(shape):
            raise ShapeError(
                f"Unflatten: dim {self.dim} is out of range for an input of shape {shape}."
            )
        dim = self.dim % len(shape)
        return x.reshape(*shape[:dim], *self.unflattened_size, *shape[dim + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
