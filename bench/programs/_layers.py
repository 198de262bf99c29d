"""Layers of both systems loaded from the same NumPy weights (PyTorch layout: ``(out, in)``)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["linear_init", "tg_linear", "torch_linear", "torch_tensor"]


def linear_init(
    rng: np.random.Generator, n_in: int, n_out: int, bias: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """PyTorch's default ``Linear`` initialisation: uniform in ``[-k, k]``, ``k = 1/sqrt(in)``."""
    k = 1.0 / np.sqrt(n_in)
    w = rng.uniform(-k, k, (n_out, n_in))
    return w, (rng.uniform(-k, k, n_out) if bias else None)


def tg_linear(w: np.ndarray, b: np.ndarray | None) -> Any:
    """A ``tapegrad.nn.Linear`` holding ``w`` (given as ``(out, in)``) and ``b``, float32."""
    import tapegrad as tg

    n_out, n_in = w.shape
    layer = tg.nn.Linear(n_in, n_out, bias=b is not None, key=0)
    weight = w if _torch_layout() else w.T
    layer.weight.data = tg.tensor(weight.astype(np.float32)).data
    if b is not None:
        layer.bias.data = tg.tensor(b.astype(np.float32)).data
    return layer


@functools.cache
def _torch_layout() -> bool:
    """Whether ``tapegrad.nn.Linear.weight`` is ``(out, in)`` as PyTorch's (else ``(in, out)``)."""
    import tapegrad as tg

    return tg.nn.Linear(2, 3, key=0).weight.shape == (3, 2)


def torch_linear(w: np.ndarray, b: np.ndarray | None, dtype: Any) -> Any:
    """A ``torch.nn.Linear`` holding ``w`` and ``b`` in ``dtype``."""
    import torch

    n_out, n_in = w.shape
    layer = torch.nn.Linear(n_in, n_out, bias=b is not None, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(w))
        if b is not None:
            layer.bias.copy_(torch.from_numpy(b))
    return layer


def torch_tensor(x: np.ndarray, dtype: Any, requires_grad: bool = False) -> Any:
    """A torch tensor of ``x``: floating arrays in ``dtype``, integer arrays as int64."""
    import torch

    if np.issubdtype(x.dtype, np.floating):
        return torch.tensor(x, dtype=dtype, requires_grad=requires_grad)
    return torch.tensor(x, dtype=torch.int64)
