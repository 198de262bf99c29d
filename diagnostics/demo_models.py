"""``demo --model cnn|transformer``: build the task, train it with ``training.fit``, print
the summary, the final accuracy or a generated sample."""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console
from rich.text import Text

from diagnostics.demo import Data
from diagnostics.render import plural
from diagnostics.training import CheckpointError, Task, fit, summary

__all__ = ["run_model"]


def run_model(args: argparse.Namespace, console: Console, data: Data) -> int:
    """Run the demo ``args.model`` (``"cnn"`` or ``"transformer"``) with the parsed flags.

    Returns:
        The exit status: 0, or 2 for bad arguments (a ``--checkpoint`` it cannot resume).
    """
    if getattr(args, "jit", False):
        print("python -m diagnostics demo: --jit applies to --model mlp only", file=sys.stderr)
        return 2
    if args.steps is not None and args.steps < 1:
        print("python -m diagnostics demo: --steps must be at least 1", file=sys.stderr)
        return 2
    mode = "leak removed (--fixed)" if args.fixed else "with a planted leak"
    task: Task
    if args.model == "cnn":
        from diagnostics.demo_cnn import CNNTask

        task = CNNTask(args.epochs, args.seed, args.steps, data)
        what = (
            f"convnet on scikit-learn digits ({data.x_train.shape[0]} train / "
            f"{data.x_test.shape[0]} test, 1x8x8), AdamW + cosine schedule"
        )
    else:
        from diagnostics.demo_text import TextTask

        text_task = task = TextTask(args.epochs, args.seed, args.steps)
        corpus = text_task.corpus
        what = (
            f"character transformer on Python's standard library ({len(corpus.train):,} train "
            f"/ {len(corpus.val):,} validation characters, {len(corpus.chars)} symbols), AdamW "
            "+ warm-up"
        )
    params = sum(p.size for p in task.model.parameters())
    console.print(
        f"tapegrad demo: {what}; {params:,} parameters, {task.steps} steps per epoch, "
        f"{plural(args.epochs, 'epoch')}, seed {args.seed}; {mode}",
        highlight=False,
    )
    start = time.perf_counter()
    try:
        records = fit(
            task,
            args.epochs,
            seed=args.seed,
            cleanup=not args.no_cleanup,
            fixed=args.fixed,
            checkpoint=args.checkpoint,
            console=console,
        )
    except CheckpointError as err:
        print(f"python -m diagnostics demo: {err}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    console.print(summary(records))
    if args.model == "cnn":
        accuracy = records[-1].metrics["test acc"]
        console.print(
            f"final test accuracy: {accuracy:.1%} after {plural(args.epochs, 'epoch')} "
            f"({seconds:.1f} s)",
            highlight=False,
        )
    else:
        from diagnostics.demo_text import sample

        console.print("sample (prompt 'def '):", highlight=False)
        console.print(Text(sample(text_task.model, corpus, "def ", 200, seed=args.seed)))
        console.print(f"({seconds:.1f} s)", highlight=False)
    return 0
