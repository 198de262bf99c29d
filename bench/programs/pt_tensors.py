"""Learning PyTorch with Examples, "Tensors and autograd": a cubic fit to sin(x), manual SGD."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.programs._steps import sgd_step

SOURCE = "Learning PyTorch with Examples: tensors + autograd"
STEPS = 20
LR = 1e-6


def data() -> dict[str, Any]:
    """2,000 points of sin on [-pi, pi] and four random coefficients."""
    x = np.linspace(-np.pi, np.pi, 2000)
    return {"x": x, "y": np.sin(x), "coef": np.random.default_rng(0).standard_normal(4)}


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    x, y = tg.tensor(d["x"], dtype=tg.float32), tg.tensor(d["y"], dtype=tg.float32)
    a, b, c, e = (tg.tensor(float(v)).require_grad() for v in d["coef"])

    def loss_of() -> Any:
        y_pred = a + b * x + c * x**2 + e * x**3
        loss = ((y_pred - y) ** 2).sum()
        return loss

    return sgd_step(loss_of, (a, b, c, e), LR, tg.no_grad)


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    x, y = torch.tensor(d["x"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    a, b, c, e = (torch.tensor(float(v), dtype=dtype, requires_grad=True) for v in d["coef"])

    def loss_of() -> Any:
        y_pred = a + b * x + c * x**2 + e * x**3
        loss = (y_pred - y).pow(2).sum()
        return loss

    return sgd_step(loss_of, (a, b, c, e), LR, torch.no_grad)
