"""PyTorch's eager autograd (CPU) as a peer: the same math, plain tensors and ``.backward()``."""

# torch.Tensor.backward is untyped in torch 2.13's stubs.
# mypy: disable-error-code="no-untyped-call"

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bench import _data
from bench._peer import (
    PEER_WORKLOADS,
    Case,
    leaf_probe,
    mlp_case,
    one_variant,
)

__all__ = ["SYSTEM", "VARIANTS", "version", "case", "probe"]

SYSTEM = "torch"
NAME = "torch eager"

VARIANTS: dict[str, tuple[str, ...]] = one_variant(NAME, (*PEER_WORKLOADS, "jit"))


def version() -> str:
    """torch's version and its intra-op thread count."""
    return f"torch {torch.__version__} ({torch.get_num_threads()} threads)"


def _sync(out: Any) -> None:
    return None  # torch on CPU computes eagerly


class _Trainer:
    """The MLP with leaf tensors, ``F.cross_entropy`` and SGD under ``torch.no_grad()``."""

    def __init__(self) -> None:
        self.params = [torch.tensor(p, requires_grad=True) for p in _data.mlp_init()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2, w3, b3 = self.params
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        return h @ w3 + b3

    def convert(self, x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y)

    def step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.forward(x), y)
        loss.backward()
        with torch.no_grad():
            for p in self.params:
                assert p.grad is not None
                p -= _data.LR * p.grad
                p.grad = None
        return loss.detach()

    def loss(self, out: torch.Tensor) -> float:
        return float(out)

    def evaluate(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, float]:
        x, y = batch
        with torch.no_grad():
            logits = self.forward(x)
            loss = F.cross_entropy(logits, y)
            acc = (logits.argmax(dim=1) == y).float().mean()
        return float(loss), float(acc)


def _new_leaf() -> torch.Tensor:
    return torch.zeros((2, 2), requires_grad=True)


def case(workload: str, variant: str, **kw: Any) -> Case:
    """The timed ``workload`` (see ``bench.peers``)."""
    if workload == "perop":
        a0, b0 = _data.operands(tuple(kw["shape"]))
        a, b = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)

        def perop() -> Any:
            y = (a * b + a).sum()
            y.backward()
            grads = (a.grad, b.grad)
            a.grad = b.grad = None
            return grads

        return Case(perop, sync=_sync)
    if workload in ("mlp", "jit"):  # "jit": torch eager beside the compiled steps
        return mlp_case(_Trainer(), kw["batch"], sync=_sync)
    if workload == "chain":
        leaf = torch.tensor(_data.operands((2, 2))[0], requires_grad=True)
        n = kw["n"]

        def chain() -> Any:
            y = leaf
            for _ in range(n):
                y = y * _data.FACTOR
            y.sum().backward()
            g = leaf.grad
            leaf.grad = None
            return g

        return Case(chain, sync=_sync)
    if workload == "seed":
        return Case(_new_leaf, sync=_sync)
    raise ValueError(f"torch has no case {workload!r} / {variant!r}")


probe = leaf_probe(SYSTEM, _Trainer, _new_leaf)
