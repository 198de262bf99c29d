"""LeakReport: what the tape holds, classified (``classify.py``) and grouped by origin.

Plain data only (no rich here: ``render.py`` draws it, ``picture.py`` pictures it). A report
is built from one ``tg.snapshot()`` and holds strings and numbers, never a tensor, node or
array. Building is three steps, each its own function: classify the nodes (``classify``),
group them into rows with totals (``_rows``), keep the records of the graphs worth drawing
(``_graph_nodes``); ``explain=True`` adds referrer chains (``explain.py``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tapegrad as tg
from diagnostics.classify import (
    KINDS,
    REASON_CONSUMED,
    REASON_GREW,
    REASON_MORE_GRAPHS,
    Classification,
    Kind,
    classify,
)
from diagnostics.explain import describe_tensor, referrer_chain
from tapegrad.census import paused_gc

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = [
    "CONSEQUENCES",
    "KINDS",
    "MAX_GRAPH_NODES",
    "REASON_CONSUMED",
    "REASON_GREW",
    "REASON_MORE_GRAPHS",
    "TITLE",
    "Explanation",
    "GraphNode",
    "Kind",
    "LeakReport",
    "LeakRow",
    "build_report",
    "leak_report",
    "ledger_counts",
    "timed_report",
]

CONSEQUENCES: dict[str, str] = {
    "hanging": "freed by graph_cleanup()",
    "kept-alive": "fix the code: .item(), .detach() or tg.no_grad()",
    "live": "in use, not blamed",
    "consumed": "backward markers, freed with their tensors",
}
"""What each class means for the user."""

TITLE = "tapegrad leak report"
"""The title every rendering of a report starts with."""

MAX_EXPLANATIONS = 3
"""How many kept-alive graphs ``explain=True`` explains (the largest first)."""

MAX_GRAPH_NODES = 20_000
"""Most node records a report keeps for pictures (whole graphs, most urgent first)."""

RowKey = tuple[str, str, str, str]
LedgerKey = tuple[str, str, str]


@dataclass(frozen=True)
class LeakRow:
    """The nodes of one class created at one line by one op.

    Attributes:
        origin: ``"path:line"`` of the user's line that created the nodes.
        function: qualified name of the function that line is in.
        op: the op name (``"leaf"`` for leaves).
        kind: the class: ``"hanging"``, ``"kept-alive"``, ``"live"`` or ``"consumed"``.
        count: number of nodes. For ``"hanging"``: those on the tape now plus those sweeps
            removed since the tape was made (the tape's ledger), so it only grows.
        bytes: bytes of saved arrays these nodes hold now, summed per node (an array two
            nodes save counts twice here; the report's ``saved_bytes`` counts it once).
        delta: ``count`` minus the count of the same row in the baseline report (0 when the
            baseline had no such row), or ``None`` without a baseline. For hanging rows that
            is what is new since the baseline, swept or not.
        swept: how many of ``count`` sweeps already removed (hanging rows only).
    """

    origin: str
    function: str
    op: str
    kind: str
    count: int
    bytes: int
    delta: int | None = None
    swept: int = 0

    @property
    def key(self) -> RowKey:
        """``(origin, function, op, kind)``: what identifies a row across reports."""
        return (self.origin, self.function, self.op, self.kind)


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One node of a hanging or kept-alive graph, kept by a report for ``graph_picture``.

    Attributes:
        id: the node id. graph: its graph id. kind: its class. op, origin, function: as in
        ``LeakRow``. saved_bytes: bytes of its saved arrays. parents: ids of its parents that
        the report keeps too.
    """

    id: int
    graph: int
    kind: str
    op: str
    origin: str
    function: str
    saved_bytes: int
    parents: tuple[int, ...] = ()


@dataclass(frozen=True)
class Explanation:
    """Why one kept-alive graph is alive.

    Attributes:
        graph: the graph id (its smallest node id).
        reason: which kept-alive rule matched (``REASON_*`` in ``classify.py``).
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
    """What the tape held at one moment, classified (docs/design.md) and grouped by origin.

    Attributes:
        hanging_leaves: leaves on the tape that are not useful.
        hanging_nodes: nodes on the tape that are not useful (``hanging_leaves`` included):
            what ``graph_cleanup()`` would remove now.
        dead_graphs: graphs with no useful node.
        live_graphs: graphs with a live node (kept-alive ones included).
        kept_alive_graphs: live graphs that are probably a mistake (``classify.py``).
        total_nodes: records on the tape, consumed ones included.
        bytes_held: what ``graph_cleanup()`` would free now: the bytes of the distinct saved
            arrays only hanging nodes hold (``Snapshot.hanging_bytes``), with or without a
            baseline (a baseline changes only ``delta`` and the kept-alive rules); in a
            ``no_leaks`` guard's report (``build_report(since=...)``), the bytes of the
            hanging nodes made inside the block (a shared array once a node).
        rows: one per origin and op (``LeakRow``), split by class when nodes of one line
            fall in several (say 99 hanging and 1 live), largest bytes then count first.
        explanations: with ``explain=True``, why the largest kept-alive graphs are alive.
        graphs: graphs on the tape.
        saved_bytes: saved-array bytes held by the whole tape, each distinct array once.
        last_node_id: the largest node id on the tape (-1 when empty): what a later report
            given this one as ``baseline`` calls "recorded since".
        label: a caption such as ``"epoch 3"``, or ``None``.
        seconds: time taken to build the report, snapshot included.
        swept_nodes: hanging nodes that sweeps removed before this report (the tape's
            ledger), counted in the hanging rows but not in ``hanging_nodes``.
        graph_origins: ``(origin, live graphs)`` pairs: how many live graphs have their
            newest node at each origin (a later report's baseline compares them).
        graph_ops: ``(graph, op nodes)`` pairs: how many useful unconsumed op nodes each
            graph holding some has (a later report's baseline compares them: a graph that
            gained op nodes but holds no more than then was replaced, not grown).
        graph_nodes: the records of the hanging and kept-alive graphs, with the parents they
            reach (at most ``MAX_GRAPH_NODES``), for ``graph_picture``; ``history()`` drops
            them.
        graph_nodes_omitted: hanging or kept-alive nodes left out of ``graph_nodes``.
        bytes_by_device: ``(device, bytes)`` pairs: the whole tape's saved arrays on each
            device (their addressable shards; a replicated array counts on every device it
            is on), adding up to ``saved_bytes``.
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
    swept_nodes: int = 0
    graph_origins: tuple[tuple[str, int], ...] = ()
    graph_ops: tuple[tuple[int, int], ...] = ()
    graph_nodes: tuple[GraphNode, ...] = ()
    graph_nodes_omitted: int = 0
    bytes_by_device: tuple[tuple[str, int], ...] = ()

    @property
    def title(self) -> str:
        """``"tapegrad leak report"``, with the label when there is one."""
        return TITLE if self.label is None else f"{TITLE} — {self.label}"

    @property
    def clean(self) -> bool:
        """No hanging node (on the tape or swept) and no kept-alive graph."""
        return self.hanging_nodes == 0 and self.swept_nodes == 0 and self.kept_alive_graphs == 0

    @property
    def rows_bytes(self) -> int:
        """The bytes of all rows added up: above ``saved_bytes`` when nodes share arrays."""
        return sum(r.bytes for r in self.rows)

    def count(self, kind: str) -> int:
        """Total nodes of one class over all rows (swept hanging nodes included)."""
        return sum(r.count for r in self.rows if r.kind == kind)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (plain str, int, float, None, lists and dicts)."""
        data: dict[str, Any] = _plain(dataclasses.asdict(self))
        data["title"] = self.title
        for e, d in zip(self.explanations, data["explanations"], strict=True):
            d["path"] = e.path
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LeakReport:
        """Rebuild a report from ``to_dict()`` output (e.g. a logged baseline).

        Raises:
            KeyError: a required key is missing.
        """
        report: LeakReport = _build(cls, data)
        return report

    def save_html(self, path: str | Path, *, history: Sequence[LeakReport] | None = None) -> Path:
        """Write the report as one self-contained HTML file: the tables, the graph picture
        and the history plot (``diagnostics.history()`` unless ``history`` is given) as
        inline SVG, the report as JSON; nothing fetched from the network.

        Raises:
            OSError: the file cannot be written.
        """
        from diagnostics.html import save_html

        return save_html(self, path, history=history)

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


_NESTED: dict[str, type] = {
    "rows": LeakRow,
    "explanations": Explanation,
    "graph_nodes": GraphNode,
}


def _plain(value: Any) -> Any:
    """``dataclasses.asdict`` output with tuples as lists (what JSON gives back)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _frozen(value: Any) -> Any:
    """Lists back to tuples, deeply (the dataclasses hold tuples)."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _build(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """``cls(**data)`` for a dataclass, nested dataclasses rebuilt; unknown keys ignored."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING:
                raise KeyError(f.name)
            continue
        value = data[f.name]
        sub = _NESTED.get(f.name) if cls is LeakReport else None
        kwargs[f.name] = (
            tuple(_build(sub, item) for item in value) if sub is not None else _frozen(value)
        )
    return cls(**kwargs)


def leak_report(*, baseline: LeakReport | None = None, explain: bool = False) -> LeakReport:
    """Classify what the tape holds now (docs/design.md "Graph lifetime"); changes nothing.

    Pure: it reads one ``tg.snapshot()`` (its nodes and its ledger of swept nodes), keeps no
    state, calls no ``gc.collect()`` and keeps no reference to any tensor, node or array.

    Args:
        baseline: an earlier report. Rows get ``delta`` (change in count against it), and a
            graph that existed then and has grown since (more useful op nodes than then, new
            ones among them), or comes from an origin whose live graphs grew in number since,
            is kept-alive.
        explain: for the largest kept-alive graphs, find the chain of referrers from a
            user-visible name (a global, a local, a list element, an attribute, ``Out[n]``)
            to the live tensor keeping each alive (``gc.get_referrers``, bounded in depth
            and time: about 0.5 s a graph at most).

    Returns:
        The report.

    Raises:
        TypeError: ``baseline`` is not a ``LeakReport``.
    """
    return timed_report(baseline=baseline, explain=explain)


def timed_report(
    *,
    baseline: LeakReport | None = None,
    explain: bool = False,
    swept_before: Mapping[LedgerKey, int] | None = None,
) -> LeakReport:
    """``leak_report`` with ``build_report``'s ``swept_before`` (``epoch_end`` passes what
    sweeps had removed when the history was cleared)."""
    start = time.perf_counter()
    with paused_gc():  # the snapshot and the report are acyclic: no heap-wide collection
        report = build_report(
            tg.snapshot(), baseline=baseline, explain=explain, swept_before=swept_before
        )
    return replace(report, seconds=time.perf_counter() - start)


def ledger_counts(snap: tg.Snapshot) -> dict[LedgerKey, int]:
    """The snapshot's ledger (hanging nodes sweeps removed) as ``(origin, function, op)`` ->
    count. Empty when the tape keeps no ledger."""
    counts: dict[LedgerKey, int] = {}
    for entry in getattr(snap, "ledger", ()):
        key = (entry.origin, entry.function, entry.op)
        counts[key] = counts.get(key, 0) + int(entry.count)
    return counts


def build_report(
    snap: tg.Snapshot,
    *,
    baseline: LeakReport | None = None,
    explain: bool = False,
    since: int = -1,
    swept_before: Mapping[LedgerKey, int] | None = None,
) -> LeakReport:
    """Build a report from a snapshot. Linear in the nodes of the snapshot.

    Args:
        snap: what ``tg.snapshot()`` returned.
        baseline: see ``leak_report``.
        explain: see ``leak_report``.
        since: count only nodes whose id is greater (classification still looks at the
            whole tape); graph totals then count the graphs holding such a node. The
            ``no_leaks`` guard passes the largest id at its entry.
        swept_before: ``ledger_counts`` of an earlier snapshot: swept nodes counted then are
            not counted (the guard passes its entry's).

    Returns:
        The report; ``seconds`` is left at 0.

    Raises:
        TypeError: ``baseline`` is not a ``LeakReport``.
    """
    if baseline is not None and not isinstance(baseline, LeakReport):
        raise TypeError(
            "baseline must be an earlier LeakReport (what leak_report() or epoch_end() "
            f"returned), got {type(baseline).__name__}; for a report saved with to_dict(), "
            "pass LeakReport.from_dict(data)."
        )
    with paused_gc():  # acyclic rows and sets, ~3 per node: no heap-wide collection meanwhile
        return _report(snap, baseline, explain, since, swept_before or {})


def _report(
    snap: tg.Snapshot,
    baseline: LeakReport | None,
    explain: bool,
    since: int,
    swept_before: Mapping[LedgerKey, int],
) -> LeakReport:
    records = snap.nodes
    classes = classify(
        records,
        baseline_last=None if baseline is None else baseline.last_node_id,
        baseline_origins=None if baseline is None else dict(baseline.graph_origins),
        baseline_ops=None if baseline is None else dict(baseline.graph_ops),
    )
    tally = _tally(records, classes.kinds, since)
    swept = _add_swept(tally.rows, ledger_counts(snap), swept_before)
    base = {row.key: row.count for row in baseline.rows} if baseline is not None else None
    ordered = [
        LeakRow(*key, n, nbytes, None if base is None else n - base.get(key, 0), gone)
        for key, (n, nbytes, gone) in tally.rows.items()
    ]
    rank: dict[str, int] = {kind: i for i, kind in enumerate(KINDS)}
    ordered.sort(key=lambda r: (-r.bytes, -r.count, rank[r.kind], r.origin, r.op))
    kept_ids = [g for g in classes.kept if g in tally.blamed and tally.blamed[g][2]]
    explanations = _explain(kept_ids, records, classes) if explain and kept_ids else ()
    nodes, omitted = _graph_nodes(records, classes.kinds, tally, classes.kept)
    return LeakReport(
        hanging_leaves=tally.hanging_leaves,
        hanging_nodes=tally.hanging_nodes,
        dead_graphs=len(tally.graphs - classes.useful_graphs),
        live_graphs=len(tally.graphs & classes.live_graphs),
        kept_alive_graphs=len(kept_ids),
        total_nodes=tally.nodes,
        # the tape's own figure, each array once (rule 7); for a guard (``since``), its block's
        bytes_held=getattr(snap, "hanging_bytes", 0) if since < 0 else tally.bytes_held,
        rows=tuple(ordered),
        explanations=explanations,
        graphs=len(tally.graphs),
        saved_bytes=snap.stats.saved_bytes if since < 0 else sum(r.bytes for r in ordered),
        last_node_id=tally.last_id,
        swept_nodes=swept,
        graph_origins=tuple(sorted(classes.graph_origins.items())),
        graph_ops=tuple(sorted(classes.graph_ops.items())),
        graph_nodes=nodes,
        graph_nodes_omitted=omitted,
        bytes_by_device=getattr(snap, "bytes_by_device", ()) if since < 0 else (),
    )


@dataclass
class _Tally:
    """What one pass over the counted nodes adds up (``_tally``)."""

    rows: dict[RowKey, list[int]] = field(default_factory=dict)  # count, bytes, swept
    graphs: set[int] = field(default_factory=set)
    blamed: dict[int, list[int]] = field(default_factory=dict)  # graph -> nodes, bytes, kept
    members: dict[int, list[int]] = field(default_factory=dict)  # graph -> blamed indices
    nodes: int = 0
    hanging_nodes: int = 0
    hanging_leaves: int = 0
    bytes_held: int = 0
    last_id: int = -1


def _tally(records: tuple[tg.NodeRecord, ...], kinds: tuple[Kind, ...], since: int) -> _Tally:
    """Rows (count and bytes per origin, function, op and class) and totals over the nodes
    newer than ``since``, in one pass; per graph holding blamed (hanging or kept-alive)
    nodes, their indices in ``records``."""
    if len(records) != len(kinds):
        raise ValueError(f"{len(records)} records but {len(kinds)} classes")
    acc: dict[RowKey, list[int]] = {}
    blamed: dict[int, list[int]] = {}
    members: dict[int, list[int]] = {}
    graphs: set[int] = set()
    nodes = hanging = leaves = held = 0
    last = -1
    for i, r in enumerate(records):
        kind = kinds[i]
        nid = r.id
        if nid > last:
            last = nid
        if nid <= since:
            continue
        nodes += 1
        graphs.add(r.graph)
        key = (r.origin, r.function, r.op, kind)
        slot = acc.get(key)
        if slot is None:
            acc[key] = [1, r.saved_bytes, 0]
        else:
            slot[0] += 1
            slot[1] += r.saved_bytes
        if kind == "live" or kind == "consumed":
            continue
        blame = blamed.get(r.graph)
        if blame is None:
            blame = blamed[r.graph] = [0, 0, 0]
            members[r.graph] = [i]
        else:
            members[r.graph].append(i)
        blame[0] += 1
        blame[1] += r.saved_bytes
        if kind == "hanging":
            hanging += 1
            held += r.saved_bytes
            leaves += r.kind == "leaf"
        else:
            blame[2] += 1
    return _Tally(acc, graphs, blamed, members, nodes, hanging, leaves, held, last)


def _add_swept(
    rows: dict[RowKey, list[int]],
    ledger: Mapping[LedgerKey, int],
    before: Mapping[LedgerKey, int],
) -> int:
    """Add what sweeps removed (since ``before``) to the hanging rows; return the total."""
    total = 0
    for key, n in ledger.items():
        n -= before.get(key, 0)
        if n <= 0:
            continue
        total += n
        slot = rows.setdefault((*key, "hanging"), [0, 0, 0])
        slot[0] += n
        slot[2] += n
    return total


def _graph_nodes(
    records: tuple[tg.NodeRecord, ...],
    kinds: tuple[Kind, ...],
    tally: _Tally,
    kept: Mapping[int, str],
) -> tuple[tuple[GraphNode, ...], int]:
    """The records of the graphs holding hanging or kept-alive nodes (``tally.blamed``: graph
    -> nodes, bytes; ``tally.members``: their indices), most urgent (kept-alive, then most
    bytes) first, up to ``MAX_GRAPH_NODES`` blamed nodes; and how many blamed nodes were left
    out. A graph over the limit keeps its newest blamed nodes (nearest its roots)."""
    blamed = tally.blamed
    ranked = sorted([(g not in kept, -b[1], -b[0], g) for g, b in blamed.items()])
    room = MAX_GRAPH_NODES
    chosen: dict[int, int] = {}  # graph -> how many of its blamed nodes to keep
    for key in ranked:
        if not room:
            break
        g = key[3]
        take = min(blamed[g][0], room)
        chosen[g] = take
        room -= take
    omitted = sum(n for n, *_ in blamed.values()) - sum(chosen.values())
    if not chosen:
        return (), omitted
    # a parent is found by id only for the kept nodes
    ids = [r.id for r in records]
    where = dict(zip(ids, range(len(ids)), strict=True))
    keep: dict[int, tuple[tg.NodeRecord, Kind]] = {}
    for g, take in chosen.items():
        group = sorted(tally.members[g], key=ids.__getitem__)
        for i in reversed(group[-take:]):  # the newest first: nearest the roots
            r = records[i]
            keep[r.id] = (r, kinds[i])
            for p in r.parents:
                j = where.get(p)
                if j is not None:
                    keep.setdefault(p, (records[j], kinds[j]))
    nodes = []
    for nid, (r, k) in sorted(keep.items()):
        # up to 20,000 of them: built through the slot descriptors, not the frozen
        # dataclass's __init__ (one object.__setattr__ call per field: twice the time)
        node = _new_object(GraphNode)
        _set_id(node, nid)
        _set_graph(node, r.graph)
        _set_kind(node, k)
        _set_op(node, r.op)
        _set_origin(node, r.origin)
        _set_function(node, r.function)
        _set_saved_bytes(node, r.saved_bytes)
        _set_parents(node, tuple([p for p in r.parents if p in keep]) if r.parents else ())
        nodes.append(node)
    return tuple(nodes), omitted


(
    _set_id,
    _set_graph,
    _set_kind,
    _set_op,
    _set_origin,
    _set_function,
    _set_saved_bytes,
    _set_parents,
) = (getattr(GraphNode, f.name).__set__ for f in dataclasses.fields(GraphNode))
_new_object = object.__new__


def _explain(
    kept_ids: list[int], records: tuple[tg.NodeRecord, ...], classes: Classification
) -> tuple[Explanation, ...]:
    """Explain the largest kept-alive graphs: which live tensor, reached from which name."""
    sizes: dict[int, list[int]] = {g: [0, 0] for g in kept_ids}
    keeper: dict[int, tg.NodeRecord] = {}  # graph -> its newest live kept-alive record
    newest_live: dict[int, tg.NodeRecord] = {}
    for r, k in zip(records, classes.kinds, strict=True):
        size = sizes.get(r.graph)
        if size is None:
            continue
        if k == "kept-alive":
            size[0] += 1
            size[1] += r.saved_bytes
            if r.live:
                keeper[r.graph] = r
        if r.live:
            newest_live[r.graph] = r
    top = sorted(kept_ids, key=lambda g: (-sizes[g][1], -sizes[g][0], g))[:MAX_EXPLANATIONS]
    out = []
    for g in top:
        rec = keeper.get(g, newest_live.get(g))
        tensor = rec.tensor() if rec is not None and rec.tensor is not None else None
        desc, chain = "(no live tensor)", tuple[str, ...]()
        if tensor is not None and rec is not None:
            desc = describe_tensor(tensor, rec.origin)
            chain = referrer_chain(tensor)
        del tensor
        out.append(Explanation(g, classes.kept[g], sizes[g][0], sizes[g][1], desc, chain))
    return tuple(out)
