"""``tg.nn.init``: PyTorch's ``torch.nn.init`` functions, filling a tensor in place.

Each function draws from the process random state (``tg.manual_seed``), or from ``key=``
(an int seed or a ``jax.random`` key), in the tensor's dtype and placement, writes the values
into the tensor (``t.data = ...``: a parameter keeps its node and its place in every module
and optimizer) and returns it. The formulas are PyTorch's; the numbers are JAX's draws, so a
seed gives other values than ``torch.manual_seed``'s.
"""

from __future__ import annotations

import math
from typing import Any

import jax

from tapegrad import random
from tapegrad._arrays import filled
from tapegrad._dtypes import is_float
from tapegrad._placement import placed_like
from tapegrad._tensor import Tensor
from tapegrad.random import key_of

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "zeros_",
    "ones_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
]

_GAINS = {"linear": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3, "relu": math.sqrt(2.0), "selu": 0.75}
_LINEAR = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """PyTorch's recommended gain for ``nonlinearity``: 1 for linear, convolutions and
    sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu
    (``param``: the slope, default 0.01), 3/4 for selu.

    Raises:
        ValueError: an unknown nonlinearity, or a leaky_relu slope that is not a number.
    """
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ValueError(
                f"calculate_gain: the leaky_relu slope must be a number, got {slope!r}."
            )
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity not in _GAINS:
        raise ValueError(
            f"calculate_gain: unknown nonlinearity {nonlinearity!r}; use one of "
            f"{', '.join([*_GAINS, 'leaky_relu', *_LINEAR])}."
        )
    return _GAINS[nonlinearity]


def _fill(t: Tensor, array: jax.Array) -> Tensor:
    """Write ``array`` into ``t`` in place, on ``t``'s placement."""
    t.data = placed_like(array, t.data)
    return t


def _check(t: Any, what: str) -> Tensor:
    """``t``, a tensor of a float dtype.

    Raises:
        TypeError: ``t`` is not a tapegrad Tensor (a PyTorch tensor, an array), or not of a
            float dtype.
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"nn.init.{what}: expected a tapegrad Tensor, got {type(t).__name__}.")
    if not is_float(t.dtype):
        raise TypeError(
            f"nn.init.{what}: fills float tensors, got {t.dtype}; cast first "
            "(t.astype(tg.float32))."
        )
    return t


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, *, key: Any = None) -> Tensor:
    """Fill with draws from U(a, b).

    Raises:
        ValueError: ``a > b``.
    """
    t = _check(tensor, "uniform_")
    if a > b:
        raise ValueError(f"nn.init.uniform_: a={a} is above b={b}; give a <= b.")
    return _fill(t, random.uniform(key_of(key), t.shape, t.dtype, a, b))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, *, key: Any = None) -> Tensor:
    """Fill with draws from N(mean, std^2)."""
    t = _check(tensor, "normal_")
    return _fill(t, random.normal(key_of(key), t.shape, t.dtype) * std + mean)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    *,
    key: Any = None,
) -> Tensor:
    """Fill with draws from N(mean, std^2) truncated to [a, b] (absolute bounds, as
    PyTorch's; ``jax.random.truncated_normal``)."""
    t = _check(tensor, "trunc_normal_")
    lo, hi = (a - mean) / std, (b - mean) / std
    draw = jax.random.truncated_normal(key_of(key), lo, hi, t.shape, t.dtype)
    return _fill(t, draw * std + mean)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    t = _check(tensor, "constant_")
    return _fill(t, filled(t.shape, val, t.dtype))


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def _fans(t: Tensor, what: str) -> tuple[int, int]:
    """PyTorch's ``(fan_in, fan_out)``: ``shape[1]`` and ``shape[0]`` times the receptive
    field (the product of the other axes).

    Raises:
        ValueError: fewer than two dimensions.
    """
    if t.ndim < 2:
        raise ValueError(
            f"nn.init.{what}: fan in and fan out need a tensor of at least 2 dimensions, got "
            f"shape {t.shape}; use uniform_ or normal_ for a bias."
        )
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(t: Tensor, mode: str, what: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"nn.init.{what}: mode must be 'fan_in' or 'fan_out', got {mode!r}.")
    fan_in, fan_out = _fans(t, what)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, *, key: Any = None) -> Tensor:
    """Glorot: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``.

    Raises:
        ValueError: fewer than two dimensions.
    """
    t = _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _fans(t, "xavier_uniform_")
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, key=key)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, *, key: Any = None) -> Tensor:
    """Glorot: N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``.

    Raises:
        ValueError: fewer than two dimensions.
    """
    t = _check(tensor, "xavier_normal_")
    fan_in, fan_out = _fans(t, "xavier_normal_")
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), key=key)


def _kaiming_std(t: Tensor, a: float, mode: str, nonlinearity: str, what: str) -> float | None:
    """He's ``gain / sqrt(fan)``; ``None`` for a tensor of no elements (nothing to fill:
    PyTorch warns and returns it too)."""
    if t.size == 0:
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode, what))


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    *,
    key: Any = None,
) -> Tensor:
    """He: U(-b, b) with ``b = sqrt(3) * gain / sqrt(fan)`` (``gain``: ``calculate_gain(
    nonlinearity, a)``; ``fan``: ``mode``'s).

    Raises:
        ValueError: fewer than two dimensions, or an unknown mode or nonlinearity.
    """
    t = _check(tensor, "kaiming_uniform_")
    std = _kaiming_std(t, a, mode, nonlinearity, "kaiming_uniform_")
    return t if std is None else uniform_(t, -math.sqrt(3.0) * std, math.sqrt(3.0) * std, key=key)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    *,
    key: Any = None,
) -> Tensor:
    """He: N(0, std^2) with ``std = gain / sqrt(fan)`` (as ``kaiming_uniform_``).

    Raises:
        ValueError: fewer than two dimensions, or an unknown mode or nonlinearity.
    """
    t = _check(tensor, "kaiming_normal_")
    std = _kaiming_std(t, a, mode, nonlinearity, "kaiming_normal_")
    return t if std is None else normal_(t, 0.0, std, key=key)
