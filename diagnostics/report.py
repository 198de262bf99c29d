"""LeakReport: what the tape holds, classified by DESIGN.md's terms and grouped by origin.

Plain data only (no rich here: ``render.py`` draws it). A report is built from one
``tg.snapshot()`` and holds strings and numbers, never a tensor, node or array.

Classes (DESIGN.md, "Graph lifetime"), each with its consequence:

- ``hanging``: a node that is not useful (hanging leaves are among them). A graph with no
  useful node is a dead graph. ``graph_cleanup()`` frees them.
- ``kept-alive``: the unconsumed op nodes of a kept-alive graph, a live graph that is probably
  a mistake: (a) a live tensor reaches a consumed record through at least one unconsumed op
  node (a loss total kept as a tensor); or (b), given a baseline report, the graph already
  existed then and holds useful op nodes recorded since (a history list growing across
  epochs). They are useful, so cleanup never touches them: the code must change.
- ``consumed``: markers of finished backward passes, kept while their tensor lives.
- ``live``: everything else that is useful (parameters, graphs in use).

Rule (a) reduces to a local test. Consumed records drop their parent links and leaves have
none, so the step of a path that enters a consumed record always leaves an unconsumed op node;
that node is useful because the path starts at a live tensor. Hence a graph is kept-alive by
(a) exactly when it holds a useful unconsumed op node with a consumed parent.

Graph identity across reports (rule (b)): a graph's id is the smallest node id in it, and node
ids grow with creation. So a graph "already existed" at the baseline exactly when its id is at
most the baseline's ``last_node_id`` (it still holds a node recorded before the baseline),
even if it merged or lost nodes since; and a node was "recorded since" exactly when its id is
greater than ``last_node_id``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import tapegrad as tg
from diagnostics.explain import describe_tensor, referrer_chain

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = [
    "CONSEQUENCES",
    "KINDS",
    "TITLE",
    "Explanation",
    "Kind",
    "LeakReport",
    "LeakRow",
    "build_report",
    "leak_report",
]

Kind = Literal["hanging", "kept-alive", "live", "consumed"]

KINDS: tuple[Kind, ...] = ("hanging", "kept-alive", "live", "consumed")
"""The classes, most urgent first."""

CONSEQUENCES: dict[str, str] = {
    "hanging": "freed by graph_cleanup()",
    "kept-alive": "fix the code: .item(), .detach() or tg.no_grad()",
    "live": "in use, not blamed",
    "consumed": "backward markers, freed with their tensors",
}
"""What each class means for the user."""

TITLE = "tapegrad leak report"
"""The title every rendering of a report starts with."""

REASON_CONSUMED = "a live tensor reaches a consumed record through unconsumed ops"
REASON_GREW = "existed at the baseline and gained op nodes since"

MAX_EXPLANATIONS = 3
"""How many kept-alive graphs ``explain=True`` explains (the largest first)."""


@dataclass(frozen=True)
class LeakRow:
    """The nodes of one class created at one line by one op.

    Attributes:
        origin: ``"path:line"`` of the user's line that created the nodes.
        function: qualified name of the function that line is in.
        op: the op name (``"leaf"`` for leaves).
        kind: the class: ``"hanging"``, ``"kept-alive"``, ``"live"`` or ``"consumed"``.
        count: number of nodes.
        bytes: bytes of saved arrays these nodes hold (summed per node).
        delta: ``count`` minus the count of the same row in the baseline report (0 when the
            baseline had no such row), or ``None`` without a baseline.
    """

    origin: str
    function: str
    op: str
    kind: str
    count: int
    bytes: int
    delta: int | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(origin, function, op, kind)``: what identifies a row across reports."""
        return (self.origin, self.function, self.op, self.kind)


@dataclass(frozen=True)
class Explanation:
    """Why one kept-alive graph is alive.

    Attributes:
        graph: the graph id (its smallest node id).
        reason: which kept-alive rule matched (``REASON_CONSUMED`` or ``REASON_GREW``).
        nodes: kept-alive nodes in the graph.
        bytes: saved bytes those nodes hold.
        tensor: the live tensor keeping it alive, e.g. ``"Tensor(shape=(), origin=t.py:4)"``.
        chain: referrers from a user-visible name to that tensor, e.g. ``("global running",)``
            or ``("global history", "[3]")``; empty when none was found within the bounds.
    """

    graph: int
    reason: str
    nodes: int
    bytes: int
    tensor: str
    chain: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        """The chain as one line: ``global running → Tensor(shape=(), origin=t.py:4)``."""
        steps = [*self.chain, self.tensor] if self.chain else ["(no name found)", self.tensor]
        return " → ".join(steps)


@dataclass(frozen=True)
class LeakReport:
    """What the tape held at one moment, classified (DESIGN.md) and grouped by origin.

    Attributes:
        hanging_leaves: leaves that are not useful.
        hanging_nodes: nodes that are not useful (``hanging_leaves`` included).
        dead_graphs: graphs with no useful node.
        live_graphs: graphs with a live node (kept-alive ones included).
        kept_alive_graphs: live graphs that are probably a mistake (see the module doc).
        total_nodes: records on the tape, consumed ones included.
        bytes_held: saved-array bytes held by hanging nodes: the sum of their per-node
            ``saved_bytes``, capped at the tape's total (an array saved by two nodes counts
            twice below the cap, as the snapshot does not say which arrays nodes share).
        rows: one per origin and op (``LeakRow``), split by class when nodes of one line
            fall in several (say 99 hanging and 1 live), largest bytes then count first.
        explanations: with ``explain=True``, why the largest kept-alive graphs are alive.
        graphs: graphs on the tape.
        saved_bytes: saved-array bytes held by the whole tape (distinct arrays).
        last_node_id: the largest node id on the tape (-1 when empty): what a later report
            given this one as ``baseline`` calls "recorded since".
        label: a caption such as ``"epoch 3"``, or ``None``.
        seconds: time taken to build the report, snapshot included.
    """

    hanging_leaves: int = 0
    hanging_nodes: int = 0
    dead_graphs: int = 0
    live_graphs: int = 0
    kept_alive_graphs: int = 0
    total_nodes: int = 0
    bytes_held: int = 0
    rows: tuple[LeakRow, ...] = ()
    explanations: tuple[Explanation, ...] = ()
    graphs: int = 0
    saved_bytes: int = 0
    last_node_id: int = -1
    label: str | None = None
    seconds: float = field(default=0.0, compare=False)

    @property
    def title(self) -> str:
        """``"tapegrad leak report"``, with the label when there is one."""
        return TITLE if self.label is None else f"{TITLE} — {self.label}"

    @property
    def clean(self) -> bool:
        """No hanging node and no kept-alive graph."""
        return self.hanging_nodes == 0 and self.kept_alive_graphs == 0

    def count(self, kind: str) -> int:
        """Total nodes of one class over all rows."""
        return sum(r.count for r in self.rows if r.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (plain str, int, float, None, lists and dicts)."""
        return {
            "title": self.title,
            "label": self.label,
            "hanging_leaves": self.hanging_leaves,
            "hanging_nodes": self.hanging_nodes,
            "dead_graphs": self.dead_graphs,
            "live_graphs": self.live_graphs,
            "kept_alive_graphs": self.kept_alive_graphs,
            "total_nodes": self.total_nodes,
            "bytes_held": self.bytes_held,
            "graphs": self.graphs,
            "saved_bytes": self.saved_bytes,
            "last_node_id": self.last_node_id,
            "seconds": self.seconds,
            "rows": [
                {
                    "origin": r.origin,
                    "function": r.function,
                    "op": r.op,
                    "kind": r.kind,
                    "count": r.count,
                    "bytes": r.bytes,
                    "delta": r.delta,
                }
                for r in self.rows
            ],
            "explanations": [
                {
                    "graph": e.graph,
                    "reason": e.reason,
                    "nodes": e.nodes,
                    "bytes": e.bytes,
                    "tensor": e.tensor,
                    "chain": list(e.chain),
                    "path": e.path,
                }
                for e in self.explanations
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LeakReport:
        """Rebuild a report from ``to_dict()`` output (e.g. a logged baseline).

        Raises:
            KeyError: a required key is missing.
        """
        return cls(
            hanging_leaves=data["hanging_leaves"],
            hanging_nodes=data["hanging_nodes"],
            dead_graphs=data["dead_graphs"],
            live_graphs=data["live_graphs"],
            kept_alive_graphs=data["kept_alive_graphs"],
            total_nodes=data["total_nodes"],
            bytes_held=data["bytes_held"],
            rows=tuple(
                LeakRow(
                    r["origin"],
                    r["function"],
                    r["op"],
                    r["kind"],
                    r["count"],
                    r["bytes"],
                    r["delta"],
                )
                for r in data["rows"]
            ),
            explanations=tuple(
                Explanation(
                    e["graph"],
                    e["reason"],
                    e["nodes"],
                    e["bytes"],
                    e["tensor"],
                    tuple(e["chain"]),
                )
                for e in data["explanations"]
            ),
            graphs=data["graphs"],
            saved_bytes=data["saved_bytes"],
            last_node_id=data["last_node_id"],
            label=data["label"],
            seconds=data.get("seconds", 0.0),
        )

    # ------------------------------------------------------------------ rendering

    def __rich__(self) -> RenderableType:
        """The summary panel, the origin table and the explanations (see ``render.py``)."""
        from diagnostics.render import render_report

        return render_report(self)

    def _repr_mimebundle_(
        self, include: Any = None, exclude: Any = None, **kwargs: Any
    ) -> dict[str, str]:
        """Jupyter display: the rendered report as HTML, and as plain text."""
        from diagnostics.render import render_html, render_text

        bundle = {"text/plain": render_text(self), "text/html": render_html(self)}
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle

    def _repr_html_(self) -> str:
        """The rendered report as HTML (for front ends that ask only for HTML)."""
        from diagnostics.render import render_html

        return render_html(self)

    def __str__(self) -> str:
        from diagnostics.render import render_text

        return render_text(self)


def leak_report(*, baseline: LeakReport | None = None, explain: bool = False) -> LeakReport:
    """Classify what the tape holds now (DESIGN.md "Graph lifetime"); changes nothing.

    Pure: it reads one ``tg.snapshot()``, keeps no state, calls no ``gc.collect()`` and keeps
    no reference to any tensor, node or array.

    Args:
        baseline: an earlier report. Rows get ``delta`` (change in count against it), and a
            graph that existed then and has gained useful op nodes since is kept-alive.
        explain: for the largest kept-alive graphs, find the chain of referrers from a
            user-visible name (a global, a local, a list element, an attribute, ``Out[n]``)
            to the live tensor keeping each alive (``gc.get_referrers``, bounded in depth
            and time: about 0.5 s a graph at most).

    Returns:
        The report.
    """
    start = time.perf_counter()
    report = build_report(tg.snapshot(), baseline=baseline, explain=explain)
    return replace(report, seconds=time.perf_counter() - start)


def build_report(
    snap: tg.Snapshot,
    *,
    baseline: LeakReport | None = None,
    explain: bool = False,
    since: int = -1,
) -> LeakReport:
    """Build a report from a snapshot. Linear in the nodes of the snapshot.

    Args:
        snap: what ``tg.snapshot()`` returned.
        baseline: see ``leak_report``.
        explain: see ``leak_report``.
        since: count only nodes whose id is greater (classification still looks at the
            whole tape); graph totals then count the graphs holding such a node. The
            ``no_leaks`` guard passes the largest id at its entry.

    Returns:
        The report; ``seconds`` is left at 0.
    """
    records = snap.nodes
    useful_graphs: set[int] = set()
    live_graphs: set[int] = set()
    all_graphs: set[int] = set()
    consumed: set[int] = set()
    last_id = -1
    for r in records:
        g = r.graph
        all_graphs.add(g)
        if r.useful:
            useful_graphs.add(g)
            if r.live:
                live_graphs.add(g)
            if r.consumed:
                consumed.add(r.id)
        if r.id > last_id:
            last_id = r.id

    # Kept-alive graphs: rule (a) and, against a baseline, rule (b) (see the module doc).
    kept: dict[int, str] = {}
    base_last = baseline.last_node_id if baseline is not None else None
    if consumed or base_last is not None:
        for r in records:
            if not r.useful or r.consumed or r.kind != "op":
                continue
            g = r.graph
            if consumed and g not in kept and not consumed.isdisjoint(r.parents):
                kept[g] = REASON_CONSUMED
            elif base_last is not None and g <= base_last < r.id and g not in kept:
                kept[g] = REASON_GREW

    # Rows, and the totals over the counted nodes.
    acc: dict[tuple[str, str, str, str], list[int]] = {}
    hanging_nodes = hanging_leaves = bytes_held = 0
    counted_graphs: set[int] | None = set() if since >= 0 else None
    keeper: dict[int, tg.NodeRecord] = {}  # graph -> its newest live kept-alive record
    kept_size: dict[int, list[int]] = {g: [0, 0] for g in kept}
    for r in records:
        if r.id <= since:
            continue
        if counted_graphs is not None:
            counted_graphs.add(r.graph)
        kind: str
        if not r.useful:
            kind = "hanging"
            hanging_nodes += 1
            bytes_held += r.saved_bytes
            if r.kind == "leaf":
                hanging_leaves += 1
        elif r.consumed:
            kind = "consumed"
        elif r.graph in kept and r.kind == "op":
            kind = "kept-alive"
            size = kept_size[r.graph]
            size[0] += 1
            size[1] += r.saved_bytes
            if r.live:
                keeper[r.graph] = r
        else:
            kind = "live"
        key = (r.origin, r.function, r.op, kind)
        slot = acc.get(key)
        if slot is None:
            acc[key] = [1, r.saved_bytes]
        else:
            slot[0] += 1
            slot[1] += r.saved_bytes

    base = {row.key: row.count for row in baseline.rows} if baseline is not None else None
    rows = [
        LeakRow(*key, count, nbytes, None if base is None else count - base.get(key, 0))
        for key, (count, nbytes) in acc.items()
    ]
    rank: dict[str, int] = {kind: i for i, kind in enumerate(KINDS)}
    rows.sort(key=lambda row: (-row.bytes, -row.count, rank[row.kind], row.origin, row.op))

    if counted_graphs is not None:
        graph_set = counted_graphs
        kept_ids = [g for g in kept if g in counted_graphs and kept_size[g][0] > 0]
    else:
        graph_set = all_graphs
        kept_ids = list(kept)

    explanations: tuple[Explanation, ...] = ()
    if explain and kept_ids:
        explanations = _explain(kept_ids, kept, kept_size, keeper, records)

    return LeakReport(
        hanging_leaves=hanging_leaves,
        hanging_nodes=hanging_nodes,
        dead_graphs=len(graph_set - useful_graphs),
        live_graphs=len(graph_set & live_graphs),
        kept_alive_graphs=len(kept_ids),
        total_nodes=len(records) if since < 0 else sum(row.count for row in rows),
        bytes_held=min(bytes_held, snap.stats.saved_bytes),
        rows=tuple(rows),
        explanations=explanations,
        graphs=len(graph_set),
        saved_bytes=snap.stats.saved_bytes if since < 0 else sum(row.bytes for row in rows),
        last_node_id=last_id,
    )


def _explain(
    kept_ids: list[int],
    reasons: dict[int, str],
    sizes: dict[int, list[int]],
    keeper: dict[int, tg.NodeRecord],
    records: tuple[tg.NodeRecord, ...],
) -> tuple[Explanation, ...]:
    """Explain the largest kept-alive graphs: which live tensor, reached from which name."""
    top = sorted(kept_ids, key=lambda g: (-sizes[g][1], -sizes[g][0], g))[:MAX_EXPLANATIONS]
    out = []
    for g in top:
        rec = keeper.get(g)
        if rec is None:  # no live kept-alive op: take the newest live node of the graph
            rec = max((r for r in records if r.graph == g and r.live), key=_record_id, default=None)
        tensor = rec.tensor() if rec is not None and rec.tensor is not None else None
        desc, chain = "(no live tensor)", tuple[str, ...]()
        if tensor is not None and rec is not None:
            desc = describe_tensor(tensor, rec.origin)
            chain = referrer_chain(tensor)
        del tensor
        out.append(Explanation(g, reasons[g], sizes[g][0], sizes[g][1], desc, chain))
    return tuple(out)


def _record_id(record: tg.NodeRecord) -> int:
    return record.id
