"""MyGrad as a peer: a pure-Python tape over NumPy arrays, the same math."""

# mygrad re-exports its API implicitly and types .grad as optional: checked at run time here.
# mypy: disable-error-code="attr-defined,operator,arg-type"

from __future__ import annotations

from typing import Any

import mygrad as mg
import numpy as np
from mygrad.nnet import relu, softmax_crossentropy

from bench import _data
from bench._peer import (
    Case,
    leaf_probe,
    mlp_case,
    one_variant,
)

__all__ = ["SYSTEM", "VARIANTS", "version", "case", "probe"]

SYSTEM = "mygrad"
NAME = "MyGrad"

VARIANTS: dict[str, tuple[str, ...]] = one_variant(NAME)


def version() -> str:
    """MyGrad's version."""
    return f"mygrad {mg.__version__} (numpy {np.__version__})"


def _sync(out: Any) -> None:
    return None  # NumPy computes eagerly


class _Trainer:
    """The MLP with MyGrad tensors and SGD on their NumPy data."""

    def __init__(self) -> None:
        self.params = [mg.tensor(p) for p in _data.mlp_init()]

    def forward(self, x: np.ndarray) -> Any:
        w1, b1, w2, b2, w3, b3 = self.params
        h = relu(x @ w1 + b1)
        h = relu(h @ w2 + b2)
        return h @ w3 + b3

    def convert(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x, y

    def step(self, batch: tuple[np.ndarray, np.ndarray]) -> Any:
        x, y = batch
        loss = softmax_crossentropy(self.forward(x), y)
        loss.backward()
        for p in self.params:
            p.data -= _data.LR * p.grad
        return loss

    def loss(self, out: Any) -> float:
        return float(out.item())

    def evaluate(self, batch: tuple[np.ndarray, np.ndarray]) -> tuple[float, float]:
        x, y = batch
        with mg.no_autodiff:
            logits = self.forward(x)
            loss = softmax_crossentropy(logits, y)
        acc = float(np.mean(np.argmax(np.asarray(logits), axis=1) == y))
        return float(loss.item()), acc


def _new_leaf() -> Any:
    return mg.zeros((2, 2), dtype=np.float32, constant=False)


def case(workload: str, variant: str, **kw: Any) -> Case:
    """The timed ``workload`` (see ``bench.peers``)."""
    if workload == "perop":
        a0, b0 = _data.operands(tuple(kw["shape"]))
        a, b = mg.tensor(a0), mg.tensor(b0)

        def perop() -> Any:
            y = (a * b + a).sum()
            y.backward()
            return (a.grad, b.grad)

        return Case(perop, sync=_sync)
    if workload == "mlp":
        return mlp_case(_Trainer(), kw["batch"], sync=_sync)
    if workload == "chain":
        leaf = mg.tensor(_data.operands((2, 2))[0])
        n = kw["n"]

        def chain() -> Any:
            y = leaf
            for _ in range(n):
                y = y * _data.FACTOR
            y.sum().backward()
            return leaf.grad

        return Case(chain, sync=_sync)
    if workload == "seed":
        return Case(_new_leaf, sync=_sync)
    raise ValueError(f"mygrad has no case {workload!r} / {variant!r}")


probe = leaf_probe(SYSTEM, _Trainer, _new_leaf)
