"""``plot_history``: nodes and bytes held per class over epoch ends, as a matplotlib figure.

The figure is made with ``matplotlib.figure.Figure`` (no pyplot: no global figure state, no
window): Jupyter displays it inline, ``fig.savefig("growth.png")`` or ``.svg`` saves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from diagnostics.history import GROWTH_EPOCHS, growth, held, history
from diagnostics.report import KINDS, LeakReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["COLOURS", "distinct_bytes", "plot_history"]

COLOURS: dict[str, str] = {
    "hanging": "#d62728",
    "kept-alive": "#b5179e",
    "live": "#2ca02c",
    "consumed": "#7f7f7f",
}
"""One colour per class, shared with the graph picture."""


def distinct_bytes(report: LeakReport) -> dict[str, float]:
    """Per class, its part of the tape's distinct saved bytes (``saved_bytes``, each array
    once), so that the parts add up to it: the hanging nodes' own arrays (``bytes_held``,
    what cleanup frees), and the rest shared among the other classes in proportion to their
    rows' bytes (exact when one class holds it all; the rows count an array saved by several
    nodes once per node, and the snapshot does not say which nodes share one)."""
    rows = {kind: nbytes for kind, (_, nbytes) in held(report).items() if kind != "hanging"}
    rest, weights = report.saved_bytes - report.bytes_held, sum(rows.values())
    parts = {kind: rest * nbytes / weights if weights else 0.0 for kind, nbytes in rows.items()}
    return {"hanging": float(report.bytes_held), **parts}


def plot_history(reports: Sequence[LeakReport] | None = None) -> Figure:
    """Nodes and saved bytes held per class at each epoch end, growth marked.

    Args:
        reports: oldest first; ``diagnostics.history()`` (what ``epoch_end`` recorded) by
            default.

    Returns:
        A matplotlib ``Figure`` with two panels: nodes, and bytes (each class's part of the
        distinct total, ``distinct_bytes``: the class lines add up to the total line and never
        rise above it). Epoch ends where the tape had
        grown ``GROWTH_EPOCHS`` epochs in a row (what ``epoch_end`` warns about) are shaded,
        and the origins that grew most are written under the title. An empty history gives a
        figure that says so.

    Raises:
        ModuleNotFoundError: matplotlib is not installed (``pip install 'tapegrad[demo]'``).
    """
    from matplotlib.figure import Figure

    reports = list(history() if reports is None else reports)
    fig = Figure(figsize=(8, 5.5), layout="constrained")
    nodes_ax, bytes_ax = fig.subplots(2, 1, sharex=True)
    fig.suptitle("tapegrad: what the tape holds at each epoch end")
    if not reports:
        nodes_ax.text(0.5, 0.5, "no epoch_end report yet", ha="center", va="center")
        return fig
    xs = list(range(1, len(reports) + 1))
    nodes = [held(r) for r in reports]
    parts = [distinct_bytes(r) for r in reports]
    for kind in KINDS:
        style = {"color": COLOURS[kind], "marker": "o", "label": kind}
        nodes_ax.plot(xs, [n[kind][0] for n in nodes], **style)
        bytes_ax.plot(xs, [p[kind] for p in parts], **style)
    nodes_ax.plot(xs, [r.total_nodes for r in reports], "k--", label="total")
    total = bytes_ax.plot(xs, [r.saved_bytes for r in reports], "k--", label="total (distinct)")
    grown = [i for i in range(len(reports)) if growth(reports[: i + 1]) is not None]
    for i in grown:
        for ax in (nodes_ax, bytes_ax):
            ax.axvspan(xs[i] - 0.5, xs[i] + 0.5, color="#ffb000", alpha=0.25, lw=0)
    if grown:
        last = growth(reports[: grown[-1] + 1])
        assert last is not None
        where = ", ".join(o for o, _ in last.origins[:2]) or "several origins"
        where = where.replace("$", r"\$")  # user text: never read as mathtext
        nodes_ax.set_title(
            f"shaded: grew {GROWTH_EPOCHS} epochs in a row (most at {where})",
            fontsize="small",
            wrap=True,
        )
    nodes_ax.set_ylabel("nodes")
    bytes_ax.set_ylabel("saved bytes")
    bytes_ax.set_xlabel("epoch end")
    labels = [r.label or str(x) for r, x in zip(reports, xs, strict=True)]
    bytes_ax.set_xticks(xs, [label.removeprefix("epoch ") for label in labels])
    nodes_ax.legend(fontsize="small", ncols=3)
    bytes_ax.legend(handles=total, fontsize="small")  # the classes' colours: in the panel above
    return fig
