"""Documents users read point only inside the repository (issue 16, item 11): every ``*.md``
file that code, tests, notebooks or docs name exists in the repository, and nothing points to
a folder outside it."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    *ROOT.glob("tapegrad/**/*.py"),
    *ROOT.glob("diagnostics/**/*.py"),
    *ROOT.glob("tests/**/*.py"),
    *ROOT.glob("bench/*.py"),
    *ROOT.glob("notebooks/*.ipynb"),
    *ROOT.glob("docs/*.md"),
    ROOT / "README.md",
    ROOT / "pyproject.toml",
]
MENTION = re.compile(r"[\w./-]*\b[\w-]+\.md\b")


def test_every_named_document_is_in_the_repository() -> None:
    missing = []
    for path in SOURCES:
        if path.name == "test_docs.py":  # its own literals
            continue
        text = path.read_text()
        for name in set(MENTION.findall(text)):
            name = name.lstrip("./") if not name.startswith("../") else name
            if not ((ROOT / name).is_file() or (path.parent / name).is_file()):
                missing.append(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, "documents named but not in the repository:\n" + "\n".join(missing)


def _text(path: Path) -> str:
    """The file's text; for a notebook, its cells' sources (outputs name the machine that ran
    it)."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells)


def test_nothing_points_outside_the_repository() -> None:
    bad = [
        str(path.relative_to(ROOT))
        for path in SOURCES
        if path.name != "test_docs.py" and re.search(r"\.\./shared|/work/", _text(path))
    ]
    assert not bad, bad


def test_the_reference_and_design_notes_ship_in_docs() -> None:
    for name in ("api.md", "design.md"):
        assert (ROOT / "docs" / name).stat().st_size > 1000
    readme = (ROOT / "README.md").read_text()
    assert "docs/design.md" in readme and "docs/api.md" in readme


def test_notebook_outputs_name_repository_files_relative_to_it() -> None:
    """Committed outputs may name the kernel's cell files, never where a developer's checkout
    lay: a notebook that shows the repository's code is run from the repository root, so
    its origins read ``diagnostics/demo_cnn.py:90``."""
    absolute = re.compile(r"/[\w.-]+(?:/[\w.-]+)*/(?:tapegrad|diagnostics|bench|tests)/[\w/]+\.py")
    bad = {
        f"{path.name}: {m}"
        for path in ROOT.glob("notebooks/*.ipynb")
        for cell in json.loads(path.read_text())["cells"]
        for m in absolute.findall(json.dumps(cell.get("outputs", [])))
    }
    assert not bad, sorted(bad)


def test_the_readmes_layers_example_runs() -> None:
    """The README's example of PyTorch's layers and the linear algebra runs as printed (its
    asserts check the shapes)."""
    readme = (ROOT / "README.md").read_text()
    marker = "decoder = nn.Sequential("
    block = next(b for b in readme.split("```python\n")[1:] if marker in b).split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    low = namespace["low"]
    assert getattr(low, "grad", None) is not None
