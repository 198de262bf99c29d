"""notebooks/04_compiled_step.ipynb: committed with outputs, and executes with small parameters."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _notebooks import execute_small, outputs, read, texts

NOTEBOOK = "04_compiled_step.ipynb"


def _check(nb: Any) -> None:
    outs = outputs(nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    text = texts(outs)
    speed = re.search(r"compiled: +[\d.]+ ms per step \(([\d.]+)x faster\)", text)
    assert speed is not None, text
    assert re.search(r"same parameters after \d+ steps each: True", text)
    assert "compiled 1 time(s)" in text and "nodes=8, leaves=8" in text
    assert re.search(r"steps with a one-cycle schedule: +[\d.]+ ms per step", text)
    assert re.search(r"beta1 0\.9\d\d, weight decay", text)  # OneCycleLR moved beta1 back up
    assert "; new compiles: 0" in text  # the rate, betas and weight decay are inputs
    assert re.search(r"3 models, \d+ calls in turn: compiled 3 time\(s\)", text)
    assert "TracerError: logging_step: the step stored a tensor made inside it" in text
    assert "losses: []; parameters unchanged: True" in text
    hanging = re.search(r"(\d+) nodes recorded while tracing, (\d+) left hanging", text)
    assert hanging is not None and int(hanging.group(2)) > 0
    assert "x max at" in text
    assert re.search(r"eager step, eager backward passes: +[\d.]+ ms per step", text)
    assert re.search(r"eager step, compiled backward passes: +[\d.]+ ms per step", text)
    first = re.search(r"first process: [\d.]+ s, (\d+) kernels lowered, (\d+) programs", text)
    second = re.search(r"second process: [\d.]+ s, 0 kernels lowered, (\d+) programs", text)
    assert first is not None and int(first.group(1)) > 0, text
    assert second is not None and second.group(1) == first.group(2) != "0", text


def test_committed_notebook_has_its_outputs() -> None:
    nb = read(NOTEBOOK)
    _check(nb)
    speed = re.search(r"\(([\d.]+)x faster\)", texts(outputs(nb)))
    assert speed is not None and float(speed.group(1)) > 1.0


@pytest.mark.slow
def test_notebook_executes_with_small_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    _check(execute_small(NOTEBOOK, monkeypatch))
