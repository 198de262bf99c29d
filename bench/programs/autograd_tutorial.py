"""A Gentle Introduction to torch.autograd: the fine-tuning step (frozen backbone, new head).

The tutorial freezes a pretrained ResNet-18, replaces its classifier with ``Linear(512, 10)``,
and runs ``prediction = model(data); loss = (prediction - labels).sum(); loss.backward();
optimizer.step()`` with SGD (lr 1e-2, momentum 0.9). Stand-in: a frozen feature extractor of
three Linear+ReLU layers on a flattened 3x16x16 image (tapegrad has no convolution yet), a
new trainable head, the same loss and optimizer; random image and labels as in the tutorial.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.programs._layers import linear_init, tg_linear, torch_linear
from bench.programs._steps import optimizer_step

SOURCE = "A Gentle Introduction to torch.autograd: fine-tune step"
STEPS = 20
LR = 1e-2
SIZES = (3 * 16 * 16, 256, 128, 64)


def data() -> dict[str, Any]:
    """One random image (1, 768), random labels (1, 10), a backbone and a head."""
    rng = np.random.default_rng(3)
    backbone = [linear_init(rng, a, b) for a, b in zip(SIZES, SIZES[1:], strict=False)]
    return {
        "image": rng.random((1, SIZES[0])),
        "labels": rng.random((1, 10)),
        "backbone": backbone,
        "head": linear_init(rng, SIZES[-1], 10),
    }


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    layers = []
    for w, b in d["backbone"]:
        layers += [tg_linear(w, b), tg.nn.ReLU()]
    model = tg.nn.Sequential(*layers)
    for param in model.parameters():
        param.requires_grad_(False)  # freeze the "pretrained" backbone
    model = tg.nn.Sequential(model, tg_linear(*d["head"]))
    image = tg.tensor(d["image"], dtype=tg.float32)
    labels = tg.tensor(d["labels"], dtype=tg.float32)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = tg.optim.SGD(trainable, lr=LR, momentum=0.9)

    def loss_of() -> Any:
        prediction = model(image)
        loss = (prediction - labels).sum()
        return loss

    return optimizer_step(loss_of, optimizer)


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    layers: list[Any] = []
    for w, b in d["backbone"]:
        layers += [torch_linear(w, b, dtype), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    for param in model.parameters():
        param.requires_grad = False
    model = torch.nn.Sequential(model, torch_linear(*d["head"], dtype))
    image = torch.tensor(d["image"], dtype=dtype)
    labels = torch.tensor(d["labels"], dtype=dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    def loss_of() -> Any:
        prediction = model(image)
        loss = (prediction - labels).sum()
        return loss

    return optimizer_step(loss_of, optimizer)
