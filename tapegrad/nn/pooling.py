"""Pooling layers: ``MaxPool1d``/``2d``/``3d`` and ``AvgPool1d``/``2d``/``3d`` over NCL, NCHW
and NCDHW inputs; ``AdaptiveAvgPool1d``/``2d``/``3d`` and ``AdaptiveMaxPool1d``/``2d`` to a
fixed output size."""

from __future__ import annotations

from typing import Any

from tapegrad import ops
from tapegrad._args import torch_keywords
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module
from tapegrad.ops.adaptive_pool import no_indices
from tapegrad.ops.pool import (
    AVG1_ADVICE,
    AVG1_DEFAULTS,
    AVG3_ADVICE,
    AVG_ADVICE,
    AVG_DEFAULTS,
    MAX1_ADVICE,
    MAX3_ADVICE,
    MAX_ADVICE,
    MAX_DEFAULTS,
)

__all__ = [
    "MaxPool1d",
    "AvgPool1d",
    "MaxPool2d",
    "AvgPool2d",
    "MaxPool3d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
]

_Size = int | tuple[int, int]
_Size1 = int | tuple[int]
_Size3 = int | tuple[int, int, int]


class _Pool2d(Module):
    """The arguments and repr of the max and average pooling layers (1-, 2- and 3-d)."""

    def __init__(self, kernel_size: Any, stride: Any | None = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride  # PyTorch's default, shown
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
        TypeError: ``ceil_mode=True``, ``dilation`` other than 1 or ``return_indices=True``
            (not supported; the message says what to do).
        ValueError: at call time, a kernel larger than the padded input.
    """

    @torch_keywords(MAX_ADVICE, defaults=MAX_DEFAULTS)
    def __init__(self, kernel_size: _Size, stride: _Size | None = None, padding: _Size = 0) -> None:
        super().__init__(kernel_size, stride, padding)

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.max_pool2d(x, self.kernel_size, self.stride, self.padding)


class _AvgPool(_Pool2d):
    """The average pooling layers (1-, 2- and 3-d): ``count_include_pad``, the call and repr."""

    _pool = staticmethod(ops.avg_pool2d)

    def __init__(
        self, kernel_size: Any, stride: Any, padding: Any, count_include_pad: bool
    ) -> None:
        super().__init__(kernel_size, stride, padding)
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return self._pool(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            count_include_pad=self.count_include_pad,
        )

    def extra_repr(self) -> str:
        return super().extra_repr() + (
            "" if self.count_include_pad else ", count_include_pad=False"
        )


class AvgPool2d(_AvgPool):
    """Mean over ``kernel_size`` windows of x ``(N, C, H, W)``: ``tg.avg_pool2d``.

    Args:
        kernel_size: an int or ``(kH, kW)``.
        stride: defaults to ``kernel_size`` (PyTorch's default).
        padding: implicit zero padding on both sides.
        count_include_pad: count the padded zeros in the mean (PyTorch's default ``True``);
            ``False`` divides each window's sum by the input elements it covers.

    Raises:
        TypeError: ``ceil_mode=True`` or ``divisor_override`` (not supported; the message says
            what to do).
        ValueError: at call time, a kernel larger than the padded input.
    """

    @torch_keywords(AVG_ADVICE, defaults=AVG_DEFAULTS)
    def __init__(
        self,
        kernel_size: _Size,
        stride: _Size | None = None,
        padding: _Size = 0,
        *,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding, count_include_pad)


class MaxPool1d(_Pool2d):
    """Maximum over ``kernel_size`` windows of x ``(N, C, L)`` or ``(C, L)``:
    ``tg.max_pool1d``.

    Args:
        kernel_size: an int (or ``(k,)``).
        stride: defaults to ``kernel_size`` (PyTorch's default, shown in the repr).
        padding: implicit ``-inf`` padding on both ends, at most half the kernel.

    Raises:
        TypeError: ``ceil_mode=True``, ``dilation`` other than 1 or ``return_indices=True``
            (not supported; the message says what to do).
        ShapeError: at call time, an input that is not 2- or 3-D, or a kernel longer than
            the padded input.
        ValueError: at call time, a malformed kernel, stride or padding.
    """

    @torch_keywords(MAX1_ADVICE, defaults=MAX_DEFAULTS)
    def __init__(
        self, kernel_size: _Size1, stride: _Size1 | None = None, padding: _Size1 = 0
    ) -> None:
        super().__init__(kernel_size, stride, padding)

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.max_pool1d(x, self.kernel_size, self.stride, self.padding)


class AvgPool1d(_AvgPool):
    """Mean over ``kernel_size`` windows of x ``(N, C, L)`` or ``(C, L)``: ``tg.avg_pool1d``.

    Args:
        kernel_size: an int (or ``(k,)``).
        stride: defaults to ``kernel_size`` (PyTorch's default, shown in the repr).
        padding: implicit zero padding on both ends, at most half the kernel.
        count_include_pad: count the padded zeros in the mean (PyTorch's default ``True``);
            ``False`` divides each window's sum by the input elements it covers.

    Raises:
        TypeError: ``ceil_mode=True`` (not supported; the message says what to do).
        ShapeError: at call time, an input that is not 2- or 3-D, or a kernel longer than
            the padded input.
        ValueError: at call time, a malformed kernel, stride or padding.
    """

    _pool = staticmethod(ops.avg_pool1d)

    @torch_keywords(AVG1_ADVICE, defaults=AVG1_DEFAULTS)
    def __init__(
        self,
        kernel_size: _Size1,
        stride: _Size1 | None = None,
        padding: _Size1 = 0,
        *,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding, count_include_pad)


class MaxPool3d(_Pool2d):
    """Maximum over ``kernel_size`` windows of x ``(N, C, D, H, W)`` or ``(C, D, H, W)``:
    ``tg.max_pool3d``.

    Args:
        kernel_size: an int or ``(kD, kH, kW)``.
        stride: defaults to ``kernel_size`` (PyTorch's default, shown in the repr).
        padding: implicit ``-inf`` padding on both sides, at most half the kernel.

    Raises:
        TypeError: ``ceil_mode=True``, ``dilation`` other than 1 or ``return_indices=True``
            (not supported; the message says what to do).
        ShapeError: at call time, an input that is not 4- or 5-D, or a kernel larger than
            the padded input.
        ValueError: at call time, a malformed kernel, stride or padding.
    """

    @torch_keywords(MAX3_ADVICE, defaults=MAX_DEFAULTS)
    def __init__(
        self, kernel_size: _Size3, stride: _Size3 | None = None, padding: _Size3 = 0
    ) -> None:
        super().__init__(kernel_size, stride, padding)

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.max_pool3d(x, self.kernel_size, self.stride, self.padding)


class AvgPool3d(_AvgPool):
    """Mean over ``kernel_size`` windows of x ``(N, C, D, H, W)`` or ``(C, D, H, W)``:
    ``tg.avg_pool3d``.

    Args:
        kernel_size: an int or ``(kD, kH, kW)``.
        stride: defaults to ``kernel_size`` (PyTorch's default, shown in the repr).
        padding: implicit zero padding on both sides, at most half the kernel.
        count_include_pad: count the padded zeros in the mean (PyTorch's default ``True``);
            ``False`` divides each window's sum by the input elements it covers.

    Raises:
        TypeError: ``ceil_mode=True`` or ``divisor_override`` (not supported; the message says
            what to do).
        ShapeError: at call time, an input that is not 4- or 5-D, or a kernel larger than
            the padded input.
        ValueError: at call time, a malformed kernel, stride or padding.
    """

    _pool = staticmethod(ops.avg_pool3d)

    @torch_keywords(AVG3_ADVICE, defaults=AVG_DEFAULTS)
    def __init__(
        self,
        kernel_size: _Size3,
        stride: _Size3 | None = None,
        padding: _Size3 = 0,
        *,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding, count_include_pad)


class _AdaptivePool(Module):
    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average over PyTorch's adaptive windows of x ``(N, C, L)`` to length ``output_size``
    (an int): ``tg.adaptive_avg_pool1d``.

    Raises:
        At call time, as ``tg.adaptive_avg_pool1d``: ``ShapeError``, ``ValueError`` or
        ``TypeError`` for a wrong input or ``output_size``.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average over PyTorch's adaptive windows of x ``(N, C, H, W)`` to ``output_size``
    (``(H_out, W_out)``, one int for both, ``None`` to keep a size; ``1`` is global average
    pooling, as ResNet's head): ``tg.adaptive_avg_pool2d``.

    Raises:
        At call time, as ``tg.adaptive_avg_pool2d``: ``ShapeError``, ``ValueError`` or
        ``TypeError`` for a wrong input or ``output_size``.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.adaptive_avg_pool2d(x, self.output_size)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average over PyTorch's adaptive windows of x ``(N, C, D, H, W)`` or ``(C, D, H, W)`` to
    ``output_size`` (``(D_out, H_out, W_out)``, one int for all, ``None`` to keep a size):
    ``tg.adaptive_avg_pool3d``.

    Raises:
        At call time, as ``tg.adaptive_avg_pool3d``: ``ShapeError``, ``ValueError`` or
        ``TypeError`` for a wrong input or ``output_size``.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.adaptive_avg_pool3d(x, self.output_size)


class _AdaptiveMaxPool(_AdaptivePool):
    """The adaptive max pooling layers: PyTorch's ``return_indices=True`` refused."""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        no_indices(f"{type(self).__name__}()", return_indices)
        super().__init__(output_size)


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Maximum over PyTorch's adaptive windows of x ``(N, C, L)`` or ``(C, L)`` to length
    ``output_size`` (an int): ``tg.adaptive_max_pool1d``.

    Raises:
        TypeError: ``return_indices=True`` (no indices are returned; the message says what to
            do).
        At call time, as ``tg.adaptive_max_pool1d``: ``ShapeError``, ``ValueError`` or
        ``TypeError`` for a wrong input or ``output_size``.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.adaptive_max_pool1d(x, self.output_size)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Maximum over PyTorch's adaptive windows of x ``(N, C, H, W)`` or ``(C, H, W)`` to
    ``output_size`` (``(H_out, W_out)``, one int for both, ``None`` to keep a size; ``1`` is
    global max pooling): ``tg.adaptive_max_pool2d``.

    Raises:
        TypeError: ``return_indices=True`` (no indices are returned).
        At call time, as ``tg.adaptive_max_pool2d``: ``ShapeError``, ``ValueError`` or
        ``TypeError`` for a wrong input or ``output_size``.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x``."""
        return ops.adaptive_max_pool2d(x, self.output_size)
