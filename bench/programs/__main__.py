"""Issue 17: ``python -m bench.programs [--quick] [--repeats N] [--json PATH] [--only a,b]
[--torch-from JSON]``.

For every program of ``bench.programs.PROGRAMS``, each in fresh processes with one compute
thread per system (``bench.peers.thread_env``; torch also ``set_num_threads(1)``):

1. torch float32: first run (cold), its losses, then warm batches;
2. torch float64: its losses only (the learning rate is one where float32 and float64 agree);
3. tapegrad, first-ever run: an empty persistent compilation cache (a new temporary folder);
4. tapegrad, primed: the same folder again (the machine has run the program before): first run,
   losses, then warm batches.

Agreement: tapegrad's losses against torch float32's, and torch float32's against float64's,
each within ``RTOL`` at every step. Warm: seconds per step (after 3 s of untimed steps:
steady state), median of the repeats (wall; CPU
time beside it); the warm ratio is tapegrad's median over torch's (the two are measured one
after the other, not interleaved: read the CPU-time ratio on a busy machine). Cold: the first
run's seconds (build the model and optimizer, ``STEPS`` steps, losses read back) and how much
longer tapegrad's took than torch's; import times are shown apart.

``--torch-from`` reuses torch's figures (steps 1 and 2) from an earlier ``--json`` output, to
re-time tapegrad alone after a change (torch's side did not change; its warm figures then come
from another moment of a shared machine, so compare CPU-time ratios with care).

Targets (issue 17): every warm ratio <= 4x, their median <= 2.5x; cold, primed: <= 0.5 s beyond
torch's first run; first-ever: <= 1.5 s beyond.
"""

from __future__ import annotations

import importlib
import json
import os
import statistics
import tempfile
from collections.abc import Sequence
from typing import Any

from bench._timing import (
    Stat,
    Target,
    finish_args,
    fmt_ratio,
    fmt_time,
    make_parser,
    ratio_target,
    run_child,
)
from bench.peers import thread_env
from bench.programs import PROGRAMS

RTOL = 1e-4
WARM_LIMIT = 4.0
WARM_MEDIAN_LIMIT = 2.5
COLD_PRIMED_LIMIT = 0.5
COLD_FIRST_LIMIT = 1.5
CHILD = "bench.programs._child"


def _child(program: str, system: str, *extra: str) -> dict[str, Any]:
    return run_child(CHILD, [program, system, *extra])


def _agreement(a: Sequence[float], b: Sequence[float]) -> float:
    """The largest relative difference between two loss sequences, step by step."""
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b, strict=True))


def measure_program(
    name: str, warm_s: float, repeats: int, quick: bool, torch_from: dict[str, Any]
) -> dict[str, Any]:
    """Run ``name`` in its four processes (two when ``torch_from`` has its torch figures);
    return the raw figures."""
    warm = ["--warm", str(warm_s), "--repeats", str(repeats)]
    steps = ["--steps", "2", "--settle", "0"] if quick else []
    if name in torch_from:
        torch32, torch64 = torch_from[name]["torch"], torch_from[name]["torch64"]
    else:
        torch32 = _child(name, "torch", *warm, *steps)
        torch64 = _child(name, "torch", "--dtype", "float64", *steps)
    with tempfile.TemporaryDirectory(prefix="tapegrad-cache-") as cache:
        first = _child(name, "tapegrad", "--cache-dir", cache, *steps)
        primed = _child(name, "tapegrad", "--cache-dir", cache, *warm, *steps)
    return {"torch": torch32, "torch64": torch64, "tapegrad_first": first, "tapegrad": primed}


def _warm(result: dict[str, Any], column: int) -> float:
    return statistics.median(w[column] for w in result["warm"])


def main(argv: Sequence[str] | None = None) -> None:
    """Measure every program (or ``--only``) and print the table and targets."""
    p = make_parser(__doc__ or "")
    p.add_argument("--only", default="", help="comma-separated program names")
    p.add_argument("--warm", type=float, default=0.3, help="seconds per warm batch")
    p.add_argument(
        "--torch-from",
        metavar="JSON",
        default=None,
        help="take torch's figures from an earlier run's --json output (re-time tapegrad only)",
    )
    args = finish_args(p, argv, default=7)
    names = [n for n in args.only.split(",") if n] or list(PROGRAMS)
    unknown = set(names) - set(PROGRAMS)
    if unknown:
        p.error(f"unknown programs {sorted(unknown)}; choose from {', '.join(PROGRAMS)}")
    os.environ.update(thread_env(1))
    torch_from: dict[str, Any] = {}
    if args.torch_from:
        with open(args.torch_from) as f:
            torch_from = json.load(f)["sections"][0]["data"]
    from bench._timing import Report

    report = Report("Issue 17: public programs, tapegrad against torch", args.quick, args.repeats)
    rows, data, ratios = [], {}, []
    cold_primed, cold_first = [], []
    for name in names:
        warm_s = 0.05 if args.quick else args.warm
        r = measure_program(name, warm_s, args.repeats, args.quick, torch_from)
        data[name] = r
        t, g, g0 = r["torch"], r["tapegrad"], r["tapegrad_first"]
        agree = _agreement(g["losses"], t["losses"])
        lr_ok = _agreement(t["losses"], r["torch64"]["losses"])
        wall = _warm(g, 0) / _warm(t, 0)
        cpu = _warm(g, 1) / _warm(t, 1)
        ratios.append(wall)
        extra_primed = g["cold_s"] - t["cold_s"]
        extra_first = g0["cold_s"] - t["cold_s"]
        cold_primed.append((name, extra_primed))
        cold_first.append((name, extra_first))
        module = importlib.import_module(f"bench.programs.{name}")
        rows.append(
            [
                name,
                module.SOURCE,
                f"{agree:.1e}" + ("" if agree <= RTOL else " MISS"),
                f"{lr_ok:.1e}" + ("" if lr_ok <= RTOL else " MISS"),
                fmt_time(_warm(t, 0)),
                fmt_time(_warm(g, 0)),
                f"{fmt_ratio(wall)} (CPU {fmt_ratio(cpu)})",
                fmt_time(t["cold_s"]),
                f"{fmt_time(g['cold_s'])} (+{extra_primed:.2f} s)",
                f"{fmt_time(g0['cold_s'])} (+{extra_first:.2f} s)",
                f"{t['import_s']:.2f} s / {g['import_s']:.2f} s",
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    report.add(
        "Programs: warm per step and cold first run, tapegrad against torch (1 thread)",
        [
            "program",
            "re-expresses",
            "losses vs torch f32 (max rel)",
            "torch f32 vs f64",
            "warm torch",
            "warm tapegrad",
            "warm ratio",
            "cold torch",
            "cold tapegrad, primed cache",
            "cold tapegrad, empty cache",
            "import torch / tapegrad",
        ],
        rows,
        note=f"Losses must agree within rtol {RTOL:g} at every step of the first run.",
        data=data,
    )
    for name, wall in zip(names, ratios, strict=True):
        report.target(ratio_target(f"issue 17: {name}, warm / torch", Stat.of([wall]), WARM_LIMIT))
    report.target(
        ratio_target(
            "issue 17: median warm ratio over the programs",
            Stat.of(ratios),
            WARM_MEDIAN_LIMIT,
        )
    )
    worst_primed = max(cold_primed, key=lambda x: x[1])
    worst_first = max(cold_first, key=lambda x: x[1])
    report.target(
        Target(
            f"issue 17: cold first run, primed cache, beyond torch's (worst: {worst_primed[0]})",
            worst_primed[1],
            COLD_PRIMED_LIMIT,
            "max",
            lambda s: f"{s:.2f} s",
        )
    )
    report.target(
        Target(
            f"issue 17: cold first run, empty caches, beyond torch's (worst: {worst_first[0]})",
            worst_first[1],
            COLD_FIRST_LIMIT,
            "max",
            lambda s: f"{s:.2f} s",
        )
    )
    report.finish(args.json)


if __name__ == "__main__":
    main()
