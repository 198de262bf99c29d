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

from diagnostics.report import LeakReport

__all__ = [
    "GROWTH_EPOCHS",
    "Growth",
    "LeakWarning",
    "clear_history",
    "growth",
    "history",
    "record",
]

GROWTH_EPOCHS = 3
"""Epochs in a row of growth (in nodes or in bytes held) that make ``epoch_end`` warn."""

MAX_ORIGINS = 5
"""Origins a growth warning names (those that grew most)."""

_reports: list[tuple[LeakReport, weakref.ref[Any]]] = []  # each with the tape it read


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
    """

    epochs: int
    nodes: tuple[int, int]
    saved_bytes: tuple[int, int]
    origins: tuple[tuple[str, int], ...]

    @property
    def message(self) -> str:
        """One line: what grew, by how much, and where."""
        where = ", ".join(f"{o} (+{n})" for o, n in self.origins) or "no single origin"
        return (
            f"the tape grew {self.epochs} epochs in a row: {self.nodes[0]:,} -> "
            f"{self.nodes[1]:,} nodes, {self.saved_bytes[0]:,} -> {self.saved_bytes[1]:,} "
            f"saved bytes; grown most at {where}. Graphs that cleanup cannot free are kept "
            "alive by the code: see the report's kept-alive rows and 'why alive'."
        )


def history() -> list[LeakReport]:
    """The reports ``epoch_end`` made since the start (or ``clear_history()``), oldest first.

    Returns:
        A new list; the reports keep their rows but not their node records.
    """
    return [report for report, _ in _reports]


def clear_history() -> None:
    """Forget the reports: the next ``epoch_end`` has no baseline (a new training run)."""
    _reports.clear()


def record(report: LeakReport, tape: Any) -> None:
    """Append a report (without its node records) that read ``tape`` to the history."""
    _reports.append((replace(report, graph_nodes=()), weakref.ref(tape)))


def on_tape(tape: Any) -> list[LeakReport]:
    """The reports of the history that read ``tape``, oldest first: a baseline and a growth
    compare reports of one tape only (node ids, counts and rows are a tape's own)."""
    return [report for report, read in _reports if read() is tape]


def _on_tape(report: LeakReport) -> tuple[int, int]:
    return report.total_nodes, report.saved_bytes


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
    held = [_on_tape(r) for r in window]
    grew_nodes = all(b[0] > a[0] for a, b in zip(held, held[1:], strict=False))
    grew_bytes = all(b[1] > a[1] for a, b in zip(held, held[1:], strict=False))
    if not (grew_nodes or grew_bytes):
        return None
    # Consumed records are what a kept graph holds on to: name them only when nothing else grew.
    gained = _gained(window[0], window[-1], skip="consumed") or _gained(window[0], window[-1])
    return Growth(
        epochs=epochs,
        nodes=(held[0][0], held[-1][0]),
        saved_bytes=(held[0][1], held[-1][1]),
        origins=tuple(gained[:MAX_ORIGINS]),
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
