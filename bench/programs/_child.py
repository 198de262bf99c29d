"""One program in one system, in a fresh process: import, first run (cold), losses, warm timing.

``python -m bench.programs._child PROGRAM SYSTEM [--dtype D] [--warm SECONDS] [--repeats N]
[--cache-dir DIR]`` prints one JSON line (``bench._timing.emit_child``) with:

- ``import_s``: seconds to import the system (tapegrad: JAX included);
- ``cold_s``: seconds of the first run: ``data`` handed to the builder, the model and
  optimizer built, ``STEPS`` steps run and their losses read back as floats;
- ``losses``: those ``STEPS`` losses;
- ``warm``: with ``--warm`` > 0, ``repeats`` batches of steps that each last about ``SECONDS``
  (after the first run and ``--settle`` seconds of untimed steps, 3 by default: steady state
  is what a long loop reaches, and tapegrad compiles a backward structure once its eager
  passes took its estimated compile time, at most 1 s), as ``[wall, cpu]`` seconds per step;
- ``backward_structures`` (tapegrad, with ``--warm``): its backward structures after the warm
  batches, each with its node count, eager passes and whether it compiled.

``--cache-dir`` points tapegrad's persistent compilation cache at DIR (the parent passes an
empty directory for a first-ever run, then the same one again for a primed run).
"""

from __future__ import annotations

import argparse
import importlib
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
    """Run one program in one system and emit its figures."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("program")
    p.add_argument("system", choices=("tapegrad", "torch"))
    p.add_argument("--dtype", default="float32")
    p.add_argument("--warm", type=float, default=0.0, help="seconds per warm batch (0: none)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--settle", type=float, default=3.0, help="untimed seconds before warm")
    p.add_argument("--steps", type=int, default=None, help="first-run steps (default STEPS)")
    p.add_argument("--cache-dir", default=None)
    args = p.parse_args(argv)
    program = importlib.import_module(f"bench.programs.{args.program}")
    d = program.data()
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
    result: dict[str, Any] = {"import_s": t1 - t0, "cold_s": t2 - t1, "losses": losses}
    if args.warm > 0:
        settled = time.perf_counter() + args.settle
        while time.perf_counter() < settled:
            sync(step())
        number = calibrate(step, args.warm, sync=sync)
        result["warm"] = [list(measure(step, number, sync)) for _ in range(args.repeats)]
        result["number"] = number
        if args.system == "tapegrad":
            result["backward_structures"] = _structures()
    emit_child(result)


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
