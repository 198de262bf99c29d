"""Issue 14's data-parallel step on 1, 2, 4 and 8 simulated CPU devices: tapegrad eager and
``tg.jit`` against the same step written in raw JAX (``jax.jit``), all in one process.

``python -m bench.devices [--quick] [--repeats N] [--json PATH]``

The MLP 64-128-128-10 (cross entropy, SGD) on a batch of 256 sharded over a one-axis
``Mesh`` of the first k devices (parameters replicated). The 8 devices are XLA's simulated
host devices (``--xla_force_host_platform_device_count=8``, set here before JAX starts), which
share this machine's cores: more devices measure the cost of sharding (partitioned programs,
collectives, per-device dispatch), not a speed-up. On an accelerator machine with several
devices, the same command measures real devices (the flag only affects the CPU platform).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from bench._timing import (
    Report,
    alternate_timings,
    calibrate,
    finish_args,
    make_parser,
    measure,
    timing_row,
    timing_target,
)

__all__ = ["main"]

DEVICES = (1, 2, 4, 8)
HEADERS = ["case", "time per step (wall)", "ratio to raw JAX jit (wall)", "ratio (CPU time)"]


def _steps(k: int, quick: bool) -> dict[str, Callable[[], Any]]:
    """The three data-parallel steps on a mesh of the first ``k`` devices."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import tapegrad as tg
    from tapegrad import nn, optim

    mesh = Mesh(np.array(jax.devices()[:k]), ("data",))
    data, repl = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    n = 16 if quick else 256
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((n, 64)).astype(np.float32), data)
    y = jax.device_put((np.arange(n) % 10).astype(np.int32), data)

    def model() -> nn.Module:
        net = nn.Sequential(
            nn.Linear(64, 128, key=0),
            nn.ReLU(),
            nn.Linear(128, 128, key=1),
            nn.ReLU(),
            nn.Linear(128, 10, key=2),
        )
        return net.to(repl)

    eager, compiled = model(), model()
    opt_e = optim.SGD(eager.parameters(), lr=0.1)
    opt_c = optim.SGD(compiled.parameters(), lr=0.1)
    tx = tg.tensor(x)

    def eager_step() -> Any:
        opt_e.zero_grad()
        loss = tg.cross_entropy(eager(tx), y)
        loss.backward()
        opt_e.step()
        return loss.data

    @tg.jit
    def jit_step(xx: tg.Tensor, yy: Any) -> tg.Tensor:
        opt_c.zero_grad()
        loss = tg.cross_entropy(compiled(xx), yy)
        loss.backward()
        opt_c.step()
        return loss

    params = [p.data for p in model().parameters()]

    def loss_fn(ps: list[Any], xx: Any, yy: Any) -> Any:
        h = xx
        for i in range(0, len(ps), 2):
            h = h @ ps[i].T + ps[i + 1]
            if i + 2 < len(ps):
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h)
        return -jnp.mean(jnp.take_along_axis(logp, yy[:, None], axis=1))

    @jax.jit
    def jax_step(ps: list[Any], xx: Any, yy: Any) -> tuple[list[Any], Any]:
        loss, g = jax.value_and_grad(loss_fn)(ps, xx, yy)
        return [p - 0.1 * gp for p, gp in zip(ps, g, strict=True)], loss

    state = [params]

    def raw_step() -> Any:
        state[0], loss = jax_step(state[0], x, y)
        return loss

    return {
        "tapegrad eager": eager_step,
        "tapegrad tg.jit": lambda: jit_step(tx, y).data,
        "raw JAX jit": raw_step,
    }


def main(argv: Sequence[str] | None = None) -> Report:
    """Run the data-parallel benchmark, print its tables and targets, return the report."""
    p = make_parser(__doc__ or "")
    args = finish_args(p, argv, default=5)
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:  # before JAX starts
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count=8".strip()
    import jax

    import tapegrad as tg

    report = Report("bench.devices (issue 14)", args.quick, args.repeats)
    report.meta.update(jax=jax.__version__, tapegrad=tg.__version__, devices=str(jax.devices()))
    seconds = 0.01 if args.quick else 0.3
    ones: dict[str, Any] = {}
    for k in DEVICES:
        if k > len(jax.devices()):
            break
        steps = _steps(k, args.quick)
        batches = {}
        for name, step in steps.items():
            number = calibrate(step, seconds)
            batches[name] = lambda step=step, number=number: measure(step, number)
        times = alternate_timings(batches, args.repeats)
        base = times["raw JAX jit"]
        rows = [timing_row(name, ts, base) for name, ts in times.items()]
        if k == 1:
            ones = times
        else:
            rows += [
                timing_row(f"{name} against itself on 1 device", ts, ones[name])
                for name, ts in times.items()
            ]
        report.add(
            f"data-parallel MLP step on {k} device{'s' if k > 1 else ''}, per step",
            HEADERS,
            rows,
            note="Batch sharded over a one-axis mesh, parameters replicated; simulated CPU "
            "devices sharing the machine's cores (overhead, not speed-up). Rows 'against "
            "itself on 1 device' divide by the same system's 1-device time.",
            data={name: [t._asdict() for t in ts] for name, ts in times.items()},
        )
        report.target(
            timing_target(
                f"issue 14: tapegrad tg.jit data-parallel step on {k} device(s) / raw JAX jit",
                times["tapegrad tg.jit"],
                base,
                1.5,
            )
        )
        tg.graph_cleanup()
    report.finish(args.json)
    return report


if __name__ == "__main__":
    main()
