"""What is torch.nn really?, "Neural net from scratch": logistic regression written by hand.

Stand-in for MNIST: 640 random sparse 28x28 images (784 pixels in [0, 1)), random labels.
``weights = randn(784, 10) / sqrt(784)``, ``bias = zeros(10)``; ``log_softmax`` and negative
log-likelihood written with tensor ops; batches of 64 by slicing; the update under
``no_grad`` (``weights -= weights.grad * lr``) and the gradients reset, lr 0.5.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SOURCE = "What is torch.nn really? (from scratch)"
STEPS = 20
BS = 64
LR = 0.5
N = 640


def images(rng: np.random.Generator) -> np.ndarray:
    """``N`` stand-in digits: 784 pixels in [0, 1), four in five of them dark (as MNIST's)."""
    return rng.random((N, 784)) * (rng.random((N, 784)) < 0.2)


def data() -> dict[str, Any]:
    """Images, labels and the initial weights."""
    rng = np.random.default_rng(8)
    return {
        "x": images(rng),
        "y": rng.integers(0, 10, N).astype(np.int32),
        "weights": rng.standard_normal((784, 10)) / math.sqrt(784),
    }


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    x_train, y_train = tg.tensor(d["x"], dtype=tg.float32), tg.tensor(d["y"])
    weights = tg.tensor(d["weights"], dtype=tg.float32).require_grad()
    bias = tg.zeros(10).require_grad()
    rows = np.arange(BS)

    def log_softmax(x: Any) -> Any:
        return x - tg.expand_dims(x.exp().sum(-1).log(), -1)

    def model(xb: Any) -> Any:
        return log_softmax(xb @ weights + bias)

    def nll(input: Any, target: Any) -> Any:  # noqa: A002 - the tutorial's name
        return -input[rows[: target.shape[0]], target].mean()

    i = 0

    def step() -> Any:
        nonlocal i
        start = (i % (N // BS)) * BS
        i += 1
        xb, yb = x_train[start : start + BS], y_train[start : start + BS]
        pred = model(xb)
        loss = nll(pred, yb)
        loss.backward()
        with tg.no_grad():
            for p in (weights, bias):
                p -= p.grad * LR
                p.grad = None  # weights.grad.zero_()
        return loss

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    x_train, y_train = torch.tensor(d["x"], dtype=dtype), torch.tensor(d["y"], dtype=torch.int64)
    weights = torch.tensor(d["weights"], dtype=dtype, requires_grad=True)
    bias = torch.zeros(10, dtype=dtype, requires_grad=True)

    def log_softmax(x: Any) -> Any:
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb: Any) -> Any:
        return log_softmax(xb @ weights + bias)

    def nll(input: Any, target: Any) -> Any:  # noqa: A002 - the tutorial's name
        return -input[range(target.shape[0]), target].mean()

    i = 0

    def step() -> Any:
        nonlocal i, weights, bias
        start = (i % (N // BS)) * BS
        i += 1
        xb, yb = x_train[start : start + BS], y_train[start : start + BS]
        pred = model(xb)
        loss = nll(pred, yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * LR
            bias -= bias.grad * LR
            weights.grad.zero_()
            bias.grad.zero_()
        return loss

    return step
