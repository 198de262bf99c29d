"""Issue 2's speed targets: the cost of a tracked op and of backward, against raw JAX.

``python -m bench.engine [--quick] [--repeats N] [--json PATH]``

- A tracked elementwise op on (2, 2) float32 (both inputs require grad) against the same
  ``jnp`` op on the raw arrays: target <= 1.25x (issue 10 item 5; issue 2 had 1.4x).
- Backward through a chain ``y = y * 1.0001`` of 1,000 ops, per node, against the raw ``jnp``
  multiply ``y = y * 1.0001`` per op: target <= 1.4x (issue 10 item 5; issue 2 had 2.5x). The
  eager pass (one VJP dispatch per node) is the target's row; the same pass once its structure
  is compiled (``tapegrad.compiled_backward``, what a training loop reaches once its eager
  passes of one structure took its estimated compile time, at most 1 s) and the structure
  lookup every pass pays are shown beside it.

Each pair runs alternately in one process. The tracked op's outputs are dropped, so their nodes
hang (the default ``"threshold"`` policy sweeps them every 10,000 nodes, inside the timing, as a
user pays it); an untimed ``graph_cleanup()`` before every batch keeps the tape small. The chain
is built untimed before each timed backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench._timing import (
    Clock,
    Report,
    Timing,
    alternate_timings,
    block,
    calibrate,
    measure,
    parse_args,
    timing_row,
    timing_target,
)

__all__ = ["main"]

CHAIN = 1000
"""Ops in the chain of the backward benchmark."""


HEADERS = ["case", "time per call (wall)", "ratio to raw jnp (wall)", "ratio (CPU time)"]


def _batch(
    step: Callable[[], Any], number: int, before: Callable[[], Any], after: Callable[[], Any]
) -> Callable[[], Timing]:
    def run() -> Timing:
        before()
        try:
            return measure(step, number)
        finally:
            after()

    return run


def main(argv: Sequence[str] | None = None) -> Report:
    """Run the engine benchmark, print its tables and targets, and return the report."""
    args = parse_args(__doc__, argv, default=15)
    quick: bool = args.quick

    import jax
    import jax.numpy as jnp
    import numpy as np

    import tapegrad as tg
    from tapegrad import compiled_backward
    from tapegrad._tensor import node_of

    report = Report("bench.engine (issue 2)", quick, args.repeats)
    report.meta["jax"] = jax.__version__
    report.meta["tapegrad"] = tg.__version__
    seconds = 0.002 if quick else 0.05
    chain = 20 if quick else CHAIN
    chains_per_batch = 1 if quick else 3

    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((2, 2)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((2, 2)), jnp.float32)
    ta, tb = tg.tensor(a).require_grad(), tg.tensor(b).require_grad()
    ua, ub = tg.tensor(a), tg.tensor(b)

    def nothing() -> None:
        return None

    # ---------------------------------------------------------------- elementwise (2, 2) ops
    kept: list[Any] = []

    def keep_step() -> Any:
        kept.append(ta * tb)

    def clear() -> None:
        kept.clear()
        tg.graph_cleanup()

    def auto() -> None:
        tg.set_cleanup_policy("auto")

    def manual() -> None:
        tg.set_cleanup_policy("manual")

    # name -> (step, untimed before each batch, untimed after, the raw op it is compared with)
    steps: dict[str, tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any], str]] = {
        "raw jnp a * b": (lambda: a * b, nothing, nothing, "raw jnp a * b"),
        "tapegrad tracked a * b": (lambda: ta * tb, clear, nothing, "raw jnp a * b"),
        "raw jnp a + b": (lambda: a + b, nothing, nothing, "raw jnp a + b"),
        "tapegrad tracked a + b": (lambda: ta + tb, clear, nothing, "raw jnp a + b"),
        "raw jnp a * 1.0001": (lambda: a * 1.0001, nothing, nothing, "raw jnp a * 1.0001"),
        "tapegrad tracked a * 1.0001": (lambda: ta * 1.0001, clear, nothing, "raw jnp a * 1.0001"),
        "(diag) tracked a * b, outputs kept": (keep_step, clear, clear, "raw jnp a * b"),
        "(diag) tracked a * b, auto policy": (lambda: ta * tb, auto, manual, "raw jnp a * b"),
        "(diag) untracked a * b": (lambda: ua * ub, nothing, nothing, "raw jnp a * b"),
    }
    batches = {}
    for name, (step, before, after, _) in steps.items():
        before()
        number = calibrate(step, seconds)
        after()
        batches[name] = _batch(step, number, before, after)
    times = alternate_timings(batches, args.repeats)
    tg.graph_cleanup()
    rows = [timing_row(name, ts, times[steps[name][3]]) for name, ts in times.items()]
    report.add(
        "Elementwise op on (2, 2) float32, per call",
        HEADERS,
        rows,
        note="Tracked: both inputs require grad, a node is recorded and, when the output is "
        "dropped, hangs (manual policy; an untimed cleanup runs before each batch). (diag) "
        "rows split the cost: outputs kept (no drop handling), auto policy (dropped nodes "
        "freed at once), untracked tensors (no recording). CPU time: this process's, all "
        "threads; unlike wall time it does not count time descheduled on a busy machine.",
        data={k: [t._asdict() for t in v] for k, v in times.items()},
    )
    report.target(
        timing_target(
            "issue 10: tracked (2,2) op / raw jnp op",
            times["tapegrad tracked a * b"],
            times["raw jnp a * b"],
            1.25,
        )
    )

    # ---------------------------------------------------------------- backward through a chain
    leaf = tg.tensor(a).require_grad()
    seed = jnp.ones((2, 2), jnp.float32)

    def build() -> Any:
        y = leaf
        for _ in range(chain):
            y = y * 1.0001
        return y

    def backward_batch(compile_after: float | None = None) -> Timing:
        compiled_backward.set_compile_after(compile_after)
        clock = Clock()
        for _ in range(chains_per_batch):
            y = build()
            block(y)
            clock.start()
            y.backward(seed)
            block(leaf.grad)
            clock.stop()
            leaf.grad = None
            del y
        return clock.per(chains_per_batch * chain)

    def forward_batch() -> Timing:
        clock = Clock()
        for _ in range(chains_per_batch):
            clock.start()
            y = build()
            block(y)
            clock.stop()
            del y
            tg.graph_cleanup()
        return clock.per(chains_per_batch * chain)

    def raw_chain_batch() -> Timing:
        clock = Clock()
        for _ in range(chains_per_batch):
            clock.start()
            y = a
            for _ in range(chain):
                y = y * 1.0001
            block(y)
            clock.stop()
        return clock.per(chains_per_batch * chain)

    def compiled_batch() -> Timing:
        return backward_batch(0.0)  # the structure was compiled in the warm-up

    def lookup_batch() -> Timing:
        compiled_backward.set_compile_after(0.0)
        y = build()
        steps = tg.current_tape().ancestors([node_of(y)], claim=False)
        clock = Clock()
        clock.start()
        for _ in range(chains_per_batch):
            compiled_backward.lookup(steps, [node_of(y)], frozenset())
        clock.stop()
        del steps, y
        return clock.per(chains_per_batch * chain)

    before = compiled_backward.compile_after()
    # warm up (compiles): the eager pass, then the compiled one (eager once, then traced)
    backward_batch(), forward_batch(), raw_chain_batch(), compiled_batch(), compiled_batch()
    chain_times = alternate_timings(
        {
            "raw jnp y * 1.0001": raw_chain_batch,
            "tapegrad backward": backward_batch,
            "tapegrad backward, compiled pass": compiled_batch,
            "(diag) structure lookup per pass": lookup_batch,
            "tapegrad forward (tracked)": forward_batch,
        },
        args.repeats,
    )
    compiled_backward.set_compile_after(before)
    rawc = chain_times["raw jnp y * 1.0001"]
    rows = [timing_row(name, ts, rawc) for name, ts in chain_times.items()]
    report.add(
        f"Chain y = y * 1.0001 of {chain} ops on (2, 2) float32, per node",
        ["case", "time per node (wall)", "ratio to raw jnp multiply (wall)", "ratio (CPU time)"],
        rows,
        note="Backward: y.backward(ones) from the chain's end (built untimed), blocked on the "
        "leaf's gradient; it includes collecting the ancestors and consuming the graph. Eager: "
        "one VJP dispatch per node (compiled backward off). Compiled pass: the chain's "
        "structure compiled (tapegrad.compiled_backward), so the VJPs are one XLA call; the "
        "structure lookup (diag row) is part of it, and is what an eager pass pays before its "
        "structure reaches the threshold.",
        data={k: [t._asdict() for t in v] for k, v in chain_times.items()},
    )
    report.target(
        timing_target(
            f"issue 10: backward per node, {chain}-op chain / raw jnp multiply",
            chain_times["tapegrad backward"],
            rawc,
            1.4,
        )
    )
    leaf.grad = None
    tg.graph_cleanup()
    report.finish(args.json)
    return report


if __name__ == "__main__":
    main()
