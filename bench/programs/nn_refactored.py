"""What is torch.nn really?, refactored: ``nn.Module`` with ``nn.Linear``, ``F.cross_entropy``,
``optim.SGD``; batches of 64 sliced from the (stand-in) training set, lr 0.5."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.programs._layers import linear_init, tg_linear, torch_linear
from bench.programs.nn_scratch import BS, LR, N, images

SOURCE = "What is torch.nn really? (refactored: nn.Linear, optim.SGD)"
STEPS = 20


def data() -> dict[str, Any]:
    """Images, labels and a Linear(784, 10)."""
    rng = np.random.default_rng(9)
    w, b = linear_init(rng, 784, 10)
    return {"x": images(rng), "y": rng.integers(0, 10, N).astype(np.int32), "lin": (w, b)}


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    class MnistLogistic(tg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = tg_linear(*d["lin"])

        def forward(self, xb: Any) -> Any:
            return self.lin(xb)

    x_train, y_train = tg.tensor(d["x"], dtype=tg.float32), tg.tensor(d["y"])
    model = MnistLogistic()
    opt = tg.optim.SGD(model.parameters(), lr=LR)
    i = 0

    def step() -> Any:
        nonlocal i
        start = (i % (N // BS)) * BS
        i += 1
        xb, yb = x_train[start : start + BS], y_train[start : start + BS]
        loss = tg.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch
    import torch.nn.functional as F  # noqa: N812 - the tutorial's spelling

    class MnistLogistic(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch_linear(*d["lin"], dtype)

        def forward(self, xb: Any) -> Any:
            return self.lin(xb)

    x_train, y_train = torch.tensor(d["x"], dtype=dtype), torch.tensor(d["y"], dtype=torch.int64)
    model = MnistLogistic()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    i = 0

    def step() -> Any:
        nonlocal i
        start = (i % (N // BS)) * BS
        i += 1
        xb, yb = x_train[start : start + BS], y_train[start : start + BS]
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return step
