"""Issue 10's targets: every graph operation costs what it touches, not the size of the tape.

``python -m bench.touched [--quick] [--repeats N] [--json PATH]``

- A sweep freeing 1,000 hanging op nodes (``a * 1.0001``, dropped), next to 100,000 live op
  nodes (outputs kept), against the same sweep on a tape with nothing else: target <= 3x.
  (Freeing the saved arrays is the floor both pay.)
- Dropping a 10-node graph under the ``"auto"`` policy (each node freed the moment it
  hangs), next to 100,000 live op nodes, against the same drop with none: target <= 2x.

Both are timed around the freeing only (building and the live nodes are untimed), alternately
with and without the live nodes, in one process. Both run under an explicit policy.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from bench._timing import Report, Stat, Target, fmt_time, parse_args, settle

__all__ = ["main"]

FREED = 1000
"""Hanging op nodes one timed sweep frees."""
GRAPH = 10
"""Nodes of the graph one timed drop frees under "auto"."""


def _sweep_seconds(tg: Any, a: Any) -> float:
    """Make ``FREED`` hanging op nodes on the live leaf ``a``; return the seconds of the sweep."""
    for _ in range(FREED):
        a * 1.0001  # noqa: B018 - a hanging op node, on purpose
    settle()
    start = time.perf_counter()
    stats = tg.graph_cleanup()
    seconds = time.perf_counter() - start
    if stats.nodes_removed != FREED:
        raise RuntimeError(f"the sweep removed {stats.nodes_removed} nodes, not {FREED}")
    return seconds


def _drop_seconds(tg: Any, arr: Any, rounds: int) -> float:
    """Under "auto": build a ``GRAPH``-node graph, then time dropping it (the drop enqueues, the
    next entry point frees); median seconds over ``rounds``."""
    times = []
    for _ in range(rounds):
        y = tg.tensor(arr).require_grad()
        for _ in range(GRAPH - 1):
            y = y * 1.0001
        before = tg.graph_stats().nodes if not times else None
        start = time.perf_counter()
        del y
        tg.graph_cleanup()  # an entry point: applies the queued death, frees the graph
        times.append(time.perf_counter() - start)
        if before is not None and tg.graph_stats().nodes != before - GRAPH:
            raise RuntimeError("the drop did not free the graph at once")
    return Stat.of(times).median


def main(argv: Sequence[str] | None = None) -> Report:
    """Run the benchmark, print its table and targets, and return the report."""
    args = parse_args(__doc__, argv, default=7)
    quick: bool = args.quick

    import jax
    import jax.numpy as jnp

    import tapegrad as tg

    report = Report("bench.touched (issue 10)", quick, args.repeats)
    report.meta["jax"] = jax.__version__
    report.meta["tapegrad"] = tg.__version__
    n_live = 2000 if quick else 100_000
    rounds = 5 if quick else 50
    arr = jnp.zeros((2, 2), jnp.float32)
    live: list[Any] = []

    def with_live() -> None:
        x = tg.tensor(arr).require_grad()
        live.extend(x * 2.0 for _ in range(n_live))  # live op nodes: outputs kept

    results: dict[str, list[float]] = {k: [] for k in ("sweep0", "sweepN", "drop0", "dropN")}
    try:
        tg.set_cleanup_policy("manual")
        tg.graph_cleanup()
        leaf = tg.tensor(arr).require_grad()
        _sweep_seconds(tg, leaf)  # warm up (compiles)
        for _ in range(args.repeats):
            results["sweep0"].append(_sweep_seconds(tg, leaf))
            with_live()
            results["sweepN"].append(_sweep_seconds(tg, leaf))
            live.clear()
            tg.graph_cleanup()
        del leaf
        tg.set_cleanup_policy("auto")
        _drop_seconds(tg, arr, 2)
        for _ in range(args.repeats):
            results["drop0"].append(_drop_seconds(tg, arr, rounds))
            with_live()
            results["dropN"].append(_drop_seconds(tg, arr, rounds))
            live.clear()
            tg.graph_cleanup()
    finally:
        live.clear()
        tg.set_cleanup_policy("manual")
        tg.graph_cleanup()

    stats = {k: Stat.of(v) for k, v in results.items()}
    rows = [
        [name, stats[f"{key}0"].fmt(fmt_time), stats[f"{key}N"].fmt(fmt_time)]
        for key, name in (
            ("sweep", f"sweep freeing {FREED:,} hanging op nodes"),
            ("drop", f'drop a {GRAPH}-node graph under "auto"'),
        )
    ]
    report.add(
        "Freeing next to live nodes: time per call",
        ["case", "tape otherwise empty", f"next to {n_live:,} live op nodes"],
        rows,
        note="Median over repeats (each drop figure a median of its rounds). Freeing the "
        "saved arrays themselves (JAX) is the floor both columns pay.",
        data=results,
    )
    for key, name, limit in (
        ("sweep", f"issue 10: sweep freeing {FREED:,} nodes, {n_live:,} live / none", 3.0),
        ("drop", f'issue 10: drop a {GRAPH}-node graph under "auto", {n_live:,} live / none', 2.0),
    ):
        ratio = stats[f"{key}N"].median / stats[f"{key}0"].median
        report.target(Target(name, ratio, limit, "max"))
    report.finish(args.json)
    return report


if __name__ == "__main__":
    main()
