"""Convolution layers over NCL / NCHW / NCDHW inputs: ``Conv1d``, ``Conv2d``, ``Conv3d``
and their transposes ``ConvTranspose1d``, ``ConvTranspose2d``, ``ConvTranspose3d``
(PyTorch's layouts)."""

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

__all__ = [
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
]


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


def _sizes(
    layer: Any,
    in_channels: Any,
    out_channels: Any,
    groups: Any,
    kernel_size: Any,
    stride: Any,
    dilation: Any,
    dtype: Any,
) -> None:
    """Check and set a convolution layer's channels, groups, kernel size, stride and
    dilation (``layer._dims`` spatial axes), and check its dtype.

    Raises:
        TypeError: a size that is not an integer (or not one or a tuple of them).
        ValueError: non-positive channels, groups, sizes, strides or dilations; channels not
            divisible by ``groups``; a dtype that is not floating.
    """
    name, n = type(layer).__name__, layer._dims
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
    check_float(dtype, name)
    layer.in_channels, layer.out_channels, layer.groups = in_channels, out_channels, groups
    layer.kernel_size = _tuple(name, "kernel_size", kernel_size, n)
    layer.stride = _tuple(name, "stride", stride, n)
    layer.dilation = _tuple(name, "dilation", dilation, n)
    for what, values in (
        ("kernel_size", layer.kernel_size),
        ("stride", layer.stride),
        ("dilation", layer.dilation),
    ):
        if any(v < 1 for v in values):
            raise ValueError(f"{name}: {what} must be >= 1, got {values}.")


def _parameters(
    layer: Module, shape: tuple[int, ...], bias: bool, key: Any, dtype: Any, device: Any
) -> None:
    """PyTorch's initialisation of a convolution's ``weight`` of ``shape`` and its ``bias``
    (one per output channel): uniform in ``[-k, k]``, ``k = 1 / sqrt(fan_in)`` with PyTorch's
    ``fan_in`` of the weight, ``shape[1] * prod(kernel)`` (for a transposed convolution,
    whose weight is (in, out / groups, *kernel), that is its output channels per group)."""
    name = type(layer).__name__
    k = _init.fan_in_bound(shape[1] * math.prod(shape[2:]))
    kw, kb = _init.keys(key, 2)
    out_channels: int = layer.out_channels
    layer.weight = _init.uniform(kw, shape, k, dtype)
    layer.bias = _init.uniform(kb, (out_channels,), k, dtype) if bias else None
    _init.to_device(layer, device, f"nn.{name}")


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
        _sizes(self, in_channels, out_channels, groups, kernel_size, stride, dilation, dtype)
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be an int, a tuple, 'same' or 'valid'.")
        self.padding: tuple[int, ...] | str = (
            (0,) * n
            if padding == "valid"
            else padding
            if isinstance(padding, str)
            else _tuple(name, "padding", padding, n)
        )
        if any(v < 0 for v in (() if isinstance(self.padding, str) else self.padding)):
            raise ValueError(f"{name}: padding must be >= 0, got {self.padding}.")
        if self.padding == "same" and any(v != 1 for v in self.stride):
            raise ValueError(
                f"{name}: padding='same' needs stride 1 (as in PyTorch); give the padding as "
                "ints for a strided convolution."
            )
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        _parameters(self, shape, bias, key, dtype, device)

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


_TRANSPOSE_ADVICE = {
    "padding_mode": "only zero padding is supported, as for PyTorch's transposed "
    "convolutions (which refuse any other padding_mode too).",
}


class _ConvTransposeNd(Module):
    """Shared construction of ``ConvTranspose1d``/``2d``/``3d`` (PyTorch's parameter order:
    ``groups`` before ``bias``, ``dilation`` after it)."""

    weight: Tensor
    bias: Tensor | None
    _dims: int

    @torch_keywords(_TRANSPOSE_ADVICE, defaults={"padding_mode": "zeros"})
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
        output_padding: int | tuple[int, ...] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int, ...] = 1,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        n = self._dims
        _sizes(self, in_channels, out_channels, groups, kernel_size, stride, dilation, dtype)
        if isinstance(padding, str):
            raise ValueError(
                f"{name}: padding={padding!r}: a transposed convolution takes ints (as "
                "PyTorch's), the zeros cut from each side of the output."
            )
        self.padding = _tuple(name, "padding", padding, n)
        self.output_padding = _tuple(name, "output_padding", output_padding, n)
        if min(self.padding) < 0 or min(self.output_padding) < 0:
            raise ValueError(f"{name}: padding and output_padding must be >= 0.")
        for e, st, d in zip(self.output_padding, self.stride, self.dilation, strict=True):
            if e >= st and e >= d:
                raise ValueError(
                    f"{name}: output_padding={self.output_padding} must be smaller than either "
                    f"the stride {self.stride} or the dilation {self.dilation} on each axis "
                    "(as in PyTorch)."
                )
        shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        _parameters(self, shape, bias, key, dtype, device)

    def _output_padding(self, x: Any, output_size: Any) -> tuple[int, ...]:
        """The ``output_padding`` that gives ``output_size`` (PyTorch's rule: it may name the
        spatial sizes, or all of them, batch and channels first).

        Raises:
            ValueError: ``output_size`` has the wrong length, or a size no output padding
                reaches (the message gives the range).
        """
        name, n = type(self).__name__, self._dims
        if output_size is None:
            return self.output_padding
        sizes = [integer(v, f"{name}: output_size") for v in output_size]
        spatial = tuple(x.shape[-n:])
        if len(sizes) == n + 2 or (len(sizes) == n + 1 and x.ndim == n + 1):
            sizes = sizes[-n:]
        if len(sizes) != n:
            raise ValueError(
                f"{name}: output_size must have {n} or {n + 2} elements (spatial sizes, or "
                f"batch and channels too), got {output_size!r}."
            )
        least = [
            (s - 1) * st - 2 * p + d * (k - 1) + 1
            for s, st, p, d, k in zip(
                spatial, self.stride, self.padding, self.dilation, self.kernel_size, strict=True
            )
        ]
        for size, low, st in zip(sizes, least, self.stride, strict=True):
            if not low <= size <= low + st - 1:
                raise ValueError(
                    f"{name}: requested an output size of {tuple(sizes)}, but valid sizes "
                    f"range from {tuple(least)} to "
                    f"{tuple(lo + st - 1 for lo, st in zip(least, self.stride, strict=True))} "
                    f"(for an input of {spatial})."
                )
        return tuple(size - low for size, low in zip(sizes, least, strict=True))

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        """Transposed convolution of ``x`` ``(N, C_in, *spatial)`` (or unbatched
        ``(C_in, *spatial)``); ``output_size`` picks the output padding that gives those
        sizes, as PyTorch's (a stride above 1 leaves several sizes possible)."""
        return ops.conv_transpose(
            x,
            self.weight,
            self.bias,
            stride=self.stride,
            padding=self.padding,
            output_padding=self._output_padding(x, output_size),
            groups=self.groups,
            dilation=self.dilation,
        )

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ("" if self.bias is not None else ", bias=False")


_TRANSPOSE_DOC = """{n}-D transposed convolution (PyTorch's ``torch.nn.ConvTranspose{n}d``): the
gradient of a convolution with respect to its input, an upsampling layer of decoders and
generators: x ``(N, C_in, {axes})`` -> ``(N, C_out, {axes_out})`` with each
``S' = (S - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1``.

Weight ``(in_channels, out_channels // groups, {kernel})``, bias ``(out_channels,)``, both
uniform in ``[-k, k]`` with ``k = 1 / sqrt(out_channels // groups * {kprod})`` (PyTorch's
initialisation and names: its state dict loads unchanged). ``forward(x, output_size=None)``.

Args:
    in_channels: input channels ``C_in``.
    out_channels: output channels ``C_out``.
    kernel_size: an int or one per spatial axis.
    stride: an int or one per axis.
    padding: ``dilation (kernel - 1) - padding`` zeros around the stride-dilated input: an
        int or one per axis (no strings, as PyTorch's).
    output_padding: extra size at the end of each output axis (smaller than that axis' stride
        or dilation); ``forward``'s ``output_size`` picks it instead.
    groups: split channels into this many independent groups.
    bias: add a learned bias per output channel.
    dilation: an int or one per axis.
    key: an int seed or a key; ``None`` draws from the process random state.
    dtype: a floating dtype for the parameters.
    device: where the parameters are made, as ``tg.zeros(..., device=)``; ``None``: JAX's
        default device.

Raises:
    TypeError: a size that is not an integer or a tuple of them; PyTorch's
        ``padding_mode`` other than ``'zeros'`` (the message says what to write).
    ValueError: non-positive sizes, strides or dilations, negative or string padding,
        channels not divisible by ``groups``, an ``output_padding`` not smaller than the
        stride or the dilation; at call time, an ``output_size`` out of reach (the message
        gives the range).
"""


class ConvTranspose1d(_ConvTransposeNd):
    __doc__ = _TRANSPOSE_DOC.format(n=1, axes="L", axes_out="L'", kernel="k", kprod="k")
    _dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    __doc__ = _TRANSPOSE_DOC.format(
        n=2, axes="H, W", axes_out="H', W'", kernel="kH, kW", kprod="kH * kW"
    )
    _dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    __doc__ = _TRANSPOSE_DOC.format(
        n=3, axes="D, H, W", axes_out="D', H', W'", kernel="kD, kH, kW", kprod="kD * kH * kW"
    )
    _dims = 3
