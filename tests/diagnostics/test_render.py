"""Rendering: exact text of a small report, colours by class, wrapped origins, Jupyter."""

from __future__ import annotations

import re
from io import StringIO

import rich
from rich.console import Console
from rich.style import Style
from rich.terminal_theme import DEFAULT_TERMINAL_THEME

import tapegrad as tg
from diagnostics.render import STYLES, human_bytes, render_cleanup, render_html, render_text
from diagnostics.report import REASON_CONSUMED, TITLE, Explanation, LeakReport, LeakRow

SMALL = LeakReport(
    hanging_leaves=1,
    hanging_nodes=3,
    dead_graphs=1,
    live_graphs=2,
    kept_alive_graphs=1,
    total_nodes=9,
    bytes_held=1536,
    rows=(
        LeakRow("train.py:17", "step", "matmul", "hanging", 2, 1536, 2),
        LeakRow("train.py:42", "train", "add", "kept-alive", 3, 0, 1),
        LeakRow("train.py:16", "step", "leaf", "hanging", 1, 0, 0),
        LeakRow("train.py:40", "train", "sum", "consumed", 3, 0, 1),
    ),
    explanations=(
        Explanation(
            8, REASON_CONSUMED, 3, 0, "Tensor(shape=(), origin=train.py:42)", ("global running",)
        ),
    ),
    graphs=3,
    saved_bytes=2048,
    last_node_id=12,
    label="epoch 2",
)

SMALL_TEXT = """\
╭─ tapegrad leak report — epoch 2 ───────────────────────────────────────────────────╮
│ hanging     3 nodes (1 leaf), 1 dead graph, 1.5 kB held → freed by graph_cleanup() │
│ kept-alive  1 graph, 3 nodes → fix the code: .item(), .detach() or tg.no_grad()    │
│ live        2 graphs with a live tensor → in use, not blamed                       │
│ consumed    3 records → backward markers, freed with their tensors                 │
│ total       9 nodes in 3 graphs, 2.0 kB saved                                      │
╰────────────────────────────────────────────────────────────────────────────────────╯
kind        origin                                   function             op      count    bytes   Δ
────────────────────────────────────────────────────────────────────────────────────────────────────
hanging     train.py:17                              step                 matmul      2   1.5 kB  +2
kept-alive  train.py:42                              train                add         3  0 bytes  +1
hanging     train.py:16                              step                 leaf        1  0 bytes   0
consumed    train.py:40                              train                sum         3  0 bytes  +1
why alive
graph 8: 3 nodes, 0 bytes; a live tensor reaches a consumed record through unconsumed ops
  global running → Tensor(shape=(), origin=train.py:42)
"""


def plain_console(width: int = 100) -> Console:
    return Console(file=StringIO(), width=width, color_system=None)


def test_a_small_report_renders_exactly() -> None:
    console = plain_console()
    console.print(SMALL)
    assert console.file.getvalue() == SMALL_TEXT  # type: ignore[attr-defined]
    assert render_text(SMALL) == SMALL_TEXT
    assert str(SMALL) == SMALL_TEXT


def test_hanging_bytes_that_cleanup_cannot_free_are_explained_on_the_hanging_line() -> None:
    """Hanging rows that save arrays live graphs or tensors also hold (a penalty on a
    parameter, computed and never used) list bytes while "held" (what cleanup frees) is 0:
    the hanging line says so, where a reader compares the two."""
    shared = LeakReport(
        hanging_nodes=2,
        bytes_held=0,
        rows=(LeakRow("train.py:22", "step", "integer_pow", "hanging", 2, 262144, None),),
        total_nodes=4,
        graphs=2,
        saved_bytes=131072,
    )
    text = " ".join(render_text(shared, width=200).split())
    assert "0 bytes held (their rows list 262.1 kB: arrays that live graphs or tensors" in text
    assert "hold too, which cleanup does not free)" in text
    assert "their rows list" not in render_text(SMALL, width=200)  # rows == held there
    partly = LeakReport(  # arrays several hanging nodes save: the total line explains those
        hanging_nodes=2,
        bytes_held=131072,
        rows=(LeakRow("train.py:22", "step", "relu", "hanging", 2, 262144, None),),
        total_nodes=2,
        graphs=1,
        saved_bytes=131072,
    )
    assert "their rows list" not in render_text(partly, width=200)


def test_no_delta_column_without_a_baseline_and_no_table_for_an_empty_tape() -> None:
    rows = tuple(LeakRow(r.origin, r.function, r.op, r.kind, r.count, r.bytes) for r in SMALL.rows)
    text = render_text(LeakReport(rows=rows))
    assert "Δ" not in text
    assert "   +2" not in text
    empty = render_text(LeakReport())
    assert empty.splitlines()[0].startswith(f"╭─ {TITLE} ─")
    assert "origin" not in empty
    assert "0 nodes (0 leaves), 0 dead graphs, 0 bytes held" in empty


def test_classes_are_coloured() -> None:
    console = Console(file=StringIO(), width=100, record=True, color_system="truecolor")
    console.print(SMALL)
    html = console.export_html(inline_styles=True)
    for kind in ("hanging", "kept-alive"):
        css = Style.parse(STYLES[kind]).get_html_style(DEFAULT_TERMINAL_THEME)
        assert re.search(f'<span style="{css}">{kind} *</span>', html)


def test_long_origins_are_wrapped_never_cut() -> None:
    origin = "/".join(f"directory{i}" for i in range(12)) + "/train.py:1234"
    report = LeakReport(hanging_nodes=1, rows=(LeakRow(origin, "f", "exp", "hanging", 1, 0),))
    text = render_text(report, width=72)
    assert "…" not in text
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("kind"))
    start, end = lines[header].index("origin"), lines[header].index("function")
    pieces = [line[start:end].strip() for line in lines[header + 2 :]]
    assert "".join(pieces) == origin
    assert len(pieces) > 1
    assert all(piece.endswith("/") for piece in pieces[:-1])  # wrapped after a folder


def test_cells_wrap_after_a_separator_never_inside_a_name() -> None:
    """At 80 columns the demos' rows folded ``demo_cnn.py`` into ``d`` + ``emo_cnn.py`` and
    ``CNNTask.train_step`` into ``CNNTask.tra`` + ``in_step``: origins now wrap after a
    ``/``, functions after a ``.``; a piece too wide for the table makes blocks instead."""
    where = "/home/me/projects/diagnostics/demo_cnn.py"
    rows = (
        LeakRow(f"{where}:90", "CNNTask.train_step", "add", "kept-alive", 42, 0),
        LeakRow(f"{where}:37", "ConvNet.__init__", "leaf", "live", 2, 0),
    )
    text = render_text(LeakReport(rows=rows), width=80).split("╯")[-1]
    assert text.lstrip().startswith("kind")  # still a table
    lines = [line.split() for line in text.splitlines()[3:]]
    assert lines[0][1:3] == ["/home/me/projects/diagnostics/", "CNNTask."]
    assert lines[1] == ["demo_cnn.py:90", "train_step"]
    assert lines[3] == ["demo_cnn.py:37", "__init__"]
    long = LeakRow("/home/a_module_with_a_long_name.py:1", "Model.__init__", "leaf", "live", 1, 0)
    blocks = render_text(LeakReport(rows=(long,)), width=70).split("╯")[-1]  # room to fold it
    assert "  /home/a_module_with_a_long_name.py:1" in [x.rstrip() for x in blocks.splitlines()]


def test_many_rows_are_summed_up_after_max_rows() -> None:
    rows = tuple(LeakRow(f"t.py:{i}", "f", "add", "hanging", 1, 100) for i in range(35))
    text = render_text(LeakReport(hanging_nodes=35, rows=rows))
    assert "t.py:29 " in text and "t.py:30 " not in text
    assert "… 5 more rows" in text
    assert "500 bytes" in text  # the rest, summed


def test_rich_print_and_jupyter_display() -> None:
    out = StringIO()
    rich.print(SMALL, file=out)
    assert "tapegrad leak report — epoch 2" in out.getvalue()
    bundle = SMALL._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == SMALL_TEXT
    assert bundle["text/html"].startswith("<pre ")
    assert "tapegrad leak report — epoch 2" in bundle["text/html"]
    assert "global running → Tensor(shape=(), origin=train.py:42)" in bundle["text/html"]
    assert SMALL._repr_html_() == render_html(SMALL)
    assert set(SMALL._repr_mimebundle_(include=["text/html"])) == {"text/html"}
    assert set(SMALL._repr_mimebundle_(exclude=["text/html"])) == {"text/plain"}


def test_cleanup_line_and_human_bytes() -> None:
    stats = tg.CleanupStats(
        nodes_removed=3, leaves_removed=1, graphs_removed=2, bytes_freed=1024, seconds=0.0015
    )
    assert (
        render_text(render_cleanup(stats))
        == "graph_cleanup() freed 3 nodes (1 leaf, 2 graphs), 1.0 kB in 1.5 ms\n"
    )
    assert [human_bytes(n) for n in (0, 1, 999, 1500, 2_500_000)] == [
        "0 bytes",
        "1 byte",
        "999 bytes",
        "1.5 kB",
        "2.5 MB",
    ]


def test_a_narrow_console_gets_one_block_per_row_and_loses_no_column() -> None:
    """Too narrow for the table (a 40-column terminal, a long op name): rich would squeeze
    columns to nothing (count and bytes gone, origins cut to "…"); each row becomes a block
    whose every field is there and whose origin folds over the whole width."""
    origin = "models/train_script_with_a_long_name.py:5"
    rows = (
        LeakRow(
            origin, "Trainer.training_step", "scaled_dot_product_attention", "hanging", 3, 4096
        ),
        LeakRow("t.py:1", "f", "add", "live", 1, 16, delta=2),
    )
    report = LeakReport(hanging_nodes=3, rows=rows)
    for width in (40, 60):
        text = render_text(report, width=width)
        assert "…" not in text
        rows_part = text.split("╯")[-1]
        assert "kind" not in rows_part  # no table header: blocks
        assert "scaled_dot_product_attention" in rows_part.replace("\n", "")
        assert "×3" in rows_part and "4.1 kB" in rows_part and "Δ +2" in rows_part
        pieces = [line.strip() for line in rows_part.splitlines()]
        assert origin in "".join(pieces)
        assert "Trainer.training_step" in "".join(pieces)
    wide = render_text(report, width=120)
    assert "kind" in wide.split("╯")[-1] and " Trainer. " in wide  # a table
    assert " training_step " in wide  # wrapped after the dot, never inside the name
