"""Learning PyTorch with Examples, "optim": the same Linear(3, 1), trained with RMSprop."""

from __future__ import annotations

from typing import Any

from bench.programs._layers import tg_linear, torch_linear
from bench.programs._steps import optimizer_step
from bench.programs.pt_nn import data

__all__ = ["data", "tapegrad", "torch"]

SOURCE = "Learning PyTorch with Examples: optim (RMSprop)"
STEPS = 20
LR = 1e-3


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    xx, y = tg.tensor(d["xx"], dtype=tg.float32), tg.tensor(d["y"], dtype=tg.float32)
    model = tg.nn.Sequential(tg_linear(d["w"], d["b"]), tg.nn.Flatten(0, 1))
    loss_fn = tg.nn.MSELoss(reduction="sum")
    optimizer = tg.optim.RMSprop(model.parameters(), lr=LR)

    def loss_of() -> Any:
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        return loss

    return optimizer_step(loss_of, optimizer)


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    xx, y = torch.tensor(d["xx"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    model = torch.nn.Sequential(torch_linear(d["w"], d["b"], dtype), torch.nn.Flatten(0, 1))
    loss_fn = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.RMSprop(model.parameters(), lr=LR)

    def loss_of() -> Any:
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        return loss

    return optimizer_step(loss_of, optimizer)
