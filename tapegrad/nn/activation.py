"""Elementwise activation layers: ReLU, GELU, SiLU, Tanh, Sigmoid."""

from __future__ import annotations

from tapegrad import ops
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module

__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid"]


class ReLU(Module):
    """Elementwise ``max(x, 0)`` (subgradient 0 at 0, as JAX).

    Args:
        inplace: accepted for PyTorch's signature (``nn.ReLU(inplace=True)``) and changes
            nothing: tapegrad never writes into the input (JAX arrays are immutable), the
            result is a new tensor, so use the returned value (``x = relu(x)``), as PyTorch
            code usually does.
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""

    def forward(self, x: Tensor) -> Tensor:
        """Apply ReLU elementwise."""
        return x.relu()


class GELU(Module):
    """Gaussian error linear unit, ``x * Phi(x)``: ``tg.gelu``.

    Args:
        approximate: ``"none"`` for the exact erf form (PyTorch's default), ``"tanh"`` for
            the tanh approximation.
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}.")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        """Apply GELU elementwise."""
        return ops.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """Sigmoid linear unit (swish), ``x * sigmoid(x)``: ``tg.silu``.

    Args:
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""

    def forward(self, x: Tensor) -> Tensor:
        """Apply SiLU elementwise."""
        return ops.silu(x)


class Tanh(Module):
    """Elementwise hyperbolic tangent."""

    def forward(self, x: Tensor) -> Tensor:
        """Apply tanh elementwise."""
        return x.tanh()


class Sigmoid(Module):
    """Elementwise logistic function ``1 / (1 + exp(-x))``."""

    def forward(self, x: Tensor) -> Tensor:
        """Apply the sigmoid elementwise."""
        return x.sigmoid()
