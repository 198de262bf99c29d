"""The reports ``epoch_end`` made, oldest first, and the growth over them it warns about.

The list of reports is the package's only state: its last report is the baseline of the next
``epoch_end`` (for the deltas and the kept-alive rules). ``leak_report`` itself stays pure.
Reports are kept without their node records (``graph_nodes``), so a long run keeps only rows.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import tapegrad as tg
from diagnostics.report import KINDS, LeakReport, LedgerKey, ledger_counts

__all__ = [
    "ADVICE",
    "GROWTH_EPOCHS",
    "Growth",
    "LeakWarning",
    "clear_history",
    "growth",
    "held",
    "history",
    "record",
    "swept_before",
]

GROWTH_EPOCHS = 3
"""Epochs in a row of growth (in nodes or in bytes held) that make ``epoch_end`` warn."""

MAX_ORIGINS = 5
"""Origins a growth warning names (those that grew most)."""

ADVICE: dict[str, str] = {
    "hanging": "Hanging nodes are freed by graph_cleanup() (epoch_end's cleanup=True); to make "
    "none, run that code under tg.no_grad() or without requires_grad: see the report's hanging "
    "rows.",
    "kept-alive": "Graphs that cleanup cannot free are kept alive by the code: see the report's "
    "kept-alive rows and 'why alive'.",
    "live": "Live graphs grew: the code holds on to more tensors that require grad each epoch "
    "(keep .item() or .detach() of what it stores).",
    "consumed": "Backward markers stay while the code holds tensors that reach them: see 'why "
    "alive'.",
}
"""What a growth warning advises for each class that grew."""

_reports: list[tuple[LeakReport, weakref.ref[Any]]] = []  # each with the tape it read
_cleared: list[tuple[weakref.ref[Any], dict[LedgerKey, int]]] = []
"""The current tape's swept counts (``ledger_counts``) when the history was last cleared."""


class LeakWarning(UserWarning):
    """The tape held more nodes or bytes at each of the last ``GROWTH_EPOCHS`` epoch ends.

    Attributes:
        growth: what grew, and the origins that grew most.
    """

    def __init__(self, growth: Growth) -> None:
        super().__init__(growth.message)
        self.growth = growth


@dataclass(frozen=True)
class Growth:
    """Growth over the last ``epochs + 1`` reports.

    Attributes:
        epochs: epochs in a row that grew.
        nodes: ``(first, last)`` nodes on the tape over the window.
        saved_bytes: ``(first, last)`` saved bytes over the window.
        origins: ``(origin, nodes gained)`` for the rows that grew most, largest first.
        kinds: the classes whose nodes or bytes on the tape grew over the window, in
            ``KINDS`` order.
    """

    epochs: int
    nodes: tuple[int, int]
    saved_bytes: tuple[int, int]
    origins: tuple[tuple[str, int], ...]
    kinds: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        """One line: what grew, by how much, where, and what to do about each class that
        grew (``ADVICE``)."""
        where = ", ".join(f"{o} (+{n})" for o, n in self.origins) or "no single origin"
        advice = "".join(f" {ADVICE[kind]}" for kind in self.kinds)
        return (
            f"the tape grew {self.epochs} epochs in a row: {self.nodes[0]:,} -> "
            f"{self.nodes[1]:,} nodes, {self.saved_bytes[0]:,} -> {self.saved_bytes[1]:,} "
            f"saved bytes; grown most at {where}.{advice}"
        )


def history() -> list[LeakReport]:
    """The reports ``epoch_end`` made since the start (or ``clear_history()``), oldest first.

    Returns:
        A new list; the reports keep their rows but not their node records.
    """
    return [report for report, _ in _reports]


def clear_history() -> None:
    """Forget the reports: the next ``epoch_end`` has no baseline (a new training run), and
    the hanging nodes that sweeps removed from the current tape before now are not counted
    in the reports ``epoch_end`` makes of it (reports count their run's sweeps only)."""
    _reports.clear()
    _cleared.clear()
    tape = tg.current_tape()
    counts = ledger_counts(tape.snapshot())
    if counts:
        _cleared.append((weakref.ref(tape), counts))


def swept_before(tape: Any) -> dict[LedgerKey, int]:
    """What sweeps had removed from ``tape`` when the history was last cleared (``{}``
    when nothing, or another tape)."""
    for read, counts in _cleared:
        if read() is tape:
            return counts
    return {}


def record(report: LeakReport, tape: Any) -> None:
    """Append a report (without its node records) that read ``tape`` to the history."""
    _reports.append((replace(report, graph_nodes=()), weakref.ref(tape)))


def on_tape(tape: Any) -> list[LeakReport]:
    """The reports of the history that read ``tape``, oldest first: a baseline and a growth
    compare reports of one tape only (node ids, counts and rows are a tape's own)."""
    return [report for report, read in _reports if read() is tape]


def held(report: LeakReport) -> dict[str, tuple[int, int]]:
    """Per class (``KINDS``), the nodes on the tape (swept ones are gone: not counted) and
    their rows' bytes."""
    out: dict[str, tuple[int, int]] = dict.fromkeys(KINDS, (0, 0))
    for row in report.rows:
        nodes, nbytes = out[row.kind]
        out[row.kind] = (nodes + row.count - row.swept, nbytes + row.bytes)
    return out


def growth(reports: Sequence[LeakReport], epochs: int = GROWTH_EPOCHS) -> Growth | None:
    """The growth ending at the last report, if nodes or bytes held grew at each of the last
    ``epochs`` reports; else ``None`` (a flat or shrinking loop).

    Args:
        reports: oldest first (``history()``).
        epochs: how many successive increases make growth.
    """
    if len(reports) <= epochs:
        return None
    window = reports[-epochs - 1 :]
    held_now = [(r.total_nodes, r.saved_bytes) for r in window]
    grew_nodes = all(b[0] > a[0] for a, b in zip(held_now, held_now[1:], strict=False))
    grew_bytes = all(b[1] > a[1] for a, b in zip(held_now, held_now[1:], strict=False))
    if not (grew_nodes or grew_bytes):
        return None
    # Consumed records are what a kept graph holds on to: name them only when nothing else grew.
    gained = _gained(window[0], window[-1], skip="consumed") or _gained(window[0], window[-1])
    first, last = held(window[0]), held(window[-1])
    return Growth(
        epochs=epochs,
        nodes=(held_now[0][0], held_now[-1][0]),
        saved_bytes=(held_now[0][1], held_now[-1][1]),
        origins=tuple(gained[:MAX_ORIGINS]),
        kinds=tuple(k for k in KINDS if any(b > a for a, b in zip(first[k], last[k], strict=True))),
    )


def _gained(first: LeakReport, last: LeakReport, skip: str = "") -> list[tuple[str, int]]:
    """``(origin, nodes gained on the tape)`` from ``first`` to ``last``, most first, over
    the rows not of class ``skip``."""
    before: dict[str, int] = {}
    for row in first.rows:
        if row.kind != skip:
            before[row.origin] = before.get(row.origin, 0) + row.count - row.swept
    after: dict[str, int] = {}
    for row in last.rows:
        if row.kind != skip:
            after[row.origin] = after.get(row.origin, 0) + row.count - row.swept
    return sorted(
        ((o, n - before.get(o, 0)) for o, n in after.items() if n > before.get(o, 0)),
        key=lambda item: (-item[1], item[0]),
    )
