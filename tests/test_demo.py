"""``python -m diagnostics demo`` as a user runs it: a subprocess, its output piped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

import diagnostics.demo as demo
import tapegrad as tg

RUNS = {
    "planted": ["--epochs", "1"],
    "fixed": ["--epochs", "1", "--fixed"],
    "no-cleanup": ["--epochs", "3", "--no-cleanup"],
}

# A summary-table row: epoch, accuracy, nodes, saved, hanging, [freed nodes, freed,] after.
_ROW = re.compile(
    r"^\s*(?P<epoch>\d+)\s+(?P<acc>[\d.]+)%\s+(?P<nodes>[\d,]+)\s+(?P<saved>[\d.]+ \w+)\s+"
    r"(?P<hanging>[\d,]+)\s+(?:(?P<freed>[\d,]+)\s+(?P<freed_bytes>[\d.]+ \w+)\s+)?"
    r"(?P<after>[\d,]+)\s*$",
    re.MULTILINE,
)


@pytest.fixture(scope="module")
def outputs() -> dict[str, tuple[int, str]]:
    """Run the demos concurrently (each is a fresh process: compiles dominate)."""
    env = dict(os.environ, COLUMNS="160", PYTHONIOENCODING="utf-8")
    env.pop("FORCE_COLOR", None)
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "diagnostics", "demo", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=Path(demo.__file__).parent.parent,
        )
        for name, args in RUNS.items()
    }
    out = {}
    for name, proc in procs.items():
        stdout, _ = proc.communicate(timeout=240)
        out[name] = (proc.returncode, stdout.decode("utf-8"))
    return out


def _rows(text: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in _ROW.finditer(text.split("the tape at each epoch end")[-1])]


def _int(s: str | None) -> int:
    assert s is not None
    return int(s.replace(",", ""))


def _planted_lines(marker: str) -> set[str]:
    source = Path(demo.__file__).read_text().splitlines()
    return {f"diagnostics/demo.py:{i}" for i, line in enumerate(source, 1) if marker in line}


def _report_rows(text: str, kind: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(kind + " ")]


def test_planted_mistakes_are_reported_and_cleanup_frees_them(
    outputs: dict[str, tuple[int, str]],
) -> None:
    status, text = outputs["planted"]
    assert status == 0, text
    assert "tapegrad leak report" in text and "epoch 1" in text
    hanging = "\n".join(_report_rows(text, "hanging"))
    # Both mistakes are named by the lines that planted them (leaf and ops of mistake 1,
    # the evaluation forward of mistake 2), and nothing else hangs.
    for origin in _planted_lines("planted mistake 1") | _planted_lines("planted mistake 2"):
        assert origin in hanging, f"{origin} missing from the report:\n{text}"
    origins = set(re.findall(r"diagnostics/demo\.py:\d+", hanging))
    assert origins == _planted_lines("planted mistake 1") | _planted_lines("planted mistake 2")
    (row,) = _rows(text)
    batches = 1347 // demo.BATCH_SIZE
    # Per batch: the jitter leaf and its graph; at least one node of each kind per batch.
    assert _int(row["hanging"]) > 2 * batches
    # Cleanup freed exactly what hung; only the four parameters remain.
    assert _int(row["freed"]) == _int(row["hanging"])
    assert _int(row["after"]) == 4
    assert _int(row["nodes"]) == _int(row["hanging"]) + 4
    assert row["freed_bytes"] == row["saved"] != "0 bytes"
    accuracy = re.search(r"final test accuracy: ([\d.]+)% after 1 epoch \([\d.]+ s\)", text)
    assert accuracy is not None, text
    assert float(accuracy.group(1)) == float(row["acc"]) >= 85.0


def test_fixed_loop_leaves_nothing_hanging(outputs: dict[str, tuple[int, str]]) -> None:
    status, text = outputs["fixed"]
    assert status == 0, text
    assert "tapegrad leak report" in text
    assert _report_rows(text, "hanging") == []
    (row,) = _rows(text)
    assert _int(row["hanging"]) == 0 and _int(row["freed"]) == 0
    assert _int(row["nodes"]) == _int(row["after"]) == 4
    assert row["saved"] == "0 bytes"
    assert re.search(r"final test accuracy: [\d.]+% after 1 epoch \(", text)


def test_without_cleanup_the_tape_grows_each_epoch(outputs: dict[str, tuple[int, str]]) -> None:
    status, text = outputs["no-cleanup"]
    assert status == 0, text
    first, second, third = _rows(text)
    assert first["freed"] is None  # no cleanup columns
    per_epoch = _int(first["nodes"]) - 4
    assert per_epoch > 0
    assert _int(second["nodes"]) == 4 + 2 * per_epoch
    assert _int(third["hanging"]) == 3 * _int(first["hanging"])
    assert f"holds {_int(third['nodes']):,} nodes" in text
    assert f"(+{per_epoch:,} nodes since epoch 1)" in text


def test_full_reports_on_the_first_and_last_epochs_a_line_between(
    outputs: dict[str, tuple[int, str]],
) -> None:
    _, text = outputs["no-cleanup"]
    assert "╭─ tapegrad leak report — epoch 1 " in text
    assert "╭─ tapegrad leak report — epoch 3 " in text
    assert "╭─ tapegrad leak report — epoch 2" not in text
    (line,) = [s for s in text.splitlines() if s.startswith("tapegrad leak report — epoch 2:")]
    hanging = _int(_rows(text)[0]["hanging"])
    assert f"{2 * hanging:,} hanging nodes (+{hanging:,} since the last report)".replace(
        ",", ""
    ) in line.replace(",", "")


def test_compiled_step_trains_and_its_mistake_is_dead_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In this process (the shared demo runs above already take most of the time budget), whose
    # tape may hold other modules' live tensors: the demo adds its four parameters to them.
    base = tg.graph_stats().nodes
    assert demo.main(["--epochs", "1", "--jit"]) == 0
    text = capsys.readouterr().out
    # The compiled step's planted mistake hangs on the trace's private tape (dead code XLA
    # removes); only the eager evaluation's mistake reaches the process tape.
    hanging = "\n".join(_report_rows(text, "hanging"))
    assert set(re.findall(r"diagnostics/demo\.py:\d+", hanging)) == _planted_lines(
        "planted mistake 2"
    )
    dead = text.split("left", 1)[1].split("the tape at each epoch end")[0]
    assert set(re.findall(r"diagnostics/demo\.py:\d+", dead)) == _planted_lines("planted mistake 1")
    assert "the step compiled 1 time(s)" in text
    (row,) = _rows(text)
    assert _int(row["after"]) == base + 4
    assert float(row["acc"]) >= 85.0


def test_piped_output_has_no_control_characters(outputs: dict[str, tuple[int, str]]) -> None:
    for status, text in outputs.values():
        assert status == 0
        controls = {c for c in text if ord(c) < 32 and c != "\n"}
        assert controls == set(), f"control characters {controls!r} in piped output"


def test_bad_epochs_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main(["--epochs", "0"]) == 2
    assert "--epochs must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["--checkpoint", "ck.safetensors"], "--checkpoint"), (["--steps", "3"], "--steps")],
)
def test_a_flag_of_the_other_models_is_a_usage_error_for_the_mlp(
    argv: list[str],
    flag: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--checkpoint``/``--steps`` were silently ignored by the MLP (no file written), as
    ``--jit`` is refused by the other models."""
    monkeypatch.chdir(tmp_path)
    assert demo.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag} applies to --model cnn or transformer" in err, err
    assert not (tmp_path / "ck.safetensors").exists()


@pytest.mark.parametrize("seed", ["-3", "1.5", str(demo.MAX_SEED + 1)])
def test_a_seed_numpy_refuses_is_a_usage_error(
    seed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seed -3`` ended in NumPy's traceback ("expected non-negative integer")."""
    with pytest.raises(SystemExit) as info:
        demo.main(["--seed", seed, "--epochs", "1"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --seed: must be an integer from 0 to {demo.MAX_SEED}, got '{seed}'" in err


def test_a_checkpoint_it_cannot_resume_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another model's checkpoint ended in a traceback, an unreadable one too, and one saved
    after the last epoch asked for printed "final test accuracy: nan%"."""
    other, later, broken = (tmp_path / n for n in ("other.st", "later.st", "broken.st"))
    tg.save({"model_name": "transformer", "epoch": 1}, other)
    tg.save({"model_name": "cnn", "epoch": 3}, later)
    broken.write_bytes(b"garbage\n")
    cases = {
        other: "holds a 'transformer' model, not 'cnn'; pass another path.",
        later: "was saved after epoch 3: nothing left to run up to --epochs 2; pass --epochs 4",
        broken: f"cannot read --checkpoint {str(broken)!r}: tg.load:",
    }
    for path, message in cases.items():
        argv = ["--model", "cnn", "--epochs", "2", "--steps", "1", "--checkpoint", str(path)]
        assert demo.main(argv) == 2
        captured = capsys.readouterr()
        (line,) = captured.err.splitlines()
        assert line.startswith("python -m diagnostics demo: ") and message in line, line
        assert "nan" not in captured.out and "epoch 1/2" not in captured.out


def test_the_epoch_table_keeps_every_value_whole_at_60_columns() -> None:
    """At ``COLUMNS=60`` the table cut values ("91.…", "epo…"): headers now take a line a
    word, values are never cut."""
    records = [
        demo.EpochRecord(e, 0.1, 0.916, 301, 3_400_000, 297, 297, 3_400_000, 4) for e in (1, 2)
    ]
    out = StringIO()
    Console(file=out, width=60, color_system=None).print(demo._summary(records, cleanup=True))
    text = out.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 60
    assert [_int(row["freed"]) for row in _rows(text)] == [297, 297]
    assert all(row["acc"] == "91.6" and row["saved"] == "3.4 MB" for row in _rows(text))
