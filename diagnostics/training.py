"""The demo models' training loop: epochs with a progress bar, the leak report at each epoch
end, a summary table, and checkpoints that resume (``--checkpoint``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rich import box
from rich.console import Console
from rich.filesize import decimal
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import tapegrad as tg
from diagnostics.epoch import epoch_end
from diagnostics.history import clear_history
from diagnostics.render import terminal_console
from tapegrad import nn, optim

__all__ = ["CheckpointError", "Task", "Record", "epoch_table", "fit", "progress_bar", "summary"]


class Task:
    """One demo: a model, its optimizer, its data, and one planted leak that ``fixed`` removes.

    Subclasses set ``name``, ``model`` and ``opt`` and define the methods below; ``fit``
    calls ``start_epoch`` with a generator seeded by ``(seed, epoch)``, so a resumed run
    draws the same batches as an uninterrupted one.
    """

    name: str
    model: nn.Module
    opt: optim.Optimizer
    schedule: optim.lr_scheduler.LRScheduler | None = None
    schedule_every_step = False  # the task steps ``schedule`` itself (a warm-up)
    steps: int

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds: model, optimizer and schedule states (``tg.save``-able)."""
        state = {"model": self.model.state_dict(), "optimizer": self.opt.state_dict()}
        if self.schedule is not None:
            state["schedule"] = self.schedule.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` (model, optimizer, schedule)."""
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        if self.schedule is not None:
            self.schedule.load_state_dict(state["schedule"])

    def start_epoch(self, rng: np.random.Generator) -> None:
        """Prepare an epoch (shuffle, reset running totals)."""

    def train_step(self, i: int, fixed: bool) -> float:
        """Train on the ``i``-th batch of the epoch; return its loss."""
        raise NotImplementedError

    def evaluate(self, fixed: bool) -> dict[str, float]:
        """Metrics after an epoch, by column name (training loss included)."""
        raise NotImplementedError

    def describe(self, metrics: dict[str, float]) -> str:
        """The line printed after each epoch."""
        return ", ".join(f"{k} {v:.3f}" for k, v in metrics.items())


@dataclass(frozen=True)
class Record:
    """The metrics and the tape at one epoch end.

    Attributes:
        epoch: 1-based epoch number.
        metrics: the task's metrics (accuracy, bits per character, ...).
        nodes: nodes on the tape at the epoch end, before the cleanup.
        saved_bytes: saved-array bytes the tape held then.
        hanging_nodes: hanging nodes the report found.
        kept_alive_graphs: graphs the report found kept alive by mistake.
        nodes_after: nodes on the tape after the epoch end.
    """

    epoch: int
    metrics: dict[str, float] = field(default_factory=dict)
    nodes: int = 0
    saved_bytes: int = 0
    hanging_nodes: int = 0
    kept_alive_graphs: int = 0
    nodes_after: int = 0


def progress_bar(console: Console) -> Progress:
    """A transient rich progress bar with the running loss (off when not a terminal)."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def epoch_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """The table of the tape at each epoch end: one right-aligned column per name. A header
    takes one line per word and a value folds rather than being cut, so that a narrow
    terminal (60 columns) shows every value whole."""
    table = Table(
        title="the tape at each epoch end",
        title_justify="left",
        box=box.SIMPLE,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for name in columns:
        table.add_column(name.replace(" ", "\n"), justify="right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def summary(records: list[Record]) -> Table:
    """Metrics and the tape at each epoch end, one row per epoch."""
    names = list(records[0].metrics) if records else []
    return epoch_table(
        ["epoch", *names, "nodes", "saved", "hanging", "kept alive", "nodes after"],
        (
            [
                str(r.epoch),
                *(f"{r.metrics[n]:.3f}" for n in names),
                f"{r.nodes:,}",
                decimal(r.saved_bytes),
                f"{r.hanging_nodes:,}",
                f"{r.kept_alive_graphs:,}",
                f"{r.nodes_after:,}",
            ]
            for r in records
        ),
    )


class CheckpointError(ValueError):
    """``--checkpoint`` cannot be resumed: unreadable, another model's, or already past the
    last epoch to run."""


def _resume(task: Task, path: str, epochs: int, console: Console) -> int:
    """Load ``path`` into the task's model and optimizer; the first epoch still to run.

    Raises:
        CheckpointError: ``path`` cannot be read, holds no checkpoint of ``task``'s model, or
            was saved after epoch ``epochs`` or later (nothing left to run).
    """
    if not os.path.exists(path):
        return 1
    try:
        ck = tg.load(path)
    except (OSError, ValueError) as err:
        raise CheckpointError(f"cannot read --checkpoint {path!r}: {err}") from err
    if ck.get("model_name") != task.name:
        raise CheckpointError(
            f"--checkpoint {path!r} holds a {ck.get('model_name')!r} model, not {task.name!r}; "
            "pass another path."
        )
    done = int(ck["epoch"])
    if done >= epochs:
        raise CheckpointError(
            f"--checkpoint {path!r} was saved after epoch {done}: nothing left to run up to "
            f"--epochs {epochs}; pass --epochs {done + 1} or more, or another path."
        )
    task.load_state_dict(ck)
    console.print(f"resumed from {path} after epoch {done}", highlight=False)
    return done + 1


def fit(
    task: Task,
    epochs: int,
    *,
    seed: int = 0,
    cleanup: bool = True,
    fixed: bool = False,
    checkpoint: str | None = None,
    console: Console | None = None,
) -> list[Record]:
    """Train ``task`` for ``epochs`` epochs, printing the leak report at each epoch end.

    Args:
        task: the demo.
        epochs: the last epoch to run (a resumed run continues up to it).
        seed: seeds the per-epoch generators.
        cleanup: run ``tg.graph_cleanup()`` at each epoch end (through ``epoch_end``).
        fixed: remove the planted leak.
        checkpoint: a path: resume from it when it exists, save to it after each epoch
            (model, optimizer, epoch; ``tg.save``).
        console: where to print.

    Returns:
        One record per epoch run.

    Raises:
        CheckpointError: ``checkpoint`` exists but cannot be resumed (see ``_resume``).
    """
    console = console if console is not None else terminal_console()
    first = _resume(task, checkpoint, epochs, console) if checkpoint else 1
    clear_history()  # a new run: no baseline from an earlier one
    records: list[Record] = []
    progress = progress_bar(console)
    for epoch in range(first, epochs + 1):
        task.start_epoch(np.random.default_rng([seed, epoch]))
        task.model.train()
        with progress:
            bar = progress.add_task(f"epoch {epoch}/{epochs}", total=task.steps, loss=float("nan"))
            for i in range(task.steps):
                progress.update(bar, advance=1, loss=task.train_step(i, fixed))
            progress.remove_task(bar)
        task.model.eval()
        metrics = task.evaluate(fixed)
        console.print(f"epoch {epoch}/{epochs}: {task.describe(metrics)}", highlight=False)
        if task.schedule is not None and not task.schedule_every_step:
            task.schedule.step()
        before = tg.graph_stats()
        report, _ = epoch_end(epoch, cleanup=cleanup, console=console)
        records.append(
            Record(
                epoch=epoch,
                metrics=metrics,
                nodes=before.nodes,
                saved_bytes=before.saved_bytes,
                hanging_nodes=report.hanging_nodes,
                kept_alive_graphs=report.kept_alive_graphs,
                nodes_after=tg.graph_stats().nodes,
            )
        )
        if checkpoint:
            tg.save({**task.state_dict(), "epoch": epoch, "model_name": task.name}, checkpoint)
            console.print(f"saved {checkpoint} (epoch {epoch})", highlight=False)
        console.print()
    return records
