"""Parameter initialisation as PyTorch's (uniform fan-in bounds, Xavier, normal, constants)."""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Any

import jax

from tapegrad import random
from tapegrad._arrays import filled
from tapegrad._placement import place
from tapegrad._tensor import Tensor
from tapegrad.random import key_of

if TYPE_CHECKING:
    from tapegrad.nn.module import Module

__all__ = ["keys", "uniform", "normal", "constant", "fan_in_bound", "to_device"]


def keys(key: Any, n: int) -> list[jax.Array]:
    """``n`` independent keys from ``key`` (an int seed, a key, or ``None``: the process
    random state of ``tg.manual_seed``): ``jax.random.split``'s (``random.split_keys``)."""
    return random.split_keys(key_of(key), n)


def fan_in_bound(fan_in: int) -> float:
    """PyTorch's default bound for weights and biases of Linear/Conv/RNN layers:
    ``1 / sqrt(fan_in)`` (``kaiming_uniform_(a=sqrt(5))``), 0 for an empty fan-in."""
    return 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0


def _ints(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` as Python ints: sizes read from a NumPy array (``np.int64``) draw as ints do
    (the random draw sizes its buffer with ``int.bit_length``)."""
    return tuple(operator.index(d) for d in shape)


def uniform(key: jax.Array, shape: tuple[int, ...], bound: float, dtype: Any) -> Tensor:
    """A parameter drawn uniformly from ``[-bound, bound]``."""
    return Tensor(random.uniform(key, _ints(shape), dtype, -bound, bound)).require_grad()


def normal(key: jax.Array, shape: tuple[int, ...], dtype: Any) -> Tensor:
    """A parameter drawn from the standard normal (``Embedding``'s init)."""
    return Tensor(random.normal(key, _ints(shape), dtype)).require_grad()


def constant(shape: tuple[int, ...], value: float, dtype: Any, *, param: bool = True) -> Tensor:
    """A tensor filled with ``value``: a parameter, or with ``param=False`` a buffer."""
    t = Tensor(filled(shape, value, dtype))
    return t.require_grad() if param else t


def to_device(module: Module, device: Any, what: str) -> None:
    """PyTorch's ``device=`` of a layer's constructor: put ``module``'s parameters and buffers
    on ``device`` as ``tg.zeros(..., device=)`` places its result (``_placement.place``: a
    ``jax.Device``, an index into ``jax.devices()``, a string such as ``"cpu"`` or ``"gpu:0"``);
    ``None`` leaves them on JAX's default device, as PyTorch's ``device=None``.

    Raises:
        DeviceError: no such device (the message names ``what`` and lists the devices).
    """
    if device is None:
        return
    for t in (*module.parameters(), *module.buffers()):
        t.data = place(t.data, device, what)
