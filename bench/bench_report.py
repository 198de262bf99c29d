"""Issue 4's speed target: a leak report over 100,000 tracked nodes in <= 0.5 s.

``python -m bench.bench_report [--quick] [--repeats N] [--json PATH]``

The tape holds a mix of every class (100,000 nodes; 10,000 with ``--quick``): live leaves
(parameters), hanging leaves (the seed mistake), hanging op nodes on a live parameter, a
loss total kept as a tensor (kept-alive: add nodes over consumed loss markers) and a long
live op chain. Timed, alternately:

- ``diagnostics.leak_report()``: what a user calls (``tg.snapshot()`` + classification);
- ``tg.snapshot()`` alone (the engine's part);
- ``build_report(snapshot)`` alone (the diagnostics part, on a snapshot taken once).

Targets: ``leak_report()`` <= 0.5 s (the issue's figure), and ``build_report`` <= 0.5 s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench._timing import (
    Report,
    Stat,
    Target,
    alternate,
    fmt_time,
    parse_args,
    time_batch,
)

LIMIT = 0.5


def build_tape(total: int) -> dict[str, Any]:
    """Record about ``total`` nodes of every class; return the tensors that keep them."""
    import tapegrad as tg

    share = total // 100
    params = [tg.ones(()).require_grad() for _ in range(20 * share)]  # live leaves
    for _ in range(30 * share):
        tg.ones(()).require_grad()  # hanging leaves (the seed mistake)
    w = params[0]
    for _ in range(30 * share):
        w * 2.0  # noqa: B018 - hanging op nodes on a live parameter, on purpose
    running: Any = 0.0
    for _ in range(2 * share):
        loss = (w * w).sum()
        loss.backward()
        running = running + loss  # kept-alive: a sum marker and an add per step
    chain = w
    for _ in range(total - 84 * share):
        chain = chain + 1.0  # a live chain: every node useful
    return {"params": params, "running": running, "chain": chain, "loss": loss}


def main(argv: Sequence[str] | None = None) -> Report:
    """Run the report benchmark, print its table and targets, and return the report."""
    args = parse_args(__doc__, argv, default=5)
    import jax

    import diagnostics
    import tapegrad as tg
    from diagnostics.report import build_report

    total = 10_000 if args.quick else 100_000
    tg.set_cleanup_policy("manual")  # the report reads a tape of `total` nodes: no sweep
    keep = build_tape(total)
    snap = tg.snapshot()
    report = diagnostics.leak_report()
    assert report.total_nodes >= total, report.total_nodes
    assert report.kept_alive_graphs == 1 and report.hanging_nodes > 0

    cases: dict[str, Callable[[], Any]] = {
        "leak_report()": diagnostics.leak_report,
        "tg.snapshot()": tg.snapshot,
        "build_report(snapshot)": lambda snap=snap: build_report(snap),
    }
    batches = {
        name: (lambda step=step: time_batch(step, 1, lambda _: None))
        for name, step in cases.items()
    }
    times = alternate(batches, args.repeats)

    out = Report("bench.bench_report (issue 4)", args.quick, args.repeats)
    out.meta["jax"] = jax.__version__
    out.meta["nodes"] = report.total_nodes
    out.add(
        f"A leak report over {report.total_nodes:,} tracked nodes",
        ["step", "seconds", "per node"],
        [
            [name, Stat.of(ts).fmt(fmt_time), fmt_time(Stat.of(ts).median / report.total_nodes)]
            for name, ts in times.items()
        ],
        note=(
            f"tape: {report.hanging_nodes:,} hanging nodes ({report.hanging_leaves:,} leaves), "
            f"{report.kept_alive_graphs} kept-alive graph, {report.live_graphs:,} live graphs, "
            f"{report.graphs:,} graphs."
        ),
        data={name: Stat.of(ts).as_dict() for name, ts in times.items()},
    )
    for name, why in (
        ("leak_report()", "leak_report() over 100,000 nodes"),
        ("build_report(snapshot)", "classification alone (diagnostics' share)"),
    ):
        stat = Stat.of(times[name])
        out.target(
            Target(
                why,
                stat.median,
                LIMIT,
                "max",
                fmt_time,
                f"({fmt_time(stat.lo)}-{fmt_time(stat.hi)})",
            )
        )
    out.finish(args.json)
    del keep, snap
    tg.graph_cleanup()
    return out


if __name__ == "__main__":
    main()
