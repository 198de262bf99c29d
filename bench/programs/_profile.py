"""Where each program's tapegrad time goes: ``python -m bench.programs._profile [--only a,b]``.

Each program runs twice, each time in a fresh process, with one compilation cache folder: first
empty (the first-ever run), then primed by that run (a machine that ran the program before).
Each process times ``import tapegrad`` (JAX included) and its first run (build and ``STEPS``
steps), and counts JAX's compiles, the seconds spent tracing, lowering and compiling them
(``jax.monitoring`` events; on a cache hit "compile" is the read of the cached executable) and
the persistent cache's hits. The first process then runs 20 warm steps under ``cProfile``, which
counts the ops tapegrad applied and the VJPs it ran per step and names the functions that took
the most time of their own; then it runs ``GC_SECONDS`` of warm steps without the profiler and
times Python's garbage collector in them (``gc.callbacks``): the share of the wall time spent in
collections, and in full (generation 2) ones. One Markdown table is printed.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import os
import pstats
import tempfile
import time
from collections import Counter, defaultdict
from typing import Any

from bench._timing import block, emit_child, markdown_table, run_child
from bench.peers import thread_env
from bench.programs import PROGRAMS

WARM_STEPS = 20
GC_SECONDS = 3.0
"""Seconds of warm steps whose garbage collections are timed (full collections come every few
seconds: 20 steps would often see none)."""
EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
HITS = "/jax/compilation_cache/cache_hits"


def profile_one(name: str, cache: str, warm: bool) -> dict[str, Any]:
    """Profile program ``name`` in this (fresh) process with its compilation cache at
    ``cache``; with ``warm``, also 20 warm steps under ``cProfile``, then ``GC_SECONDS`` of
    warm steps with Python's garbage collections timed (``_collections``)."""
    t0 = time.perf_counter()
    import jax

    t1 = time.perf_counter()
    import tapegrad as tg

    imports = {"jax": t1 - t0, "tapegrad": time.perf_counter() - t1}
    seconds: defaultdict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()

    def on_duration(event: str, duration_secs: float, **_: str | int) -> None:
        if event in EVENTS:
            seconds[EVENTS[event]] += duration_secs
            counts[EVENTS[event]] += 1

    def on_event(event: str, **_: str | int) -> None:
        if event == HITS:
            counts["hits"] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    program = importlib.import_module(f"bench.programs.{name}")
    tg.set_compilation_cache(cache)
    d = program.data()
    t0 = time.perf_counter()
    step = program.tapegrad(d)
    for _ in range(program.STEPS):
        out = step()
    block(out)
    first = time.perf_counter() - t0
    result: dict[str, Any] = {
        "import_s": imports,
        "first_s": first,
        "compiles": counts["compile"],
        "hits": counts["hits"],
        "seconds": dict(seconds),
    }
    if not warm:
        return result
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(WARM_STEPS):
        out = step()
    block(out)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in stats.values())
    calls = {f"{os.path.basename(f)}:{fn}": nc for (f, _, fn), (_, nc, _, _, _) in stats.items()}
    own = sorted(((tt, f, fn) for (f, _, fn), (_, _, tt, _, _) in stats.items()), reverse=True)
    return {
        **result,
        **_collections(step),
        "ops": calls.get("op.py:apply", 0) / WARM_STEPS,
        "vjps": calls.get("op.py:call_vjp", 0) / WARM_STEPS,
        "getitem": calls.get("indexing.py:getitem", 0) / WARM_STEPS,
        "top": [(f"{os.path.basename(f)}:{fn}", round(100 * tt / total)) for tt, f, fn in own[:4]],
    }


def _collections(step: Any) -> dict[str, Any]:
    """Run ``step`` for ``GC_SECONDS`` and time Python's garbage collections meanwhile: the
    share of the wall time in all collections and in full ones, and the steps run."""
    spent = [0.0, 0.0, 0.0]  # seconds per generation
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[info["generation"]] += time.perf_counter() - started[0]

    gc.callbacks.append(on_gc)
    try:
        t0 = time.perf_counter()
        out = step()
        steps = 1
        while time.perf_counter() - t0 < GC_SECONDS:
            out = step()
            steps += 1
        block(out)
        wall = time.perf_counter() - t0
    finally:
        gc.callbacks.remove(on_gc)
    return {"gc_share": sum(spent) / wall, "gc_full_share": spent[2] / wall, "gc_steps": steps}


def _first_run(r: dict[str, Any]) -> str:
    s = r["seconds"]
    return (
        f"{r['first_s']:.2f} s: {r['compiles']} compiles, {r['hits']} cache hits (trace "
        f"{s.get('trace', 0):.2f} s, lower {s.get('lower', 0):.2f} s, compile "
        f"{s.get('compile', 0):.2f} s)"
    )


def main() -> None:
    """Profile every program (or ``--only``) in its own processes; print the table."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--only", default="")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    p.add_argument("--cache", default="", help=argparse.SUPPRESS)
    p.add_argument("--primed", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        emit_child(profile_one(args.one, args.cache, warm=not args.primed))
        return
    os.environ.update(thread_env(1))
    rows = []
    for name in [n for n in args.only.split(",") if n] or PROGRAMS:
        with tempfile.TemporaryDirectory(prefix="tapegrad-cache-") as cache:
            r = run_child("bench.programs._profile", ["--one", name, "--cache", cache])
            primed = run_child(
                "bench.programs._profile", ["--one", name, "--cache", cache, "--primed"]
            )
        imports = primed["import_s"]
        rows.append(
            [
                name,
                f"{imports['jax']:.2f} s + {imports['tapegrad']:.2f} s",
                _first_run(r),
                _first_run(primed),
                f"{r['ops']:.0f} ops, {r['vjps']:.0f} VJPs, {r['getitem']:.0f} of them indexing",
                ", ".join(f"{fn} {pct}%" for fn, pct in r["top"]),
                f"{100 * r['gc_share']:.1f}% (full {100 * r['gc_full_share']:.1f}%; "
                f"{r['gc_steps']} steps)",
            ]
        )
        print(" | ".join(rows[-1]), flush=True)
    print(
        markdown_table(
            [
                "program",
                "import jax + tapegrad",
                "first run, empty cache",
                "first run, primed cache",
                "per warm step",
                "own time, warm (top 4)",
                "Python GC, warm (share of wall time)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
