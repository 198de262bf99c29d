"""``epoch_end``: the report against the previous epoch's, then a cleanup, both printed.

The report ``epoch_end`` printed last is module state (``_previous``), the package's only
state: it is the baseline of the next call, for the deltas and for the "gained op nodes since"
rule. ``leak_report`` itself stays pure.
"""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

import tapegrad as tg
from diagnostics.render import render_cleanup
from diagnostics.report import LeakReport, leak_report

__all__ = ["epoch_end"]

_previous: LeakReport | None = None
"""The report the last ``epoch_end`` printed: the baseline of the next one."""


def epoch_end(
    epoch: int | str | None = None,
    *,
    cleanup: bool = True,
    console: Console | None = None,
) -> tuple[LeakReport, tg.CleanupStats | None]:
    """Print what the tape holds (deltas against the previous ``epoch_end``), then clean up.

    The report explains its kept-alive graphs (``explain=True``). The cleanup frees what the
    report calls hanging; kept-alive graphs stay (they are useful), so the code must change.

    Args:
        epoch: a label for the report title (``"epoch 3"``), or ``None``.
        cleanup: run ``tg.graph_cleanup()`` after the report and print what it freed.
        console: where to print; a new ``rich.console.Console()`` (stdout, or the notebook)
            by default.

    Returns:
        The report, and the ``CleanupStats`` (``None`` with ``cleanup=False``).
    """
    global _previous
    report = leak_report(baseline=_previous, explain=True)
    if epoch is not None:
        report = replace(report, label=f"epoch {epoch}")
    _previous = report
    console = console if console is not None else Console()
    console.print(report)
    stats = tg.graph_cleanup() if cleanup else None
    if stats is not None:
        console.print(render_cleanup(stats))
    return report, stats
