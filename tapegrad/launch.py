"""Multi-process runs on one machine: ``python -m tapegrad.launch -n N script.py`` starts N
copies of a script on loopback, and ``initialize()`` joins each to JAX's runtime.

JAX's multi-process runtime is the engine (``jax.distributed.initialize``); this module only
starts the processes, tells each its rank and the coordinator's address (environment
variables the launcher sets for its children), and stops them all, bounded in time::

    python -m tapegrad.launch -n 2 --devices-per-process 4 train.py --epochs 3

and in ``train.py``, before any other JAX call::

    from tapegrad.launch import initialize
    initialize()                       # jax.distributed.initialize on 127.0.0.1
    mesh = Mesh(np.array(jax.devices()), ("data",))   # the global mesh: every process's devices
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

import jax

__all__ = ["initialize", "launch", "main", "COORDINATOR", "NUM_PROCESSES", "PROCESS_ID"]

COORDINATOR = "TAPEGRAD_COORDINATOR"
"""Environment variable the launcher sets: the coordinator's ``host:port``."""
NUM_PROCESSES = "TAPEGRAD_NUM_PROCESSES"
"""Environment variable the launcher sets: how many processes take part."""
PROCESS_ID = "TAPEGRAD_PROCESS_ID"
"""Environment variable the launcher sets: this process's rank, from 0."""


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    cpu_collectives: str = "gloo",
) -> None:
    """Join this process to JAX's multi-process runtime (``jax.distributed.initialize``).

    Arguments not given are read from the variables ``python -m tapegrad.launch`` sets
    (``TAPEGRAD_COORDINATOR``, ``TAPEGRAD_NUM_PROCESSES``, ``TAPEGRAD_PROCESS_ID``). Call it
    before any other JAX call: afterwards ``jax.devices()`` lists every process's devices and
    a ``Mesh`` over them is global; ``tg.jit`` steps run on it unchanged.

    Args:
        coordinator_address: ``host:port`` of process 0's coordinator.
        num_processes: how many processes take part.
        process_id: this process's rank.
        cpu_collectives: the CPU backend's cross-process collectives (``"gloo"``; JAX's
            ``jax_cpu_collectives_implementation``).

    Raises:
        RuntimeError: an argument is neither given nor set by the launcher.
    """
    env = os.environ
    address = coordinator_address or env.get(COORDINATOR)
    count = num_processes if num_processes is not None else _int(env.get(NUM_PROCESSES))
    rank = process_id if process_id is not None else _int(env.get(PROCESS_ID))
    if address is None or count is None or rank is None:
        raise RuntimeError(
            "tapegrad.launch.initialize: no coordinator address, process count or rank; run "
            "the script with `python -m tapegrad.launch -n N script.py`, or pass "
            "coordinator_address=, num_processes= and process_id=."
        )
    jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)  # type: ignore[no-untyped-call]  # JAX's update is untyped
    jax.distributed.initialize(address, num_processes=count, process_id=rank)


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def launch(
    argv: Sequence[str],
    nproc: int,
    *,
    devices_per_process: int | None = None,
    timeout: float = 600.0,
    port: int | None = None,
) -> int:
    """Run ``python ARGV`` in ``nproc`` processes on loopback and wait for all of them.

    Each child gets ``TAPEGRAD_COORDINATOR`` (127.0.0.1 and a free port),
    ``TAPEGRAD_NUM_PROCESSES`` and ``TAPEGRAD_PROCESS_ID``; with ``devices_per_process``, also
    ``--xla_force_host_platform_device_count`` in ``XLA_FLAGS`` (simulated CPU devices).
    When one process fails, the others are stopped; after ``timeout`` seconds, all are.

    Returns:
        0 when every process exited 0; else the first failing exit status (124 on timeout).
    """
    if nproc < 1:
        raise ValueError(f"tapegrad.launch: -n must be at least 1, got {nproc}.")
    address = f"127.0.0.1:{port or _free_port()}"
    procs = []
    for rank in range(nproc):
        env = {
            **os.environ,
            COORDINATOR: address,
            NUM_PROCESSES: str(nproc),
            PROCESS_ID: str(rank),
        }
        if devices_per_process is not None:
            flag = f"--xla_force_host_platform_device_count={devices_per_process}"
            env["XLA_FLAGS"] = " ".join(filter(None, [env.get("XLA_FLAGS"), flag]))
        procs.append(subprocess.Popen([sys.executable, *argv], env=env))
    deadline = time.monotonic() + timeout
    status = 0
    try:
        while True:
            codes = [p.poll() for p in procs]  # every process, each time round
            if None not in codes:
                break
            failed = [c for c in codes if c not in (None, 0)]
            if failed or time.monotonic() > deadline:
                status = failed[0] if failed else 124
                if not failed:
                    print(f"tapegrad.launch: timed out after {timeout:g} s", file=sys.stderr)
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return status or next((p.returncode for p in procs if p.returncode), 0)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python -m tapegrad.launch -n N [options] script.py [args...]``."""
    parser = argparse.ArgumentParser(
        prog="python -m tapegrad.launch",
        description="Run a script in N processes joined by JAX's multi-process runtime on "
        "127.0.0.1 (the script calls tapegrad.launch.initialize() first).",
        usage="%(prog)s [-h] -n NPROC [--devices-per-process K] [--timeout S] [--port PORT] "
        "script [args ...]",
    )
    parser.add_argument("-n", "--nproc", type=int, required=True, help="number of processes")
    parser.add_argument(
        "--devices-per-process",
        type=int,
        default=None,
        help="simulated CPU devices in each process (XLA's host platform device count)",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds before every process is stopped"
    )
    parser.add_argument("--port", type=int, default=None, help="coordinator port (default: free)")
    # script optional to argparse, checked below: argparse counts a REMAINDER as required and
    # said "required: script, args" when both were missing, though args may be empty
    parser.add_argument("script", nargs="?", help="the Python script each process runs")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    ns = parser.parse_args(argv)
    if ns.script is None:
        parser.error("the following arguments are required: script")
    if ns.nproc < 1:
        parser.error(f"-n must be at least 1, got {ns.nproc}")
    if not os.path.exists(ns.script):
        print(f"tapegrad.launch: no such script: {ns.script}", file=sys.stderr)
        return 2
    return launch(
        [ns.script, *ns.args],
        ns.nproc,
        devices_per_process=ns.devices_per_process,
        timeout=ns.timeout,
        port=ns.port,
    )


if __name__ == "__main__":
    sys.exit(main())
