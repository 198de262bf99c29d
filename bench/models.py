"""Issue 13's model steps: a convnet step and a transformer-block step, tapegrad eager
against PyTorch eager (CPU), the same weights in both.

``python -m bench.models [--quick] [--repeats N] [--json PATH]``

- Convnet step (the ``demo --model cnn`` network: conv 3x3 (32) - batch norm - ReLU - max
  pool - conv 3x3 (64) - ReLU - max pool - linear (10)) on a batch of 64 digits ``(64, 1, 8,
  8)``: zero_grad, forward, cross entropy, backward, Adam step. Target <= 2x torch eager.
- Transformer-block step (``TransformerEncoderLayer(64, 4, 256, dropout=0,
  batch_first=True)``) on ``(16, 64, 64)``: forward, mean square, backward, Adam step.
  Target <= 2x torch eager.

Both systems run alternately in one process (torch with one compute thread, as in
``bench.peers``: its thread pool spins badly on a busy machine); torch's state dict is loaded
into the tapegrad model unchanged, so both start from the same weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench._timing import (
    Report,
    alternate_timings,
    calibrated_batch,
    parse_args,
    timing_row,
    timing_target,
)

__all__ = ["main"]

HEADERS = ["case", "time per step (wall)", "ratio to torch eager (wall)", "ratio (CPU time)"]


def _torch_sync(out: Any) -> None:
    """torch's CPU ops are synchronous: nothing to wait for."""


def _cases(quick: bool) -> dict[str, dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]]:
    """Per workload: system -> (one training step, how to wait for its result)."""
    import jax
    import numpy as np
    import torch

    import tapegrad as tg
    from bench._timing import block
    from diagnostics.demo_cnn import ConvNet
    from tapegrad import nn, optim

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # as bench.peers runs torch: no oversubscription on a busy machine

    # ---- convnet
    n = 8 if quick else 64
    x = rng.standard_normal((n, 1, 8, 8)).astype(np.float32)
    y = (np.arange(n) % 10).astype(np.int32)
    theirs = torch.nn.Module()
    theirs.features = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
    )
    theirs.head = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Dropout(0.2), torch.nn.Linear(256, 10)
    )
    theirs.forward = lambda t: theirs.head(theirs.features(t))
    ours = ConvNet(key=0)
    ours.load_state_dict(theirs.state_dict())  # a torch state dict loads unchanged
    ours.eval(), theirs.eval()  # no dropout in either: the same arithmetic
    ours.features[1].train(), theirs.features[1].train()  # batch norm: batch statistics
    opt = optim.Adam(ours.parameters(), lr=1e-3)
    topt = torch.optim.Adam(theirs.parameters(), lr=1e-3)
    tx, ty = tg.tensor(x), tg.tensor(y)
    px, py = torch.tensor(x), torch.tensor(y.astype(np.int64))

    def conv_ours() -> Any:
        opt.zero_grad()
        loss = tg.cross_entropy(ours(tx), ty)
        loss.backward()
        opt.step()
        return loss.data

    def conv_theirs() -> Any:
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(theirs(px), py)
        loss.backward()
        topt.step()
        return loss

    # ---- transformer block
    b, length, d = (2, 8, 16) if quick else (16, 64, 64)
    layer_t = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
    layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True, key=0)
    layer.load_state_dict(layer_t.state_dict())
    h = rng.standard_normal((b, length, d)).astype(np.float32)
    th, ph = tg.tensor(h), torch.tensor(h)
    opt2 = optim.Adam(layer.parameters(), lr=1e-3)
    topt2 = torch.optim.Adam(layer_t.parameters(), lr=1e-3)

    def block_ours() -> Any:
        opt2.zero_grad()
        loss = (layer(th) ** 2).mean()
        loss.backward()
        opt2.step()
        return loss.data

    def block_theirs() -> Any:
        topt2.zero_grad()
        loss = (layer_t(ph) ** 2).mean()
        loss.backward()
        topt2.step()
        return loss

    del jax
    return {
        "convnet step": {"tapegrad": (conv_ours, block), "torch": (conv_theirs, _torch_sync)},
        "transformer-block step": {
            "tapegrad": (block_ours, block),
            "torch": (block_theirs, _torch_sync),
        },
    }


def main(argv: Sequence[str] | None = None) -> Report:
    """Run the model-step benchmark, print its tables and targets, and return the report."""
    args = parse_args(__doc__, argv, default=7)
    import jax
    import torch

    import tapegrad as tg

    report = Report("bench.models (issue 13)", args.quick, args.repeats)
    report.meta.update(jax=jax.__version__, torch=torch.__version__, tapegrad=tg.__version__)
    seconds = 0.01 if args.quick else 0.5
    for workload, systems in _cases(args.quick).items():
        batches = {
            f"{system} {workload}": calibrated_batch(step, seconds, sync)
            for system, (step, sync) in systems.items()
        }
        times = alternate_timings(batches, args.repeats)
        base = times[f"torch {workload}"]
        report.add(
            f"{workload} (eager), per step",
            HEADERS,
            [timing_row(name, ts, base) for name, ts in times.items()],
            note="Both systems alternate in one process; same initial weights; CPU.",
            data={k: [t._asdict() for t in v] for k, v in times.items()},
        )
        report.target(
            timing_target(
                f"issue 13: tapegrad eager {workload} / torch eager",
                times[f"tapegrad {workload}"],
                base,
                2.0,
            )
        )
        tg.graph_cleanup()
    report.finish(args.json)
    return report


if __name__ == "__main__":
    main()
