"""A worker process of the peers suite: one system, driven over stdin/stdout in JSON lines.

``python -m bench._worker SYSTEM`` imports ``bench.peer_<SYSTEM>`` only, so systems never share
a process (importing torch and JAX together changes garbage-collection costs). Requests and
replies, one JSON object a line:

- ``{"op": "info"}`` -> ``{"system", "version", "variants"}`` or ``{"skipped": reason}``
- ``{"op": "prepare", "key", "workload", "variant", "kwargs", "seconds", "settle"}`` ->
  ``{"number"}``: builds the case, runs it for its ``settle`` seconds (untimed) when
  ``settle`` is true (not in a ``--quick`` run), warms it up and picks the
  steps per batch that fill about ``seconds``.
- ``{"op": "run", "key"}`` -> ``{"seconds", "cpu"}``: one batch, wall and CPU seconds per
  step (CPU: this worker process, all threads).
- ``{"op": "probe", "workload", "variant", "kwargs"}`` -> the probe's dict.
- ``{"op": "exit"}``.

Any failure is answered with ``{"error": message}``; the worker keeps serving.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any

from bench._peer import Case
from bench._timing import calibrate, measure

__all__ = ["serve"]


def serve(system: str) -> None:
    """Answer requests on stdin until ``exit`` or end of input."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # anything a library prints goes to stderr, not into the protocol
    module: Any = None
    skipped = ""
    try:
        module = importlib.import_module(f"bench.peer_{system}")
    except ImportError as err:
        skipped = f"not installed ({err.name or err})"
    cases: dict[str, tuple[Case, int]] = {}
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "exit":
            break
        try:
            if module is None:
                reply: dict[str, Any] = {"skipped": skipped}
            elif op == "info":
                reply = {
                    "system": module.SYSTEM,
                    "version": module.version(),
                    "variants": module.VARIANTS,
                }
            elif op == "prepare":
                case = module.case(req["workload"], req["variant"], **req.get("kwargs", {}))
                case.before()
                try:
                    settled = time.perf_counter() + (case.settle if req.get("settle") else 0.0)
                    while time.perf_counter() < settled:
                        case.sync(case.step())
                    number = calibrate(
                        case.step, req["seconds"], sync=case.sync, max_number=req.get("max", 10**6)
                    )
                finally:
                    case.after()
                cases[req["key"]] = (case, number)
                reply = {"number": number}
            elif op == "run":
                case, number = cases[req["key"]]
                case.before()
                try:
                    m = measure(case.step, number, case.sync)
                    reply = {"seconds": m.wall, "cpu": m.cpu}
                finally:
                    case.after()
            elif op == "drop":
                cases.pop(req["key"], None)
                reply = {}
            elif op == "probe":
                reply = module.probe(req["workload"], req["variant"], **req.get("kwargs", {}))
            else:
                reply = {"error": f"unknown request {op!r}"}
        except Exception as err:  # noqa: BLE001 - reported to the orchestrator, which goes on
            traceback.print_exc()
            reply = {"error": f"{type(err).__name__}: {err}"}
        out.write(json.dumps(reply, default=float) + "\n")


if __name__ == "__main__":
    serve(sys.argv[1])
