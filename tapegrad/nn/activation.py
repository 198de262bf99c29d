"""Activation layers: ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, ELU, Softplus (elementwise),
Softmax and LogSoftmax (along an axis)."""

from __future__ import annotations

from tapegrad import ops
from tapegrad._args import integer, numpy_keywords
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module

__all__ = [
    "ReLU",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "LeakyReLU",
    "ELU",
    "Softplus",
    "Softmax",
    "LogSoftmax",
]


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


class LeakyReLU(Module):
    """``x`` where ``x > 0``, else ``negative_slope * x``: ``tg.leaky_relu``.

    Args:
        negative_slope: the slope below 0.
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = float(negative_slope)
        self.inplace = bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the leaky ReLU elementwise."""
        return ops.leaky_relu(x, negative_slope=self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``: ``tg.elu``.

    Args:
        alpha: the value the negative side tends to, ``-alpha``.
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = float(alpha)
        self.inplace = bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the ELU elementwise."""
        return ops.elu(x, alpha=self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``: ``tg.softplus``.

    Args:
        beta: the sharpness.
        threshold: above ``beta * x > threshold`` the output is ``x``.
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = float(beta)
        self.threshold = float(threshold)

    def forward(self, x: Tensor) -> Tensor:
        """Apply softplus elementwise."""
        return ops.softplus(x, beta=self.beta, threshold=self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmax(Module):
    """``tg.softmax`` along ``axis`` (PyTorch's ``dim``; required there too in effect: its
    default ``None`` is deprecated).

    Raises:
        TypeError: ``axis`` is not an integer; PyTorch's ``dim=`` (names ``axis=``).
    """

    @numpy_keywords
    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = integer(axis, f"{type(self).__name__}: axis")

    def forward(self, x: Tensor) -> Tensor:
        """The softmax of ``x`` along ``axis``."""
        return ops.softmax(x, axis=self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class LogSoftmax(Softmax):
    """``tg.log_softmax`` along ``axis`` (PyTorch's ``dim``)."""

    def forward(self, x: Tensor) -> Tensor:
        """The log-softmax of ``x`` along ``axis``."""
        return ops.log_softmax(x, axis=self.axis)
