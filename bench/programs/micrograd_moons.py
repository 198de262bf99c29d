"""micrograd's demo notebook: an MLP 2-16-16-1 on make_moons, SVM max-margin loss, L2, SGD.

The demo's MLP works on scalar ``Value``s; PyTorch users write it with tensors, as here: the
same layers (ReLU after all but the last), initialisation (uniform weights in [-1, 1], zero
biases), loss (mean hinge ``relu(1 - y * score)`` plus ``1e-4 * sum(p * p)``), accuracy, full
batch, and learning rate ``1 - 0.9 * k / 100`` at step k.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SOURCE = "micrograd demo: MLP on moons (hinge loss, SGD schedule)"
STEPS = 20
SIZES = (2, 16, 16, 1)


def data() -> dict[str, Any]:
    """100 points of scikit-learn's two moons (labels -1/1) and the MLP's weights."""
    from sklearn.datasets import make_moons

    x, y = make_moons(n_samples=100, noise=0.1, random_state=1)
    rng = np.random.default_rng(5)
    layers = [
        (rng.uniform(-1, 1, (b, a)), np.zeros(b)) for a, b in zip(SIZES, SIZES[1:], strict=False)
    ]
    return {"x": x, "y": (y * 2 - 1).astype(np.float64), "layers": layers}


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg
    from bench.programs._layers import tg_linear

    layers: list[Any] = []
    for i, (w, b) in enumerate(d["layers"]):
        layers.append(tg_linear(w, b))
        if i < len(d["layers"]) - 1:
            layers.append(tg.nn.ReLU())
    model = tg.nn.Sequential(*layers)
    parameters = list(model.parameters())
    x, y = tg.tensor(d["x"], dtype=tg.float32), tg.tensor(d["y"], dtype=tg.float32)
    k = 0

    def step() -> Any:
        nonlocal k
        scores = model(x).reshape(-1)
        losses = (1 + -y * scores).relu()
        data_loss = losses.mean()
        reg_loss = 1e-4 * sum((p * p).sum() for p in parameters)
        total_loss = data_loss + reg_loss
        accuracy = ((y > 0) == (scores > 0)).astype(tg.float32).mean()
        model.zero_grad()
        total_loss.backward()
        learning_rate = 1.0 - 0.9 * k / 100
        with tg.no_grad():
            for p in parameters:
                p -= learning_rate * p.grad
        k += 1
        del accuracy
        return total_loss

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    from bench.programs._layers import torch_linear

    layers: list[Any] = []
    for i, (w, b) in enumerate(d["layers"]):
        layers.append(torch_linear(w, b, dtype))
        if i < len(d["layers"]) - 1:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    parameters = list(model.parameters())
    x, y = torch.tensor(d["x"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    k = 0

    def step() -> Any:
        nonlocal k
        scores = model(x).reshape(-1)
        losses = (1 + -y * scores).relu()
        data_loss = losses.mean()
        reg_loss = 1e-4 * sum((p * p).sum() for p in parameters)
        total_loss = data_loss + reg_loss
        accuracy = ((y > 0) == (scores > 0)).to(dtype).mean()
        model.zero_grad()
        total_loss.backward()
        learning_rate = 1.0 - 0.9 * k / 100
        with torch.no_grad():
            for p in parameters:
                p -= learning_rate * p.grad
        k += 1
        del accuracy
        return total_loss

    return step
