"""save_html: one self-contained file (no network), tables, picture and plot inline, data."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import diagnostics
from diagnostics.report import GraphNode, LeakReport, LeakRow

REPORT = LeakReport(
    hanging_nodes=2,
    hanging_leaves=1,
    rows=(LeakRow("träin/<b>[/]&.py:7", "step", "exp", "hanging", 2, 64),),
    graph_nodes=(
        GraphNode(0, 0, "hanging", "leaf", "träin/<b>[/]&.py:6", "step", 0),
        GraphNode(1, 0, "hanging", "exp", "träin/<b>[/]&.py:7", "step", 64, (0,)),
    ),
    label="epoch 3",
)


class Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.data.append(data)


def test_the_file_is_self_contained_and_holds_everything(tmp_path: Path) -> None:
    history = [REPORT, REPORT]
    path = REPORT.save_html(tmp_path / "leak.html", history=history)
    page = path.read_text(encoding="utf-8")
    parser = Collect()
    parser.feed(page)
    tags = parser.tags
    # nothing fetched: no link, no img, no src or href anywhere, scripts are data only
    assert not [t for t, a in tags if t in ("link", "img", "iframe", "object", "embed")]
    assert not [a for _, a in tags if "src" in a or "href" in a]
    assert [a.get("type") for t, a in tags if t == "script"] == ["application/json"]
    assert not re.search(r"url\((?!#)", page)  # CSS url() only to the SVG's own markers
    text = "".join(parser.data)
    assert "träin/<b>[/]&.py:7" in text  # escaped in the page, read back as text
    assert [t for t, _ in tags].count("svg") == 2  # the graph picture and the history plot
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert LeakReport.from_dict(data) == REPORT


def test_an_origin_cannot_end_or_hide_the_data_block(tmp_path: Path) -> None:
    """A file name holding "<!--<script>" or "</script>" stays inside the JSON data block
    (no "<" in it at all), and the block reads back as the report."""
    odd = "x<!--<script>/</script>.py:3"
    report = LeakReport(rows=(LeakRow(odd, "step", "exp", "hanging", 1, 8),))
    page = report.save_html(tmp_path / "odd.html", history=[]).read_text(encoding="utf-8")
    block = re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1)  # type: ignore[union-attr]
    assert "<" not in block
    assert LeakReport.from_dict(json.loads(block)) == report


def test_without_history_there_is_no_plot(tmp_path: Path) -> None:
    diagnostics.clear_history()
    page = REPORT.save_html(tmp_path / "a.html").read_text(encoding="utf-8")
    assert page.count("<svg") == 1
    assert 'id="history-plot"' not in page
