"""notebooks/02_training_loop.ipynb: committed with outputs, and executes with small parameters."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _notebooks import execute_small, html_outputs, outputs, png_outputs, read, svg_outputs, texts

NOTEBOOK = "02_training_loop.ipynb"


def _check(nb: Any, epochs: int) -> None:
    outs = outputs(nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    # A rendered report (HTML) at each epoch end of the first run, then one for the second.
    reports = [h for h in html_outputs(outs) if "tapegrad leak report" in h]
    assert len(reports) == epochs + 1
    for epoch in range(1, epochs + 1):
        assert any(f"epoch {epoch}" in h for h in reports)
    assert all("hanging" in h for h in reports)
    text = texts(outs)
    freed = [int(n) for n in re.findall(r"freed (\d+) nodes \(\d+ leaves", text)]
    assert len(freed) == epochs and freed[0] > 0 and len(set(freed)) == 1
    # Without cleanup the tape grows by the same amount every epoch.
    grown = [int(n.replace(",", "")) for n in re.findall(r"epoch \d+: ([\d,]+) nodes", text)]
    assert len(grown) == epochs
    assert grown == [4 + (i + 1) * (grown[0] - 4) for i in range(epochs)]
    assert "the tape now holds 4 nodes (the parameters)" in text
    assert "\x1b[" not in text  # plain-text outputs carry no ANSI escapes
    (picture,) = svg_outputs(outs)  # the hanging nodes in the model's graph, drawn
    assert "hanging nodes in a graph" in picture and "cross_entropy" in picture
    width = float(re.search(r'<svg[^>]* width="(\d+)"', picture).group(1))  # type: ignore[union-attr]
    assert width < 1600  # wide layers wrap
    pngs = png_outputs(outs)  # the hand-made plot, then plot_history() of the first run
    assert len(pngs) == 2
    assert all(p.startswith(b"\x89PNG") and len(p) > 10_000 for p in pngs)
    accuracy = re.search(rf"final test accuracy: ([\d.]+)% after {epochs} epochs", text)
    assert accuracy is not None and float(accuracy.group(1)) >= 85.0


def test_committed_notebook_has_its_outputs() -> None:
    _check(read(NOTEBOOK), epochs=5)


def test_notebook_executes_with_small_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    _check(execute_small(NOTEBOOK, monkeypatch), epochs=2)
