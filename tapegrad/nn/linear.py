"""Affine layers: ``Linear`` (PyTorch's layout and initialisation) and ``Identity``."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tapegrad._args import integer
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.nn import _init
from tapegrad.nn.module import Module
from tapegrad.ops.linalg import linear

__all__ = ["Linear", "Identity"]


class Linear(Module):
    """``y = x @ weight.T + bias``: x ``(..., in_features)`` -> y ``(..., out_features)``.

    Layout, names and initialisation are PyTorch's, so ``torch.nn.Linear``'s state dict loads
    unchanged: weight and bias uniform in ``[-k, k]`` with ``k = 1 / sqrt(in_features)``
    (``k = 0`` when ``in_features == 0``).

    Args:
        in_features: size of the last input axis.
        out_features: size of the last output axis.
        bias: add a learned bias.
        key: an int seed or a ``jax.random`` key; ``None`` draws from the process random
            state (``tg.manual_seed``).
        dtype: a floating dtype for the parameters (float32 by default).
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Attributes:
        weight: parameter of shape ``(out_features, in_features)``.
        bias: parameter of shape ``(out_features,)``, or ``None``.

    Raises:
        ValueError: a negative size.
        TypeError: a size that is not an integer (NumPy's are), ``key`` is neither an int nor
            a key, or ``dtype`` is not floating.
    """

    weight: Tensor
    bias: Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        in_features = integer(in_features, "Linear: in_features")
        out_features = integer(out_features, "Linear: out_features")
        if in_features < 0 or out_features < 0:
            raise ValueError(f"Linear({in_features}, {out_features}): sizes must be non-negative.")
        check_float(dtype, "Linear")
        self.in_features, self.out_features = in_features, out_features
        k = _init.fan_in_bound(in_features)
        kw, kb = _init.keys(key, 2)
        self.weight = _init.uniform(kw, (out_features, in_features), k, dtype)
        self.bias = _init.uniform(kb, (out_features,), k, dtype) if bias else None
        _init.to_device(self, device, "nn.Linear")

    def forward(self, x: Tensor) -> Tensor:
        """Apply the layer to ``x`` of shape ``(..., in_features)``: one ``tg.linear`` op (one
        compiled forward, one compiled VJP)."""
        return linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Identity(Module):
    """Returns its input unchanged (a placeholder layer, as ``torch.nn.Identity``).

    Args:
        *args: ignored (PyTorch's ``Identity`` takes any arguments, so it can stand in for
            another layer's constructor call).
        **kwargs: ignored.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        """Return ``x``."""
        return x
