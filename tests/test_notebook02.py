"""notebooks/02_training_loop.ipynb: committed with outputs, and executes with small parameters."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_training_loop.ipynb"


def _outputs(nb: Any) -> list[dict[str, Any]]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]


def _text(output: dict[str, Any]) -> str:
    if output["output_type"] == "stream":
        return str(output["text"])
    return str(output.get("data", {}).get("text/plain", ""))


def _check(nb: Any, epochs: int) -> None:
    outputs = _outputs(nb)
    assert not [o for o in outputs if o["output_type"] == "error"]
    # A rendered report (HTML) at each epoch end of the first run, then one for the second.
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    reports = [h for h in html if "tapegrad leak report" in h]
    assert len(reports) == epochs + 1
    for epoch in range(1, epochs + 1):
        assert any(f"epoch {epoch}" in h for h in reports)
    assert all("hanging" in h for h in reports)
    text = "\n".join(_text(o) for o in outputs)
    freed = [int(n) for n in re.findall(r"freed (\d+) nodes \(\d+ leaves", text)]
    assert len(freed) == epochs and freed[0] > 0 and len(set(freed)) == 1
    # Without cleanup the tape grows by the same amount every epoch.
    grown = [int(n.replace(",", "")) for n in re.findall(r"epoch \d+: ([\d,]+) nodes", text)]
    assert len(grown) == epochs
    assert grown == [4 + (i + 1) * (grown[0] - 4) for i in range(epochs)]
    assert "the tape now holds 4 nodes (the parameters)" in text
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1
    png = base64.b64decode(pngs[0])
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    accuracy = re.search(rf"final test accuracy: ([\d.]+)% after {epochs} epochs", text)
    assert accuracy is not None and float(accuracy.group(1)) >= 85.0


def test_committed_notebook_has_its_outputs() -> None:
    _check(nbformat.read(NOTEBOOK, as_version=4), epochs=5)


def test_notebook_executes_with_small_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAPEGRAD_NOTEBOOK_SMALL", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    _check(nb, epochs=2)
