"""``python -m diagnostics demo``: train an MLP on real data with planted graph-memory mistakes.

The data is scikit-learn's bundled digits set (1,797 8x8 images, 10 classes; nothing is
downloaded), split 75/25 with a fixed seed and stratified. A 64-128-10 MLP trains with Adam
on minibatches of 32 (the last partial batch of each epoch is dropped, so every step has the
same shapes and JAX compiles each op once).

Two realistic mistakes are planted, unless ``--fixed``:

1. Per batch: a perturbation for a logged robustness metric is made to require grad (as in
   adversarial-training code, where it does need a gradient), and the metric runs under grad
   mode. No backward ever reaches that graph: its leaf and op nodes hang (tracel-ai/burn#3976).
2. Per epoch: the test-set evaluation runs under grad mode (``model.eval()`` does not turn
   recording off), so its forward pass leaves op nodes with their saved activations.

At each epoch end ``diagnostics.epoch_end`` prints the leak report (in full on the first and
last epochs, one summary line between) and what ``tg.graph_cleanup()`` freed;
``--no-cleanup`` skips the cleanup so the tape grows epoch after epoch; ``--fixed`` removes
both mistakes (``tg.no_grad()``, no ``requires_grad``), and the report shows nothing
hanging. A table of nodes and saved bytes per epoch and a final test-accuracy line close the
run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from rich.console import Console
from rich.filesize import decimal
from rich.progress import Progress
from rich.table import Table

import tapegrad as tg
from diagnostics import clear_history, epoch_end
from diagnostics.render import plural, terminal_console
from diagnostics.training import epoch_table, progress_bar
from tapegrad import nn, optim

__all__ = ["main", "build_parser", "Data", "load_data", "make_model", "EpochRecord"]

BATCH_SIZE = 32
HIDDEN = 128
LEARNING_RATE = 3e-3
JITTER = 0.1
DEFAULT_EPOCHS = {"mlp": 5, "cnn": 10, "transformer": 3}


@dataclass(frozen=True)
class Data:
    """The digits split: standardised pixels (float32), labels 0-9 (int32).

    Attributes:
        x_train: shape (1347, 64).
        y_train: shape (1347,).
        x_test: shape (450, 64).
        y_test: shape (450,).
    """

    x_train: jax.Array
    y_train: jax.Array
    x_test: jax.Array
    y_test: jax.Array


@dataclass(frozen=True)
class EpochRecord:
    """The tape at one epoch end.

    Attributes:
        epoch: 1-based epoch number.
        loss: mean training loss over the epoch.
        accuracy: test accuracy after the epoch, in [0, 1].
        nodes: nodes on the tape at the epoch end, before any cleanup.
        saved_bytes: saved-array bytes the tape held then.
        hanging_nodes: hanging nodes the report found.
        nodes_freed: nodes the cleanup removed (``None`` with ``--no-cleanup``).
        bytes_freed: bytes the cleanup released (``None`` with ``--no-cleanup``).
        nodes_after: nodes on the tape after the epoch end.
    """

    epoch: int
    loss: float
    accuracy: float
    nodes: int
    saved_bytes: int
    hanging_nodes: int
    nodes_freed: int | None
    bytes_freed: int | None
    nodes_after: int


MAX_SEED = 2**32 - 1
"""The largest ``--seed`` (NumPy's generators take no negative seed)."""


def _seed(text: str) -> int:
    """``--seed``: an integer from 0 to ``MAX_SEED``, else an argparse usage error."""
    if not (text.isdecimal() and int(text) <= MAX_SEED):  # "-3", "1.5", "x"
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {MAX_SEED}, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    """The demo's command line (docs/api.md: ``[--epochs N] [--no-cleanup] [--fixed]
    [--seed S]``)."""
    parser = argparse.ArgumentParser(
        prog="python -m diagnostics demo",
        description=(
            "Train an MLP on scikit-learn's digits with planted graph-memory mistakes; "
            "print the leak report and what cleanup freed at each epoch end."
        ),
    )
    parser.add_argument(
        "--epochs",
        type=int,
        metavar="N",
        help="epochs (default: 5 for mlp, 10 for cnn, 3 for transformer)",
    )
    parser.add_argument(
        "--no-cleanup",
        action="store_true",
        help="report but never clean up: shows the tape growing epoch after epoch",
    )
    parser.add_argument(
        "--fixed", action="store_true", help="remove the planted mistakes: nothing hangs"
    )
    parser.add_argument(
        "--seed", type=_seed, default=0, metavar="S", help="seed of init, shuffling, jitter"
    )
    parser.add_argument("--jit", action="store_true", help="compile the training step with tg.jit")
    parser.add_argument(
        "--model",
        choices=("mlp", "cnn", "transformer"),
        default="mlp",
        help="mlp (default), cnn (a convnet on the digits: a running loss kept as a tensor) "
        "or transformer (characters of Python's standard library: attention maps kept)",
    )
    parser.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="cnn/transformer: resume from PATH if it exists, save to it after each epoch",
    )
    parser.add_argument(
        "--steps", type=int, metavar="N", help="cnn/transformer: at most N batches per epoch"
    )
    return parser


def load_data() -> Data:
    """Load the bundled digits, split them 75/25 (stratified, fixed seed) and standardise the
    pixels with the training set's mean and deviation (scikit-learn's ``StandardScaler``).

    Raises:
        ModuleNotFoundError: scikit-learn is not installed (``pip install 'tapegrad[demo]'``).
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.25, random_state=0, stratify=digits.target
    )
    scaler = StandardScaler().fit(x_train)
    return Data(
        x_train=jnp.asarray(scaler.transform(x_train), dtype=jnp.float32),
        y_train=jnp.asarray(y_train, dtype=jnp.int32),
        x_test=jnp.asarray(scaler.transform(x_test), dtype=jnp.float32),
        y_test=jnp.asarray(y_test, dtype=jnp.int32),
    )


def make_model(seed: int, hidden: int = HIDDEN) -> nn.Sequential:
    """A 64-``hidden``-10 MLP with a ReLU, initialised from ``seed``."""
    return nn.Sequential(
        nn.Linear(64, hidden, key=2 * seed), nn.ReLU(), nn.Linear(hidden, 10, key=2 * seed + 1)
    )


def _train_step(
    model: nn.Module,
    opt: optim.Optimizer,
    x: tg.Tensor,
    y: tg.Tensor,
    noise: np.ndarray,
    fixed: bool,
) -> tuple[tg.Tensor, tg.Tensor]:
    """One minibatch: forward, backward, Adam step, and the jittered-input metric.

    The same code runs eagerly and, with ``--jit``, compiled by ``tg.jit`` (``fixed`` is then
    a static argument).

    Returns:
        The batch loss and the loss on jittered inputs (the logged robustness metric), as
        one-element tensors.
    """
    opt.zero_grad()
    loss = tg.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if fixed:
        delta = tg.tensor(noise)
        with tg.no_grad():
            jittered = tg.cross_entropy(model(x + JITTER * delta), y)
    else:
        # Planted mistake 1: the perturbation requires grad and the metric runs under grad
        # mode; no backward ever reaches this graph, so its nodes hang after the step.
        delta = tg.tensor(noise, requires_grad=True)  # planted mistake 1
        jittered = tg.cross_entropy(model(x + JITTER * delta), y)  # planted mistake 1
    return loss.detach(), jittered.detach()


def _train_epoch(
    step: Any,
    model: nn.Module,
    opt: optim.Optimizer,
    data: Data,
    rng: np.random.Generator,
    fixed: bool,
    progress: Progress,
    epoch: int,
    epochs: int,
) -> tuple[float, float]:
    """One pass over the shuffled training set in full minibatches.

    Shuffling and jitter are drawn on the host with ``rng``, as a data loader would (no
    PRNG kernels to compile); each batch is then one transfer.

    Returns:
        The mean loss and the mean jittered-input loss over the batches.
    """
    n = data.x_train.shape[0]
    batches = n // BATCH_SIZE
    order = rng.permutation(n)
    task = progress.add_task(f"epoch {epoch}/{epochs}", total=batches, loss=float("nan"))
    total = jittered_total = 0.0
    model.train()
    for b in range(batches):
        idx = order[b * BATCH_SIZE : (b + 1) * BATCH_SIZE]
        x = tg.tensor(data.x_train[idx])
        y = tg.tensor(data.y_train[idx])
        noise = rng.standard_normal(x.shape, dtype=np.float32)
        loss_t, jittered_t = step(model, opt, x, y, noise, fixed=fixed)
        loss, jittered = loss_t.item(), jittered_t.item()
        total += loss
        jittered_total += jittered
        progress.update(task, advance=1, loss=loss)
    progress.remove_task(task)
    return total / batches, jittered_total / batches


def _evaluate(model: nn.Module, data: Data, fixed: bool) -> float:
    """Test accuracy in [0, 1], from one forward pass over the test set."""
    model.eval()
    x = tg.tensor(data.x_test)
    if fixed:
        with tg.no_grad():
            logits = model(x)
    else:
        # Planted mistake 2: evaluation under grad mode. model.eval() does not stop recording;
        # each op's node and its saved activations stay on the tape after `logits` is dropped.
        logits = model(x)  # planted mistake 2
    predicted = jnp.argmax(logits.data, axis=-1)
    return float(jnp.mean(predicted == data.y_test))


def _summary(records: Sequence[EpochRecord], cleanup: bool) -> Table:
    """Nodes and saved bytes at each epoch end: before cleanup, freed, after."""
    freed = ["freed nodes", "freed"] if cleanup else []
    rows = []
    for r in records:
        row = [
            str(r.epoch),
            f"{r.accuracy:.1%}",
            f"{r.nodes:,}",
            decimal(r.saved_bytes),
            f"{r.hanging_nodes:,}",
        ]
        if cleanup:
            row += [f"{r.nodes_freed or 0:,}", decimal(r.bytes_freed or 0)]
        row.append(f"{r.nodes_after:,}")
        rows.append(row)
    return epoch_table(
        ["epoch", "test acc", "nodes", "saved", "hanging", *freed, "nodes after"], rows
    )


def run(
    epochs: int,
    *,
    cleanup: bool = True,
    fixed: bool = False,
    seed: int = 0,
    console: Console | None = None,
    data: Data | None = None,
    jit: bool = False,
) -> list[EpochRecord]:
    """Train and report; the body of ``main`` (the notebook calls it too).

    Args:
        epochs: passes over the training set.
        cleanup: run ``tg.graph_cleanup()`` at each epoch end (through ``epoch_end``).
        fixed: remove the planted mistakes.
        seed: seeds the initialisation, the shuffling and the jitter.
        console: where to print (a new ``terminal_console()`` by default).
        data: the split (``load_data()`` by default).
        jit: compile the training step with ``tg.jit`` (its planted mistake then hangs on
            the trace's private tape, as dead code XLA removes, not on the process tape).

    Returns:
        One record per epoch.
    """
    console = console if console is not None else terminal_console()
    data = data if data is not None else load_data()
    model = make_model(seed)
    opt = optim.Adam(model.parameters(), lr=LEARNING_RATE)
    rng = np.random.default_rng(seed)
    step = tg.jit(_train_step, static_argnames=("fixed",)) if jit else _train_step
    records: list[EpochRecord] = []
    clear_history()  # a new run: no baseline from an earlier one
    progress = progress_bar(console)
    for epoch in range(1, epochs + 1):
        with progress:
            loss, jittered = _train_epoch(
                step, model, opt, data, rng, fixed, progress, epoch, epochs
            )
        accuracy = _evaluate(model, data, fixed)
        console.print(
            f"epoch {epoch}/{epochs}: loss {loss:.3f}, jittered-input loss {jittered:.3f}, "
            f"test accuracy {accuracy:.1%}",
            highlight=False,
        )
        before = tg.graph_stats()
        # The full report on the first and last epochs, one summary line between.
        full = epoch in (1, epochs)
        report, freed = epoch_end(epoch, cleanup=cleanup, console=console, full=full)
        after = tg.graph_stats()
        records.append(
            EpochRecord(
                epoch=epoch,
                loss=loss,
                accuracy=accuracy,
                nodes=before.nodes,
                saved_bytes=before.saved_bytes,
                hanging_nodes=report.hanging_nodes,
                nodes_freed=None if freed is None else freed.nodes_removed,
                bytes_freed=None if freed is None else freed.bytes_freed,
                nodes_after=after.nodes,
            )
        )
        if not cleanup:
            grown = (
                ""
                if epoch == 1
                else (
                    f" (+{after.nodes - records[-2].nodes_after:,} nodes since epoch {epoch - 1})"
                )
            )
            console.print(
                f"no cleanup: the tape holds {after.nodes:,} nodes and "
                f"{decimal(after.saved_bytes)} of saved arrays after epoch {epoch}{grown}",
                highlight=False,
            )
        console.print()
    if isinstance(step, tg.JitFunction):
        _print_trace(step, console)
    return records


def _print_trace(step: tg.JitFunction[Any, Any], console: Console) -> None:
    """What the compiled step's private tape held at the end of its trace."""
    report = step.trace_report()
    console.print(
        f"tg.jit: the step compiled {step.trace_count} time(s); its trace recorded "
        f"{report.nodes} nodes on a private tape and left {report.hanging_nodes} hanging: dead "
        "code, which XLA removes from the compiled step (nothing reaches the process tape):",
        highlight=False,
    )
    for origin, op, count in report.hanging:
        console.print(f"  {count:>3} {op:<14} {origin}", highlight=False)


def main(argv: list[str] | None = None) -> int:
    """Run the demo with command-line ``argv`` (``sys.argv[1:]`` by default).

    Returns:
        The exit status: 0, or 2 for bad arguments or a missing scikit-learn.
    """
    args = build_parser().parse_args(argv)
    console = terminal_console()
    if args.epochs is None:
        args.epochs = DEFAULT_EPOCHS[args.model]
    if args.epochs < 1:
        print("python -m diagnostics demo: --epochs must be at least 1", file=sys.stderr)
        return 2
    for flag, value in (("--checkpoint", args.checkpoint), ("--steps", args.steps)):
        if args.model == "mlp" and value is not None:  # the MLP would ignore it silently
            print(
                f"python -m diagnostics demo: {flag} applies to --model cnn or transformer",
                file=sys.stderr,
            )
            return 2
    try:
        data = load_data()
    except ModuleNotFoundError as err:
        print(
            f"the demo needs scikit-learn ({err}); install it with: pip install 'tapegrad[demo]'",
            file=sys.stderr,
        )
        return 2
    if args.model != "mlp":
        from diagnostics.demo_models import run_model  # the convnet and the transformer

        return run_model(args, console, data)
    mode = "mistakes removed (--fixed)" if args.fixed else "with planted mistakes"
    cleanup = "" if args.no_cleanup else ", cleanup at each epoch end"
    cleanup += ", step compiled with tg.jit" if args.jit else ""
    console.print(
        f"tapegrad demo: MLP 64-{HIDDEN}-10 on scikit-learn digits "
        f"({data.x_train.shape[0]} train / {data.x_test.shape[0]} test), Adam, "
        f"batch {BATCH_SIZE}, {plural(args.epochs, 'epoch')}, seed {args.seed}; {mode}{cleanup}",
        highlight=False,
    )
    start = time.perf_counter()
    records = run(
        args.epochs,
        cleanup=not args.no_cleanup,
        fixed=args.fixed,
        seed=args.seed,
        console=console,
        data=data,
        jit=args.jit,
    )
    seconds = time.perf_counter() - start
    console.print(_summary(records, cleanup=not args.no_cleanup))
    last: Any = records[-1]
    console.print(
        f"final test accuracy: {last.accuracy:.1%} after {plural(args.epochs, 'epoch')} "
        f"({seconds:.1f} s)",
        highlight=False,
    )
    return 0


if __name__ == "__main__":  # pragma: no cover - `python -m diagnostics demo` is the entry
    raise SystemExit(main())
