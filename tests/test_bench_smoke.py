"""Smoke test of the benchmarks: each bench command runs once with ``--quick`` (no timing checks).

Each runs as its user runs it, ``python -m bench.X --quick --json PATH`` from the repository
root, in a subprocess (so the bench's JAX state and tape never touch this process). The JSON
is checked for its tables and targets; the peers run also checks that a missing peer is
reported as skipped, and counts the nodes the seed loop leaves under each policy.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERDICTS = {"PASS", "MISS", "SKIP"}


def _run(module: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    out = tmp_path / f"{module}.json"
    proc = subprocess.run(
        [sys.executable, "-m", module, "--quick", "--json", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "### Targets" in proc.stdout
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["quick"] is True
    for target in report["targets"]:
        assert target["verdict"] in VERDICTS, target
    return report


def _titles(report: dict[str, Any]) -> list[str]:
    return [s["title"] for s in report["sections"]]


def test_engine_quick(tmp_path: Path) -> None:
    report = _run("bench.engine", tmp_path)
    assert len(report["sections"]) == 2
    names = [t["name"] for t in report["targets"]]
    assert names == [
        "issue 10: tracked (2,2) op / raw jnp op",
        "issue 10: backward per node, 20-op chain / raw jnp multiply",
    ]
    for t in report["targets"]:
        assert t["verdict"] in {"PASS", "MISS"}
        assert t["value"] > 0


@pytest.mark.slow
def test_higher_quick(tmp_path: Path) -> None:
    report = _run("bench.higher", tmp_path)
    assert len(report["sections"]) == 2
    names = [t["name"] for t in report["targets"]]
    assert names == [
        "issue 11: backward(create_graph=True) / plain backward, MLP",
        "issue 11: tg.hvp / torch.autograd.functional.hvp, digits MLP",
    ]
    assert all(t["verdict"] in {"PASS", "MISS"} and t["value"] > 0 for t in report["targets"])


def test_tape_quick(tmp_path: Path) -> None:
    report = _run("bench.tape", tmp_path)
    assert len(report["targets"]) == 8
    assert all(t["verdict"] in {"PASS", "MISS"} for t in report["targets"])
    memory = report["sections"][-1]["data"]
    # the leaf-memory pass saw every dropped leaf hanging; auto policy left nothing behind
    assert memory["leaf"]["hanging_leaves"] == memory["leaf"]["n"] == 500
    assert memory["auto"]["nodes_at_end"] == 0
    cleanup = report["sections"][1]["data"]
    assert cleanup["removed"] == [3000]


def test_peers_quick(tmp_path: Path) -> None:
    # torch is hidden behind a module that fails to import, so the skip path runs whatever is
    # installed. The MLP workloads are left out: their first run compiles for seconds (too slow
    # for a smoke test); the full run's learning-curve table checks that every system agrees.
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "torch.py").write_text("raise ImportError('hidden by the test', name='torch')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(ROOT)])}
    workloads = "perop,seed,chain,memory"
    report = _run(
        "bench.peers",
        tmp_path,
        "--systems",
        "tapegrad,torch,mygrad",
        "--workloads",
        workloads,
        env=env,
    )
    systems = report["meta"]["systems"]
    assert systems.startswith("tapegrad ")
    assert "torch skipped: not installed (torch)" in systems
    assert len(report["sections"]) == 5
    seed = next(s for s in report["sections"] if s["title"].startswith("3. Seed loop"))["data"]
    growth = seed["growth"]
    # 500 iterations after a warm-up of 100: manual keeps every leaf, auto none
    assert growth["tapegrad, manual, no cleanup"]["nodes_at_end"] == 600
    assert growth["tapegrad, auto policy"]["nodes_at_end"] == 0
    assert set(seed["times"]) >= {"raw JAX (jnp.zeros / jax.Array)", "tapegrad, auto policy"}
    assert "torch eager" not in seed["times"]
    targets = {t["name"]: t for t in report["targets"]}
    chain = targets["issue 10: 20-op chain forward+backward, tapegrad / torch"]
    assert chain["verdict"] == "SKIP"
    assert "torch skipped: not installed" in chain["detail"]
    if importlib.util.find_spec("mygrad") is not None:
        assert "MyGrad" in seed["times"]
    else:
        assert "mygrad skipped: not installed" in systems


def test_missing_peer_is_skipped() -> None:
    from_root = [sys.executable, "-c", _ASK_MISSING]
    proc = subprocess.run(from_root, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    reply = json.loads(proc.stdout.strip().splitlines()[-1])
    assert reply["skipped"].startswith("not installed")


_ASK_MISSING = """
import json
from bench.peers import Worker
w = Worker("no_such_system")
try:
    print(json.dumps(w.ask(op="info")))
finally:
    w.close()
"""


def test_touched_quick(tmp_path: Path) -> None:
    report = _run("bench.touched", tmp_path)
    assert len(report["sections"]) == 1
    names = [t["name"] for t in report["targets"]]
    assert [n.split(",")[0] for n in names] == [
        "issue 10: sweep freeing 1",
        'issue 10: drop a 10-node graph under "auto"',
    ]
    assert all(t["value"] > 0 for t in report["targets"])


@pytest.mark.slow
def test_programs_quick(tmp_path: Path) -> None:
    # one program through the whole pipeline: torch float32 and float64, tapegrad with an
    # empty then a primed compilation cache; the losses of the two systems agree
    report = _run("bench.programs", tmp_path, "--only", "micrograd_readme")
    (section,) = report["sections"]
    run = section["data"]["micrograd_readme"]
    assert set(run) == {"torch", "torch64", "tapegrad_first", "tapegrad"}
    assert run["tapegrad"]["losses"] == pytest.approx(run["torch"]["losses"], rel=1e-5)
    assert run["tapegrad"]["warm"] and run["torch"]["warm"]
    names = [t["name"] for t in report["targets"]]
    assert names[0] == "issue 17: micrograd_readme, warm / torch"
    assert len(names) == 4


def test_models_quick(tmp_path: Path) -> None:
    report = _run("bench.models", tmp_path)
    assert _titles(report) == [
        "convnet step (eager), per step",
        "convnet step (compiled), per step",
        "transformer-block step (eager), per step",
        "transformer-block step (compiled), per step",
        "LSTM step (eager), per step",
        "LSTM step (compiled), per step",
    ]
    assert [t["name"] for t in report["targets"]] == [
        "issue 13: tapegrad eager convnet step / torch eager",
        "issue 13: tg.jit convnet step / hand jax.jit + optax",
        "issue 13: tapegrad eager transformer-block step / torch eager",
        "issue 13: tg.jit transformer-block step / hand jax.jit + optax",
        "issue 13: tapegrad eager LSTM step / torch eager",
        "issue 13: tg.jit LSTM step / hand jax.jit + optax",
    ]


def test_instructions_loops_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench.instructions``' counted loop runs for every case (here without valgrind: a
    stand-in ``callgrind_control`` that does nothing), an unknown case is refused, and a
    machine without valgrind is told the run was skipped."""
    monkeypatch.syspath_prepend(str(ROOT))  # `pytest` (unlike `python -m pytest`) leaves cwd off
    from bench import instructions

    fake = tmp_path / "callgrind_control"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"}
    for case in instructions.SIZES:
        proc = subprocess.run(
            [sys.executable, "-c", instructions._LOOP, case, "5"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, (case, proc.stderr[-3000:])
    with pytest.raises(SystemExit):
        instructions.main(["--cases", "raw,bogus"])
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    assert instructions.main(["--cases", "raw"]) == {}


def test_profile_times_the_garbage_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    # ``bench.programs._profile``'s collector column: a step that leaves reference cycles
    # behind makes Python collect (full collections too, forced here), and the shares
    # are of the wall time the steps took
    import gc

    from bench.programs import _profile

    monkeypatch.setattr(_profile, "GC_SECONDS", 0.2)
    monkeypatch.setattr(_profile, "block", lambda out: None)
    calls = [0]

    def step() -> None:
        calls[0] += 1
        for _ in range(200):
            cycle: list[Any] = []
            cycle.append(cycle)
        if calls[0] % 50 == 0:
            gc.collect()

    callbacks = list(gc.callbacks)
    result = _profile._collections(step)
    assert gc.callbacks == callbacks  # its callback is removed
    assert result["gc_steps"] == calls[0] > 0
    assert 0 < result["gc_full_share"] <= result["gc_share"] < 1
