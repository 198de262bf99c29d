"""notebooks/01_hanging_leaves.ipynb: committed with outputs, and executes with small parameters."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from diagnostics.report import TITLE

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_hanging_leaves.ipynb"


def code_outputs(cell: Any) -> list[dict[str, Any]]:
    return list(cell.outputs) if cell.cell_type == "code" else []


def text_of(output: dict[str, Any]) -> str:
    if output["output_type"] == "stream":
        return str(output["text"])
    return str(output.get("data", {}).get("text/plain", ""))


def check(nb: Any, steps: int) -> None:
    outputs = [o for cell in nb.cells for o in code_outputs(cell)]
    assert not [o for o in outputs if o["output_type"] == "error"]
    text = "\n".join(text_of(o) for o in outputs)
    # The mistake: one hanging leaf per step, all from the same line.
    assert f"hanging_nodes={steps}, hanging_leaves={steps}" in text
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    (report,) = [h for h in html if TITLE in h]
    assert f"{steps} nodes ({steps} leaves), {steps} dead graphs" in report
    assert "freed by graph_cleanup()" in report
    assert f"CleanupStats(nodes_removed={steps}, leaves_removed={steps}" in text
    growth = re.search(r"no cleanup: (\d+) nodes at the end; with cleanup: at most (\d+)", text)
    assert growth is not None
    assert int(growth.group(1)) == steps + 1  # the parameter and one leaf a step
    assert int(growth.group(2)) < int(growth.group(1))
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and base64.b64decode(pngs[0]).startswith(b"\x89PNG")
    # The final cell: the fixed loop under no_leaks(), then the stats.
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    final = "\n".join(text_of(o) for o in code_outputs(last))
    assert "hanging_nodes=0" in final
    assert "hanging nodes: 0; nodes on the tape: 1" in final


def test_committed_notebook_has_its_outputs() -> None:
    check(nbformat.read(NOTEBOOK, as_version=4), steps=600)


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
    check(nb, steps=60)
