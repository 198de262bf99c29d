"""Issue 11's speed targets: higher-order gradients on the digits MLP (64-128-128-10, ReLU).

``python -m bench.higher [--quick] [--repeats N] [--json PATH]``

- ``loss.backward(create_graph=True)`` against a plain ``loss.backward()`` on the MLP with a
  minibatch of 64 (the forward is built untimed before each backward): target <= 3x.
- ``tg.hvp`` of the cross-entropy loss with respect to the six parameters against
  ``torch.autograd.functional.hvp`` on the same function, data and weights (torch on one
  thread, in this process): target <= 1.5x. A compiled JAX forward-over-reverse HVP
  (``jax.jit(jax.jvp(jax.grad(f)))``) is shown as the floor.

Each pair runs alternately in one process (A B A B ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench import _data
from bench import _timing as bt

__all__ = ["main"]

HEADERS = ["case", "time per call (wall)", "ratio to the baseline (wall)", "ratio (CPU time)"]


def _forward(tg: Any, params: Sequence[Any], x: Any, y: Any) -> Any:
    h = x
    for i in range(0, len(params) - 2, 2):
        h = (h @ params[i] + params[i + 1]).relu()
    return tg.cross_entropy(h @ params[-2] + params[-1], y)


def main(argv: Sequence[str] | None = None) -> bt.Report:
    """Run the higher-order benchmark, print its tables and targets, and return the report."""
    args = bt.parse_args(__doc__, argv, default=7)
    quick: bool = args.quick

    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    import tapegrad as tg

    torch.set_num_threads(1)
    if jax.default_backend() != "cpu":
        # its results are checked against PyTorch's on the CPU in full float32; a GPU's
        # default float32 matmul precision in JAX is TF32 (~1e-3 relative)
        jax.config.update("jax_default_matmul_precision", "highest")
    report = bt.Report("bench.higher (issue 11)", quick, args.repeats)
    report.meta["jax"] = jax.__version__
    report.meta["torch"] = torch.__version__
    seconds = 0.002 if quick else 0.1
    x_np, y_np = _data.minibatches(_data.BATCH)[0]
    init = _data.mlp_init()
    x, y = tg.tensor(x_np), tg.tensor(y_np.astype(np.int32))
    params = [tg.tensor(a).require_grad() for a in init]

    # ---------------------------------------------------------------- create_graph / plain
    def backward_batch(create_graph: bool) -> Callable[[], bt.Timing]:
        def run() -> bt.Timing:
            clock = bt.Clock()
            number = 2 if quick else 10
            for _ in range(number):
                loss = _forward(tg, params, x, y)
                bt.block(loss)
                clock.start()
                loss.backward(create_graph=create_graph)
                bt.block([q.grad for q in params])
                clock.stop()
                del loss
                for q in params:
                    q.grad = None
                tg.graph_cleanup()
            return clock.per(number)

        return run

    batches = {
        "plain backward": backward_batch(False),
        "backward(create_graph=True)": backward_batch(True),
    }
    for run in batches.values():
        run()  # warm up (compiles)
    times = bt.alternate_timings(batches, args.repeats)
    base = times["plain backward"]
    report.add(
        f"Backward of the MLP {'-'.join(map(str, _data.SIZES))} on a batch of {_data.BATCH}",
        HEADERS,
        [bt.timing_row(name, ts, base) for name, ts in times.items()],
        note="The forward is built untimed before each backward; the timed part ends when every "
        "parameter's .grad is computed. create_graph records each VJP application as a node "
        "(vjp(<op>)), so its gradients can be differentiated again.",
        data={k: [t._asdict() for t in v] for k, v in times.items()},
    )
    report.target(
        bt.timing_target(
            "issue 11: backward(create_graph=True) / plain backward, MLP",
            times["backward(create_graph=True)"],
            base,
            3.0,
        )
    )

    # ---------------------------------------------------------------- HVP
    rng = np.random.default_rng(2)
    vecs = [rng.standard_normal(a.shape).astype(np.float32) for a in init]
    tg_in = [tg.tensor(a) for a in init]
    tg_v = [tg.tensor(v) for v in vecs]

    def tg_loss(*ps: Any) -> Any:
        return _forward(tg, ps, x, y)

    xt, yt = torch.from_numpy(x_np), torch.from_numpy(y_np)
    t_in = tuple(torch.from_numpy(a.copy()) for a in init)
    t_v = tuple(torch.from_numpy(v) for v in vecs)

    def torch_loss(*ps: Any) -> Any:
        h = xt
        for i in range(0, len(ps) - 2, 2):
            h = torch.relu(h @ ps[i] + ps[i + 1])
        return torch.nn.functional.cross_entropy(h @ ps[-2] + ps[-1], yt)

    xj, yj = jnp.asarray(x_np), jnp.asarray(y_np.astype(np.int32))

    def jax_loss(ps: Any) -> Any:
        h = xj
        for i in range(0, len(ps) - 2, 2):
            h = jax.nn.relu(h @ ps[i] + ps[i + 1])
        logp = jax.nn.log_softmax(h @ ps[-2] + ps[-1])
        return -jnp.mean(jnp.take_along_axis(logp, yj[:, None], axis=1))

    jax_hvp = jax.jit(lambda ps, vs: jax.jvp(jax.grad(jax_loss), (ps,), (vs,)))
    j_in, j_v = [jnp.asarray(a) for a in init], [jnp.asarray(v) for v in vecs]

    def torch_step() -> Any:
        return torch.autograd.functional.hvp(torch_loss, t_in, t_v)

    steps: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
        "torch.autograd.functional.hvp": (torch_step, lambda out: None),
        "tg.hvp": (lambda: tg.hvp(tg_loss, tg_in, tg_v), bt.block),
        "(floor) jax.jit(jvp(grad(f)))": (lambda: jax_hvp(j_in, j_v), bt.block),
    }
    got = tg.hvp(tg_loss, tg_in, tg_v)[1]
    want = torch_step()[1]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-3, atol=2e-5)
    hvp_batches = {
        name: bt.calibrated_batch(step, seconds, sync) for name, (step, sync) in steps.items()
    }
    hvp_times = bt.alternate_timings(hvp_batches, args.repeats)
    torch_times = hvp_times["torch.autograd.functional.hvp"]
    report.add(
        f"Hessian-vector product of the MLP's loss (batch {_data.BATCH}), all six parameters",
        HEADERS,
        [bt.timing_row(name, ts, torch_times) for name, ts in hvp_times.items()],
        note="The same function, data, weights and vector in each system; the results agree "
        "(checked before timing). torch runs on one thread. The floor is JAX compiling the "
        "whole forward-over-reverse product into one XLA computation.",
        data={k: [t._asdict() for t in v] for k, v in hvp_times.items()},
    )
    report.target(
        bt.timing_target(
            "issue 11: tg.hvp / torch.autograd.functional.hvp, digits MLP",
            hvp_times["tg.hvp"],
            torch_times,
            1.5,
        )
    )
    for q in params:
        q.grad = None
    tg.graph_cleanup()
    report.finish(args.json)
    return report


if __name__ == "__main__":
    main()
