"""``epoch_end``: the report against the previous epoch's, then a cleanup, both printed.

The previous report is the last one in ``history`` (the package's only state): it is the
baseline of the next call, for the deltas and for the kept-alive rules. ``epoch_end`` warns
(``LeakWarning``) when the tape grew ``GROWTH_EPOCHS`` epoch ends in a row.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

from rich.console import Console

import tapegrad as tg
from diagnostics import history as _history
from diagnostics.render import render_cleanup, render_line, show
from diagnostics.report import LeakReport, timed_report

__all__ = ["epoch_end"]


def epoch_end(
    epoch: int | str | None = None,
    *,
    cleanup: bool = True,
    console: Console | None = None,
    full: bool = True,
) -> tuple[LeakReport, tg.CleanupStats | None]:
    """Print what the current tape holds (deltas against the previous ``epoch_end`` on that
    tape), then clean up.

    The report explains its kept-alive graphs (``explain=True``) and joins ``history()``.
    The cleanup frees what the report calls hanging; kept-alive graphs stay (they are
    useful), so the code must change.

    Args:
        epoch: a label for the report title (``"epoch 3"``), or ``None``.
        cleanup: run ``tg.graph_cleanup()`` after the report and print what it freed.
        console: where to print; by default stdout, or in Jupyter the rendered report with
            a plain-text alternative free of ANSI escapes.
        full: print the whole report; ``False`` prints one summary line instead (say,
            between a first and a last epoch printed in full).

    Returns:
        The report, and the ``CleanupStats`` (``None`` with ``cleanup=False``).

    Warns:
        LeakWarning: nodes or bytes held grew at each of the last ``GROWTH_EPOCHS`` epoch
            ends; its message names the origins that grew most.
    """
    tape = tg.current_tape()
    reports = _history.on_tape(tape)  # an epoch_end on another tape is no baseline here
    report = timed_report(
        baseline=reports[-1] if reports else None,
        explain=True,
        swept_before=_history.swept_before(tape),
    )
    if epoch is not None:
        report = replace(report, label=f"epoch {epoch}")
    _history.record(report, tape)
    show(report if full else render_line(report), console)
    grown = _history.growth([*reports, report])
    if grown is not None:
        warnings.warn(_history.LeakWarning(grown), stacklevel=2)
    stats = tg.graph_cleanup() if cleanup else None
    if stats is not None:
        show(render_cleanup(stats), console)
    return report, stats
