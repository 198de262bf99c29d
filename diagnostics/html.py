"""``save_html``: a report as one self-contained HTML file to attach to a bug report.

The file holds the rendered report (rich's HTML export, inline styles), the graph picture
(inline SVG), the history plot (inline SVG, when there is a history) and the report as JSON
(a ``<script type="application/json">`` data block, never run). Nothing is fetched: no
external stylesheet, script, font or image.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Sequence
from pathlib import Path

from diagnostics.history import history as recorded
from diagnostics.picture import graph_picture
from diagnostics.render import render_html
from diagnostics.report import LeakReport

__all__ = ["save_html", "to_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
.scroll { overflow-x: auto; border: 1px solid #ddd; padding: 0.5em; }
pre { white-space: pre; }
"""


def _plot_svg(reports: Sequence[LeakReport]) -> str:
    """The history plot as an inline SVG element (matplotlib draws text as paths)."""
    from diagnostics.plot import plot_history

    fig = plot_history(reports)
    out = io.StringIO()
    fig.savefig(out, format="svg")
    text = out.getvalue()
    return text[text.index("<svg") :]


def to_html(report: LeakReport, *, history: Sequence[LeakReport] | None = None) -> str:
    """The HTML document ``save_html`` writes.

    Args:
        report: the report.
        history: reports to plot, oldest first; ``diagnostics.history()`` by default (no
            plot when it is empty).
    """
    reports = list(recorded() if history is None else history)
    # no "<" at all in the data block: neither "</script>" nor "<!--" can end or hide it
    data = json.dumps(report.to_dict(), ensure_ascii=True).replace("<", "\\u003c")
    picture = graph_picture(report).svg
    sections = [
        "<h2>Report</h2>",
        render_html(report, width=120),
        "<h2>Graphs</h2>",
        f'<div class="scroll" id="graph-picture">{picture}</div>',
    ]
    if reports:
        sections += ["<h2>History</h2>", f'<div id="history-plot">{_plot_svg(reports)}</div>']
    title = html.escape(report.title)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>{title}</h1>" + "\n".join(sections) + "<h2>Data</h2><p>The report as JSON "
        "(<code>LeakReport.from_dict</code> reads it back) is in this file's "
        '<code>report-data</code> block.</p><script type="application/json" id="report-data">'
        f"{data}</script></body></html>\n"
    )


def save_html(
    report: LeakReport, path: str | Path, *, history: Sequence[LeakReport] | None = None
) -> Path:
    """Write ``to_html(report, history=history)`` to ``path`` (UTF-8); return the path.

    Raises:
        OSError: the file cannot be written.
    """
    out = Path(path)
    out.write_text(to_html(report, history=history), encoding="utf-8")
    return out
