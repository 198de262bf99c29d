"""The tapegrad system of the peers suite (and the raw-JAX baselines measured beside it).

The MLP uses ``tapegrad.nn`` and ``tapegrad.optim.SGD`` when they exist, else plain ops
(``@``, ``relu``, ``cross_entropy``) with the SGD update written under ``tg.no_grad()``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tapegrad as tg
from bench import _data
from bench._peer import Case, curve, first_call, mlp_case, seed_growth, tensor_memory
from tapegrad import compiled_backward, nn, optim

__all__ = ["SYSTEM", "VARIANTS", "version", "case", "probe"]

SYSTEM = "tapegrad"

MANUAL = "tapegrad, manual, no cleanup"
PERIODIC = f"tapegrad, manual + cleanup every {_data.SEED_PERIOD:,}"
AUTO = "tapegrad, auto policy"
RAW = "raw JAX (jnp.zeros / jax.Array)"
JIT = "tapegrad, tg.jit"
JIT_ZERO_LAST = "tapegrad, tg.jit, zero_grad() last (no .grad out)"
EAGER_BACKWARD = "tapegrad, eager backward passes only"

VARIANTS: dict[str, tuple[str, ...]] = {
    "perop": ("tapegrad",),
    "mlp": ("tapegrad",),
    "chain": ("tapegrad", EAGER_BACKWARD),
    "seed": (RAW, MANUAL, PERIODIC, AUTO),
    "seed_growth": (RAW, MANUAL, PERIODIC, AUTO),
    "live_memory": (RAW, "tapegrad"),
    "hanging_memory": (MANUAL, AUTO),
    "curve": ("tapegrad",),
    "jit": (JIT, JIT_ZERO_LAST),
    "jit_first": (JIT,),
}


def version() -> str:
    """tapegrad's and JAX's versions, and how the MLP is written."""
    return f"tapegrad {tg.__version__} (jax {jax.__version__}; MLP: nn + optim.SGD)"


class _Trainer:
    """The MLP in tapegrad (see ``bench._peer.Trainer``)."""

    def __init__(self) -> None:
        init = [jnp.asarray(p) for p in _data.mlp_init()]
        linears = [
            nn.Linear(i, o, key=k)
            for k, (i, o) in enumerate(zip(_data.SIZES[:-1], _data.SIZES[1:], strict=True))
        ]
        biases: list[tg.Tensor] = []
        for lin, w, b in zip(linears, init[0::2], init[1::2], strict=True):
            assert lin.bias is not None
            lin.weight.data = w.T  # nn.Linear keeps PyTorch's (out, in) layout
            lin.bias.data = b
            biases.append(lin.bias)
        self.model = nn.Sequential(linears[0], nn.ReLU(), linears[1], nn.ReLU(), linears[2])
        self.params: list[tg.Tensor] = [
            p for lin, b in zip(linears, biases, strict=True) for p in (lin.weight, b)
        ]
        self.opt = optim.SGD(self.model.parameters(), lr=_data.LR)

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        out: tg.Tensor = self.model(x)
        return out

    def convert(self, x: np.ndarray, y: np.ndarray) -> tuple[tg.Tensor, jax.Array]:
        return tg.tensor(jnp.asarray(x)), jnp.asarray(y, jnp.int32)

    def step(self, batch: tuple[tg.Tensor, jax.Array]) -> tuple[jax.Array, ...]:
        x, y = batch
        loss = tg.cross_entropy(self.forward(x), y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        return (loss.data, *(p.data for p in self.params))

    def loss(self, out: tuple[jax.Array, ...]) -> float:
        return float(out[0])

    def evaluate(self, batch: tuple[tg.Tensor, jax.Array]) -> tuple[float, float]:
        x, y = batch
        with tg.no_grad():
            logits = self.forward(x)
            loss = tg.cross_entropy(logits, y)
        acc = float(jnp.mean(jnp.argmax(logits.data, axis=1) == y))
        return float(loss.item()), acc


class _JitTrainer(_Trainer):
    """The same MLP, its unchanged eager step compiled by ``tg.jit`` (issue 12). With
    ``zero_last`` the step clears the gradients after ``opt.step()`` instead of before the
    forward, so no ``.grad`` is left to write back: the computation does not return them."""

    def __init__(self, zero_last: bool = False) -> None:
        super().__init__()
        model, opt = self.model, self.opt

        @tg.jit
        def step(x: tg.Tensor, y: jax.Array) -> tg.Tensor:
            if not zero_last:
                opt.zero_grad()
            loss = tg.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if zero_last:
                opt.zero_grad()
            return loss

        self.compiled = step

    def step(self, batch: tuple[tg.Tensor, jax.Array]) -> tuple[jax.Array, ...]:
        # the loss only, as a training loop keeps it: it comes from the same computation as
        # the new parameters (waiting for it waits for them), and a caller holding the
        # parameters' arrays makes each call ask the tapes whether a graph saves them
        return (self.compiled(*batch).data,)


def _new_leaf() -> tg.Tensor:
    return tg.zeros((2, 2)).require_grad()


def _raw_zeros() -> jax.Array:
    return jnp.zeros((2, 2))


def _manual() -> None:
    tg.set_cleanup_policy("manual")


def _auto() -> None:
    tg.set_cleanup_policy("auto")


def _clean() -> None:
    tg.set_cleanup_policy("manual")
    tg.graph_cleanup()


def case(workload: str, variant: str, **kw: Any) -> Case:
    """The timed ``workload`` (see ``bench.peers``) for ``variant``."""
    if workload == "perop":
        a0, b0 = _data.operands(tuple(kw["shape"]))
        a, b = tg.tensor(jnp.asarray(a0)).require_grad(), tg.tensor(jnp.asarray(b0)).require_grad()

        def perop() -> Any:
            y = (a * b + a).sum()
            y.backward()
            grads = (a.grad, b.grad)
            a.grad = b.grad = None
            return grads

        return Case(perop)
    if workload == "mlp":
        return mlp_case(_Trainer(), kw["batch"])
    if workload == "jit":
        return mlp_case(_JitTrainer(zero_last=variant == JIT_ZERO_LAST), kw["batch"])
    if workload == "chain":
        leaf = tg.tensor(jnp.asarray(_data.operands((2, 2))[0])).require_grad()
        n = kw["n"]

        def chain() -> Any:
            y = leaf
            for _ in range(n):
                y = y * _data.FACTOR
            y.sum().backward()
            g = leaf.grad
            leaf.grad = None
            return g

        if variant == EAGER_BACKWARD:  # what a loop runs before its structure compiles
            after = compiled_backward.compile_after()
            return Case(
                chain,
                before=lambda: compiled_backward.set_compile_after(None),
                after=lambda: compiled_backward.set_compile_after(after),
            )
        return Case(chain, settle=4.0)
    if workload == "seed":
        if variant == RAW:
            return Case(_raw_zeros)
        if variant == MANUAL:
            return Case(_new_leaf, before=_manual)
        if variant == AUTO:
            return Case(_new_leaf, before=_auto, after=_manual)
        if variant == PERIODIC:
            state = {"i": 0}

            def periodic() -> Any:
                _new_leaf()
                state["i"] += 1
                if state["i"] % _data.SEED_PERIOD == 0:
                    tg.graph_cleanup()

            return Case(periodic, before=_clean)
    raise ValueError(f"tapegrad has no case {workload!r} / {variant!r}")


def probe(workload: str, variant: str, **kw: Any) -> dict[str, Any]:
    """The one-shot measurement ``workload`` (see ``bench.peers``) for ``variant``."""
    _clean()
    try:
        if workload == "curve":
            return curve(_Trainer(), kw.get("steps", _data.CURVE_STEPS), kw.get("rows", 0))
        if workload == "jit_first":
            return first_call(_JitTrainer, kw["batch"])
        if workload == "seed_growth":
            n = kw["iterations"]

            def count() -> int:
                return tg.graph_stats().nodes

            if variant == RAW:
                return seed_growth(_raw_zeros, n)
            if variant == MANUAL:
                return seed_growth(_new_leaf, n, count=count)
            if variant == PERIODIC:
                return seed_growth(
                    _new_leaf, n, every=tg.graph_cleanup, period=_data.SEED_PERIOD, count=count
                )
            if variant == AUTO:
                _auto()
                return seed_growth(_new_leaf, n, count=count)
        if workload == "live_memory":
            return tensor_memory(_raw_zeros if variant == RAW else _new_leaf, kw["n"], keep=True)
        if workload == "hanging_memory":
            if variant == AUTO:
                _auto()
            return tensor_memory(_new_leaf, kw["n"], keep=False, reset=tg.graph_cleanup)
    finally:
        _clean()
    raise ValueError(f"tapegrad has no probe {workload!r} / {variant!r}")
