"""notebooks/05_models.ipynb: committed with outputs, and executes with small parameters."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _notebooks import execute_small, html_outputs, outputs, read, texts

NOTEBOOK = "05_models.ipynb"


def _check(nb: Any, full: bool) -> None:
    outs = outputs(nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    reports = [h for h in html_outputs(outs) if "tapegrad leak report" in h]
    assert len(reports) >= 3  # the convnet's epochs, its fixed run, the transformer's epochs
    kept = [h for h in reports if "demo_cnn.py" in h and "kept-alive" in h]
    assert kept, "the convnet's planted leak is not named"
    assert any("demo_text.py" in h and "kept-alive" in h for h in reports)
    text = texts(outs) + "".join(html_outputs(outs))
    assert "kept-alive graphs with the fix: 0" in text
    # the RNN: the state carried without .detach() meets a consumed graph; with it, only the
    # seven parameters stay on the tape
    assert "GraphConsumedError: Trying to backward through a graph a second time" in text
    assert "call .detach() on state carried between steps" in text
    assert "nodes=7, leaves=7, live_nodes=7, hanging_nodes=0" in text
    assert re.search(r"unigram baseline [\d.]+", text)
    # sequences of different lengths, packed: a GRU classifies random walks
    walks = re.search(r"walks of 3 to 12 steps, packed: accuracy ([\d.]+)%", text)
    assert walks is not None
    if full:
        assert float(walks.group(1)) >= 90.0
    # the encoder-decoder and the autoencoder train; a cleanup leaves parameters only
    assert re.search(r"reverser: loss [\d.]+ -> [\d.]+, 1 compile", text)
    assert re.search(r"autoencoder: reconstruction error [\d.]+ -> [\d.]+", text)
    assert "after cleanup: 0 op nodes, 0 hanging" in text
    accuracy = re.search(r"final test accuracy: ([\d.]+)%", text)
    assert accuracy is not None
    if full:
        assert float(accuracy.group(1)) >= 97.0


def test_committed_notebook_has_its_outputs() -> None:
    _check(read(NOTEBOOK), full=True)


@pytest.mark.slow
def test_notebook_runs_with_small_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    _check(execute_small(NOTEBOOK, monkeypatch), full=False)
