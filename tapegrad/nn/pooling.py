"""Pooling layers over NCHW inputs: ``MaxPool2d``, ``AvgPool2d``."""

from __future__ import annotations

from tapegrad import ops
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module

__all__ = ["MaxPool2d", "AvgPool2d"]

_Size = int | tuple[int, int]


class _Pool2d(Module):
    def __init__(self, kernel_size: _Size, stride: _Size | None = None, padding: _Size = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool2d):
    """Maximum over ``kernel_size`` windows of x ``(N, C, H, W)``: ``tg.max_pool2d``.

    Args:
        kernel_size: an int or ``(kH, kW)``.
        stride: defaults to ``kernel_size`` (PyTorch's default).
        padding: implicit ``-inf`` padding on both sides.

    Raises:
        ValueError: at call time, a kernel larger than the padded input.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(_Pool2d):
    """Mean over ``kernel_size`` windows of x ``(N, C, H, W)``: ``tg.avg_pool2d``.

    Args:
        kernel_size: an int or ``(kH, kW)``.
        stride: defaults to ``kernel_size`` (PyTorch's default).
        padding: implicit zero padding on both sides (counted in the mean, as PyTorch's
            default ``count_include_pad=True``).

    Raises:
        ValueError: at call time, a kernel larger than the padded input.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.avg_pool2d(x, self.kernel_size, self.stride, self.padding)
