"""Issue 3's speed and memory targets: the seed loop, graph_cleanup() and graph memory.

``python -m bench.tape [--quick] [--repeats N] [--json PATH]``

- Seed loop iteration (``tg.zeros((2, 2)).require_grad()``, drop) against a raw
  ``jnp.zeros((2, 2))`` loop iteration, under the ``"manual"`` and ``"auto"`` policies:
  target <= 1.1x. (For reference only: the untracked ``tg.zeros`` and a compiled raw
  constructor, to show the tracking overhead itself.)
- ``graph_cleanup()`` on 300,000 hanging leaves: target >= 3 million nodes per second.
- A sweep of a tape holding 100,000 useful nodes and nothing to free: target <= 50 ms
  (100,000 live leaves; and a 100,000-op chain kept useful by its last tensor).
- Python-side memory per hanging leaf (``tracemalloc``): target <= 400 bytes.
- ``"auto"`` policy: memory growth over 200,000 seed-loop iterations, RSS and ``tracemalloc``:
  target <= 1 MB (10**6 bytes) each.

The memory figures come from fresh child processes (``python -m bench.tape --child ...``;
in-process with ``--quick``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from bench._timing import (
    Report,
    Stat,
    Target,
    Timing,
    alternate_timings,
    calibrate,
    emit_child,
    finish_args,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    make_parser,
    measure,
    ratio,
    rss_bytes,
    run_child,
    settle,
    timing_row,
    timing_target,
    traced_bytes,
    tracing,
    walls,
)

__all__ = ["main", "child"]

MB = 1_000_000


def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:.3g} M/s"


def _fmt_int(x: float) -> str:
    return f"{x:,.0f}"


# ----------------------------------------------------------------------------- children


def child(name: str, n: int) -> dict[str, Any]:
    """One memory measurement in this (fresh) process; see ``main``.

    Args:
        name: ``"leaf-memory"`` (bytes per hanging leaf, manual policy) or ``"auto-growth"``
            (growth over ``n`` seed-loop iterations under the ``"auto"`` policy).
        n: leaves or iterations.

    Returns:
        Figures in bytes, plus the tape's node count at the end.
    """
    import tapegrad as tg

    def seed_loop(k: int) -> None:
        zeros = tg.zeros
        for _ in range(k):
            zeros((2, 2)).require_grad()

    warm = max(200, n // 20)
    if name == "leaf-memory":
        seed_loop(warm)  # compile the constructor, grow the interpreter's pools
        tg.graph_cleanup()
        settle()
        rss0 = rss_bytes()
        seed_loop(n)
        settle()
        rss1 = rss_bytes()
        hanging = tg.graph_stats().hanging_leaves
        tg.graph_cleanup()
        settle()
        with tracing():
            seed_loop(warm)
            tg.graph_cleanup()
            settle()
            before = traced_bytes()
            seed_loop(n)
            settle()
            after = traced_bytes()
            hanging_traced = tg.graph_stats().hanging_leaves
            tg.graph_cleanup()
        return {
            "n": n,
            "hanging_leaves": hanging,
            "hanging_leaves_traced": hanging_traced,
            "rss_per_leaf": (rss1 - rss0) / n,
            "traced_per_leaf": (after - before) / n,
        }
    if name == "auto-growth":
        tg.set_cleanup_policy("auto")
        seed_loop(warm)
        settle()
        rss0 = rss_bytes()
        start = time.perf_counter()
        seed_loop(n)
        seconds = time.perf_counter() - start
        settle()
        rss1 = rss_bytes()
        nodes = tg.graph_stats().nodes
        with tracing():
            seed_loop(warm)
            settle()
            before = traced_bytes()
            seed_loop(n)
            settle()
            after = traced_bytes()
        tg.set_cleanup_policy("manual")
        return {
            "n": n,
            "rss_growth": rss1 - rss0,
            "traced_growth": after - before,
            "nodes_at_end": nodes,
            "seconds_per_iteration": seconds / n,
        }
    raise ValueError(f"unknown child measurement {name!r}")


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> Report:
    """Run the tape benchmark, print its tables and targets, and return the report."""
    p = make_parser(__doc__ or "")
    p.add_argument("--child", default=None, help="internal: one memory measurement")
    p.add_argument("--n", type=int, default=0, help="internal: size for --child")
    args = finish_args(p, argv, default=7)
    if args.child:
        emit_child(child(args.child, args.n))
        raise SystemExit(0)
    quick: bool = args.quick
    repeats: int = args.repeats

    import jax
    import jax.numpy as jnp

    import tapegrad as tg

    report = Report("bench.tape (issue 3)", quick, repeats)
    report.meta["jax"] = jax.__version__
    report.meta["tapegrad"] = tg.__version__
    seconds = 0.002 if quick else 0.1

    # ---------------------------------------------------------------- seed loop
    zeros_c = jax.jit(lambda: jnp.zeros((2, 2), jnp.float32))

    def manual() -> None:
        tg.set_cleanup_policy("manual")
        tg.graph_cleanup()

    def auto() -> None:
        tg.set_cleanup_policy("auto")

    def nothing() -> None:
        return None

    def raw_seed() -> Any:
        return jnp.zeros((2, 2))

    def tg_seed() -> Any:
        tg.zeros((2, 2)).require_grad()
        return None

    cases: dict[str, tuple[Callable[[], Any], Callable[[], None]]] = {
        "raw jnp.zeros((2,2))": (raw_seed, nothing),
        "tapegrad seed, manual policy": (tg_seed, manual),
        "tapegrad seed, auto policy": (tg_seed, auto),
        "(ref) tg.zeros((2,2)), untracked": (lambda: tg.zeros((2, 2)), manual),
        "(ref) raw jax.jit(zeros)()": (zeros_c, nothing),
    }
    batches: dict[str, Callable[[], Timing]] = {}
    try:
        for name, (step, before) in cases.items():
            before()
            number = calibrate(step, seconds)

            def run(
                step: Callable[[], Any] = step,
                before: Callable[[], None] = before,
                number: int = number,
            ) -> Timing:
                before()
                return measure(step, number)

            batches[name] = run
        times = alternate_timings(batches, repeats)
    finally:
        tg.set_cleanup_policy("manual")
        tg.graph_cleanup()
    base = times["raw jnp.zeros((2,2))"]
    untracked = times["(ref) tg.zeros((2,2)), untracked"]
    rows = [
        [*timing_row(name, ts, base), ratio(walls(ts), walls(untracked)).fmt(fmt_ratio)]
        for name, ts in times.items()
    ]
    report.add(
        "Seed loop: create a (2,2) tensor, require grad, drop; per iteration",
        [
            "case",
            "time per iteration (wall)",
            "ratio to raw jnp.zeros (wall)",
            "ratio (CPU time)",
            "ratio to untracked tg.zeros (wall)",
        ],
        rows,
        note="Manual policy: the hanging leaves are swept by an untimed cleanup before each "
        "batch. jnp.zeros dispatches op by op (slow); tg.zeros uses a compiled constructor, "
        "so the last column is the tracking overhead itself.",
        data={k: [t._asdict() for t in v] for k, v in times.items()},
    )
    for pol in ("manual", "auto"):
        report.target(
            timing_target(
                f"issue 3: seed loop ({pol}) / raw jnp.zeros loop",
                times[f"tapegrad seed, {pol} policy"],
                base,
                1.1,
            )
        )

    # ---------------------------------------------------------------- cleanup throughput
    n_hang = 3000 if quick else 300_000
    arr = jnp.zeros((2, 2), jnp.float32)
    rates, secs, removed = [], [], []
    for _ in range(repeats):
        for _ in range(n_hang):
            tg.tensor(arr).require_grad()
        settle()
        start = time.perf_counter()
        st = tg.graph_cleanup()
        elapsed = time.perf_counter() - start
        rates.append(st.nodes_removed / elapsed)
        secs.append(elapsed)
        removed.append(st.nodes_removed)
    rate = Stat.of(rates)
    # (diag) hanging op nodes with residuals: the sweep also counts the bytes it frees
    n_ops = 1000 if quick else 100_000
    ta, tb = tg.tensor(arr).require_grad(), tg.tensor(arr + 1).require_grad()
    op_rates = []
    for _ in range(repeats):
        for _ in range(n_ops):
            ta * tb
        settle()
        start = time.perf_counter()
        st = tg.graph_cleanup()
        op_rates.append(st.nodes_removed / (time.perf_counter() - start))
    del ta, tb
    tg.graph_cleanup()
    op_rate = Stat.of(op_rates)
    report.add(
        f"graph_cleanup() of {n_hang:,} hanging leaves",
        ["figure", "value"],
        [
            ["nodes removed per call", ", ".join(f"{r:,}" for r in sorted(set(removed)))],
            ["time per call", Stat.of(secs).fmt(fmt_time)],
            ["hanging nodes per second", rate.fmt(_fmt_rate)],
            [
                f"(diag) {n_ops:,} hanging op nodes (a * b, two saved arrays each): nodes per "
                "second",
                op_rate.fmt(_fmt_rate),
            ],
        ],
        data={"seconds": secs, "rates": rates, "removed": removed, "op_rates": op_rates},
    )
    report.target(
        Target(
            f"issue 3: graph_cleanup() rate on {n_hang:,} hanging leaves",
            rate.median,
            3e6,
            "min",
            _fmt_rate,
            "" if rate.n == 1 else f"({_fmt_rate(rate.lo)}-{_fmt_rate(rate.hi)})",
        )
    )

    # ---------------------------------------------------------------- no-op sweep
    n_useful = 1000 if quick else 100_000
    sweeps: dict[str, list[float]] = {}
    live = [tg.tensor(arr).require_grad() for _ in range(n_useful)]
    sweeps[f"{n_useful:,} live leaves"] = _time_sweeps(tg, repeats)
    del live
    tg.graph_cleanup()
    y = tg.tensor(arr).require_grad()
    for _ in range(n_useful - 1):
        y = y * 1.0001
    sweeps[f"{n_useful:,}-node chain kept by its end"] = _time_sweeps(tg, repeats)
    del y
    tg.graph_cleanup()
    rows = []
    for name, ts in sweeps.items():
        sweep = Stat.of(ts)
        rows.append([name, sweep.fmt(fmt_time)])
        report.target(
            Target(
                f"issue 3: sweep with nothing to free, {name}",
                sweep.median,
                0.050,
                "max",
                fmt_time,
                "" if sweep.n == 1 else f"({fmt_time(sweep.lo)}-{fmt_time(sweep.hi)})",
            )
        )
    report.add(
        "graph_cleanup() of a tape holding only useful nodes",
        ["tape", "time per call"],
        rows,
        data=sweeps,
    )

    # ---------------------------------------------------------------- memory (children)
    n_leaves = 500 if quick else 100_000
    n_auto = 500 if quick else 200_000
    if quick:  # the same code in this process: a smoke run, not a measurement
        leaf, growth = child("leaf-memory", n_leaves), child("auto-growth", n_auto)
    else:
        leaf = run_child("bench.tape", ["--child", "leaf-memory", "--n", str(n_leaves)])
        growth = run_child("bench.tape", ["--child", "auto-growth", "--n", str(n_auto)])
    report.add(
        "Graph memory (fresh processes)",
        ["figure", "value"],
        [
            [
                f"tracemalloc per hanging leaf ({n_leaves:,} leaves)",
                fmt_bytes(leaf["traced_per_leaf"]),
            ],
            [f"RSS per hanging leaf ({n_leaves:,} leaves)", fmt_bytes(leaf["rss_per_leaf"])],
            ["hanging leaves counted by graph_stats()", _fmt_int(leaf["hanging_leaves"])],
            [
                f"auto policy: RSS growth over {n_auto:,} seed iterations",
                fmt_bytes(growth["rss_growth"]),
            ],
            [
                f"auto policy: tracemalloc growth over {n_auto:,} seed iterations",
                fmt_bytes(growth["traced_growth"]),
            ],
            ["auto policy: nodes on the tape at the end", _fmt_int(growth["nodes_at_end"])],
            [
                "auto policy: time per seed iteration (untraced)",
                fmt_time(growth["seconds_per_iteration"]),
            ],
        ],
        note="After a warm-up; gc.collect() before each reading. tracemalloc sees Python "
        "allocations only; RSS also counts JAX's buffers and the allocator's slack.",
        data={"leaf": leaf, "auto": growth},
    )
    report.target(
        Target(
            "issue 3: Python-side bytes per hanging leaf (tracemalloc)",
            leaf["traced_per_leaf"],
            400,
            "max",
            fmt_bytes,
        )
    )
    report.target(
        Target(
            f"issue 3: auto policy RSS growth over {n_auto:,} seed iterations",
            growth["rss_growth"],
            MB,
            "max",
            fmt_bytes,
        )
    )
    report.target(
        Target(
            f"issue 3: auto policy tracemalloc growth over {n_auto:,} seed iterations",
            growth["traced_growth"],
            MB,
            "max",
            fmt_bytes,
        )
    )
    report.finish(args.json)
    return report


def _time_sweeps(tg: Any, repeats: int) -> list[float]:
    """Seconds of ``repeats`` calls of ``graph_cleanup()``, each checked to free nothing.

    Raises:
        RuntimeError: a sweep removed a node (the tape was not made of useful nodes only).
    """
    out = []
    tg.graph_cleanup()
    for _ in range(repeats):
        start = time.perf_counter()
        st = tg.graph_cleanup()
        out.append(time.perf_counter() - start)
        if st.nodes_removed:
            raise RuntimeError(f"a sweep of useful nodes removed {st.nodes_removed} nodes")
    return out


if __name__ == "__main__":
    main()
