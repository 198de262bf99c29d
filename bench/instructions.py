"""Instructions per op, counted by valgrind (deterministic where wall time is not).

``python -m bench.instructions [--cases raw,tracked,chain,compiled]`` (needs ``valgrind`` on the
PATH; Debian: ``apt-get install valgrind``; ~5 min).

On a shared machine whose speed drifts, a 5% change in the cost of an op is lost in the noise
of wall time; the instructions the CPU executes for it are not. Each case runs in a fresh
process under ``valgrind --tool=callgrind`` with counting off, warms up, then counts one loop
of ``N`` ops (``callgrind_control`` turns counting on and off around it; the garbage
collector is off during the loop and the cleanup policy is ``"manual"``, so no collection or
sweep lands in it; the background thread has finished what the warm-up started compiling
ahead, which a tree whose kernel store is empty, after any edit to tapegrad's source, would
otherwise count too: 92,000-114,000 instead of ~74,000 for a tracked op). Per op: the
difference between a loop of 3,000 and one of 1,000 ops, divided by 2,000 (what both loops
share cancels). Cases:

- ``raw``: ``a * b`` on two (2, 2) float32 ``jax.Array``s;
- ``tracked``: the same on tensors that require grad, the output dropped (its node hangs);
- ``chain``: ``y = y * 1.0001`` forward and an eager backward, per op (200 and 600 ops);
- ``compiled``: the same once its structure is compiled (``tapegrad.compiled_backward``: the
  backward is one XLA call; what stays per node is the structure lookup, the walk and the
  graph's consumption), as a training loop's repeated step reaches it.

Instructions are not time (cache misses, the XLA thread's waits), but on this dispatch-bound
path they follow it: the tracked / raw ratio in instructions is within a few percent of the
wall-time ratio of ``bench.engine`` on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence

SIZES = {"raw": (1000, 3000), "tracked": (1000, 3000), "chain": (200, 600), "compiled": (200, 600)}

_LOOP = """
import gc, os, subprocess, sys
import numpy as np, jax
import tapegrad as tg
tg.set_cleanup_policy("manual")
case, n = sys.argv[1], int(sys.argv[2])
ta = tg.tensor(np.ones((2, 2), np.float32), requires_grad=True)
tb = tg.tensor(np.full((2, 2), 2.0, np.float32), requires_grad=True)
a, b = ta.data, tb.data
ones = tg.ones((2, 2))
def raw():
    for _ in range(n): a * b
def tracked():
    for _ in range(n): ta * tb
def chain():
    y = ta
    for _ in range(n): y = y * 1.0001
    y.backward(ones)
    jax.block_until_ready(ta.grad.data)
    ta.grad = None
if case == "compiled":
    from tapegrad import compiled_backward
    compiled_backward.set_compile_after(0)  # the structure compiles on its second pass
loop = {"raw": raw, "tracked": tracked, "chain": chain, "compiled": chain}[case]
for _ in range(3):
    loop()
from tapegrad import kernels
pool = kernels._background()
for _ in range(2):  # what the warm-up started compiling ahead is done, and what that started
    if pool is not None:
        pool.submit(int).result()
gc.collect()
gc.disable()
pid = str(os.getpid())
subprocess.run(["callgrind_control", "-i", "on", pid], capture_output=True)
loop()
subprocess.run(["callgrind_control", "-i", "off", pid], capture_output=True)
"""


def count(case: str, n: int) -> int:
    """Instructions valgrind counted for one loop of ``n`` ops of ``case``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        proc = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                _LOOP,
                case,
                str(n),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"},
        )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise RuntimeError(f"valgrind counted nothing for {case}:\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def per_op(case: str) -> float:
    """Instructions per op of ``case`` (the difference of two loop lengths)."""
    small, large = SIZES[case]
    return (count(case, large) - count(case, small)) / (large - small)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Count each case and print instructions per op (and tracked / raw when both ran)."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--cases", default="raw,tracked,chain,compiled")
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(SIZES)
    if unknown:
        p.error(f"unknown cases {sorted(unknown)}; choose from {', '.join(SIZES)}")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("skipped: valgrind (with callgrind_control) is not installed")
        return {}
    result = {case: per_op(case) for case in cases}
    for case, value in result.items():
        print(f"{case}: {value:,.0f} instructions per op")
    if "raw" in result and "tracked" in result:
        print(f"tracked / raw: {result['tracked'] / result['raw']:.3f}x")
    return result


if __name__ == "__main__":
    main()
