"""The shared benchmark harness: batches, alternating repeats, ratios, targets and tables.

Conventions every bench module follows (issue 6):

- A *batch* runs one step ``number`` times and returns seconds per step. The result of the
  last step is blocked on (``jax.block_until_ready``) before the clock stops; JAX's CPU client
  runs dispatched work in order, so that covers every step of the batch.
- Systems that are compared run their batches alternately (A B A B ...), ``repeats`` times;
  a figure is the median over repeats with the min-max range, and a ratio is the median of the
  per-repeat ratios (each pair measured back to back), again with its range.
- Every batch is timed on two clocks: wall time (what a user waits; targets are judged on it)
  and this process's CPU time over all threads (shown beside it: on a shared machine it does
  not count the time a process spends descheduled, so its ratios are the steadier ones).
- Targets print PASS or MISS (SKIP when a peer is not installed).

This module imports neither JAX nor any peer: worker processes of other systems use it too.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

__all__ = [
    "MIN_REPEATS",
    "Stat",
    "Target",
    "Report",
    "block",
    "time_batch",
    "Timing",
    "measure",
    "alternate_timings",
    "walls",
    "cpus",
    "timing_row",
    "timing_target",
    "calibrate",
    "calibrated_batch",
    "alternate",
    "ratio",
    "rss_bytes",
    "traced_bytes",
    "settle",
    "make_parser",
    "finish_args",
    "parse_args",
    "Clock",
    "ratio_target",
    "fmt_ratio",
    "tracing",
    "markdown_table",
    "fmt_time",
    "fmt_bytes",
    "run_child",
    "emit_child",
]

MIN_REPEATS = 5
"""The fewest repeats a real (non ``--quick``) run may use."""


@dataclass(frozen=True)
class Stat:
    """Median and range of repeated measurements.

    Attributes:
        median: the median value.
        lo: the smallest value.
        hi: the largest value.
        n: how many values.
    """

    median: float
    lo: float
    hi: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        """The statistic of ``values`` (at least one).

        Raises:
            ValueError: ``values`` is empty.
        """
        if not values:
            raise ValueError("Stat.of needs at least one value.")
        return cls(statistics.median(values), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Stat:
        """The same statistic with every value multiplied by ``factor`` (> 0)."""
        return Stat(self.median * factor, self.lo * factor, self.hi * factor, self.n)

    def fmt(self, fmt_one: Callable[[float], str]) -> str:
        """``"median (lo-hi)"`` with each value formatted by ``fmt_one``."""
        if self.n == 1:
            return fmt_one(self.median)
        return f"{fmt_one(self.median)} ({fmt_one(self.lo)}-{fmt_one(self.hi)})"

    def as_dict(self) -> dict[str, float]:
        """JSON-ready ``{"median", "min", "max", "n"}``."""
        return {"median": self.median, "min": self.lo, "max": self.hi, "n": self.n}


def fmt_time(seconds: float) -> str:
    """Seconds as a short human figure: ``"12.3 us"``, ``"4.56 ms"``, ``"1.20 s"``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def fmt_bytes(n: float) -> str:
    """Bytes in decimal units, signed: ``"312 B"``, ``"4.2 kB"``, ``"1.3 MB"``."""
    a = abs(n)
    if a < 1000:
        return f"{n:.0f} B"
    if a < 1000**2:
        return f"{n / 1000:.3g} kB"
    return f"{n / 1000**2:.3g} MB"


def fmt_ratio(x: float) -> str:
    """A ratio as ``"1.23x"``."""
    return f"{x:.3g}x"


# ----------------------------------------------------------------------------- timing


def block(value: Any) -> None:
    """Wait until every JAX array in ``value`` (a pytree, Tensors included) is computed.

    A no-op in a process that never imported JAX (the torch, autograd and MyGrad workers).
    """
    jax = sys.modules.get("jax")
    if jax is not None and value is not None:
        jax.block_until_ready(value)


class Timing(NamedTuple):
    """Seconds per step on two clocks.

    Attributes:
        wall: wall-clock seconds (``time.perf_counter``): what a user waits.
        cpu: CPU seconds of this process, all threads (``time.process_time``): what the
            step costs, unaffected by time spent descheduled on a loaded machine.
    """

    wall: float
    cpu: float


class Clock:
    """Accumulates both clocks (wall, CPU) over the timed sections of one batch."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def start(self) -> None:
        """Open a timed section."""
        self._w, self._c = time.perf_counter(), time.process_time()

    def stop(self) -> None:
        """Close the timed section, adding its time on both clocks."""
        self.wall += time.perf_counter() - self._w
        self.cpu += time.process_time() - self._c

    def per(self, n: int) -> Timing:
        """The accumulated time per one of ``n`` steps."""
        return Timing(self.wall / n, self.cpu / n)


def measure(step: Callable[[], Any], number: int, sync: Callable[[Any], None] = block) -> Timing:
    """Call ``step`` ``number`` times; return seconds per call on both clocks.

    The last call's result is passed to ``sync`` (blocked on) before the clocks stop.
    """
    out: Any = None
    perf, cpu = time.perf_counter, time.process_time
    c0, w0 = cpu(), perf()
    for _ in range(number):
        out = step()
    sync(out)
    w1, c1 = perf(), cpu()
    del out
    return Timing((w1 - w0) / number, (c1 - c0) / number)


def time_batch(step: Callable[[], Any], number: int, sync: Callable[[Any], None] = block) -> float:
    """Call ``step`` ``number`` times; return wall seconds per call (see ``measure``)."""
    return measure(step, number, sync).wall


def calibrate(
    step: Callable[[], Any],
    seconds: float,
    *,
    warmup: int = 3,
    max_number: int = 1_000_000,
    sync: Callable[[Any], None] = block,
) -> int:
    """How many calls of ``step`` fill about ``seconds`` (after ``warmup`` untimed calls).

    Returns:
        A call count between 1 and ``max_number``.
    """
    for _ in range(warmup):
        sync(step())
    number, per = 1, 0.0
    while True:
        per = time_batch(step, number, sync)
        if per * number >= seconds / 8 or number >= max_number:
            break
        number *= 4
    return max(1, min(max_number, round(seconds / max(per, 1e-9))))


def calibrated_batch(
    step: Callable[[], Any], seconds: float, sync: Callable[[Any], None] = block
) -> Callable[[], Timing]:
    """A batch of ``step`` sized by ``calibrate`` to about ``seconds``: call it to time one."""
    number = calibrate(step, seconds, sync=sync)
    return lambda: measure(step, number, sync)


def alternate(batches: Mapping[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run every batch once per repeat, in order (A B A B ...); collect seconds per step.

    Args:
        batches: name -> a function running one batch and returning seconds per step (it may
            do untimed setup or cleanup of its own around the timed part).
        repeats: how many rounds.
    """
    out: dict[str, list[float]] = {name: [] for name in batches}
    for _ in range(repeats):
        for name, run in batches.items():
            out[name].append(run())
    return out


def alternate_timings(
    batches: Mapping[str, Callable[[], Timing]], repeats: int
) -> dict[str, list[Timing]]:
    """``alternate`` for batches that return a ``Timing`` (both clocks)."""
    out: dict[str, list[Timing]] = {name: [] for name in batches}
    for _ in range(repeats):
        for name, run in batches.items():
            out[name].append(run())
    return out


def ratio(a: Sequence[float], b: Sequence[float]) -> Stat:
    """Median and range of the per-repeat ratios ``a[i] / b[i]`` (pairs timed back to back)."""
    return Stat.of([x / y for x, y in zip(a, b, strict=True)])


def walls(ts: Sequence[Timing]) -> list[float]:
    """The wall-clock figures of ``ts``."""
    return [t.wall for t in ts]


def cpus(ts: Sequence[Timing]) -> list[float]:
    """The CPU-time figures of ``ts``."""
    return [t.cpu for t in ts]


def timing_row(name: str, ts: Sequence[Timing], base: Sequence[Timing]) -> list[str]:
    """Cells: name, wall time per step, wall ratio to ``base``, CPU-time ratio to ``base``."""
    return [
        name,
        Stat.of(walls(ts)).fmt(fmt_time),
        ratio(walls(ts), walls(base)).fmt(fmt_ratio),
        ratio(cpus(ts), cpus(base)).fmt(fmt_ratio),
    ]


def timing_target(name: str, ts: Sequence[Timing], base: Sequence[Timing], limit: float) -> Target:
    """A ``<= limit`` target on the wall-clock ratio ``ts / base``; the CPU-time ratio and the
    range are shown beside it."""
    wall = ratio(walls(ts), walls(base))
    cpu = ratio(cpus(ts), cpus(base))
    detail = f"CPU time {fmt_ratio(cpu.median)}"
    if wall.n > 1:
        detail = f"{fmt_ratio(wall.lo)}-{fmt_ratio(wall.hi)}; {detail}"
    detail = f"({detail})"
    return Target(name, wall.median, limit, "max", fmt_ratio, detail)


# ----------------------------------------------------------------------------- memory


def rss_bytes() -> int:
    """The resident set size of this process now, in bytes (Linux ``/proc``; else peak RSS)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def traced_bytes() -> int:
    """Bytes currently traced by ``tracemalloc`` (which must be tracing)."""
    return tracemalloc.get_traced_memory()[0]


def settle() -> None:
    """Collect garbage so that memory readings compare steady states (benchmark only)."""
    gc.collect()


@contextmanager
def tracing() -> Iterator[None]:
    """Trace Python allocations with ``tracemalloc`` inside the block."""
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


# ----------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A figure compared with its limit.

    Attributes:
        name: what is measured, with the issue it comes from.
        value: the measured figure (a median), or ``None`` when it could not be measured.
        limit: the limit.
        kind: ``"max"`` (value must be <= limit) or ``"min"`` (value must be >= limit).
        fmt: how to print value and limit.
        detail: the range or a note (e.g. why it was skipped).
    """

    name: str
    value: float | None
    limit: float
    kind: Literal["max", "min"]
    fmt: Callable[[float], str] = fmt_ratio
    detail: str = ""

    @property
    def verdict(self) -> str:
        """``"PASS"``, ``"MISS"`` or ``"SKIP"`` (no value)."""
        if self.value is None:
            return "SKIP"
        ok = self.value <= self.limit if self.kind == "max" else self.value >= self.limit
        return "PASS" if ok else "MISS"

    def row(self) -> list[str]:
        """Table cells: name, measured, limit, verdict."""
        sign = "<=" if self.kind == "max" else ">="
        value = "-" if self.value is None else self.fmt(self.value)
        if self.detail:
            value = f"{value} {self.detail}"
        return [self.name, value, f"{sign} {self.fmt(self.limit)}", self.verdict]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "name": self.name,
            "value": self.value,
            "limit": self.limit,
            "kind": self.kind,
            "verdict": self.verdict,
            "detail": self.detail,
        }


def ratio_target(name: str, stat: Stat | None, limit: float, why_missing: str = "") -> Target:
    """A ``<= limit`` target on a ratio statistic (``None``: skipped, ``why_missing`` says why)."""
    if stat is None:
        detail = f"({why_missing})" if why_missing else ""
        return Target(name, None, limit, "max", fmt_ratio, detail)
    detail = "" if stat.n == 1 else f"({fmt_ratio(stat.lo)}-{fmt_ratio(stat.hi)})"
    return Target(name, stat.median, limit, "max", fmt_ratio, detail)


# ----------------------------------------------------------------------------- reports


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown pipe table with padded columns (readable in a terminal too)."""
    cells = [list(headers)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])


@dataclass
class Section:
    """One table of a report."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    """Everything one benchmark run measured: tables, targets and the machine it ran on."""

    title: str
    quick: bool
    repeats: int
    meta: dict[str, Any] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.meta.setdefault("date", datetime.datetime.now().isoformat(timespec="seconds"))
        self.meta.setdefault("python", platform.python_version())
        self.meta.setdefault("platform", platform.platform())
        self.meta.setdefault("cpu_count", os.cpu_count())
        try:
            self.meta.setdefault("load_average", [round(x, 2) for x in os.getloadavg()])
        except OSError:
            pass

    def add(
        self,
        title: str,
        headers: Sequence[str],
        rows: Sequence[Sequence[str]],
        note: str = "",
        data: dict[str, Any] | None = None,
    ) -> None:
        """Append a table (``data``: raw figures for the JSON output)."""
        self.sections.append(
            Section(title, list(headers), [list(r) for r in rows], note, dict(data or {}))
        )

    def target(self, target: Target) -> None:
        """Append a target."""
        self.targets.append(target)

    def render(self) -> str:
        """The whole report as Markdown text."""
        head = ", ".join(f"{k} {v}" for k, v in self.meta.items())
        mode = (
            "QUICK smoke run (1 repeat, tiny sizes: not a measurement)"
            if self.quick
            else (f"median of {self.repeats} repeats (min-max)")
        )
        parts = [f"## {self.title}", "", f"{mode}; {head}", ""]
        for s in self.sections:
            parts += [f"### {s.title}", "", markdown_table(s.headers, s.rows), ""]
            if s.note:
                parts += [s.note, ""]
        if self.targets:
            parts += [
                "### Targets",
                "",
                markdown_table(
                    ["target", "measured", "limit", "verdict"], [t.row() for t in self.targets]
                ),
                "",
            ]
        return "\n".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: meta, sections (with raw data) and targets."""
        return {
            "title": self.title,
            "quick": self.quick,
            "repeats": self.repeats,
            "meta": self.meta,
            "sections": [
                {
                    "title": s.title,
                    "headers": s.headers,
                    "rows": s.rows,
                    "note": s.note,
                    "data": s.data,
                }
                for s in self.sections
            ],
            "targets": [t.as_dict() for t in self.targets],
        }

    def finish(self, json_path: str | None) -> None:
        """Print the report; write it as JSON to ``json_path`` when given."""
        print(self.render(), flush=True)
        if json_path:
            with open(json_path, "w") as f:
                json.dump(self.as_dict(), f, indent=1, default=str)


# ----------------------------------------------------------------------------- CLI


def make_parser(doc: str) -> argparse.ArgumentParser:
    """A parser described by the first paragraph of ``doc`` (a benchmark's docstring), with
    the common options ``--quick``, ``--repeats N`` and ``--json PATH``."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one repeat at tiny sizes (smoke run)")
    p.add_argument("--repeats", type=int, default=None, help=f"repeats (>= {MIN_REPEATS})")
    p.add_argument("--json", metavar="PATH", default=None, help="also write the figures as JSON")
    return p


def finish_args(p: argparse.ArgumentParser, argv: Sequence[str] | None, default: int) -> Any:
    """Parse ``argv`` with ``p``; fill in and check ``repeats``.

    Raises:
        SystemExit: bad options, or ``--repeats`` below ``MIN_REPEATS`` without ``--quick``.
    """
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else default
    if not args.quick and args.repeats < MIN_REPEATS:
        p.error(f"--repeats must be at least {MIN_REPEATS} (medians of fewer are noise)")
    return args


def parse_args(doc: str, argv: Sequence[str] | None, default: int) -> Any:
    """The common options of a benchmark whose docstring is ``doc`` (its first paragraph
    describes it), parsed from ``argv`` with ``default`` repeats: ``make_parser`` then
    ``finish_args``."""
    return finish_args(make_parser(doc), argv, default)


# ----------------------------------------------------------------------------- children


_CHILD_MARK = "@@bench-json@@"


def emit_child(result: Mapping[str, Any]) -> None:
    """Print ``result`` as the JSON line ``run_child`` reads back (in a child process)."""
    print(_CHILD_MARK + json.dumps(dict(result)), flush=True)


def run_child(module: str, args: Sequence[str], timeout: float = 900) -> dict[str, Any]:
    """Run ``python -m module *args`` in a fresh process and return the dict it emitted.

    Raises:
        RuntimeError: the child failed or emitted nothing (its stderr tail is in the message).
    """
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_CHILD_MARK):
            result: dict[str, Any] = json.loads(line[len(_CHILD_MARK) :])
            return result
    raise RuntimeError(
        f"child {module} {' '.join(args)} exited {proc.returncode} without a result:\n"
        + proc.stderr[-2000:]
    )
