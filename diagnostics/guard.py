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
from diagnostics.report import LeakReport, build_report

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


def _last_node_id() -> int:
    return max((r.id for r in tg.snapshot().nodes), default=-1)


class no_leaks:  # noqa: N801 - a context manager named like contextlib.suppress
    """Context manager and decorator: raise ``LeakError`` when the block leaves leaks.

    A block leaks when, at its end, more than ``allow`` nodes it created are hanging (not
    useful: ``graph_cleanup()`` would free them, but the code that made them is the bug);
    with ``strict=True``, also when a kept-alive graph holds an op node it created (a live
    tensor reaching a consumed record through unconsumed ops). Nothing is checked when the
    block raises: its exception propagates unchanged. Each use (and each call of a decorated
    function) measures separately, so nesting and recursion work.

    Args:
        allow: hanging nodes the block may leave.
        strict: also fail on kept-alive graphs.

    Raises:
        ValueError: ``allow`` is not a non-negative int.
        LeakError: on exit, as above; its message holds the origin table.

    Example::

        with diagnostics.no_leaks():
            loss = model(x).sum()
            loss.backward()
    """

    def __init__(self, *, allow: int = 0, strict: bool = False) -> None:
        if isinstance(allow, bool) or not isinstance(allow, int) or allow < 0:
            raise ValueError(f"no_leaks(allow=...) must be a non-negative int, got {allow!r}.")
        self.allow = allow
        self.strict = strict
        self._entries: list[int] = []

    def __enter__(self) -> no_leaks:
        self._entries.append(_last_node_id())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        __tracebackhide__ = True  # pytest: show the test's line, not this frame
        since = self._entries.pop()
        if exc_type is None:
            self.check(since)

    def check(self, since: int) -> LeakReport:
        """Check the nodes created after node id ``since``; return their report.

        Raises:
            LeakError: more than ``allow`` of them hang, or (``strict``) a kept-alive graph
                holds one.
        """
        __tracebackhide__ = True
        report = build_report(tg.snapshot(), since=since, explain=self.strict)
        kept = report.kept_alive_graphs if self.strict else 0
        if report.hanging_nodes <= self.allow and not kept:
            return report
        problems = []
        if report.hanging_nodes > self.allow:
            problems.append(
                f"{plural(report.hanging_nodes, 'hanging node')} "
                f"({plural(report.hanging_leaves, 'leaf', 'leaves')}) created inside it, "
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
        message = "no_leaks: the block left " + "; and ".join(problems) + ".\n"
        raise LeakError(message + render_text(report), report)

    def __call__(self, func: Callable[P, R]) -> Callable[P, R]:
        """Use as a decorator: each call runs under a fresh ``no_leaks`` with these arguments."""

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with no_leaks(allow=self.allow, strict=self.strict):
                return func(*args, **kwargs)

        return wrapper
