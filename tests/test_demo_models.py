"""``python -m diagnostics demo --model cnn|transformer`` at tiny settings: the planted leak
is named by its line, ``--fixed`` removes it, ``--checkpoint`` saves and resumes."""

from __future__ import annotations

import gc
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import diagnostics.demo_cnn as demo_cnn
import diagnostics.demo_text as demo_text
from diagnostics.training import fit

ROOT = Path(demo_cnn.__file__).parent.parent


def _demo(*args: str) -> str:
    env = dict(os.environ, COLUMNS="160", PYTHONIOENCODING="utf-8")
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "diagnostics", "demo", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _planted(module: object) -> str:
    path = Path(module.__file__)  # type: ignore[attr-defined]
    (line,) = [i for i, s in enumerate(path.read_text().splitlines(), 1) if "planted leak:" in s]
    return f"diagnostics/{path.name}:{line}"


def _kept_alive_rows(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.startswith("kept-alive "))


@pytest.mark.slow
def test_cnn_leak_is_named_fixed_removes_it_and_checkpoints_resume(tmp_path: Path) -> None:
    ck = str(tmp_path / "cnn.safetensors")
    text = _demo("--model", "cnn", "--epochs", "1", "--steps", "6", "--checkpoint", ck)
    assert "test accuracy" in text and f"saved {ck} (epoch 1)" in text
    assert _planted(demo_cnn) in _kept_alive_rows(text), text
    assert "local task in fit() → .running → Tensor(shape=(), origin=" in text, text
    resumed = _demo("--model", "cnn", "--epochs", "2", "--steps", "6", "--checkpoint", ck)
    assert f"resumed from {ck} after epoch 1" in resumed
    assert "epoch 1/2" not in resumed and "epoch 2/2" in resumed
    fixed = _demo("--model", "cnn", "--epochs", "1", "--steps", "6", "--fixed")
    assert _kept_alive_rows(fixed) == ""
    assert not [line for line in fixed.splitlines() if line.startswith("hanging ")]
    assert re.search(r"final test accuracy: [\d.]+% after 1 epoch \(", fixed)


@pytest.mark.slow
def test_transformer_reports_bits_per_character_a_sample_and_its_leak(tmp_path: Path) -> None:
    ck = str(tmp_path / "text.safetensors")
    _demo("--model", "transformer", "--epochs", "1", "--steps", "3", "--checkpoint", ck)
    text = _demo("--model", "transformer", "--epochs", "2", "--steps", "3", "--checkpoint", ck)
    assert f"resumed from {ck} after epoch 1" in text  # the attention kept is not state
    assert re.search(r"validation [\d.]+ bits/char \(unigram baseline [\d.]+\)", text)
    assert "sample (prompt 'def '):" in text
    assert _planted(demo_text) in _kept_alive_rows(text), text
    assert re.search(r"local task in fit\(\) → \.maps → \[\d\] → Tensor\(shape=\(64, 64\)", text)


@pytest.mark.slow
def test_transformer_fixed_keeps_no_graph_and_leaves_nothing_hanging() -> None:
    task = demo_text.TextTask(2, steps=2, corpus=demo_text.load_corpus(20_000), width=16)
    out = io.StringIO()
    records = fit(task, 2, fixed=True, console=Console(file=out, width=160))
    assert [(r.kept_alive_graphs, r.hanging_nodes) for r in records] == [(0, 0), (0, 0)]
    assert not re.search(r"^hanging ", out.getvalue(), re.M), out.getvalue()  # swept ones too
    assert len(task.maps) == 4 and not any(m.requires_grad for m in task.maps)
    del task, records
    gc.collect()  # the model's parameters go with the task (the report's chains hold cycles)


def test_the_corpus_is_the_standard_library_and_deterministic() -> None:
    a, b = demo_text.load_corpus(20_000), demo_text.load_corpus(20_000)
    assert a.chars == b.chars and (a.train == b.train).all()
    assert len(a.train) + len(a.val) == 20_000
    assert "def " in a.decode(a.train[:5000])
    assert 0 < a.unigram_bits() < 7.0
