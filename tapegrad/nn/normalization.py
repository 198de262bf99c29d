"""Normalisation layers: ``LayerNorm``, ``RMSNorm``, ``GroupNorm``, ``BatchNorm1d``/``2d``/
``3d`` and ``InstanceNorm1d``/``2d``/``3d`` (running statistics as buffers)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax.numpy as jnp
import numpy as np

from tapegrad import ops
from tapegrad._args import dims, fraction, integer
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError, TapegradWarning
from tapegrad.grad_mode import no_grad
from tapegrad.nn import _init
from tapegrad.nn._inputs import as_input
from tapegrad.nn.module import Module
from tapegrad.origin import user_stacklevel

__all__ = [
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
]


def _normalized_shape(value: Any, owner: str) -> tuple[int, ...]:
    """``normalized_shape`` (one integer of any kind, ``np.int64`` included, or a sequence of
    them) as a tuple of ints, as PyTorch takes it.

    Raises:
        TypeError: an entry is not an integer (a float is not truncated).
        ValueError: a negative size; no axis (``()``).
    """
    shape = dims(value, f"{owner}: normalized_shape")
    if not shape:
        raise ValueError(
            f"{owner}: normalized_shape must have at least one axis (PyTorch's rule), got (); "
            "pass the size of the last axis (or the trailing sizes)."
        )
    if any(d < 0 for d in shape):
        raise ValueError(f"{owner}: normalized_shape {shape} has a negative size.")
    return shape


def _momentum(value: Any, owner: str) -> float:
    """A batch norm's ``momentum`` as a float in ``[0, 1]``.

    Raises:
        ValueError: ``None`` (PyTorch's cumulative average, not supported: the message says
            what to do instead), or a number outside ``[0, 1]``.
        TypeError: not a number.
    """
    if value is None:
        raise ValueError(
            f"{owner}: momentum=None (PyTorch's cumulative average over all batches) is not "
            "supported; pass a number in [0, 1] (the default 0.1 weighs each new batch "
            "0.1), or compute the average yourself from batch statistics under tg.no_grad()."
        )
    return fraction(value, f"{owner}: momentum")


class LayerNorm(Module):
    """Normalise over the last ``len(normalized_shape)`` axes, then scale and shift:
    ``tg.layer_norm`` (one fused node).

    Args:
        normalized_shape: the trailing shape normalised over (an int for the last axis).
        eps: added to the variance (biased, as PyTorch) before the square root.
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros) of that shape.
        bias: with ``elementwise_affine``, also learn ``bias``.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: a size that is not an integer (NumPy's are).
        ValueError: a negative size.
    """

    weight: Tensor | None
    bias: Tensor | None

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        *,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        check_float(dtype, "LayerNorm")
        self.normalized_shape = _normalized_shape(normalized_shape, "LayerNorm")
        self.eps = float(eps)
        affine = elementwise_affine
        self.weight = _init.constant(self.normalized_shape, 1.0, dtype) if affine else None
        self.bias = _init.constant(self.normalized_shape, 0.0, dtype) if affine and bias else None
        _init.to_device(self, device, "nn.LayerNorm")

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x`` of shape ``(..., *normalized_shape)``."""
        return ops.layer_norm(x, self.normalized_shape, self.weight, self.bias, eps=self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, affine={self.weight is not None}"


class RMSNorm(Module):
    """Divide by the root mean square over the last ``len(normalized_shape)`` axes, then
    scale (Zhang & Sennrich 2019; PyTorch's ``RMSNorm``): ``x / sqrt(mean(x**2) + eps) *
    weight``.

    Args:
        normalized_shape: the trailing shape normalised over (an int for the last axis).
        eps: added to the mean square; ``None`` (PyTorch's default): the machine epsilon of
            the dtype computed in (float32 for a float16 or bfloat16 input, which is
            normalised in float32 and rounded back, as PyTorch does).
        elementwise_affine: learn ``weight`` (ones) of that shape.
        dtype: a floating dtype for the parameter.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: a size that is not an integer (NumPy's are).
        ValueError: a negative size.
        ShapeError: (calling it) the input's trailing shape is not ``normalized_shape``.
    """

    weight: Tensor | None

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float | None = None,
        elementwise_affine: bool = True,
        *,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        check_float(dtype, "RMSNorm")
        self.normalized_shape = _normalized_shape(normalized_shape, "RMSNorm")
        self.eps = None if eps is None else float(eps)
        affine = elementwise_affine
        self.weight = _init.constant(self.normalized_shape, 1.0, dtype) if affine else None
        _init.to_device(self, device, "nn.RMSNorm")

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x`` of shape ``(..., *normalized_shape)``."""
        x = as_input(x, "RMSNorm")
        n = len(self.normalized_shape)
        if tuple(x.shape[len(x.shape) - n :]) != self.normalized_shape or len(x.shape) < n:
            raise ShapeError(
                f"RMSNorm: input of shape {tuple(x.shape)} does not end in the normalized "
                f"shape {self.normalized_shape}."
            )
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise TypeError(
                f"RMSNorm takes floating inputs, got {x.dtype}; cast it first: "
                "x.astype(tg.float32)."
            )
        low = x.dtype in (jnp.float16, jnp.bfloat16)  # computed in float32, as PyTorch
        xs = x.astype(jnp.float32) if low else x
        eps = float(np.finfo(xs.dtype).eps) if self.eps is None else self.eps
        axes = tuple(range(-n, 0))
        y = xs * ((xs * xs).mean(axis=axes, keepdims=True) + eps).rsqrt()
        if self.weight is not None:
            y = y * self.weight
        return y.astype(x.dtype) if low else y  # the input's dtype, as PyTorch

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, affine={self.weight is not None}"


class GroupNorm(Module):
    """Normalise ``(N, C, *)`` inputs over each group of ``C // num_groups`` channels and
    every other axis but the batch (Wu & He 2018), then scale and shift per channel, as
    PyTorch's ``GroupNorm`` (biased variance; the same in training and evaluation):
    ``tg.group_norm``, whose statistics are one fused ``layer_norm`` over each group; a float16
    or bfloat16 input is normalised, scaled and shifted in float32 and the output rounded back
    to its dtype, as PyTorch's (in float16, squared deviations of activations over 256
    overflow).

    Args:
        num_groups: the number of groups; divides ``num_channels``.
        num_channels: the channels ``C`` (axis 1).
        eps: added to the variance before the square root.
        affine: learn ``weight`` (ones) and ``bias`` (zeros) of shape ``(C,)``.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: a size that is not an integer.
        ValueError: non-positive sizes, or ``num_channels`` not divisible by ``num_groups``.
    """

    weight: Tensor | None
    bias: Tensor | None

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        num_groups = integer(num_groups, "GroupNorm: num_groups")
        num_channels = integer(num_channels, "GroupNorm: num_channels")
        if num_groups <= 0 or num_channels <= 0 or num_channels % num_groups:
            raise ValueError(
                f"GroupNorm: num_channels ({num_channels}) must be a positive multiple of "
                f"num_groups ({num_groups})."
            )
        check_float(dtype, "GroupNorm")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, float(eps)
        self.affine = affine
        c = (num_channels,)
        self.weight = _init.constant(c, 1.0, dtype) if affine else None
        self.bias = _init.constant(c, 0.0, dtype) if affine else None
        _init.to_device(self, device, "nn.GroupNorm")

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x`` ``(N, C, *)``.

        Raises:
            ShapeError: ``x`` is not at least 2-D with ``num_channels`` on axis 1.
        """
        x = as_input(x, "GroupNorm")
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ShapeError(
                f"GroupNorm({self.num_groups}, {self.num_channels}) expects input (N, "
                f"{self.num_channels}, ...), got shape {x.shape}."
            )
        return ops.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _NormBase(Module):
    """What batch and instance normalisation share (PyTorch's ``_NormBase``): per-channel
    ``weight`` and ``bias``, the running statistics as buffers, and the repr."""

    weight: Tensor | None
    bias: Tensor | None
    running_mean: Tensor
    running_var: Tensor
    num_batches_tracked: Tensor

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        bias: bool = True,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        num_features = integer(num_features, f"{name}: num_features")
        if num_features <= 0:
            raise ValueError(f"{name}({num_features}): num_features must be positive.")
        check_float(dtype, name)
        self.num_features, self.eps = num_features, float(eps)
        self.momentum = self._momentum(momentum)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        c = (num_features,)
        self.weight = _init.constant(c, 1.0, dtype) if affine else None
        self.bias = _init.constant(c, 0.0, dtype) if affine and bias else None
        if track_running_stats:
            self.running_mean = _init.constant(c, 0.0, dtype, param=False)
            self.running_var = _init.constant(c, 1.0, dtype, param=False)
            self.num_batches_tracked = Tensor(jnp.zeros((), jnp.int32))
        _init.to_device(self, device, f"nn.{name}")

    def _momentum(self, value: Any) -> float | None:
        """``momentum`` checked (at construction and at each call: code sets it)."""
        return _momentum(value, type(self).__name__)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    """Batch normalisation over every axis but the channel axis (1)."""

    _ndims: tuple[int, ...]

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x`` with batch statistics (training) or the running ones (eval).

        In training mode the running mean and (unbiased) variance are updated in place
        (``buffer.data = ...``: the buffers keep their tensor objects) with
        ``momentum``, and ``num_batches_tracked`` counts the batches, as PyTorch does. An empty
        batch gives an empty output and leaves the running statistics as they are (it is still
        counted), as PyTorch's.

        Raises:
            ShapeError: ``x`` is not ``(N, C, ...)`` with ``C == num_features`` and one of
                the ranks this layer takes.
        """
        name = type(self).__name__
        x = as_input(x, name)
        if x.ndim not in self._ndims or x.shape[1] != self.num_features:
            raise ShapeError(
                f"{name}({self.num_features}) expects input of rank {self._ndims} with "
                f"{self.num_features} channels on axis 1, got shape {x.shape}."
            )
        use_batch = self.training or not self.track_running_stats
        tracked = self.track_running_stats
        empty = math.prod(x.shape) == 0
        mean: Tensor | None
        var: Tensor | None
        if use_batch and empty:  # PyTorch: an empty output, the running statistics as they were
            c = (self.num_features,)
            mean, var = Tensor(jnp.zeros(c, x.dtype)), Tensor(jnp.ones(c, x.dtype))
        else:
            mean = self.running_mean if tracked else None
            var = self.running_var if tracked else None
        y = ops.batch_norm(
            x,
            mean,
            var,
            self.weight,
            self.bias,
            training=use_batch and not empty,
            momentum=_momentum(self.momentum, name),  # read at each call: code sets it
            eps=self.eps,
        )
        if self.training and tracked:
            with no_grad():
                self.num_batches_tracked.data = self.num_batches_tracked.data + 1
        return y


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)`` inputs per channel ``C``.

    Parameters ``weight`` (ones) and ``bias`` (zeros) of shape ``(C,)``; buffers
    ``running_mean`` (zeros), ``running_var`` (ones) and ``num_batches_tracked`` (int32),
    saved in ``state_dict()`` under PyTorch's names.

    Args:
        num_features: the channels ``C``.
        eps: added to the variance before the square root.
        momentum: weight of the new batch in the running statistics, in [0, 1].
        affine: learn ``weight`` and ``bias``.
        track_running_stats: keep running statistics (else batch statistics always).
        bias: with ``affine``, also learn ``bias`` (PyTorch's keyword).
        dtype: a floating dtype for parameters and running statistics.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: ``num_features`` is not an integer (NumPy's are).
        ValueError: a non-positive ``num_features``; ``momentum`` outside [0, 1], or ``None``
            (PyTorch's cumulative average, not supported: the message says what to pass).
    """

    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` inputs per channel ``C`` (see
    :class:`BatchNorm1d` for parameters, buffers and arguments)."""

    _ndims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)`` inputs per channel ``C`` (see
    :class:`BatchNorm1d` for parameters, buffers and arguments)."""

    _ndims = (5,)


class _InstanceNorm(_NormBase):
    """Instance normalisation: each channel of each sample over its spatial axes."""

    _spatial: int  # the spatial axes: 1, 2 or 3

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        *,
        bias: bool = True,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__(
            num_features,
            eps,
            momentum,
            affine,
            track_running_stats,
            bias=bias,
            dtype=dtype,
            device=device,
        )

    def _momentum(self, value: Any) -> float | None:
        """``None`` is taken, as PyTorch's instance norm takes it: momentum 0, the running
        statistics stay as they are."""
        return None if value is None else fraction(value, f"{type(self).__name__}: momentum")

    def forward(self, x: Tensor) -> Tensor:
        """Normalise ``x``, batched ``(N, C, *spatial)`` or unbatched ``(C, *spatial)``.
        In training mode, or always without ``track_running_stats``, with each instance's own
        statistics (``tg.instance_norm``), updating the running statistics in place when
        tracked; in evaluation mode with tracking, with the running statistics.
        ``num_batches_tracked`` is kept (in ``state_dict()``) but not counted, as PyTorch's.
        Raises:
            ShapeError: ``x`` has neither rank this layer takes; its channels are not
                ``num_features`` with ``affine`` or ``track_running_stats`` (PyTorch raises too).
            ValueError: normalising with the input's statistics a spatial size of 1.
        Warns:
            TapegradWarning: (a ``UserWarning``) the channels are not ``num_features``
                without ``affine`` or ``track_running_stats``, where ``num_features`` is not
                used: PyTorch warns and normalises; so does this.
        """
        name = type(self).__name__
        x = as_input(x, name)
        ranks = (self._spatial + 1, self._spatial + 2)
        if x.ndim not in ranks:
            raise ShapeError(
                f"{name}({self.num_features}) expects input of rank {ranks} ((C, *spatial) or "
                f"(N, C, *spatial) with {self._spatial} spatial axes), got shape {x.shape}."
            )
        channels = x.shape[x.ndim - self._spatial - 1]
        if channels != self.num_features:
            if self.affine or self.track_running_stats:
                raise ShapeError(
                    f"{name}({self.num_features}) expects {self.num_features} channels on axis "
                    f"{x.ndim - self._spatial - 1}, got shape {x.shape}."
                )
            warnings.warn(
                f"{name}({self.num_features}): the input has {channels} channels (shape "
                f"{x.shape}); num_features is not used without affine or track_running_stats, "
                "so it normalises all of them (PyTorch warns here too). Pass the input's "
                f"channel count ({name}({channels})) to silence this.",
                TapegradWarning,
                stacklevel=user_stacklevel(),
            )
        batched = x if x.ndim == ranks[1] else x.reshape(1, *x.shape)
        tracked = self.track_running_stats
        momentum = self._momentum(self.momentum)  # read at each call: code sets it
        y = ops.instance_norm(
            batched,
            self.running_mean if tracked else None,
            self.running_var if tracked else None,
            self.weight,
            self.bias,
            use_input_stats=self.training or not tracked,
            momentum=0.0 if momentum is None else momentum,
            eps=self.eps,
        )
        return y if x.ndim == ranks[1] else y.reshape(*x.shape)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` or unbatched ``(C, L)`` inputs (Ulyanov et al.
    2016), PyTorch's ``InstanceNorm1d``: each channel of each sample normalised over ``L``
    (biased variance), then with ``affine`` scaled and shifted per channel.
    Parameters (with ``affine``) ``weight`` (ones) and ``bias`` (zeros) of shape ``(C,)``;
    buffers (with ``track_running_stats``) ``running_mean`` (zeros), ``running_var`` (ones)
    and ``num_batches_tracked``, saved in ``state_dict()`` under PyTorch's names, so a PyTorch
    state dict loads unchanged.
    Args:
        num_features: the channels ``C``.
        eps: added to the variance before the square root.
        momentum: weight of each new batch in the running statistics, in [0, 1] (the
            average of the instances' means and unbiased variances, as PyTorch's); ``None``,
            as PyTorch's instance norm: 0, the running statistics stay as they are.
        affine: learn ``weight`` and ``bias``.
        track_running_stats: keep running statistics, updated in training mode and used in
            evaluation mode (else each input's statistics always).
        bias: with ``affine``, also learn ``bias`` (PyTorch's keyword).
        dtype: a floating dtype for parameters and running statistics.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.
    Raises:
        TypeError: ``num_features`` is not an integer (NumPy's are).
        ValueError: a non-positive ``num_features``; ``momentum`` outside [0, 1].
    """

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` or unbatched ``(C, H, W)`` inputs (see
    :class:`InstanceNorm1d` for parameters, buffers and arguments)."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` or unbatched ``(C, D, H, W)`` inputs (see
    :class:`InstanceNorm1d` for parameters, buffers and arguments)."""

    _spatial = 3
