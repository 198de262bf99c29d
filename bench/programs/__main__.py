"""Issue 17: ``python -m bench.programs [--quick] [--repeats N] [--json PATH] [--only a,b]
[--torch-from JSON]``.

For every program of ``bench.programs.PROGRAMS``, each in fresh processes with one compute
thread per system (``bench.peers.thread_env``; torch also ``set_num_threads(1)``):

1. torch float64: its losses only (the learning rate is one where float32 and float64 agree);
2. torch float32: first run (cold) and its losses; the process then waits;
3. tapegrad, first-ever run: an empty persistent compilation cache (a new temporary folder);
4. tapegrad, primed: the same folder again (the machine has run the program before): first run
   and losses;
5. warm: the processes of 2 and 4 each run 3 s of untimed steps (steady state), then take
   turns, one batch of about ``--warm`` seconds each, ``--repeats`` times.

No two first runs overlap. Agreement: tapegrad's losses against torch float32's, and torch
float32's against float64's, each within ``RTOL`` at every step. Warm: seconds per step,
median of the repeats (wall; CPU time beside it); the warm ratio is the median over the
repeats of tapegrad's batch over torch's batch just before it: batches seconds apart, so a
shared machine whose speed drifts over minutes (seen here: 2x) moves both alike. Cold: the
first run's seconds (build the model and optimizer, ``STEPS`` steps, losses read back) and how
much longer tapegrad's took than torch's; import times are shown apart.

``--torch-from`` reuses torch's figures (1 and 2, warm included) from an earlier ``--json``
output, to re-time tapegrad alone after a change; its ratio is then of the two medians,
measured at different moments of a shared machine: compare CPU-time ratios with care.

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
from bench.peers import Worker, thread_env
from bench.programs import PROGRAMS

RTOL = 1e-4
WARM_LIMIT = 4.0
WARM_MEDIAN_LIMIT = 2.5
COLD_PRIMED_LIMIT = 0.5
COLD_FIRST_LIMIT = 1.5
CHILD = "bench.programs._child"
SETTLE = 3.0
"""Untimed seconds of steps before the warm batches (steady state)."""


def _child(program: str, system: str, *extra: str) -> dict[str, Any]:
    return run_child(CHILD, [program, system, *extra])


def _agreement(a: Sequence[float], b: Sequence[float]) -> float:
    """The largest relative difference between two loss sequences, step by step."""
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b, strict=True))


def _ask(worker: Worker, **request: Any) -> dict[str, Any]:
    reply = worker.ask(**request)
    if "error" in reply:
        raise RuntimeError(f"{worker.system} child: {reply['error']}")
    return reply


def measure_program(
    name: str, warm_s: float, repeats: int, quick: bool, torch_from: dict[str, Any]
) -> dict[str, Any]:
    """Run ``name`` in its four processes (two when ``torch_from`` has its torch figures);
    return the raw figures.

    The first runs never overlap (each process starts when the one before has finished its
    first run or exited); the two warm processes then take turns, one batch each, so that
    every pair of batches is measured seconds apart on a machine whose speed drifts."""
    steps = ["--steps", "2"] if quick else []
    settle = 0.0 if quick else SETTLE
    workers: list[tuple[Worker, dict[str, Any]]] = []
    try:
        if name in torch_from:
            torch64 = torch_from[name]["torch64"]
            torch32 = {**torch_from[name]["torch"], "interleaved": False}  # another moment
        else:
            torch64 = _child(name, "torch", "--dtype", "float64", *steps)
            torch_worker = Worker("torch", 1, [CHILD, name, "torch", "--serve", *steps])
            torch32 = _ask(torch_worker, op="cold")
            workers.append((torch_worker, torch32))
        with tempfile.TemporaryDirectory(prefix="tapegrad-cache-") as cache:
            first = _child(name, "tapegrad", "--cache-dir", cache, *steps)
            command = [CHILD, name, "tapegrad", "--cache-dir", cache, "--serve", *steps]
            tg_worker = Worker("tapegrad", 1, command)
            primed = _ask(tg_worker, op="cold")
            workers.append((tg_worker, primed))
            for worker, result in workers:
                _ask(worker, op="settle", seconds=settle)
                result["number"] = _ask(worker, op="calibrate", seconds=warm_s)["number"]
                result["warm"] = []
                result["interleaved"] = len(workers) == 2
            for _ in range(repeats):
                for worker, result in workers:
                    batch = _ask(worker, op="batch", number=result["number"])
                    result["warm"].append(batch["timing"])
            primed["backward_structures"] = _ask(tg_worker, op="structures")["structures"]
    finally:
        for worker, _ in workers:
            worker.close()
    return {"torch": torch32, "torch64": torch64, "tapegrad_first": first, "tapegrad": primed}


def _warm(result: dict[str, Any], column: int) -> float:
    return statistics.median(w[column] for w in result["warm"])


def _ratio(tapegrad: dict[str, Any], torch: dict[str, Any], column: int) -> float:
    """The warm ratio: the median of the interleaved pairs' ratios (module docstring); of the
    two medians for torch figures taken from an earlier run (``--torch-from``)."""
    if torch.get("interleaved") and len(tapegrad["warm"]) == len(torch["warm"]):
        pairs = zip(tapegrad["warm"], torch["warm"], strict=True)
        return float(statistics.median(g[column] / t[column] for g, t in pairs))
    return _warm(tapegrad, column) / _warm(torch, column)


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
        wall, cpu = _ratio(g, t, 0), _ratio(g, t, 1)
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
