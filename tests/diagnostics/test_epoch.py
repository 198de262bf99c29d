"""epoch_end: prints the report with deltas against the previous call, then cleans up."""

from __future__ import annotations

from io import StringIO

import pytest
from rich.console import Console

import diagnostics
import tapegrad as tg
from diagnostics import epoch


@pytest.fixture(autouse=True)
def fresh_epochs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no previous epoch (the module's only state)."""
    monkeypatch.setattr(epoch, "_previous", None)


def train_epoch(w: tg.Tensor, steps: int) -> None:
    for _ in range(steps):
        loss = (w * w).sum()
        loss.backward()
        tg.ones(4).require_grad()  # the planted mistake: one hanging leaf a step


def test_epoch_end_prints_deltas_against_the_previous_epoch_then_cleans() -> None:
    w = tg.ones(4).require_grad()
    out = StringIO()
    console = Console(file=out, width=100, color_system=None)
    train_epoch(w, 3)
    first, stats = diagnostics.epoch_end(1, console=console)
    assert first.title == "tapegrad leak report — epoch 1"
    assert first.hanging_leaves == 3
    assert stats is not None and (stats.nodes_removed, stats.leaves_removed) == (3, 3)
    assert tg.graph_stats().hanging_nodes == 0
    text = out.getvalue()
    assert "tapegrad leak report — epoch 1" in text
    assert "Δ" not in text  # nothing to compare with yet
    assert "graph_cleanup() freed 3 nodes (3 leaves, 3 graphs), 0 bytes in " in text

    train_epoch(w, 5)
    out = StringIO()
    second, _ = diagnostics.epoch_end(2, console=Console(file=out, width=100, color_system=None))
    junk = [r for r in second.rows if r.kind == "hanging"]
    assert [(r.count, r.delta) for r in junk] == [(5, 2)]  # 5 this epoch, 3 the last
    assert "Δ" in out.getvalue()
    assert "graph_cleanup() freed 5 nodes (5 leaves, 5 graphs)" in out.getvalue()
    del w


def test_epoch_end_without_cleanup_leaves_the_tape_alone() -> None:
    w = tg.ones(4).require_grad()
    train_epoch(w, 2)
    console = Console(file=StringIO(), color_system=None)
    report, stats = diagnostics.epoch_end(cleanup=False, console=console)
    assert stats is None
    assert report.title == "tapegrad leak report"
    assert tg.graph_stats().hanging_leaves == report.hanging_leaves == 2
    assert epoch._previous is report
    del w
