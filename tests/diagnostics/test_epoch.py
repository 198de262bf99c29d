"""epoch_end: prints the report with deltas against the previous call, keeps the history,
warns on growth, then cleans up."""

from __future__ import annotations

import warnings
from io import StringIO

import pytest
from rich.console import Console

import diagnostics
import tapegrad as tg
from diagnostics.history import ADVICE, GROWTH_EPOCHS, Growth, growth
from diagnostics.render import render_text
from diagnostics.report import LeakReport, LeakRow


@pytest.fixture(autouse=True)
def fresh_epochs() -> None:
    """Each test starts with no previous epoch (the package's only state)."""
    diagnostics.clear_history()
    yield
    diagnostics.clear_history()


def quiet() -> Console:
    return Console(file=StringIO(), width=100, color_system=None)


def train_epoch(w: tg.Tensor, steps: int) -> None:
    for _ in range(steps):
        loss = (w * w).sum()
        loss.backward()
        tg.ones(4).require_grad()  # the planted mistake: one hanging leaf a step


def test_a_cleared_history_counts_only_the_sweeps_of_the_new_run() -> None:
    """``clear_history()`` starts a new run: the hanging nodes earlier sweeps removed (an
    earlier run in the same notebook) are not "already removed" in its reports; the sweeps
    of the run itself are."""
    w = tg.ones(4).require_grad()
    train_epoch(w, 7)
    tg.graph_cleanup()  # an earlier run's sweep
    diagnostics.clear_history()
    train_epoch(w, 2)
    first, _ = diagnostics.epoch_end(1, console=quiet())
    assert (first.hanging_nodes, first.swept_nodes) == (2, 0)
    train_epoch(w, 3)
    second, _ = diagnostics.epoch_end(2, console=quiet())
    assert (second.hanging_nodes, second.swept_nodes) == (3, 2)  # epoch 1's cleanup
    assert diagnostics.leak_report().swept_nodes == 7 + 2 + 3  # the tape's own ledger
    del w


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
    assert "Δ" in out.getvalue()
    assert "graph_cleanup() freed 5 nodes (5 leaves, 5 graphs)" in out.getvalue()
    assert [r.label for r in diagnostics.history()] == ["epoch 1", "epoch 2"]
    assert all(r.graph_nodes == () for r in diagnostics.history())  # rows only
    del w
    (junk,) = [r for r in second.rows if r.kind == "hanging" and r.function == "train_epoch"]
    # Δ is what is new since the last report: the 5 leaves of this epoch (the ledger keeps
    # the 3 the last cleanup removed in the count, as swept).
    assert (junk.count - junk.swept, junk.delta) == (5, 5)


def test_epoch_end_without_cleanup_leaves_the_tape_alone() -> None:
    w = tg.ones(4).require_grad()
    train_epoch(w, 2)
    report, stats = diagnostics.epoch_end(cleanup=False, console=quiet())
    assert stats is None
    assert report.title == "tapegrad leak report"
    assert tg.graph_stats().hanging_leaves == report.hanging_leaves == 2
    assert diagnostics.history()[-1].rows == report.rows
    del w


def test_full_false_prints_one_summary_line() -> None:
    w = tg.ones(4).require_grad()
    train_epoch(w, 2)
    out = StringIO()
    diagnostics.epoch_end(1, console=Console(file=out, width=200, color_system=None), full=False)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("tapegrad leak report — epoch 1: 2 hanging nodes, 0 bytes held;")
    assert lines[1].startswith("graph_cleanup() freed 2 nodes")
    assert len(lines) == 2
    del w


def test_a_flat_loop_never_warns() -> None:
    w = tg.ones(4).require_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error", diagnostics.LeakWarning)
        for epoch in range(GROWTH_EPOCHS + 2):
            train_epoch(w, 2)  # the same hanging leaves every epoch, cleaned each time
            diagnostics.epoch_end(epoch, console=quiet())
    del w


def test_growth_three_epochs_in_a_row_warns_naming_the_origin() -> None:
    w = tg.ones(4).require_grad()
    kept = []
    for epoch in range(GROWTH_EPOCHS + 1):
        loss = (w * w).sum()
        loss.backward()
        kept.append(loss)  # the leak: losses kept after their backward  # @kept
        if epoch < GROWTH_EPOCHS:
            with warnings.catch_warnings():
                warnings.simplefilter("error", diagnostics.LeakWarning)
                diagnostics.epoch_end(epoch, console=quiet())
    with pytest.warns(diagnostics.LeakWarning, match="grew 3 epochs in a row") as caught:
        report, _ = diagnostics.epoch_end(GROWTH_EPOCHS, console=quiet())
    (warning,) = caught
    assert warning.filename == __file__  # it points at the epoch_end call
    grown = warning.message.growth  # type: ignore[union-attr]
    line = next(i for i, t in enumerate(open(__file__), 1) if t.rstrip().endswith("# @kept"))
    assert any(origin.endswith(f"test_epoch.py:{line - 2}") for origin, _ in grown.origins)
    # the kept losses are blamed: their origin's live graphs grew (kept-alive rule (c))
    assert report.kept_alive_graphs == GROWTH_EPOCHS + 1
    del w, kept, loss


def test_growth_on_bytes_alone_and_the_window() -> None:
    def rep(nodes: int, nbytes: int) -> LeakReport:
        row = LeakRow("t.py:1", "f", "add", "kept-alive", nodes, nbytes)
        return LeakReport(total_nodes=nodes, saved_bytes=nbytes, rows=(row,))

    assert growth([rep(5, 10), rep(5, 20), rep(5, 30)]) is None  # two increases only
    found = growth([rep(5, 10), rep(5, 20), rep(5, 30), rep(5, 40)])
    assert found is not None and found.saved_bytes == (10, 40)
    assert growth([rep(1, 0), rep(2, 0), rep(3, 0), rep(3, 0)]) is None  # flat at the end
    assert growth([rep(1, 0), rep(2, 0), rep(3, 0), rep(4, 0)]).origins == (("t.py:1", 3),)  # type: ignore[union-attr]


def test_an_epoch_end_on_another_tape_is_no_baseline() -> None:
    """Node ids, counts and rows are a tape's own: an evaluation tape's epoch_end is compared
    with that tape's previous one, never with the process tape's (the review found a correct
    live chain on a private tape called kept-alive, "+60" against the other tape's rows)."""
    junk = [tg.ones(2).require_grad() for _ in range(3)]
    del junk
    diagnostics.epoch_end("train", console=quiet(), cleanup=False)  # the process tape
    private = tg.Tape("eval")
    with tg.use_tape(private):
        x = tg.ones(3).require_grad()
        y = x
        for _ in range(60):
            y = y * 1.0001  # a live chain: correct, in use
        first, _ = diagnostics.epoch_end("eval", console=quiet(), cleanup=False)
        assert first.kept_alive_graphs == 0
        assert all(row.delta is None for row in first.rows)  # no baseline on this tape
        tg.ones(2).require_grad()  # one hanging leaf on this tape since its last epoch_end
        second, _ = diagnostics.epoch_end("eval", console=quiet(), cleanup=False)
        assert second.kept_alive_graphs == 0
        deltas = {(row.kind, row.op): row.delta for row in second.rows}
        assert deltas == {("live", "multiply"): 0, ("live", "leaf"): 0, ("hanging", "leaf"): 1}
    tg.graph_cleanup()
    del x, y


def test_the_summary_line_counts_what_sweeps_removed_as_the_full_report_does() -> None:
    """``epoch_end(full=False)`` printed "4002 hanging nodes (+14000 since the last report)"
    after a sweep, where the full report says what sweeps already removed."""
    tape = tg.Tape("swept")
    tape.set_cleanup_policy("threshold", threshold=10)
    lines = []
    with tg.use_tape(tape):
        for epoch in range(2):
            for _ in range(7):
                tg.ones(4).require_grad() * 2.0  # 14 hanging nodes: one sweep at 10
            out = StringIO()
            report, _ = diagnostics.epoch_end(
                epoch, console=Console(file=out, width=200, color_system=None), full=False
            )
            assert report.swept_nodes > 0
            full = render_text(report, width=200)
            swept = f"(+{report.swept_nodes} nodes sweeps already removed"
            assert swept in full
            lines.append(out.getvalue().splitlines()[0])
            assert f"{report.hanging_nodes} hanging nodes {swept}" in lines[-1]
    assert "removed), " in lines[0] and "since the last report" not in lines[0]
    assert "removed; +14 since the last report), " in lines[1]


def test_the_growth_warning_advises_by_the_class_that_grew() -> None:
    """The advice pointed to kept-alive graphs for every growth, also for hanging nodes that
    ``graph_cleanup()`` frees (an ``epoch_end(cleanup=False)`` loop)."""
    tape = tg.Tape("hanging")
    with tg.use_tape(tape):
        with pytest.warns(diagnostics.LeakWarning) as caught:
            for epoch in range(GROWTH_EPOCHS + 1):
                tg.ones(4).require_grad() * 2.0
                diagnostics.epoch_end(epoch, cleanup=False, console=quiet())
        tg.graph_cleanup()
    (warning,) = caught
    grown = warning.message.growth  # type: ignore[union-attr]
    assert grown.kinds == ("hanging",)
    assert ADVICE["hanging"] in grown.message and ADVICE["kept-alive"] not in grown.message
    kept = LeakReport(rows=(LeakRow("t.py:1", "f", "add", "kept-alive", 1, 0),))
    assert "'why alive'" in Growth(3, (1, 4), (0, 0), (), ("kept-alive",)).message
    assert growth([kept] * 4) is None
