"""Rich renderables for leak reports and cleanups, and their text and HTML (Jupyter) forms.

Renderers return renderables and never print to a global console: the caller chooses the
``Console`` (``epoch_end(console=...)``, ``Console(record=True)`` in tests).
"""

from __future__ import annotations

import re
from io import StringIO

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.filesize import decimal
from rich.jupyter import JUPYTER_HTML_FORMAT
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

import tapegrad as tg
from diagnostics.report import CONSEQUENCES, KINDS, LeakReport, LeakRow

__all__ = [
    "STYLES",
    "human_bytes",
    "plural",
    "render_cleanup",
    "render_html",
    "render_line",
    "render_report",
    "render_text",
    "show",
    "terminal_console",
]

STYLES: dict[str, str] = {
    "hanging": "bold red",
    "kept-alive": "bold magenta",
    "live": "green",
    "consumed": "dim",
}
"""The colour of each class, in the summary and in the table."""

MAX_ROWS = 30
"""Rows shown in the table; the rest are summed up in one line (the report keeps them all)."""


def human_bytes(n: int) -> str:
    """Bytes in decimal units: ``0 bytes``, ``512 bytes``, ``1.2 kB``, ``3.4 MB``."""
    return str(decimal(n))


def plural(n: int, word: str, words: str | None = None) -> str:
    """``"1 node"``, ``"3 nodes"``; ``words`` for an irregular plural (``"leaves"``)."""
    return f"{n} {word}" if n == 1 else f"{n} {words or word + 's'}"


def render_report(report: LeakReport, *, max_rows: int = MAX_ROWS) -> RenderableType:
    """The summary panel, the origin table and the "why alive" lines of a report.

    Args:
        report: the report to draw.
        max_rows: rows shown in the table; the others are summed up in a last line.
    """
    parts: list[RenderableType] = [_summary(report)]
    if report.rows:
        parts.append(_Rows(report, max_rows))
    if report.explanations:
        parts.append(_explanations(report))
    return Group(*parts)


def _swept(report: LeakReport) -> str:
    """``"+9998 nodes sweeps already removed"``: what the hanging figure adds in words."""
    return f"+{plural(report.swept_nodes, 'node')} sweeps already removed"


def _summary(report: LeakReport) -> Panel:
    notes = [_swept(report)] if report.swept_nodes else []
    listed = sum(r.bytes for r in report.rows if r.kind == "hanging")
    if listed and not report.bytes_held:  # rows list bytes, cleanup frees none: all shared
        notes.append(
            f"their rows list {human_bytes(listed)}: arrays that live graphs or tensors "
            "hold too, which cleanup does not free"
        )
    swept = f" ({'; '.join(notes)})" if notes else ""
    figures = {
        "hanging": f"{plural(report.hanging_nodes, 'node')} "
        f"({plural(report.hanging_leaves, 'leaf', 'leaves')}), "
        f"{plural(report.dead_graphs, 'dead graph')}, "
        f"{human_bytes(report.bytes_held)} held{swept}",
        "kept-alive": f"{plural(report.kept_alive_graphs, 'graph')}, "
        f"{plural(report.count('kept-alive'), 'node')}",
        "live": f"{plural(report.live_graphs, 'graph')} with a live tensor",
        "consumed": plural(report.count("consumed"), "record"),
    }
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for kind in KINDS:
        line = Text(figures[kind])
        line.append(f" → {CONSEQUENCES[kind]}", style="dim" if kind in ("live", "consumed") else "")
        grid.add_row(Text(kind, style=STYLES[kind]), line)
    total = Text(
        f"{plural(report.total_nodes, 'node')} in {plural(report.graphs, 'graph')}, "
        f"{human_bytes(report.saved_bytes)} saved"
    )
    if report.rows_bytes > report.saved_bytes:
        total.append(
            f" (the rows add up to {human_bytes(report.rows_bytes)}: an array saved by several "
            "nodes counts once per node there, once here)",
            style="dim",
        )
    grid.add_row(Text("total", style="bold"), total)
    if len(report.bytes_by_device) > 1:
        per_device = ", ".join(f"{d} {human_bytes(n)}" for d, n in report.bytes_by_device)
        grid.add_row(Text("devices", style="bold"), Text(f"saved per device: {per_device}"))
    border = "red" if report.hanging_nodes else "magenta" if report.kept_alive_graphs else "green"
    return Panel(
        grid,
        title=Text(report.title, style="bold"),
        title_align="left",
        border_style=border,
        expand=False,
    )


def render_line(report: LeakReport) -> Text:
    """The report in one line, with the full report's figures: hanging nodes on the tape
    (with those sweeps already removed, and how many are new since the baseline, swept ones
    included), bytes held, kept-alive graphs, nodes on the tape."""
    text = Text(report.title, style="bold")
    text.append(": ")
    text.append(plural(report.hanging_nodes, "hanging node"), style=STYLES["hanging"])
    notes = [_swept(report)] if report.swept_nodes else []
    if any(r.delta is not None for r in report.rows):
        new = sum(r.delta for r in report.rows if r.kind == "hanging" and r.delta)
        notes.append(f"{new:+d} since the last report")
    if notes:
        text.append(f" ({'; '.join(notes)})")
    text.append(f", {human_bytes(report.bytes_held)} held; ")
    text.append(
        plural(report.kept_alive_graphs, "kept-alive graph"),
        style=STYLES["kept-alive"] if report.kept_alive_graphs else "",
    )
    text.append(f"; {plural(report.total_nodes, 'node')} on the tape")
    return text


ORIGIN_WIDTH = 30
"""Origins up to this many characters are never folded (the table squeezes other columns)."""


class _Rows:
    """The report's rows: the table where every column fits the width at its least (the
    no-wrap columns whole, an origin folded no narrower than ``FOLD_WIDTHS`` says), else one
    block per row, so that a narrow terminal or notebook cell never drops a column or cuts
    an origin short (rich squeezes a table too wide for its console down to nothing)."""

    def __init__(self, report: LeakReport, max_rows: int) -> None:
        self.report = report
        self.max_rows = max_rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = _table(self.report, self.max_rows)
        if _least_width(table, console, options) <= options.max_width:
            yield table
        else:
            yield _blocks(self.report, self.max_rows)


FOLD_WIDTHS = {"origin": 16, "function": 8}
"""The narrowest the folded columns may get in the table (less when their text is shorter,
more when a piece of it is longer: ``_Breakable``); below that a report's rows are drawn as
blocks."""


class _Breakable:
    """An origin or a function name that wraps only after a separator (a path's ``/``, a
    qualified name's ``.``), so that no file or identifier is cut in the middle; a piece wider
    than the whole width folds. Its least width is its widest piece."""

    def __init__(self, text: str, separators: str, style: str = "") -> None:
        self.text = text
        self.pieces = re.split(f"(?<=[{re.escape(separators)}])", text)
        self.style = style

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(max(cell_len(p) for p in self.pieces), cell_len(self.text))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = [""]
        for piece in self.pieces:
            if lines[-1] and cell_len(lines[-1] + piece) > options.max_width:
                lines.append("")
            lines[-1] += piece
        yield Text("\n".join(lines), style=self.style, overflow="fold")


def _origin(row: LeakRow) -> _Breakable:
    return _Breakable(row.origin, "/\\")


def _function(row: LeakRow, style: str = "") -> _Breakable:
    return _Breakable(row.function, ".", style)


def _least_width(table: Table, console: Console, options: ConsoleOptions) -> int:
    """The width the table needs without squeezing a column below its least: no-wrap columns
    at their widest cell, two between columns, and what is left shared by the folded columns
    (rich splits it by their ratios, origin 2 : function 1) so that each gets its
    ``FOLD_WIDTHS`` or its longest text, whichever is less."""
    fixed = 2 * (len(table.columns) - 1)
    share = 0.0
    ratios = sum(column.ratio or 0 for column in table.columns)
    for column in table.columns:
        sizes = [Measurement.get(console, options, c) for c in [column.header, *column.cells]]
        widest = max(size.maximum for size in sizes)
        if column.ratio:
            piece = max(size.minimum for size in sizes)  # an unbreakable piece: kept whole
            least = min(widest, max(piece, FOLD_WIDTHS.get(str(column.header), widest)))
            share = max(share, least * ratios / column.ratio)
        else:
            fixed += widest
    return fixed + int(share) + 1


def _blocks(report: LeakReport, max_rows: int) -> Group:
    """One block a row: kind, op, count, swept, bytes and change on a first line, then the
    origin and the function, each folded over the whole width (nothing cut short)."""
    lines: list[RenderableType] = []
    shown, rest = report.rows[:max_rows], report.rows[max_rows:]
    for row in shown:
        head = Text(row.kind, style=STYLES.get(row.kind, ""))
        head.append(f"  {row.op}  ×{row.count}")
        if row.swept:
            head.append(f"  swept {row.swept}")
        head.append(f"  {human_bytes(row.bytes)}")
        if row.delta is not None:
            head.append(f"  Δ {row.delta:+d}" if row.delta else "  Δ 0")
        style = "dim" if row.kind == "consumed" else ""
        lines.append(Text.assemble(head, style=style, overflow="fold"))
        lines.append(Padding(_origin(row), (0, 0, 0, 2)))
        lines.append(Padding(_function(row, "dim"), (0, 0, 0, 2)))
    if rest:
        more = f"… {plural(len(rest), 'more row')}: ×{sum(r.count for r in rest)}, "
        lines.append(Text(more + human_bytes(sum(r.bytes for r in rest)), style="italic"))
    return Group(*lines)


def _table(report: LeakReport, max_rows: int) -> Table:
    with_delta = any(row.delta is not None for row in report.rows)
    with_swept = any(row.swept for row in report.rows)
    table = Table(
        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True, expand=True
    )  # expand: the ratio columns then share exactly the width the fixed ones leave
    # An origin is the one cell a reader copies (file:line): it gets its full width first, up
    # to ORIGIN_WIDTH, and folds only beyond that; the function column takes what is left.
    longest = max((len(row.origin) for row in report.rows[:max_rows]), default=6)
    named = max((len(row.function) for row in report.rows[:max_rows]), default=8)
    table.add_column("kind", no_wrap=True)
    table.add_column("origin", overflow="fold", ratio=2, min_width=min(longest, ORIGIN_WIDTH))
    table.add_column("function", overflow="fold", ratio=1, min_width=min(named, 12))
    table.add_column("op", no_wrap=True)
    table.add_column("count", justify="right", no_wrap=True)
    if with_swept:
        table.add_column("swept", justify="right", no_wrap=True)
    table.add_column("bytes", justify="right", no_wrap=True)
    if with_delta:
        table.add_column("Δ", justify="right", no_wrap=True)
    shown, rest = report.rows[:max_rows], report.rows[max_rows:]
    for row in shown:
        cells: list[RenderableType] = [
            Text(row.kind, style=STYLES.get(row.kind, "")),
            _origin(row),  # user text: never parsed as rich markup
            _function(row),
            Text(row.op),
            str(row.count),
            *([str(row.swept) if row.swept else ""] if with_swept else []),
            human_bytes(row.bytes),
        ]
        if with_delta:
            cells.append("" if row.delta is None else f"{row.delta:+d}" if row.delta else "0")
        table.add_row(*cells, style="dim" if row.kind == "consumed" else None)
    if rest:
        cells = [
            "",
            Text(f"… {plural(len(rest), 'more row')}", style="italic"),
            "",
            "",
            str(sum(r.count for r in rest)),
            *([str(sum(r.swept for r in rest))] if with_swept else []),
            human_bytes(sum(r.bytes for r in rest)),
        ]
        table.add_row(*cells, *([""] if with_delta else []))
    return table


def _explanations(report: LeakReport) -> Group:
    lines: list[RenderableType] = [Text("why alive", style="bold magenta")]
    for e in report.explanations:
        head = Text(f"graph {e.graph}", style="magenta")
        head.append(f": {plural(e.nodes, 'node')}, {human_bytes(e.bytes)}; {e.reason}")
        lines.append(head)
        lines.append(Padding(Text(e.path), (0, 0, 0, 2), expand=False))
    return Group(*lines)


def render_cleanup(stats: tg.CleanupStats) -> Text:
    """One line saying what a ``graph_cleanup()`` freed."""
    leaves = plural(stats.leaves_removed, "leaf", "leaves")
    text = Text("graph_cleanup() ", style="bold")
    text.append(
        f"freed {plural(stats.nodes_removed, 'node')} ({leaves}, "
        f"{plural(stats.graphs_removed, 'graph')}), {human_bytes(stats.bytes_freed)} "
        f"in {stats.seconds * 1e3:.1f} ms",
        style="green" if stats.nodes_removed else "",
    )
    return text


def _console(width: int, *, record: bool) -> Console:
    return Console(
        file=StringIO(),
        width=width,
        record=record,
        color_system="truecolor" if record else None,
        force_terminal=record,
        force_jupyter=False,
        soft_wrap=False,
    )


def render_text(item: LeakReport | RenderableType, *, width: int = 100) -> str:
    """Plain text (no colour) of a report or renderable, ``width`` columns wide."""
    console = _console(width, record=False)
    console.print(render_report(item) if isinstance(item, LeakReport) else item)
    out = console.file
    assert isinstance(out, StringIO)
    return out.getvalue()


def render_html(item: LeakReport | RenderableType, *, width: int = 100) -> str:
    """An HTML ``<pre>`` fragment of a report or renderable, coloured (for Jupyter)."""
    console = _console(width, record=True)
    console.print(render_report(item) if isinstance(item, LeakReport) else item)
    return console.export_html(inline_styles=True, code_format=JUPYTER_HTML_FORMAT)


FALLBACK_WIDTH = 80
"""The width of a terminal that reports none (``COLUMNS=0``), as rich uses for a terminal
whose size it cannot read."""


def terminal_console() -> Console:
    """A new ``Console()`` (stdout), ``FALLBACK_WIDTH`` wide when the terminal says it has no
    columns: rich would draw nothing at width 0."""
    console = Console()
    if console.width < 1:
        console.width = FALLBACK_WIDTH
    return console


def show(item: LeakReport | RenderableType, console: Console | None = None) -> None:
    """Print a report or renderable on ``console``; without one, on a new
    ``terminal_console()`` (stdout), or in Jupyter as HTML with a plain-text alternative free
    of ANSI escapes (what a notebook's text view and ``nbconvert --to script`` show)."""
    if console is None:
        console = terminal_console()
        if console.is_jupyter:
            from IPython.display import display

            bundle = {"text/plain": render_text(item), "text/html": render_html(item)}
            display(bundle, raw=True)  # type: ignore[no-untyped-call]
            return
    console.print(item)
