"""``no_leaks``: fail a block (or a decorated function) that leaves hanging nodes behind.

In the spirit of pytest-memray's ``limit_leaks`` and ``jax.checking_leaks``: it counts only
what the block itself created (nodes whose id is greater than the largest id on the tape at
entry) and what is still on the tape when it ends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import ParamSpec, TypeVar

import tapegrad as tg
from diagnostics.render import plural, render_text
from diagnostics.report import LeakReport, LedgerKey, build_report, ledger_counts

__all__ = ["LeakError", "no_leaks"]

P = ParamSpec("P")
R = TypeVar("R")


class LeakError(AssertionError):
    """A ``no_leaks`` block left more hanging nodes (or kept-alive graphs) than allowed.

    Attributes:
        report: the report restricted to the nodes the block created.
    """

    def __init__(self, message: str, report: LeakReport) -> None:
        super().__init__(message)
        self.report = report


_Entry = tuple[int, dict[LedgerKey, int], dict[int, LedgerKey]]


def _entry() -> _Entry:
    """Where a block starts: the largest node id on the tape, what its ledger holds, and the
    ledger key of each node then on the tape."""
    snap = tg.snapshot()
    old = {r.id: (r.origin, r.function, r.op) for r in snap.nodes}
    return max(old, default=-1), ledger_counts(snap), old


def _not_the_blocks(
    swept: dict[LedgerKey, int], old: dict[int, LedgerKey], snap: tg.Snapshot
) -> dict[LedgerKey, int]:
    """The ledger counts that are not the block's: those at its start, plus the nodes made
    before it that left the tape during it (a sweep inside the block ledgers the hanging
    nodes made before it too; one consumed by a backward is subtracted as well, which can
    only hide a swept node of the block from the same line and op)."""
    now = {r.id for r in snap.nodes}
    before = dict(swept)
    for nid, key in old.items():
        if nid not in now:
            before[key] = before.get(key, 0) + 1
    return before


class no_leaks:  # noqa: N801 - a context manager named like contextlib.suppress
    """Context manager and decorator: raise ``LeakError`` when the block leaves leaks.

    It watches the tape current when the block starts (a block that records on a
    ``tg.Tape`` of its own opens ``no_leaks()`` inside ``tg.use_tape(...)``). A block leaks
    when, at its end, more than ``allow`` nodes it created are hanging (not
    useful: ``graph_cleanup()`` would free them, but the code that made them is the bug; those
    a sweep already removed inside the block count too); with ``strict=True``, also when a
    kept-alive graph holds a node it created (a live tensor reaching a consumed record through
    unconsumed ops), or when an op node it created is still live at its end holding saved
    arrays (a graph that outlives the block: outputs cached in a container, a forward whose
    backward never ran). Nothing is checked when the
    block raises: its exception propagates unchanged. Each use (and each call of a decorated
    function) measures separately, so nesting and recursion work.

    Args:
        allow: hanging nodes the block may leave.
        strict: also fail on kept-alive graphs and on graphs that outlive the block holding
            saved arrays.
        name: what the message calls the block (the pytest plugin passes the test's
            ``path:line name``); "the block" by default.

    Raises:
        ValueError: ``allow`` is not a non-negative int.
        LeakError: on exit, as above; its message holds the origin table.

    Example::

        with diagnostics.no_leaks():
            loss = model(x).sum()
            loss.backward()
    """

    def __init__(self, *, allow: int = 0, strict: bool = False, name: str | None = None) -> None:
        if isinstance(allow, bool) or not isinstance(allow, int) or allow < 0:
            raise ValueError(f"no_leaks(allow=...) must be a non-negative int, got {allow!r}.")
        self.allow = allow
        self.strict = strict
        self.name = name
        self._entries: list[_Entry] = []

    def __enter__(self) -> no_leaks:
        self._entries.append(_entry())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        __tracebackhide__ = True  # pytest: show the test's line, not this frame
        since, swept, old = self._entries.pop()
        if exc_type is None:
            snap = tg.snapshot()
            self._check(snap, since, _not_the_blocks(swept, old, snap))

    def check(self, since: int, swept_before: dict[LedgerKey, int] | None = None) -> LeakReport:
        """Check the nodes created after node id ``since``; return their report.

        Args:
            since: the largest node id when the block started.
            swept_before: ``ledger_counts`` when the block started (sweeps' removals counted
                then are not the block's).

        Raises:
            LeakError: more than ``allow`` of them hang, or (``strict``) a kept-alive graph
                holds one or one is live holding saved arrays.
        """
        __tracebackhide__ = True
        return self._check(tg.snapshot(), since, swept_before)

    def _check(
        self, snap: tg.Snapshot, since: int, swept_before: dict[LedgerKey, int] | None
    ) -> LeakReport:
        __tracebackhide__ = True
        report = build_report(snap, since=since, explain=self.strict, swept_before=swept_before)
        hanging = report.hanging_nodes + report.swept_nodes
        kept = report.kept_alive_graphs if self.strict else 0
        holding = (
            [r for r in report.rows if r.kind == "live" and r.op != "leaf" and r.bytes]
            if self.strict
            else []
        )
        if hanging <= self.allow and not kept and not holding:
            return report
        problems = []
        if report.swept_nodes:  # the leaves are counted among the nodes still on the tape
            split = (
                f"{report.hanging_nodes} still on the tape, "
                f"{plural(report.hanging_leaves, 'leaf', 'leaves')} among them; "
                f"{report.swept_nodes} already swept"
            )
        else:
            split = plural(report.hanging_leaves, "leaf", "leaves")
        if hanging > self.allow:
            problems.append(
                f"{plural(hanging, 'hanging node')} ({split}) created inside it, "
                f"{self.allow} allowed: tensors that require grad were dropped "
                "without a backward (use tg.no_grad() where no gradient is needed, and do not "
                "make inputs require grad for nothing)"
            )
        if kept:
            problems.append(
                f"{plural(kept, 'kept-alive graph')}: a live tensor reaches a consumed backward "
                "record through ops it created (keep totals with .item(), or .detach() carried "
                "state)"
            )
        if holding:
            nodes = sum(r.count for r in holding)
            where = ", ".join(sorted({r.origin for r in holding}))
            problems.append(
                f"{plural(nodes, 'op node')} created inside it still live at its end, holding "
                f"saved arrays (from {where}): a graph outlives the block (run its backward, "
                "keep .detach()ed outputs or .item() values, or compute it under tg.no_grad())"
            )
        block = self.name or "the block"
        message = f"no_leaks: {block} left " + "; and ".join(problems) + ".\n"
        raise LeakError(message + render_text(report), report)

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Use as a decorator: each call runs under a fresh ``no_leaks`` with these arguments."""

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with no_leaks(allow=self.allow, strict=self.strict, name=self.name):
                return func(*args, **kwargs)

        return wrapper
