"""docs/pictures/make_pictures.py regenerates the README's pictures, and the README shows them."""

from __future__ import annotations

import re
import runpy
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import diagnostics

ROOT = Path(__file__).resolve().parents[2]
PICTURES = ROOT / "docs" / "pictures"


def test_the_readme_shows_the_committed_png() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](docs/pictures/leak_history.png)" in readme
    assert "python docs/pictures/make_pictures.py" in readme
    assert (PICTURES / "leak_history.png").read_bytes().startswith(b"\x89PNG")
    ET.parse(PICTURES / "leak_graph.svg")


@pytest.mark.slow
def test_the_script_regenerates_both_pictures(tmp_path: Path) -> None:
    script = runpy.run_path(str(PICTURES / "make_pictures.py"), run_name="make_pictures")
    try:
        script["main"](tmp_path)
    finally:
        diagnostics.clear_history()
    assert (tmp_path / "leak_history.png").read_bytes().startswith(b"\x89PNG")
    svg = (tmp_path / "leak_graph.svg").read_text(encoding="utf-8")
    committed = (PICTURES / "leak_graph.svg").read_text(encoding="utf-8")
    same = [re.sub(r"graph \d+", "graph N", text) for text in (svg, committed)]  # ids vary
    assert same[0] == same[1]  # deterministic otherwise: the committed file is current
    assert "local epoch_losses in main() → [" in svg
