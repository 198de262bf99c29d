"""Convolution layers over NCL / NCHW / NCDHW inputs: ``Conv1d``, ``Conv2d``, ``Conv3d``
(PyTorch's layout)."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from tapegrad import ops
from tapegrad._args import integer, torch_keywords
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.nn import _init
from tapegrad.nn.module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d"]


def _tuple(owner: str, name: str, value: int | tuple[int, ...], n: int) -> tuple[int, ...]:
    """``value`` (an integer of any kind, ``np.int64`` included, or ``n`` of them) as ``n``
    ints; anything else is a ``TypeError`` naming ``owner`` and ``name``."""
    message = f"{owner}: {name} must be an int or a tuple of {n} ints, got {value!r}."
    try:
        items = [value] * n if np.ndim(value) == 0 else list(value)  # type: ignore[arg-type]
        out = tuple(integer(v, name) for v in items)
    except TypeError:
        raise TypeError(message) from None
    if len(out) != n:
        raise TypeError(message)
    return out


_TORCH_ADVICE = {
    "padding_mode": "only zero padding is supported (PyTorch's default 'zeros'). For "
    "'reflect', 'replicate' or 'circular', pad the input yourself and pass padding=0: e.g. "
    "circular along the last axis, tg.concatenate([x[..., -p:], x, x[..., :p]], axis=-1).",
}


class _ConvNd(Module):
    """Shared construction of ``Conv1d``/``Conv2d``/``Conv3d``: checks, PyTorch's
    initialisation."""

    weight: Tensor
    bias: Tensor | None
    _dims: int

    @torch_keywords(_TORCH_ADVICE, defaults={"padding_mode": "zeros"})
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] | str = 0,
        dilation: int | tuple[int, ...] = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        n = self._dims
        in_channels = integer(in_channels, f"{name}: in_channels")
        out_channels = integer(out_channels, f"{name}: out_channels")
        groups = integer(groups, f"{name}: groups")
        if in_channels <= 0 or out_channels <= 0 or groups <= 0:
            raise ValueError(f"{name}: channels and groups must be positive.")
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must "
                f"both be divisible by groups ({groups})."
            )
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be an int, a tuple, 'same' or 'valid'.")
        check_float(dtype, name)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(name, "kernel_size", kernel_size, n)
        self.stride = _tuple(name, "stride", stride, n)
        self.dilation = _tuple(name, "dilation", dilation, n)
        self.padding: tuple[int, ...] | str = (
            (0,) * n
            if padding == "valid"
            else padding
            if isinstance(padding, str)
            else _tuple(name, "padding", padding, n)
        )
        for what, values, least in (
            ("kernel_size", self.kernel_size, 1),
            ("stride", self.stride, 1),
            ("dilation", self.dilation, 1),
            ("padding", () if isinstance(self.padding, str) else self.padding, 0),
        ):
            if any(v < least for v in values):
                raise ValueError(f"{name}: {what} must be >= {least}, got {values}.")
        if self.padding == "same" and any(v != 1 for v in self.stride):
            raise ValueError(
                f"{name}: padding='same' needs stride 1 (as in PyTorch); give the padding as "
                "ints for a strided convolution."
            )
        fan_in = in_channels // groups * math.prod(self.kernel_size)
        k = _init.fan_in_bound(fan_in)
        kw, kb = _init.keys(key, 2)
        shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = _init.uniform(kw, shape, k, dtype)
        self.bias = _init.uniform(kb, (out_channels,), k, dtype) if bias else None
        _init.to_device(self, device, f"nn.{name}")

    def forward(self, x: Tensor) -> Tensor:
        """Convolve ``x`` of shape ``(N, C_in, *spatial)`` (or unbatched ``(C_in, *spatial)``);
        the bias is added in the same node (``tg.conv``)."""
        return ops.conv(
            x,
            self.weight,
            self.bias,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            groups=self.groups,
        )

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding!r}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


class Conv1d(_ConvNd):
    """1-D convolution (cross-correlation, as PyTorch): x ``(N, C_in, L)`` -> ``(N, C_out, L')``.

    Weight ``(out_channels, in_channels // groups, kernel)``, bias ``(out_channels,)``, both
    uniform in ``[-k, k]`` with ``k = 1 / sqrt(in_channels // groups * kernel)`` (PyTorch's
    initialisation and names: ``torch.nn.Conv1d``'s state dict loads unchanged).

    Args:
        in_channels: input channels ``C_in``.
        out_channels: output channels ``C_out``.
        kernel_size: kernel length.
        stride: step between windows.
        padding: zeros added on both sides (an int), or ``"same"`` / ``"valid"``.
        dilation: spacing between kernel taps.
        groups: split channels into this many independent groups.
        bias: add a learned bias per output channel.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: ``in_channels``, ``out_channels`` or ``groups`` not an integer (NumPy's
            included); ``kernel_size``, ``stride``, ``padding`` or ``dilation`` not one or a
            tuple of them.
        ValueError: non-positive sizes, strides or dilations, negative padding, ``"same"``
            padding with a stride, channels not divisible by ``groups``; at call time
            (from ``tg.conv``), an input whose channels differ from ``in_channels`` or a
            kernel larger than the padded input.
    """

    _dims = 1


class Conv2d(_ConvNd):
    """2-D convolution over NCHW: x ``(N, C_in, H, W)`` -> ``(N, C_out, H', W')``.

    Weight ``(out_channels, in_channels // groups, kH, kW)`` (OIHW), bias ``(out_channels,)``,
    uniform in ``[-k, k]`` with ``k = 1 / sqrt(in_channels // groups * kH * kW)`` (PyTorch's
    initialisation and names: ``torch.nn.Conv2d``'s state dict loads unchanged).

    Args:
        in_channels: input channels ``C_in``.
        out_channels: output channels ``C_out``.
        kernel_size: an int or ``(kH, kW)``.
        stride: an int or a pair.
        padding: an int or a pair of zeros added on both sides, or ``"same"`` / ``"valid"``.
        dilation: an int or a pair.
        groups: split channels into this many independent groups.
        bias: add a learned bias per output channel.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: ``in_channels``, ``out_channels`` or ``groups`` not an integer (NumPy's
            included); ``kernel_size``, ``stride``, ``padding`` or ``dilation`` not one or a
            tuple of them.
        ValueError: non-positive sizes, strides or dilations, negative padding, ``"same"``
            padding with a stride, channels not divisible by ``groups``; at call time
            (from ``tg.conv``), an input whose channels differ from ``in_channels`` or a
            kernel larger than the padded input.
    """

    _dims = 2


class Conv3d(_ConvNd):
    """3-D convolution over NCDHW: x ``(N, C_in, D, H, W)`` -> ``(N, C_out, D', H', W')``.

    Weight ``(out_channels, in_channels // groups, kD, kH, kW)``, bias ``(out_channels,)``,
    uniform in ``[-k, k]`` with ``k = 1 / sqrt(in_channels // groups * kD * kH * kW)``
    (PyTorch's initialisation and names: ``torch.nn.Conv3d``'s state dict loads unchanged).

    Args:
        in_channels: input channels ``C_in``.
        out_channels: output channels ``C_out``.
        kernel_size: an int or ``(kD, kH, kW)``.
        stride: an int or a triple.
        padding: an int or a triple of zeros added on both sides, or ``"same"`` / ``"valid"``.
        dilation: an int or a triple.
        groups: split channels into this many independent groups.
        bias: add a learned bias per output channel.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: ``in_channels``, ``out_channels`` or ``groups`` not an integer (NumPy's
            included); ``kernel_size``, ``stride``, ``padding`` or ``dilation`` not one or a
            tuple of them.
        ValueError: as :class:`Conv2d`.
    """

    _dims = 3
