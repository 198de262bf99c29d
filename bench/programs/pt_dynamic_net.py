"""Learning PyTorch with Examples, "control flow + weight sharing": DynamicNet, SGD momentum."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from bench.programs._steps import optimizer_step

SOURCE = "Learning PyTorch with Examples: DynamicNet (SGD momentum)"
STEPS = 20
LR = 1e-8


def data() -> dict[str, Any]:
    """sin on 2,000 points and five random coefficients."""
    x = np.linspace(-np.pi, np.pi, 2000)
    return {"x": x, "y": np.sin(x), "coef": np.random.default_rng(2).standard_normal(5)}


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    class DynamicNet(tg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, v in zip("abcde", d["coef"], strict=True):
                setattr(self, name, tg.tensor(float(v)).require_grad())
            self.rng = random.Random(0)

        def forward(self, x: Any) -> Any:
            y = self.a + self.b * x + self.c * x**2 + self.d * x**3
            for exp in range(4, self.rng.randint(4, 6)):
                y = y + self.e * x**exp
            return y

    x, y = tg.tensor(d["x"], dtype=tg.float32), tg.tensor(d["y"], dtype=tg.float32)
    model = DynamicNet()
    criterion = tg.nn.MSELoss(reduction="sum")
    optimizer = tg.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    def loss_of() -> Any:
        y_pred = model(x)
        loss = criterion(y_pred, y)
        return loss

    return optimizer_step(loss_of, optimizer)


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    class DynamicNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, v in zip("abcde", d["coef"], strict=True):
                setattr(self, name, torch.nn.Parameter(torch.tensor(float(v), dtype=dtype)))
            self.rng = random.Random(0)

        def forward(self, x: Any) -> Any:
            y = self.a + self.b * x + self.c * x**2 + self.d * x**3
            for exp in range(4, self.rng.randint(4, 6)):
                y = y + self.e * x**exp
            return y

    x, y = torch.tensor(d["x"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    model = DynamicNet()
    criterion = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    def loss_of() -> Any:
        y_pred = model(x)
        loss = criterion(y_pred, y)
        return loss

    return optimizer_step(loss_of, optimizer)
