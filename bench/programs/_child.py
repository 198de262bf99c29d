"""One program in one system, in a fresh process: import, first run (cold), losses, warm timing.

``python -m bench.programs._child PROGRAM SYSTEM [--dtype D] [--steps N] [--cache-dir DIR]
[--serve]``.

Without ``--serve`` it runs the first run at once and prints one JSON line
(``bench._timing.emit_child``); with ``--serve`` it is a ``bench.peers.Worker``: it answers
one JSON request a line on stdin, so that the parent can interleave two systems' warm batches
(a shared machine's speed drifts over minutes; batches taken seconds apart compare fairly):

- ``{"op": "cold"}`` -> the first run's figures:

  - ``import_s``: seconds to import the system (tapegrad: JAX included);
  - ``cold_s``: seconds of the first run: ``data`` handed to the builder, the model and
    optimizer built, ``STEPS`` steps run and their losses read back as floats;
  - ``losses``: those ``STEPS`` losses;

- ``{"op": "settle", "seconds"}`` -> ``{}``: untimed steps (steady state is what a long loop
  reaches, and tapegrad compiles a backward structure once its eager passes took its
  estimated compile time, at most 1 s);
- ``{"op": "calibrate", "seconds"}`` -> ``{"number"}``: steps per batch of about ``seconds``;
- ``{"op": "batch", "number"}`` -> ``{"timing": [wall, cpu]}``: seconds per step;
- ``{"op": "structures"}`` -> ``{"structures": [...]}`` (tapegrad): its backward structures,
  each with its node count, eager passes and whether it compiled;
- ``{"op": "exit"}``.

``--cache-dir`` points tapegrad's persistent compilation cache at DIR (the parent passes an
empty directory for a first-ever run, then the same one again for a primed run).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from typing import Any

from bench._timing import block, calibrate, emit_child, measure


def _system(system: str, dtype: str, cache_dir: str | None) -> tuple[Any, Any]:
    """Import ``system``; return the builder's extra arguments' dtype and the sync function."""
    if system == "torch":
        import torch

        torch.set_num_threads(1)
        return getattr(torch, dtype), lambda _: None
    if system != "tapegrad":
        raise SystemExit(f"unknown system {system!r}: use tapegrad or torch")
    import tapegrad as tg

    if dtype != "float32":
        raise SystemExit("tapegrad programs run in float32 (JAX's default; x64 is process-wide)")
    if cache_dir is not None:
        tg.set_compilation_cache(cache_dir)
    return None, block


def main(argv: list[str] | None = None) -> None:
    """Run one program in one system: its first run, or serve requests (module docstring)."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("program")
    p.add_argument("system", choices=("tapegrad", "torch"))
    p.add_argument("--dtype", default="float32")
    p.add_argument("--steps", type=int, default=None, help="first-run steps (default STEPS)")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--serve", action="store_true", help="answer JSON requests on stdin")
    args = p.parse_args(argv)
    program = importlib.import_module(f"bench.programs.{args.program}")
    d = program.data()
    if not args.serve:
        emit_child(_first_run(program, d, args)[0])
        return
    replies, sys.stdout = sys.stdout, sys.stderr  # stdout carries the replies only
    step: Any = None
    sync: Any = None
    for line in sys.stdin:
        request = json.loads(line)
        op = request.get("op")
        reply: dict[str, Any] = {}
        if op == "exit":
            break
        if op == "cold":
            reply, step, sync = _first_run(program, d, args)
        elif op == "settle":
            settled = time.perf_counter() + request["seconds"]
            while time.perf_counter() < settled:
                sync(step())
        elif op == "calibrate":
            reply = {"number": calibrate(step, request["seconds"], sync=sync)}
        elif op == "batch":
            reply = {"timing": list(measure(step, request["number"], sync))}
        elif op == "structures":
            reply = {"structures": _structures()}
        else:
            reply = {"error": f"unknown request {request!r}"}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def _first_run(program: Any, d: dict[str, Any], args: argparse.Namespace) -> tuple[Any, ...]:
    """Import the system, build the program's step and run it ``STEPS`` times; return the
    figures, the step and the sync function."""
    t0 = time.perf_counter()
    dtype, sync = _system(args.system, args.dtype, args.cache_dir)
    t1 = time.perf_counter()
    if args.system == "torch":
        step = program.torch(d, dtype)
    else:
        step = program.tapegrad(d)
    steps = args.steps or program.STEPS
    outs = [step() for _ in range(steps)]
    losses = [float(x.detach()) for x in outs]
    t2 = time.perf_counter()
    del outs
    return {"import_s": t1 - t0, "cold_s": t2 - t1, "losses": losses}, step, sync


def _structures() -> list[dict[str, Any]]:
    """tapegrad's backward structures after the warm batches (``compiled_backward``): nodes,
    eager passes, whether compiled, and why not (``slower``, ``broken``): the state the warm
    figures were measured in."""
    from tapegrad import compiled_backward

    return [
        {
            "nodes": p.nodes,
            "eager_passes": p.passes,
            "compiled": p.compiled is not None,
            "slower": p.slower,
            "broken": p.broken,
            "fastest_eager_s": p.fastest,
            "fastest_compiled_s": p.fastest_compiled,
        }
        for p in compiled_backward.cached()
    ]


if __name__ == "__main__":
    main()
