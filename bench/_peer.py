"""What every system of the peers suite shares: the case type and the system-neutral workloads.

A system module (``bench.peer_<name>``) provides ``SYSTEM``, ``version()``, ``VARIANTS``
(workload -> variant labels), ``case(workload, variant, **kwargs) -> Case`` for timed
workloads and ``probe(workload, variant, **kwargs) -> dict`` for one-shot measurements. The
helpers here turn a system's primitives (a trainer, a tracked-tensor constructor) into those
workloads, identically for every system.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from bench import _data
from bench._timing import block, rss_bytes, settle, traced_bytes, tracing

__all__ = [
    "Case",
    "Trainer",
    "mlp_case",
    "first_call",
    "curve",
    "seed_growth",
    "tensor_memory",
    "nothing",
]


def nothing() -> None:
    """A hook that does nothing."""
    return None


@dataclass
class Case:
    """One timed workload of one system.

    Attributes:
        step: one iteration; its result is passed to ``sync`` at the end of a batch.
        before: untimed, before every batch (e.g. set a policy, clean the tape).
        after: untimed, after every batch.
        sync: waits for the result of the last step (``block`` for JAX, a no-op otherwise).
        settle: seconds of untimed steps before the first batch, so that batches time the
            steady state a long loop reaches (tapegrad compiles a repeating backward
            structure once its eager passes took its estimated compile time, at most 1 s).
    """

    step: Callable[[], Any]
    before: Callable[[], None] = nothing
    after: Callable[[], None] = nothing
    sync: Callable[[Any], None] = block
    settle: float = 0.0


class Trainer(Protocol):
    """One system's MLP 64-128-128-10 with plain SGD, from ``_data.mlp_init()``."""

    def convert(self, x: Any, y: Any) -> Any:
        """The system's own arrays for a NumPy batch (done once, untimed)."""

    def step(self, batch: Any) -> Any:
        """One training step (forward, backward, SGD update); returns what ``sync`` waits on
        and ``loss`` reads."""

    def loss(self, out: Any) -> float:
        """The loss of a step, as a Python float."""

    def evaluate(self, batch: Any) -> tuple[float, float]:
        """Loss and accuracy of the current parameters on ``batch`` (no update)."""


def mlp_case(trainer: Trainer, batch: int, sync: Callable[[Any], None] = block) -> Case:
    """Timed training steps cycling over the fixed minibatches of size ``batch``."""
    batches = [trainer.convert(x, y) for x, y in _data.minibatches(batch)]
    state = {"i": 0}

    def step() -> Any:
        i = state["i"]
        state["i"] = (i + 1) % len(batches)
        return trainer.step(batches[i])

    return Case(step, sync=sync)


def first_call(
    make: Callable[[], Trainer], batch: int, sync: Callable[[Any], None] = block
) -> dict[str, Any]:
    """Seconds of the first training step (a compiled step traces and compiles in it) and of
    the second, on a new trainer (made and fed untimed)."""
    trainer = make()
    first = trainer.convert(*_data.minibatches(batch)[0])
    times = []
    for _ in range(2):
        start = time.perf_counter()
        sync(trainer.step(first))
        times.append(time.perf_counter() - start)
    return {"first": times[0], "second": times[1]}


def curve(trainer: Trainer, steps: int = _data.CURVE_STEPS, rows: int = 0) -> dict[str, Any]:
    """Train ``steps`` steps on batches of ``BATCH``; report the minibatch loss after the steps
    in ``CURVE_AT`` (and the last) and the loss and accuracy on the data set at the end (its
    first ``rows`` rows when ``rows`` > 0, for quick runs)."""
    batches = [trainer.convert(x, y) for x, y in _data.minibatches(_data.BATCH)]
    losses: dict[str, float] = {}
    start = time.perf_counter()
    for s in range(1, steps + 1):
        out = trainer.step(batches[(s - 1) % len(batches)])
        if s in _data.CURVE_AT or s == steps:
            losses[str(s)] = trainer.loss(out)
    seconds = time.perf_counter() - start
    x, y = _data.digits()
    if rows > 0:
        x, y = x[:rows], y[:rows]
    loss, acc = trainer.evaluate(trainer.convert(x, y))
    return {"losses": losses, "final_loss": loss, "accuracy": acc, "seconds": seconds}


def seed_growth(
    new: Callable[[], Any],
    iterations: int,
    *,
    every: Callable[[], Any] | None = None,
    period: int = 0,
    count: Callable[[], int] | None = None,
) -> dict[str, Any]:
    """Memory growth (RSS) and time of a seed loop: ``new()`` and drop, ``iterations`` times.

    Args:
        new: makes one (2, 2) tensor that requires grad.
        iterations: loop length after a warm-up of ``iterations // 20`` (at least 100).
        every: called every ``period`` iterations (periodic cleanup), if given.
        period: see ``every``.
        count: the system's count of graph nodes left (reported as ``nodes_at_end``).
    """

    def loop(k: int) -> None:
        if every is None:
            for _ in range(k):
                new()
            return
        for i in range(k):
            new()
            if i % period == period - 1:
                every()

    loop(max(100, iterations // 20))
    settle()
    rss0 = rss_bytes()
    start = time.perf_counter()
    loop(iterations)
    seconds = time.perf_counter() - start
    settle()
    rss1 = rss_bytes()
    return {
        "iterations": iterations,
        "rss_growth": rss1 - rss0,
        "seconds_per_iteration": seconds / iterations,
        "nodes_at_end": None if count is None else count(),
    }


def tensor_memory(
    new: Callable[[], Any], n: int, *, keep: bool, reset: Callable[[], Any] = nothing
) -> dict[str, Any]:
    """Bytes per tracked (2, 2) tensor: RSS and ``tracemalloc``, ``n`` tensors.

    Args:
        new: makes one (2, 2) tensor that requires grad.
        n: how many.
        keep: ``True``: keep them alive in a list (cost of a live tracked tensor);
            ``False``: drop each at once (cost of a hanging leaf, if any remains).
        reset: frees what a previous pass left (e.g. ``graph_cleanup``), untimed.
    """

    def make(k: int) -> list[Any]:
        held: list[Any] = []
        for _ in range(k):
            t = new()
            if keep:
                held.append(t)
        del t
        return held

    # Warm-up on a few tensors only (compile, caches): a full-size warm-up would leave freed
    # pools behind that the measured pass reuses without growing the RSS.
    held = make(min(n, 200))
    del held
    reset()
    settle()
    rss0 = rss_bytes()
    held = make(n)
    settle()
    rss1 = rss_bytes()
    del held
    reset()
    settle()
    with tracing():
        t0 = traced_bytes()
        held = make(n)
        settle()
        t1 = traced_bytes()
        del held
        reset()
    return {"n": n, "rss_per": (rss1 - rss0) / n, "traced_per": (t1 - t0) / n}


PEER_WORKLOADS = (
    "perop",
    "mlp",
    "chain",
    "seed",
    "seed_growth",
    "live_memory",
    "hanging_memory",
    "curve",
)
"""Every workload a peer with one variant per workload can run."""


def one_variant(
    name: str, workloads: tuple[str, ...] = PEER_WORKLOADS
) -> dict[str, tuple[str, ...]]:
    """``VARIANTS`` for a peer that runs each of ``workloads`` one way, shown as ``name``."""
    return {workload: (name,) for workload in workloads}


def leaf_probe(
    system: str, trainer: Callable[[], Trainer], new_leaf: Callable[[], Any]
) -> Callable[..., dict[str, Any]]:
    """``probe`` for a peer whose one-shot measurements need only a trainer and a way to
    make one leaf that requires grad: the curve, seed growth and memory per tensor."""

    def probe(workload: str, variant: str, **kw: Any) -> dict[str, Any]:
        """The one-shot measurement ``workload``."""
        if workload == "curve":
            return curve(trainer(), kw.get("steps", _data.CURVE_STEPS), kw.get("rows", 0))
        if workload == "seed_growth":
            return seed_growth(new_leaf, kw["iterations"])
        if workload == "live_memory":
            return tensor_memory(new_leaf, kw["n"], keep=True)
        if workload == "hanging_memory":
            return tensor_memory(new_leaf, kw["n"], keep=False, reset=nothing)
        raise ValueError(f"{system} has no probe {workload!r} / {variant!r}")

    return probe
