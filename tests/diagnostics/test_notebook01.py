"""notebooks/01_hanging_leaves.ipynb: committed with outputs, and executes with small parameters."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _notebooks import (
    code_outputs,
    execute_small,
    html_outputs,
    outputs,
    png_outputs,
    read,
    svg_outputs,
    texts,
)

from diagnostics.report import TITLE

NOTEBOOK = "01_hanging_leaves.ipynb"


def check(nb: Any, steps: int) -> None:
    outs = outputs(nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    text = texts(outs)
    # The mistake: one hanging leaf per step, all from the same line.
    assert f"hanging_nodes={steps}, hanging_leaves={steps}" in text
    (report,) = [h for h in html_outputs(outs) if TITLE in h and "dead graph" in h]
    assert f"{steps} nodes ({steps} leaves), {steps} dead graphs" in report
    assert "freed by graph_cleanup()" in report
    assert f"CleanupStats(nodes_removed={steps}, leaves_removed={steps}" in text
    growth = re.search(r"no cleanup: (\d+) nodes at the end; with cleanup: at most (\d+)", text)
    assert growth is not None
    assert int(growth.group(1)) == steps + 1  # the parameter and one leaf a step
    assert int(growth.group(2)) < int(growth.group(1))
    assert "\x1b[" not in text  # plain-text outputs carry no ANSI escapes
    # The report's graphs, drawn: the leaves of every step are alike, drawn once.
    (picture,) = svg_outputs(outs)
    assert "dead graph" in picture and f"×{steps} alike" in picture
    # The growth plot, then plot_history() of four epoch ends (one summary line each).
    pngs = png_outputs(outs)
    assert len(pngs) == 2 and all(p.startswith(b"\x89PNG") for p in pngs)
    assert len(re.findall(r"tapegrad leak report — epoch \d: ", text)) == 4
    # The final cell: the fixed loop under no_leaks(), then the stats.
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    final = texts(code_outputs(last))
    assert "hanging_nodes=0" in final
    assert "hanging nodes: 0; nodes on the tape: 1" in final


def test_committed_notebook_has_its_outputs() -> None:
    check(read(NOTEBOOK), steps=600)


def test_notebook_executes_with_small_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    check(execute_small(NOTEBOOK, monkeypatch), steps=60)
