"""notebooks/06_devices.ipynb: committed with outputs, and executes with small parameters."""

from __future__ import annotations

from typing import Any

import pytest
from _notebooks import execute_small, html_outputs, outputs, read, texts

NOTEBOOK = "06_devices.ipynb"


def _check(nb: Any) -> None:
    first = nb.cells[1].source
    assert first.index("XLA_FLAGS") < first.index("import jax")  # before JAX starts
    outs = outputs(nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    text = texts(outs) + "".join(html_outputs(outs))
    assert "8 devices" in text
    assert "w.grad on P('data',)" in text and "gradient is 2w: True" in text
    assert "shard shape (8, 32) of (64, 32)" in text
    assert "saved_bytes: 9216 = 8192 + 1024" in text
    assert "saved per device" in text
    assert "bytes_freed=9216" in text


def test_committed_notebook_has_its_outputs() -> None:
    _check(read(NOTEBOOK))


@pytest.mark.slow
def test_notebook_runs_with_small_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    _check(execute_small(NOTEBOOK, monkeypatch))
