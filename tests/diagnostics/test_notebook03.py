"""notebooks/03_finding_a_leak.ipynb: committed with outputs, and executes with small
parameters: the warning names the line, the plot and the picture show the kept-alive graphs,
the fix is clean."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _notebooks import code_outputs, execute_small, outputs, png_outputs, read, svg_outputs, texts

NOTEBOOK = "03_finding_a_leak.ipynb"


def check(nb: Any, epochs: int) -> None:
    outs = outputs(nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    text = " ".join(texts(outs).split())
    assert "\x1b[" not in text
    # 1. the warning: from the fourth epoch end on, naming the running-loss line first
    warned = re.findall(r"LeakWarning: the tape grew 3 epochs in a row.*?grown most at (\S+)", text)
    assert len(warned) == epochs - 3
    source = "".join(c.source for c in nb.cells if "def train(" in c.source).splitlines()
    line = next(i for i, s in enumerate(source, 1) if "running = running + loss" in s)
    assert all(w.endswith(f":{line}") for w in warned)
    # 2. two plots (the leak, the fix); 3. the picture of the kept-alive graphs with the list
    assert len(png_outputs(outs)) == 2
    (picture,) = svg_outputs(outs)
    assert "kept-alive graph" in picture and f"×{epochs} alike" in picture
    assert "global epoch_losses → [" in picture
    # 4. the fix: clean, silent, only the parameters
    final = texts(code_outputs([c for c in nb.cells if c.cell_type == "code"][-2]))
    assert "kept-alive graphs: 0; hanging nodes: 0" in final
    assert "nodes on the tape: 4 (the parameters)" in final
    assert f"{epochs} kept-alive graphs" in text  # the summary line of the last leaky epoch


def test_committed_notebook_has_its_outputs() -> None:
    check(read(NOTEBOOK), epochs=6)


@pytest.mark.slow
def test_notebook_executes_with_small_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    check(execute_small(NOTEBOOK, monkeypatch), epochs=4)
