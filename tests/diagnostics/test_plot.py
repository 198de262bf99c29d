"""plot_history: one line per class in two panels, growth shaded, saving, an empty history."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.colors as mcolors
import pytest

import diagnostics
import tapegrad as tg
from diagnostics.plot import COLOURS
from diagnostics.report import LeakReport, LeakRow


def epoch(n: int, kept: int, label: str) -> LeakReport:
    rows = (
        LeakRow("t.py:1", "f", "leaf", "hanging", 10 + n, 40, swept=n),
        LeakRow("t.py:2", "f", "add", "kept-alive", kept, 8 * kept),
        LeakRow("t.py:3", "f", "leaf", "live", 4, 0),
    )
    return LeakReport(
        total_nodes=14 + kept, saved_bytes=40 + 8 * kept, bytes_held=40, rows=rows, label=label
    )


def test_lines_per_class_and_growth_shaded() -> None:
    reports = [epoch(n, kept=3 * n, label=f"epoch {n}") for n in range(1, 6)]
    fig = diagnostics.plot_history(reports)
    nodes_ax, bytes_ax = fig.axes
    lines = {line.get_label(): line for line in nodes_ax.get_lines()}
    assert set(lines) == {"hanging", "kept-alive", "live", "consumed", "total"}
    assert list(lines["hanging"].get_ydata()) == [10] * 5  # held: swept nodes are gone
    assert list(lines["kept-alive"].get_ydata()) == [3, 6, 9, 12, 15]
    assert mcolors.to_hex(lines["kept-alive"].get_color()) == COLOURS["kept-alive"]
    bytes_lines = {line.get_label(): line for line in bytes_ax.get_lines()}
    assert list(bytes_lines["kept-alive"].get_ydata()) == [24, 48, 72, 96, 120]
    assert len(nodes_ax.patches) == 2  # epochs 4 and 5: grown three epochs in a row
    assert "t.py:2" in nodes_ax.get_title()
    assert [t.get_text() for t in bytes_ax.get_xticklabels()] == ["1", "2", "3", "4", "5"]


def test_a_flat_history_has_no_shading_and_saves_png_and_svg(tmp_path: Path) -> None:
    fig = diagnostics.plot_history([epoch(0, kept=0, label=f"e{n}") for n in range(5)])
    assert len(fig.axes[0].patches) == 0
    fig.savefig(tmp_path / "h.png")
    assert (tmp_path / "h.png").read_bytes().startswith(b"\x89PNG")
    out = io.StringIO()
    fig.savefig(out, format="svg")
    assert "<svg" in out.getvalue()


def test_an_empty_history_says_so() -> None:
    diagnostics.clear_history()
    fig = diagnostics.plot_history()
    assert "no epoch_end report yet" in [t.get_text() for t in fig.axes[0].texts]


def test_dollar_signs_in_origins_are_not_mathtext() -> None:
    reports = [
        LeakReport(
            total_nodes=n, rows=(LeakRow("$HOME/a_$b$.py:1", "f", "add", "kept-alive", n, 0),)
        )
        for n in range(1, 6)
    ]
    fig = diagnostics.plot_history(reports)
    fig.savefig(io.BytesIO(), format="png")  # draws the title: no mathtext error


def test_class_bytes_add_up_to_the_distinct_total_and_never_rise_above_it() -> None:
    """Graphs kept in a list all save the same input: the rows count it once per node, so
    the kept-alive line rose above the "total (distinct)" line (608 bytes against 1,216 at
    the second epoch end). Each class now draws its part of the distinct total."""
    tape = tg.Tape("shared")
    with tg.use_tape(tape):
        w = tg.randn((8, 1), key=0).require_grad()
        x = tg.randn((16, 8), key=1)
        kept, reports = [], []
        for _ in range(4):
            kept.append(((x @ w) ** 2).mean())  # each saves x: one array, many nodes
            tg.ones(100).require_grad() * 2.0  # hanging: its own bytes
            reports.append(diagnostics.leak_report(baseline=reports[-1] if reports else None))
        assert reports[-1].rows_bytes > reports[-1].saved_bytes  # shared arrays
        fig = diagnostics.plot_history(reports)
        lines = {line.get_label(): list(line.get_ydata()) for line in fig.axes[1].get_lines()}
        total = lines.pop("total (distinct)")
        assert total == [r.saved_bytes for r in reports]
        for i, report in enumerate(reports):
            assert sum(ys[i] for ys in lines.values()) == pytest.approx(total[i])
            assert lines["hanging"][i] == report.bytes_held
        assert lines["kept-alive"][-1] > 0
        legend = fig.axes[1].get_legend()
        assert [t.get_text() for t in legend.get_texts()] == ["total (distinct)"]
        tg.graph_cleanup()
        del kept, w
