"""Activation layers: ReLU, GELU, SiLU, Tanh, Sigmoid, LeakyReLU, ELU, Softplus, SELU, Hardtanh,
ReLU6, Mish, LogSigmoid, Hardswish, Hardsigmoid, Softsign, PReLU, CELU, Hardshrink, Softshrink,
Tanhshrink, Threshold (elementwise), Softmax, LogSoftmax, Softmin, Softmax2d and GLU (along an
axis)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tapegrad import ops
from tapegrad._args import integer, number_of, numpy_keywords
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError
from tapegrad.nn import _init
from tapegrad.nn._inputs import as_input
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
    "SELU",
    "Hardtanh",
    "ReLU6",
    "Mish",
    "LogSigmoid",
    "Hardswish",
    "Hardsigmoid",
    "Softsign",
    "PReLU",
    "CELU",
    "Hardshrink",
    "Softshrink",
    "Tanhshrink",
    "Threshold",
    "Softmin",
    "Softmax2d",
    "GLU",
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


class Softmin(Softmax):
    """``tg.softmin`` along ``axis`` (PyTorch's ``dim``): ``softmax(-x)``."""

    def forward(self, x: Tensor) -> Tensor:
        """The softmin of ``x`` along ``axis``."""
        return ops.softmin(x, axis=self.axis)


class Softmax2d(Module):
    """PyTorch's ``Softmax2d``: the softmax over the channels of each location, axis -3 of
    an ``(N, C, H, W)`` or ``(C, H, W)`` input.

    Raises:
        ShapeError: at call time, an input that is not 3-d or 4-d.
    """

    def forward(self, x: Tensor) -> Tensor:
        """The softmax of ``x`` over its channel axis (-3)."""
        shape = tuple(as_input(x, "Softmax2d").shape)
        if len(shape) not in (3, 4):
            raise ShapeError(
                f"Softmax2d: expects an (N, C, H, W) or (C, H, W) input, got shape {shape}; "
                "for a softmax over another axis use nn.Softmax(axis)."
            )
        return ops.softmax(x, axis=-3)


class _Inplace(Module):
    """An elementwise layer with PyTorch's ``inplace`` flag, accepted and changing nothing
    (see :class:`ReLU`)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = bool(inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class SELU(_Inplace):
    """Scaled ELU: ``tg.selu`` (PyTorch's ``alpha`` and ``scale``).

    Args:
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def forward(self, x: Tensor) -> Tensor:
        """Apply SELU elementwise."""
        return ops.selu(x)


class Hardtanh(Module):
    """``x`` clipped to ``[min_val, max_val]``: ``tg.hardtanh`` (gradient 1 strictly inside,
    0 at and beyond the bounds, as PyTorch's).

    Args:
        min_val: the lower bound.
        max_val: the upper bound.
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).

    Raises:
        ValueError: ``min_val > max_val``.
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.min_val, self.max_val = float(min_val), float(max_val)
        if self.min_val > self.max_val:
            raise ValueError(
                f"Hardtanh: min_val={min_val} is greater than max_val={max_val}; pass "
                "min_val <= max_val."
            )
        self.inplace = bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        """Apply hardtanh elementwise."""
        return ops.hardtanh(x, min_val=self.min_val, max_val=self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else ""
        )


class ReLU6(_Inplace):
    """``min(max(x, 0), 6)``: ``tg.relu6`` (gradient 0 at 0 and 6, as PyTorch's).

    Args:
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def forward(self, x: Tensor) -> Tensor:
        """Apply ReLU6 elementwise."""
        return ops.relu6(x)


class Mish(_Inplace):
    """``x * tanh(softplus(x))``: ``tg.mish``.

    Args:
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def forward(self, x: Tensor) -> Tensor:
        """Apply Mish elementwise."""
        return ops.mish(x)


class LogSigmoid(Module):
    """``log(sigmoid(x))``, computed stably: ``tg.log_sigmoid``."""

    def forward(self, x: Tensor) -> Tensor:
        """Apply log-sigmoid elementwise."""
        return ops.log_sigmoid(x)


class Hardswish(_Inplace):
    """``x * relu6(x + 3) / 6``: ``tg.hardswish``.

    Args:
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def forward(self, x: Tensor) -> Tensor:
        """Apply hardswish elementwise."""
        return ops.hardswish(x)


class Hardsigmoid(_Inplace):
    """``relu6(x + 3) / 6``: ``tg.hardsigmoid``.

    Args:
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def forward(self, x: Tensor) -> Tensor:
        """Apply hardsigmoid elementwise."""
        return ops.hardsigmoid(x)


class Softsign(Module):
    """``x / (1 + |x|)``: ``tg.softsign``."""

    def forward(self, x: Tensor) -> Tensor:
        """Apply softsign elementwise."""
        return ops.softsign(x)


class PReLU(Module):
    """``x`` where ``x > 0``, else ``weight * x``, with a learned slope (He et al. 2015;
    PyTorch's ``PReLU``, whose state dict loads unchanged: key ``weight``).

    One slope for every element (``num_parameters=1``), or one per channel, the input's axis
    1 (``(N, C, ...)``; a 0-d or 1-D input has no channel axis: one slope). Built from
    ``tg.where`` and products, whose VJPs give PyTorch's gradients (``weight`` at ``x == 0``
    for the input; ``sum x g`` over ``x <= 0`` for the slope).

    Args:
        num_parameters: 1, or the number of channels.
        init: the slopes' initial value.
        dtype: a floating dtype for the weight.
        device: where it is made, as ``tg.zeros(..., device=)``.

    Attributes:
        weight: parameter of shape ``(num_parameters,)``.

    Raises:
        ValueError: ``num_parameters`` below 1.
        TypeError: ``num_parameters`` is not an integer, or ``dtype`` is not floating.
        ShapeError: at call time, an input whose channel count is not ``num_parameters``.
    """

    weight: Tensor

    def __init__(
        self,
        num_parameters: int = 1,
        init: float = 0.25,
        *,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        n = integer(num_parameters, "PReLU: num_parameters")
        if n < 1:
            raise ValueError(f"PReLU: num_parameters must be at least 1, got {n}.")
        check_float(dtype, "PReLU")
        self.num_parameters, self.init = n, float(init)
        self.weight = _init.constant((n,), self.init, dtype)
        _init.to_device(self, device, "nn.PReLU")

    def forward(self, x: Tensor) -> Tensor:
        """Apply the parametric ReLU to ``x`` (``(N, C, ...)`` with ``C == num_parameters``,
        or any shape with one slope); the shape of ``x``."""
        x = as_input(x, "PReLU")
        w = self.weight
        if self.num_parameters > 1:
            channels = x.shape[1] if x.ndim >= 2 else 1
            if channels != self.num_parameters:
                raise ShapeError(
                    f"PReLU: {self.num_parameters} slopes, one per channel (axis 1), but the "
                    f"input of shape {x.shape} has {channels} channel(s); pass (N, "
                    f"{self.num_parameters}, ...) or use PReLU() for one shared slope."
                )
            w = w.reshape((self.num_parameters,) + (1,) * (x.ndim - 2))
        else:
            w = w.reshape(())
        # the slope multiplies x where x <= 0 only: a zero cotangent times an infinite x of
        # the other branch would give the slope a NaN gradient (PyTorch's: 0 there)
        return ops.where(x > 0, x, w * ops.where(x > 0, 0.0, x))

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    """Gated linear unit along ``axis`` (PyTorch's ``dim``): ``tg.glu``; that axis halves.

    Raises:
        TypeError: ``axis`` is not an integer; PyTorch's ``dim=`` (names ``axis=``).
        ShapeError: at call time, ``axis`` out of range or of odd length.
    """

    @numpy_keywords
    def __init__(self, axis: int = -1) -> None:
        super().__init__()
        self.axis = integer(axis, "GLU: axis")

    def forward(self, x: Tensor) -> Tensor:
        """``a * sigmoid(b)`` for the halves ``a, b`` of ``x`` along ``axis``."""
        return ops.glu(x, axis=self.axis)

    def extra_repr(self) -> str:
        return f"axis={self.axis}"


class CELU(Module):
    """``x`` where ``x > 0``, else ``alpha * (exp(x / alpha) - 1)``: ``tg.celu``.

    Args:
        alpha: the value the negative side tends to, ``-alpha``; nonzero.
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).

    Raises:
        ValueError: ``alpha == 0``.
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = float(number_of(alpha, "CELU: alpha"))
        if self.alpha == 0:
            raise ValueError("CELU: alpha=0 divides x by zero; pass a nonzero alpha.")
        self.inplace = bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        """Apply CELU elementwise."""
        return ops.celu(x, alpha=self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Hardshrink(Module):
    """0 where ``|x| <= lambd``, else ``x``: ``tg.hardshrink`` (gradient 0 at ``+-lambd``,
    as PyTorch's).

    Raises:
        ValueError: ``lambd < 0``.
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = float(number_of(lambd, f"{type(self).__name__}: lambd"))
        if not self.lambd >= 0:
            raise ValueError(
                f"{type(self).__name__}: lambd={lambd} is negative; the band [-lambd, lambd] "
                "needs lambd >= 0."
            )

    def forward(self, x: Tensor) -> Tensor:
        """Shrink ``x`` elementwise."""
        return ops.hardshrink(x, lambd=self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0:
    ``tg.softshrink`` (gradient 0 at ``+-lambd``, as PyTorch's).

    Raises:
        ValueError: ``lambd < 0``.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Shrink ``x`` elementwise."""
        return ops.softshrink(x, lambd=self.lambd)


class Tanhshrink(Module):
    """``x - tanh(x)``: ``tg.tanhshrink``."""

    def forward(self, x: Tensor) -> Tensor:
        """Apply tanhshrink elementwise."""
        return ops.tanhshrink(x)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``: ``tg.threshold`` (both required, as
    PyTorch's).

    Args:
        threshold: the level at and below which ``value`` replaces ``x``.
        value: the replacement.
        inplace: accepted for PyTorch's signature and changes nothing (see :class:`ReLU`).
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = float(number_of(threshold, "Threshold: threshold"))
        self.value = float(number_of(value, "Threshold: value"))
        self.inplace = bool(inplace)

    def forward(self, x: Tensor) -> Tensor:
        """Threshold ``x`` elementwise."""
        return ops.threshold(x, threshold=self.threshold, value=self.value)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else ""
        )
