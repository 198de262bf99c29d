"""Reading and executing the notebooks under notebooks/, and picking their outputs apart.

Each notebook test checks the committed outputs (``read``) and the outputs of a fresh run with
small parameters (``execute_small``) with the same function, built from ``outputs``,
``text_of``, ``texts``, ``html_outputs``, ``png_outputs`` and ``svg_outputs``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

__all__ = [
    "NOTEBOOKS",
    "read",
    "execute_small",
    "code_outputs",
    "outputs",
    "text_of",
    "texts",
    "html_outputs",
    "png_outputs",
    "svg_outputs",
]

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
"""The repository's notebooks folder."""


def read(name: str) -> Any:
    """The notebook ``notebooks/<name>`` as committed, outputs included (nbformat v4)."""
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def execute_small(name: str, monkeypatch: pytest.MonkeyPatch, timeout_s: int = 300) -> Any:
    """Run ``notebooks/<name>`` from scratch in a python3 kernel, with
    ``TAPEGRAD_NOTEBOOK_SMALL=1`` (the notebooks' switch to small parameters) and the notebooks
    folder as the working directory; return the notebook with its new outputs.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised.
        nbclient.exceptions.CellTimeoutError: a cell ran longer than ``timeout_s`` seconds.
    """
    monkeypatch.setenv("TAPEGRAD_NOTEBOOK_SMALL", "1")
    nb = read(name)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    client = NotebookClient(
        nb,
        timeout=timeout_s,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    client.execute()
    return nb


def code_outputs(cell: Any) -> list[dict[str, Any]]:
    """The outputs of ``cell``, in order; none for a markdown or raw cell."""
    return list(cell.outputs) if cell.cell_type == "code" else []


def outputs(nb: Any) -> list[dict[str, Any]]:
    """Every output of every code cell of ``nb``, in order."""
    return [o for cell in nb.cells for o in code_outputs(cell)]


def text_of(output: dict[str, Any]) -> str:
    """A stream's text, or a result's ``text/plain`` (empty when it has none)."""
    if output["output_type"] == "stream":
        return str(output["text"])
    return str(output.get("data", {}).get("text/plain", ""))


def texts(outs: list[dict[str, Any]]) -> str:
    """The text of ``outs``, joined by newlines; consecutive chunks of one stream are joined
    as they are (a busy kernel may flush one ``print`` in two stream messages)."""
    parts: list[str] = []
    previous: str | None = None
    for o in outs:
        stream = o["name"] if o["output_type"] == "stream" else None
        if stream is not None and stream == previous and parts:
            parts[-1] += text_of(o)
        else:
            parts.append(text_of(o))
        previous = stream
    return "\n".join(parts)


def html_outputs(outs: list[dict[str, Any]]) -> list[str]:
    """The ``text/html`` of the outputs that have one, in order."""
    return [o["data"]["text/html"] for o in outs if "text/html" in o.get("data", {})]


def png_outputs(outs: list[dict[str, Any]]) -> list[bytes]:
    """The decoded ``image/png`` of the outputs that have one, in order."""
    return [
        base64.b64decode(o["data"]["image/png"]) for o in outs if "image/png" in o.get("data", {})
    ]


def svg_outputs(outs: list[dict[str, Any]]) -> list[str]:
    """The ``image/svg+xml`` of the outputs that have one, in order."""
    return [str(o["data"]["image/svg+xml"]) for o in outs if "image/svg+xml" in o.get("data", {})]
