"""HIPS autograd as a peer: ``autograd.value_and_grad`` of a NumPy function, the same math.

autograd traces each call afresh and keeps no tape between calls, so the seed loop and graph
memory do not apply.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd import value_and_grad
from autograd.scipy.special import logsumexp

from bench import _data
from bench._peer import Case, curve, mlp_case, one_variant

__all__ = ["SYSTEM", "VARIANTS", "version", "case", "probe"]

SYSTEM = "autograd"
NAME = "HIPS autograd"

VARIANTS: dict[str, tuple[str, ...]] = one_variant(NAME, ("perop", "mlp", "chain", "curve"))


def version() -> str:
    """autograd's version."""
    return f"autograd {importlib.metadata.version('autograd')} (numpy {np.__version__})"


def _sync(out: Any) -> None:
    return None  # NumPy computes eagerly


def _logits(params: list[Any], x: Any) -> Any:
    w1, b1, w2, b2, w3, b3 = params
    h = anp.maximum(x @ w1 + b1, 0.0)
    h = anp.maximum(h @ w2 + b2, 0.0)
    return h @ w3 + b3


def _loss(params: list[Any], x: Any, y: Any) -> Any:
    logits = _logits(params, x)
    logp = logits - logsumexp(logits, axis=1, keepdims=True)
    return -anp.mean(logp[anp.arange(len(y)), y])


_VG = value_and_grad(_loss)


class _Trainer:
    """The MLP with ``value_and_grad`` over the parameter list and a NumPy SGD update."""

    def __init__(self) -> None:
        self.params = _data.mlp_init()

    def convert(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x, y

    def step(self, batch: tuple[np.ndarray, np.ndarray]) -> Any:
        loss, grads = _VG(self.params, *batch)
        self.params = [p - _data.LR * g for p, g in zip(self.params, grads, strict=True)]
        return loss

    def loss(self, out: Any) -> float:
        return float(out)

    def evaluate(self, batch: tuple[np.ndarray, np.ndarray]) -> tuple[float, float]:
        x, y = batch
        acc = float(np.mean(np.argmax(_logits(self.params, x), axis=1) == y))
        return float(_loss(self.params, x, y)), acc


def _perop(ab: tuple[Any, Any]) -> Any:
    a, b = ab
    return anp.sum(a * b + a)


def _chain(a: Any, n: int) -> Any:
    y = a
    for _ in range(n):
        y = y * _data.FACTOR
    return anp.sum(y)


def case(workload: str, variant: str, **kw: Any) -> Case:
    """The timed ``workload`` (see ``bench.peers``)."""
    if workload == "perop":
        ab = _data.operands(tuple(kw["shape"]))
        f = value_and_grad(_perop)
        return Case(lambda: f(ab), sync=_sync)
    if workload == "mlp":
        return mlp_case(_Trainer(), kw["batch"], sync=_sync)
    if workload == "chain":
        a = _data.operands((2, 2))[0]
        n = kw["n"]
        g = value_and_grad(lambda x: _chain(x, n))
        return Case(lambda: g(a), sync=_sync)
    raise ValueError(f"autograd has no case {workload!r} / {variant!r}")


def probe(workload: str, variant: str, **kw: Any) -> dict[str, Any]:
    """The one-shot measurement ``workload``."""
    if workload == "curve":
        return curve(_Trainer(), kw.get("steps", _data.CURVE_STEPS), kw.get("rows", 0))
    raise ValueError(f"autograd has no probe {workload!r} / {variant!r}")
