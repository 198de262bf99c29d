"""Issue 13's model steps: a convnet step, a transformer-block step and an LSTM step,
tapegrad eager against PyTorch eager (CPU), and compiled (``tg.jit``) against a hand-written
``jax.jit`` step; the same weights in all four.

``python -m bench.models [--quick] [--repeats N] [--json PATH]``

- Convnet step (the ``demo --model cnn`` network: conv 3x3 (32) - batch norm - ReLU - max
  pool - conv 3x3 (64) - ReLU - max pool - linear (10)) on a batch of 64 digits ``(64, 1, 8,
  8)``: zero_grad, forward, cross entropy, backward, Adam step. Target <= 2x torch eager.
- Transformer-block step (``TransformerEncoderLayer(64, 4, 256, dropout=0,
  batch_first=True)``) on ``(16, 64, 64)``: forward, mean square, backward, Adam step.
  Target <= 2x torch eager.
- LSTM step (``LSTM(32, 64, batch_first=True)`` and a ``Linear(64, 10)`` head on the last
  step) on ``(16, 24, 32)`` with 10 classes: zero_grad, forward, cross entropy, backward, Adam
  step. Target <= 2x torch eager. (tapegrad's recurrence is one op, ``rnn_scan``: a
  compiled ``lax.scan`` with a hand-written backward; torch's is one fused kernel call for
  the whole sequence.)

Compiled (issue 13 item 6): the same unchanged tapegrad step under ``tg.jit`` (its own model
and optimizer), against a hand-written ``jax.jit(value_and_grad)`` + ``optax.adam`` step of
the same model (``bench._models_jax``, the LSTM's recurrence a ``jax.lax.scan``: pure
functions of the state dict, parameters, optimizer state and running statistics donated).
Target <= 1.2x the hand step. The first losses of the two compiled steps are checked to agree
before timing. A diagnostic row times the convnet's ``tg.jit`` step with a
``CosineAnnealingLR`` stepped after every call (a learning rate that changes every step is an
input of the compiled step: it must not compile again).

All four run alternately in one process (torch with one compute thread, as in
``bench.peers``: its thread pool spins badly on a busy machine); torch's state dict is loaded
into the tapegrad models unchanged, so all start from the same weights.
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
JIT_HEADERS = ["case", "time per step (wall)", "ratio to hand jax.jit (wall)", "ratio (CPU time)"]
TG_JIT, HAND = "tg.jit", "hand jax.jit"
SCHEDULED = "(diag) tg.jit, lr set every step"


def _torch_sync(out: Any) -> None:
    """torch's CPU ops are synchronous: nothing to wait for."""


def _cases(quick: bool) -> dict[str, dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]]:
    """Per workload: system -> (one training step, how to wait for its result)."""
    import jax
    import numpy as np
    import torch

    import tapegrad as tg
    from bench import _models_jax
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

    def convnet() -> ConvNet:
        model = ConvNet(key=0)
        model.load_state_dict(theirs.state_dict())  # a torch state dict loads unchanged
        model.eval()  # no dropout: the same arithmetic as torch's
        model.features[1].train()  # batch norm: batch statistics
        return model

    theirs.eval()
    theirs.features[1].train()
    weights = {k: v.numpy() for k, v in theirs.state_dict().items()}
    ours, compiled, scheduled = convnet(), convnet(), convnet()
    opt = optim.Adam(ours.parameters(), lr=1e-3)
    copt = optim.Adam(compiled.parameters(), lr=1e-3)
    sopt = optim.Adam(scheduled.parameters(), lr=1e-3)
    cosine = optim.lr_scheduler.CosineAnnealingLR(sopt, T_max=1000)
    topt = torch.optim.Adam(theirs.parameters(), lr=1e-3)
    tx, ty = tg.tensor(x), tg.tensor(y)
    px, py = torch.tensor(x), torch.tensor(y.astype(np.int64))

    def conv_ours() -> Any:
        opt.zero_grad()
        loss = tg.cross_entropy(ours(tx), ty)
        loss.backward()
        opt.step()
        return loss.data

    def compiled_step(model: ConvNet, opt: optim.Optimizer) -> Any:
        @tg.jit
        def step(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
            opt.zero_grad()
            loss = tg.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    conv_jit = compiled_step(compiled, copt)
    conv_scheduled_jit = compiled_step(scheduled, sopt)

    def conv_scheduled() -> Any:
        loss = conv_scheduled_jit(tx, ty)
        cosine.step()
        return loss

    conv_hand = _models_jax.convnet_step(weights, x, y, 1e-3)

    def conv_theirs() -> Any:
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(theirs(px), py)
        loss.backward()
        topt.step()
        return loss

    # ---- transformer block
    b, length, d = (2, 8, 16) if quick else (16, 64, 64)
    layer_t = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)

    def encoder() -> nn.TransformerEncoderLayer:
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True, key=0)
        layer.load_state_dict(layer_t.state_dict())
        return layer

    layer, clayer = encoder(), encoder()
    h = rng.standard_normal((b, length, d)).astype(np.float32)
    th, ph = tg.tensor(h), torch.tensor(h)
    opt2 = optim.Adam(layer.parameters(), lr=1e-3)
    copt2 = optim.Adam(clayer.parameters(), lr=1e-3)
    topt2 = torch.optim.Adam(layer_t.parameters(), lr=1e-3)

    def block_ours() -> Any:
        opt2.zero_grad()
        loss = (layer(th) ** 2).mean()
        loss.backward()
        opt2.step()
        return loss.data

    @tg.jit
    def block_jit(h: tg.Tensor) -> tg.Tensor:
        copt2.zero_grad()
        loss = (clayer(h) ** 2).mean()
        loss.backward()
        copt2.step()
        return loss

    block_weights = {k: v.detach().numpy() for k, v in layer_t.state_dict().items()}
    block_hand = _models_jax.block_step(block_weights, h, 4, 1e-3)

    def block_theirs() -> Any:
        topt2.zero_grad()
        loss = (layer_t(ph) ** 2).mean()
        loss.backward()
        topt2.step()
        return loss

    # ---- LSTM classifier
    n3, steps = (4, 6) if quick else (16, 24)
    seq = rng.standard_normal((n3, steps, 32)).astype(np.float32)
    labels = (np.arange(n3) % 10).astype(np.int32)
    lstm_t = torch.nn.Module()
    lstm_t.rnn = torch.nn.LSTM(32, 64, batch_first=True)
    lstm_t.head = torch.nn.Linear(64, 10)

    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(32, 64, batch_first=True, key=0)
            self.head = nn.Linear(64, 10, key=1)
            self.load_state_dict(lstm_t.state_dict())

        def forward(self, x: tg.Tensor) -> tg.Tensor:
            return self.head(self.rnn(x)[0][:, -1])

    tagger, ctagger = Tagger(), Tagger()
    opt3 = optim.Adam(tagger.parameters(), lr=1e-3)
    copt3 = optim.Adam(ctagger.parameters(), lr=1e-3)
    topt3 = torch.optim.Adam(lstm_t.parameters(), lr=1e-3)
    tseq, tlab = tg.tensor(seq), tg.tensor(labels)
    pseq, plab = torch.tensor(seq), torch.tensor(labels.astype(np.int64))

    def lstm_ours() -> Any:
        opt3.zero_grad()
        loss = tg.cross_entropy(tagger(tseq), tlab)
        loss.backward()
        opt3.step()
        return loss.data

    @tg.jit
    def lstm_jit(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        copt3.zero_grad()
        loss = tg.cross_entropy(ctagger(x), y)
        loss.backward()
        copt3.step()
        return loss

    lstm_weights = {k: v.detach().numpy() for k, v in lstm_t.state_dict().items()}
    lstm_hand = _models_jax.lstm_step(lstm_weights, seq, labels, 1e-3)

    def lstm_theirs() -> Any:
        topt3.zero_grad()
        out, _ = lstm_t.rnn(pseq)
        loss = torch.nn.functional.cross_entropy(lstm_t.head(out[:, -1]), plab)
        loss.backward()
        topt3.step()
        return loss

    _agree("convnet step", conv_jit(tx, ty), conv_hand())
    _agree("LSTM step", lstm_jit(tseq, tlab), lstm_hand())
    _agree("transformer-block step", block_jit(th), block_hand())
    conv_scheduled()
    conv_scheduled()
    if conv_scheduled_jit.trace_count != 1:
        raise AssertionError("tg.jit compiled again for a new learning rate")
    del jax
    return {
        "convnet step": {
            "tapegrad": (conv_ours, block),
            "torch": (conv_theirs, _torch_sync),
            TG_JIT: (lambda: conv_jit(tx, ty), block),
            HAND: (conv_hand, block),
            SCHEDULED: (conv_scheduled, block),
        },
        "transformer-block step": {
            "tapegrad": (block_ours, block),
            "torch": (block_theirs, _torch_sync),
            TG_JIT: (lambda: block_jit(th), block),
            HAND: (block_hand, block),
        },
        "LSTM step": {
            "tapegrad": (lstm_ours, block),
            "torch": (lstm_theirs, _torch_sync),
            TG_JIT: (lambda: lstm_jit(tseq, tlab), block),
            HAND: (lstm_hand, block),
        },
    }


def _agree(case: str, ours: Any, hand: Any) -> None:
    """The first losses of the two compiled steps are the same (float32)."""
    import numpy as np

    a, b = float(np.asarray(ours)), float(np.asarray(hand))
    if not np.isclose(a, b, rtol=1e-4, atol=1e-6):
        raise AssertionError(f"{case}: tg.jit's first loss {a} differs from the hand step's {b}")


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
        eager = {k: v for k, v in times.items() if k.split()[0] in ("tapegrad", "torch")}
        report.add(
            f"{workload} (eager), per step",
            HEADERS,
            [timing_row(name, ts, base) for name, ts in eager.items()],
            note="Both systems alternate in one process; same initial weights; CPU.",
            data={k: [t._asdict() for t in v] for k, v in eager.items()},
        )
        report.target(
            timing_target(
                f"issue 13: tapegrad eager {workload} / torch eager",
                times[f"tapegrad {workload}"],
                base,
                2.0,
            )
        )
        hand = times[f"{HAND} {workload}"]
        compiled = {
            f"{s} {workload}": times[f"{s} {workload}"]
            for s in (TG_JIT, HAND, SCHEDULED)
            if s in systems
        }
        report.add(
            f"{workload} (compiled), per step",
            JIT_HEADERS,
            [timing_row(name, ts, hand) for name, ts in compiled.items()],
            note="tg.jit compiles the unchanged eager step (and writes parameters, .grad, "
            "Adam's state and running statistics back); the hand step is pure JAX + optax "
            "with everything donated and no gradients returned. Timed in the same rounds as "
            "the eager rows."
            + (
                " (diag): the tg.jit step with a cosine schedule stepped after every call (one "
                "compile in all; the schedule's own step is timed too)."
                if SCHEDULED in systems
                else ""
            ),
            data={k: [t._asdict() for t in v] for k, v in compiled.items()},
        )
        report.target(
            timing_target(
                f"issue 13: tg.jit {workload} / hand jax.jit + optax",
                times[f"{TG_JIT} {workload}"],
                hand,
                1.2,
            )
        )
        tg.graph_cleanup()
    report.finish(args.json)
    return report


if __name__ == "__main__":
    main()
