"""Learning PyTorch with Examples, "nn module": Linear(3, 1) on (x, x^2, x^3), manual update."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.programs._layers import linear_init, tg_linear, torch_linear
from bench.programs._steps import sgd_step

SOURCE = "Learning PyTorch with Examples: nn"
STEPS = 20
LR = 1e-6


def data() -> dict[str, Any]:
    """sin on 2,000 points, the features x, x^2, x^3, and a Linear(3, 1)."""
    x = np.linspace(-np.pi, np.pi, 2000)
    w, b = linear_init(np.random.default_rng(1), 3, 1)
    return {"xx": x[:, None] ** np.arange(1, 4), "y": np.sin(x), "w": w, "b": b}


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    xx, y = tg.tensor(d["xx"], dtype=tg.float32), tg.tensor(d["y"], dtype=tg.float32)
    model = tg.nn.Sequential(tg_linear(d["w"], d["b"]), tg.nn.Flatten(0, 1))
    loss_fn = tg.nn.MSELoss(reduction="sum")

    def loss_of() -> Any:
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        return loss

    return sgd_step(loss_of, model.parameters(), LR, tg.no_grad)


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    xx, y = torch.tensor(d["xx"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    model = torch.nn.Sequential(torch_linear(d["w"], d["b"], dtype), torch.nn.Flatten(0, 1))
    loss_fn = torch.nn.MSELoss(reduction="sum")

    def loss_of() -> Any:
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        return loss

    return sgd_step(loss_of, model.parameters(), LR, torch.no_grad)
