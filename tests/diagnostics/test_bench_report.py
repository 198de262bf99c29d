"""Smoke test of bench/bench_report.py: it runs with --quick and reports its targets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_report_quick(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_report", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["meta"]["nodes"] == 10_000
    (section,) = report["sections"]
    assert [row[0] for row in section["rows"]] == [
        "leak_report()",
        "tg.snapshot()",
        "build_report(snapshot)",
    ]
    assert all(t["verdict"] in {"PASS", "MISS"} for t in report["targets"])
    assert len(report["targets"]) == 2
