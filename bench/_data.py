"""Identical inputs for every system of the peers suite: data, initial weights, shapes (NumPy).

Imports only NumPy and scikit-learn, so every worker process can use it without importing
another system.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "SIZES",
    "LR",
    "BATCH",
    "CURVE_STEPS",
    "CURVE_AT",
    "CHAIN",
    "FACTOR",
    "SEED_PERIOD",
    "digits",
    "minibatches",
    "mlp_init",
    "operands",
]

SIZES = (64, 128, 128, 10)
"""Layer widths of the MLP: 64 inputs (8x8 digits), two hidden ReLU layers, 10 classes."""
LR = 0.1
"""Learning rate of plain SGD, the same for every system."""
BATCH = 64
"""Minibatch size of the small-batch step and of the learning curve."""
CURVE_STEPS = 200
"""Steps of the learning curve."""
CURVE_AT = (1, 25, 50, 100, 150, 200)
"""Steps after which the curve reports the minibatch loss."""
CHAIN = 1000
"""Ops in the chain ``y = y * FACTOR``."""
FACTOR = 1.0001
"""The chain's multiplier."""
SEED_PERIOD = 1000
"""Iterations between two ``graph_cleanup()`` calls in the periodic-cleanup seed loop."""


@functools.cache
def digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits: inputs (1797, 64) float32 scaled to [0, 1], labels (1797,) int64."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    return x, y


def minibatches(batch: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The data in a fixed shuffled order (seed 0), cut into full batches of ``batch`` rows.

    ``batch`` >= 1797 gives the whole data set as one batch, unshuffled.
    """
    x, y = digits()
    if batch >= len(x):
        return [(x, y)]
    order = np.random.default_rng(0).permutation(len(x))
    return [
        (x[order[i : i + batch]], y[order[i : i + batch]])
        for i in range(0, len(x) - batch + 1, batch)
    ]


def mlp_init() -> list[np.ndarray]:
    """Initial ``[w1, b1, w2, b2, w3, b3]``, float32, ``w`` of shape (in, out).

    Uniform in +-1/sqrt(in) as PyTorch's ``Linear`` default (seed 0).
    """
    rng = np.random.default_rng(0)
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:], strict=True):
        bound = 1.0 / np.sqrt(n_in)
        params.append(rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, (n_out,)).astype(np.float32))
    return params


def operands(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Two standard-normal float32 arrays of ``shape`` (seed 1)."""
    rng = np.random.default_rng(1)
    return (
        rng.standard_normal(shape).astype(np.float32),
        rng.standard_normal(shape).astype(np.float32),
    )
