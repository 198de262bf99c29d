"""Issue 6: tapegrad side by side with PyTorch, JAX, HIPS autograd and MyGrad, same work.

``python -m bench.peers [--quick] [--repeats N] [--json PATH] [--systems a,b] [--workloads a,b]
[--threads N]``

Peers come from the optional extra ``bench`` (``pip install -e ".[bench]"``: torch 2.13.0 CPU,
autograd, mygrad); this command installs nothing, and a peer that is not installed is reported
as skipped. Every system runs in its own worker process (``bench._worker``), started once;
the workers' batches are interleaved (A B C A B C ...), each figure is the median of the
repeats with its min-max range, and ratios are tapegrad over the peer, per repeat, on wall
time (targets) and on each worker's CPU time (steadier on a shared machine). Every system gets
``--threads`` compute threads (default 1: torch, BLAS and XLA pools otherwise spin-wait and
slow each other down on a small shared machine; the issue's figures are dispatch-bound).
Memory figures come from a fresh worker process per variant.

Workloads (identical math and data everywhere, see ``bench._data``):

1. ``perop``: ``y = (a*b + a).sum()`` forward and backward, (2, 2) and (256, 256) float32.
2. ``mlp``: one SGD training step of an MLP 64-128-128-10 on scikit-learn's digits, batch 64
   and the full batch (1,797); ``curve``: 200 steps at batch 64, to show each one learns.
3. ``seed``: create a (2, 2) tensor, require grad, drop; time per iteration, and memory
   growth over 200,000 iterations (``seed_growth``).
4. ``chain``: forward and backward through ``y = y * 1.0001``, 1,000 ops, timed after 4 s of
   untimed chains (steady state: tapegrad's 1,002-node backward structure has compiled),
   and with eager backward passes only (what the loop runs before that).
5. ``memory``: bytes per live tracked tensor and per hanging leaf.
6. ``jit`` (issue 12): the MLP step of 2. compiled whole: tapegrad's unchanged eager step
   under ``tg.jit``, a hand-written ``jax.jit(value_and_grad)`` + optax step (parameters and
   optimizer state donated) and torch eager, batch 64 and full batch; and the first call of
   each compiled step (trace and compile), each in a fresh process. Two more rows split the
   difference: the hand step also returning the gradients (tg.jit's outputs), and the tapegrad
   step calling ``opt.zero_grad()`` last (no ``.grad`` left: the hand step's outputs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from bench import _data
from bench._timing import (
    Report,
    Stat,
    Target,
    Timing,
    cpus,
    finish_args,
    fmt_bytes,
    fmt_ratio,
    fmt_time,
    make_parser,
    ratio,
    ratio_target,
    timing_target,
    walls,
)

__all__ = ["main", "SYSTEMS", "WORKLOADS"]

SYSTEMS = ("tapegrad", "jax", "torch", "autograd", "mygrad")
WORKLOADS = ("perop", "mlp", "curve", "seed", "chain", "memory", "jit")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TG = "tapegrad"
TG_AUTO = "tapegrad, auto policy"
RAW = "raw JAX (jnp.zeros / jax.Array)"
TORCH = "torch eager"
TG_JIT = "tapegrad, tg.jit"
TG_JIT_ZERO_LAST = "tapegrad, tg.jit, zero_grad() last (no .grad out)"
OPTAX = "jax.jit(value_and_grad) + optax, donated"
OPTAX_GRADS = f"{OPTAX}, returning the gradients"
JAX_EAGER = "jax.value_and_grad, no jit"
HIPS = "HIPS autograd"
PEER_SYSTEM = {
    TORCH: "torch",
    JAX_EAGER: "jax",
    HIPS: "autograd",
    TG: "tapegrad",
    TG_JIT: "tapegrad",
    TG_JIT_ZERO_LAST: "tapegrad",
    OPTAX: "jax",
    OPTAX_GRADS: "jax",
    TG_AUTO: "tapegrad",
    RAW: "tapegrad",
}


def thread_env(threads: int) -> dict[str, str]:
    """This process's environment with every system's compute threads capped at ``threads``.

    torch reads ``OMP_NUM_THREADS``, NumPy's BLAS the OpenBLAS/MKL variables, XLA its flags.
    On a small shared machine, idle pool threads that spin-wait slow every system down.
    """
    env = dict(os.environ)
    n = str(threads)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = n
    xla = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    if threads == 1 and xla not in env.get("XLA_FLAGS", ""):  # once: the flags key JAX's cache
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {xla}".strip()
    return env


class Worker:
    """One system's worker process, answering one JSON request at a time.

    ``command``: the worker's module and arguments (default ``bench._worker SYSTEM``, the
    peers suite's worker); any module that answers JSON lines on stdin the same way will do.
    """

    def __init__(self, system: str, threads: int = 1, command: Sequence[str] = ()) -> None:
        self.system = system
        self.log: IO[str] = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *(command or ("bench._worker", system))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            cwd=ROOT,
            env=thread_env(threads),
        )
        self.info: dict[str, Any] = {}

    def ask(self, **request: Any) -> dict[str, Any]:
        """Send ``request``; return the reply (``{"error": ...}`` if the worker died)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self.log.seek(0)
            tail = self.log.read()[-600:]
            return {"error": f"{self.system} worker died: {tail}"}
        reply: dict[str, Any] = json.loads(line)
        return reply

    @property
    def version(self) -> str:
        """The system's version line, or why it was skipped."""
        if "skipped" in self.info:
            return f"{self.system} skipped: {self.info['skipped']}"
        if "error" in self.info:
            return f"{self.system} error: {self.info['error']}"
        return str(self.info.get("version", "?"))

    def variants(self, workload: str) -> list[str]:
        """The variants this system runs for ``workload`` (none if skipped)."""
        return list(self.info.get("variants", {}).get(workload, ()))

    def close(self) -> None:
        """Ask the worker to exit and wait for it."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@dataclass
class Timed:
    """The interleaved timings of one workload: seconds per step by variant, or an error."""

    times: dict[str, list[Timing]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    systems: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def stat(self, variant: str) -> Stat | None:
        """Wall seconds per step of ``variant`` (``None`` without figures)."""
        ts = self.times.get(variant)
        return Stat.of(walls(ts)) if ts else None

    def ratio(self, a: str, b: str, clock: str = "wall") -> Stat | None:
        """Per-repeat ratios ``a / b`` on ``clock`` (``"wall"`` or ``"cpu"``)."""
        if self.times.get(a) and self.times.get(b):
            get = walls if clock == "wall" else cpus
            return ratio(get(self.times[a]), get(self.times[b]))
        return None

    def target(self, name: str, a: str, b: str, limit: float) -> Target:
        """``a / b <= limit`` on wall time (CPU time beside it), or SKIP saying why."""
        if self.times.get(a) and self.times.get(b):
            return timing_target(name, self.times[a], self.times[b], limit)
        return ratio_target(name, None, limit, self.why(a) if a not in self.times else self.why(b))

    def data(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {
            "times": {k: [t._asdict() for t in v] for k, v in self.times.items()},
            "errors": self.errors,
        }

    def why(self, variant: str) -> str:
        """Why ``variant`` has no figure: its error, or its system's state."""
        if variant in self.errors:
            return self.errors[variant][:60]
        system = PEER_SYSTEM.get(variant, "")
        return self.skipped.get(system, f"{system or variant} not run")


class Suite:
    """Runs workloads over the workers and fills the report."""

    def __init__(self, workers: list[Worker], repeats: int, quick: bool, threads: int) -> None:
        self.workers = workers
        self.threads = threads
        self.repeats = repeats
        self.quick = quick
        self.seconds = 0.001 if quick else 0.15
        self.keys = 0
        self.skipped = {w.system: w.version for w in workers if "version" not in w.info}

    def entries(self, workload: str) -> list[tuple[Worker, str]]:
        return [(w, v) for w in self.workers for v in w.variants(workload)]

    def timed(self, workload: str, **kwargs: Any) -> Timed:
        """Prepare every variant of ``workload``, then run their batches interleaved."""
        out = Timed(skipped=self.skipped)
        live: list[tuple[Worker, str, str]] = []
        for w, v in self.entries(workload):
            self.keys += 1
            key = f"{workload}-{self.keys}"
            reply = w.ask(
                op="prepare",
                key=key,
                workload=workload,
                variant=v,
                kwargs=kwargs,
                seconds=self.seconds,
                max=2 if self.quick else 10**6,
                settle=not self.quick,
            )
            out.systems[v] = w.system
            if "number" in reply:
                live.append((w, v, key))
                out.times[v] = []
            else:
                out.errors[v] = str(reply.get("error", reply))
        for _ in range(self.repeats):
            for w, v, key in live:
                if v in out.errors:
                    continue
                reply = w.ask(op="run", key=key)
                if "seconds" in reply:
                    out.times[v].append(Timing(float(reply["seconds"]), float(reply["cpu"])))
                else:
                    out.errors[v] = str(reply.get("error", reply))
                    out.times.pop(v, None)
        for w, _, key in live:
            w.ask(op="drop", key=key)
        return out

    def probe(self, workload: str, *, fresh: bool = False, **kwargs: Any) -> dict[str, Any]:
        """One-shot measurement ``workload`` in every variant that has it.

        With ``fresh`` (memory figures, except in quick runs) each variant runs in a new
        worker process of its system, so no earlier workload's heap distorts the reading.
        """
        out: dict[str, Any] = {}
        if not fresh or self.quick:
            for w, v in self.entries(workload):
                out[v] = w.ask(op="probe", workload=workload, variant=v, kwargs=kwargs)
            return out
        entries = self.entries(workload)
        spawned = [Worker(w.system, self.threads) for w, _ in entries]  # imports overlap
        try:
            for nw, (_, v) in zip(spawned, entries, strict=True):
                nw.info = nw.ask(op="info")
                out[v] = nw.ask(op="probe", workload=workload, variant=v, kwargs=kwargs)
        finally:
            for nw in spawned:
                nw.close()
        return out


def _time_rows(t: Timed, base: str) -> list[list[str]]:
    rows = []
    for v in [*t.times, *t.errors]:
        if v in t.errors:
            rows.append([v, f"error: {t.errors[v][:80]}", "-", "-"])
            continue
        st, r, c = t.stat(v), t.ratio(base, v), t.ratio(base, v, "cpu")
        rows.append(
            [
                v,
                st.fmt(fmt_time) if st else "-",
                r.fmt(fmt_ratio) if r else "-",
                c.fmt(fmt_ratio) if c else "-",
            ]
        )
    return rows


def _headers(what: str, base: str) -> list[str]:
    return ["system", f"{what} (wall)", f"{base} / system (wall)", "(CPU time)"]


def main(argv: Sequence[str] | None = None) -> Report:
    """Run the peers suite, print its tables and targets, and return the report."""
    p = make_parser(__doc__ or "")
    p.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    p.add_argument("--threads", type=int, default=1, help="compute threads per system (default 1)")
    args = finish_args(p, argv, default=7)
    systems = [s for s in args.systems.split(",") if s]
    workloads = [s for s in args.workloads.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; choose from {', '.join(SYSTEMS)}")
    for s in workloads:
        if s not in WORKLOADS:
            p.error(f"unknown workload {s!r}; choose from {', '.join(WORKLOADS)}")
    quick: bool = args.quick
    report = Report("bench.peers (issue 6)", quick, args.repeats)

    workers = [Worker(s, args.threads) for s in systems]  # start together: imports overlap
    try:
        for w in workers:
            w.info = w.ask(op="info")
        report.meta["systems"] = "; ".join(w.version for w in workers)
        report.meta["compute threads per system"] = args.threads
        suite = Suite(workers, args.repeats, quick, args.threads)
        for name in workloads:
            _RUNNERS[name](suite, report)
    finally:
        for w in workers:
            w.close()
    report.finish(args.json)
    return report


# ----------------------------------------------------------------------------- workloads


def _run_perop(suite: Suite, report: Report) -> None:
    for shape in ((2, 2), (256, 256)):
        t = suite.timed("perop", shape=list(shape))
        report.add(
            f"1. Per-op: y = (a*b + a).sum(), forward + backward, {shape} float32",
            _headers("time per step", TG),
            _time_rows(t, TG),
            data=t.data(),
        )


def _run_mlp(suite: Suite, report: Report) -> None:
    cases = [(_data.BATCH, "batch 64"), (10**9, "full batch 1,797")]
    for batch, label in cases[:1] if suite.quick else cases:
        t = suite.timed("mlp", batch=batch)
        report.add(
            f"2. MLP 64-128-128-10 on digits, one SGD step, {label}",
            _headers("time per step", TG),
            _time_rows(t, TG),
            note="jax.jit compiles the whole step (value_and_grad and the SGD update).",
            data=t.data(),
        )
        limits = [(TORCH, 1.5)]
        if batch == _data.BATCH:
            limits = [(JAX_EAGER, 0.2), (HIPS, 1.0), (TORCH, 1.5)]
        for peer, limit in limits:
            report.target(
                t.target(f"issue 6: MLP step {label}, tapegrad / {peer}", TG, peer, limit)
            )


def _run_curve(suite: Suite, report: Report) -> None:
    steps = 3 if suite.quick else _data.CURVE_STEPS
    res = suite.probe("curve", steps=steps, rows=_data.BATCH if suite.quick else 0)
    marks = [str(s) for s in _data.CURVE_AT if s <= steps]
    if str(steps) not in marks:
        marks.append(str(steps))
    rows = []
    for v, r in res.items():
        if "error" in r:
            rows.append([v, f"error: {r['error'][:80]}"] + ["-"] * (len(marks) + 2))
            continue
        rows.append(
            [v]
            + [f"{r['losses'][m]:.4f}" for m in marks]
            + [f"{r['final_loss']:.4f}", f"{100 * r['accuracy']:.1f} %", fmt_time(r["seconds"])]
        )
    report.add(
        f"2b. Learning curve: {steps} SGD steps (lr {_data.LR}) at batch {_data.BATCH}",
        ["system"]
        + [f"loss @{m}" for m in marks]
        + ["full-data loss", "train accuracy", "wall time"],
        rows,
        note="Minibatch loss after the given step; the same initial weights and batch order "
        "for every system, so the curves agree up to float32 rounding.",
        data=res,
    )


def _run_seed(suite: Suite, report: Report) -> None:
    t = suite.timed("seed")
    n = 500 if suite.quick else 200_000
    growth = suite.probe("seed_growth", fresh=True, iterations=n)
    rows = []
    for v in [*t.times, *t.errors]:
        g = growth.get(v, {})
        st = t.stat(v)
        r, c = t.ratio(v, RAW), t.ratio(v, RAW, "cpu")
        rows.append(
            [
                v,
                st.fmt(fmt_time) if st else f"error: {t.errors.get(v, '')[:60]}",
                r.fmt(fmt_ratio) if r else "-",
                c.fmt(fmt_ratio) if c else "-",
                fmt_bytes(g["rss_growth"]) if "rss_growth" in g else g.get("error", "-")[:60],
                "-" if g.get("nodes_at_end") is None else f"{g['nodes_at_end']:,}",
            ]
        )
    report.add(
        f"3. Seed loop: create a (2,2) tensor, require grad, drop (x {n:,} for memory)",
        [
            "system",
            "time per iteration (wall)",
            "system / raw jnp.zeros (wall)",
            "(CPU time)",
            f"RSS growth over {n:,}",
            "tape nodes left",
        ],
        rows,
        note="Time: interleaved batches (the tapegrad variants share one process, so other "
        "variants' batches sweep the manual tape in between). Growth: one run of the full loop "
        "after a warm-up, gc.collect() before each RSS reading.",
        data={**t.data(), "growth": growth},
    )
    auto = growth.get(TG_AUTO, {})
    report.target(
        Target(
            f"issue 6: seed loop, auto policy, RSS growth over {n:,} iterations",
            auto.get("rss_growth"),
            1e6,
            "max",
            fmt_bytes,
            "" if "rss_growth" in auto else f"({auto.get('error', 'not run')})",
        )
    )
    report.target(t.target("issue 6: seed loop, auto policy / raw jnp.zeros", TG_AUTO, RAW, 1.1))


def _run_chain(suite: Suite, report: Report) -> None:
    n = 20 if suite.quick else _data.CHAIN
    t = suite.timed("chain", n=n)
    report.add(
        f"4. Chain y = y * {_data.FACTOR} of {n:,} ops on (2, 2), forward + backward",
        _headers("time per chain", TG),
        _time_rows(t, TG),
        data=t.data(),
    )
    report.target(
        t.target(f"issue 10: {n:,}-op chain forward+backward, tapegrad / torch", TG, TORCH, 2.0)
    )


def _run_memory(suite: Suite, report: Report) -> None:
    n = 50 if suite.quick else 50_000
    live = suite.probe("live_memory", fresh=True, n=n)
    hanging = suite.probe("hanging_memory", fresh=True, n=n)

    def cells(r: dict[str, Any] | None) -> list[str]:
        if not r:
            return ["-", "-"]
        if "error" in r:
            return [f"error: {r['error'][:40]}", "-"]
        return [fmt_bytes(r["rss_per"]), fmt_bytes(r["traced_per"])]

    variants = dict.fromkeys([*live, *hanging])
    rows = [[v, *cells(live.get(v)), *cells(hanging.get(v))] for v in variants]
    report.add(
        f"5. Memory per (2, 2) float32 tensor that requires grad ({n:,} tensors)",
        [
            "system",
            "live: RSS",
            "live: tracemalloc",
            "hanging leaf: RSS",
            "hanging leaf: tracemalloc",
        ],
        rows,
        note="Live: tensors kept in a list. Hanging leaf: each dropped at once; what remains "
        "per tensor. tracemalloc sees Python allocations only (not torch's C++ or JAX's "
        "buffers); RSS sees everything, with the allocator's slack.",
        data={"live": live, "hanging": hanging},
    )


def _run_jit(suite: Suite, report: Report) -> None:
    cases = [(_data.BATCH, "batch 64"), (10**9, "full batch 1,797")]
    for batch, label in cases[:1] if suite.quick else cases:
        t = suite.timed("jit", batch=batch)
        report.add(
            f"6. Compiled MLP step (issue 12), one SGD step, {label}",
            _headers("time per step", TG_JIT),
            _time_rows(t, TG_JIT),
            note="tg.jit runs the eager tapegrad step (zero_grad, forward, backward, opt.step) "
            "as one XLA computation and writes parameters, .grad and optimizer state back; "
            "the hand-written step returns no gradients. Like for like: the hand step "
            "returning its gradients, and tg.jit's step with zero_grad() last (no .grad out).",
            data=t.data(),
        )
        limits = [(OPTAX, 1.15)] + ([(TORCH, 0.5)] if batch == _data.BATCH else [])
        for peer, limit in limits:
            report.target(
                t.target(f"issue 12: MLP step {label}, tg.jit / {peer}", TG_JIT, peer, limit)
            )
    first = suite.probe("jit_first", fresh=True, batch=_data.BATCH)
    rows = []
    for v, r in first.items():
        if "error" in r:
            rows.append([v, f"error: {r['error'][:80]}", "-"])
        else:
            rows.append([v, fmt_time(r["first"]), fmt_time(r["second"])])
    report.add(
        "6b. First call of the compiled MLP step, batch 64 (trace and compile), fresh process",
        ["system", "first call", "second call"],
        rows,
        data=first,
    )
    ours, hand = first.get(TG_JIT, {}), first.get(OPTAX, {})
    value = ours["first"] / hand["first"] if "first" in ours and "first" in hand else None
    report.target(
        Target(
            "issue 12: first call (trace + compile), tg.jit / hand-written jax.jit",
            value,
            2.0,
            "max",
            fmt_ratio,
            "" if value is not None else "(not measured)",
        )
    )


_RUNNERS = {
    "perop": _run_perop,
    "mlp": _run_mlp,
    "curve": _run_curve,
    "seed": _run_seed,
    "chain": _run_chain,
    "memory": _run_memory,
    "jit": _run_jit,
}

if __name__ == "__main__":
    main()
