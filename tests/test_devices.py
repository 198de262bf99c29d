"""Devices and sharding on 8 simulated CPU devices: placement, data and model parallel,
memory per device, bad input (docs/api.md "Devices and sharding").

``XLA_FLAGS`` must be set before JAX starts, so the checks (``_devices_checks.py``) run in
one subprocess per test session, bounded in time; each check is reported as its own test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _devices_checks import CHECKS

ROOT = Path(__file__).resolve().parents[1]
DEVICES = "--xla_force_host_platform_device_count=8"


def run_devices(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` from the repository root with 8 simulated CPU devices."""
    env = {**os.environ, "XLA_FLAGS": DEVICES, "JAX_PLATFORMS": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    done = run_devices([str(ROOT / "tests" / "_devices_checks.py")], timeout=400)
    out = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out[row["check"]] = row
    out["__stderr__"] = done.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHECKS))
def test_on_eight_devices(results: dict[str, Any], name: str) -> None:
    assert name in results, f"the check did not report; stderr:\n{results['__stderr__']}"
    assert results[name]["ok"], results[name]["error"]


def test_one_device_counts_nbytes() -> None:
    """In this (one-device) process, saved bytes are each array's nbytes, all on one device."""
    import tapegrad as tg

    x = tg.ones((4, 3), requires_grad=True)
    y = x.exp()
    snap = tg.snapshot()
    per = dict(snap.bytes_by_device)
    assert sum(per.values()) == snap.stats.saved_bytes
    assert per[str(y.device)] >= 48
    del y, x


def test_device_put_to_a_missing_device_names_op_and_origin() -> None:
    import tapegrad as tg

    x = tg.ones(3, requires_grad=True)
    before = tg.graph_stats()
    with pytest.raises(tg.DeviceError, match=r"tg\.device_put at tests/test_devices\.py:\d+"):
        tg.device_put(x, 99)
    with pytest.raises(tg.DeviceError, match="tg.ones"):
        tg.ones(3, device="cpu:99")
    assert tg.graph_stats() == before
    y = tg.device_put(x, 0)  # the one device: a node all the same, gradient the identity
    (y * 3.0).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [3.0, 3.0, 3.0]
    del y, x


def test_device_put_differentiates_twice_on_one_device() -> None:
    """create_graph records device_put's VJP as tapegrad ops (a device_put back for a placed
    input, a copy for an uncommitted one): derivatives of sum(x**3) of 3x**2, then 6x. The
    case of two devices is the eight-device check device_put_is_differentiable_twice."""
    import tapegrad as tg

    for x in (tg.tensor([1.0, 2.0], device=0), tg.tensor([1.0, 2.0])):
        x.require_grad()
        (g,) = tg.grad((tg.device_put(x, 0) ** 3).sum(), x, create_graph=True)
        (h,) = tg.grad(g.sum(), x)
        assert g.tolist() == [3.0, 12.0] and h.tolist() == [6.0, 12.0]
        assert h.device == x.device
    del g, h, x


def _two_processes(script: str, devices: int, done_line: str, timeout: int) -> None:
    """Run ``tests/<script>`` in two processes of ``devices`` CPU devices each (the launcher,
    gloo collectives on 127.0.0.1); both exit 0 and print ``rank R: <done_line>``."""
    done = run_devices(
        [
            "-m",
            "tapegrad.launch",
            "-n",
            "2",
            "--devices-per-process",
            str(devices),
            "--timeout",
            str(timeout),
            str(ROOT / "tests" / script),
        ],
        timeout=timeout + 60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        assert f"rank {rank}: {done_line}" in done.stdout


@pytest.mark.slow
def test_two_processes_reach_the_one_process_parameters() -> None:
    """Two processes of 4 CPU devices run one tg.jit data-parallel step on the global mesh
    and match one process after 10 steps."""
    _two_processes("_multiprocess_step.py", 4, "params match one process after 10 steps", 300)


@pytest.mark.slow
def test_placement_across_processes_is_checked() -> None:
    """Two processes of 2 CPU devices: another process's device is refused with a
    DeviceError, a global array's repr and tg.save say what it is and what to do."""
    _two_processes("_multiprocess_placement.py", 2, "placement across processes checked", 120)


def test_device_index_may_be_a_numpy_integer() -> None:
    """An index into jax.devices() is any integer (operator.index), as axes are."""
    import numpy as np

    import tapegrad as tg

    assert tg.zeros(3, device=np.int64(0)).device == tg.zeros(3, device=0).device
    with pytest.raises(tg.DeviceError, match="names no device"):
        tg.zeros(3, device=np.float32(0))


def test_device_may_be_a_torch_device() -> None:
    """A PyTorch program's torch.device("cpu") places as the string "cpu" does; a device
    this process lacks (cuda on a CPU-only JAX) is the DeviceError the string gives."""
    torch = pytest.importorskip("torch")

    import tapegrad as tg

    assert tg.zeros(3, device=torch.device("cpu")).device == tg.zeros(3, device="cpu").device
    layer = tg.nn.Linear(2, 3, device=torch.device("cpu", 0))
    assert layer.weight.device == tg.zeros(1, device="cpu:0").device
    if not any(d.platform == "gpu" for d in __import__("jax").devices()):
        with pytest.raises(tg.DeviceError, match="there is no device 'cuda:1'.*GPU"):
            tg.zeros(3, device=torch.device("cuda", 1))


def test_launcher_stops_every_process_on_failure_and_timeout(tmp_path: Path) -> None:
    from tapegrad.launch import launch, main

    crash = tmp_path / "crash.py"
    crash.write_text(
        "import os, sys, time\n"
        "if os.environ['TAPEGRAD_PROCESS_ID'] == '1':\n"
        "    sys.exit(3)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    assert launch([str(crash)], 2, timeout=60) == 3  # rank 1 fails: rank 0 is stopped
    assert time.monotonic() - start < 30
    sleepy = tmp_path / "sleepy.py"
    sleepy.write_text("import time\ntime.sleep(60)\n")
    assert launch([str(sleepy)], 2, timeout=1) == 124
    assert main(["-n", "2", str(tmp_path / "missing.py")]) == 2
