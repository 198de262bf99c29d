"""Which class each node of a snapshot is in (hanging, kept-alive, live, consumed), and why.

Plain logic over ``tg.NodeRecord``s: no rich, no report objects. ``report.py`` groups the
result by origin; ``picture.py`` draws it.

Classes (docs/design.md, "Graph lifetime"), each with its consequence:

- ``hanging``: a node that is not useful (hanging leaves are among them). A graph with no
  useful node is a dead graph. ``graph_cleanup()`` frees them.
- ``kept-alive``: nodes of a kept-alive graph, a live graph that is probably a mistake:
  (a) a live tensor reaches a consumed record through at least one unconsumed op node (a loss
  total kept as a tensor); or, given a baseline, (b) the graph already existed then, holds
  useful op nodes recorded since, and more useful unconsumed op nodes than it held then (a
  history list growing across epochs; not the last step's output, which each step replaces
  in the parameters' graph), or (c) it comes from
  an origin whose live graphs have grown in number since the baseline, where it had some
  already (outputs appended to a list every step, even after their backward; a line
  that makes its first live graph is not blamed for it). The blamed nodes are the graph's
  unconsumed op nodes; a graph without any (losses kept after their backward: consumed
  records; leaves appended to a list) blames all its nodes. They are useful, so cleanup
  never touches them: the code must change.
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
greater than ``last_node_id``. Its size then is the baseline's ``graph_ops`` entry (none: 0).
A graph's origin (rule (c)) is the origin of its newest node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import tapegrad as tg

__all__ = [
    "KINDS",
    "REASON_CONSUMED",
    "REASON_GREW",
    "REASON_MORE_GRAPHS",
    "Classification",
    "Kind",
    "classify",
]

Kind = Literal["hanging", "kept-alive", "live", "consumed"]

KINDS: tuple[Kind, ...] = ("hanging", "kept-alive", "live", "consumed")
"""The classes, most urgent first."""

REASON_CONSUMED = "a live tensor reaches a consumed record through unconsumed ops"
REASON_GREW = "existed at the baseline and has grown since (more op nodes than then)"
REASON_MORE_GRAPHS = "its origin holds more live graphs than at the baseline"


@dataclass(frozen=True)
class Classification:
    """The class of every node of a snapshot, in the snapshot's order.

    Attributes:
        kinds: one class per record of the snapshot, aligned with ``snapshot.nodes``.
        kept: kept-alive graph id -> the rule that matched (``REASON_*``).
        live_graphs: ids of graphs with a live node.
        useful_graphs: ids of graphs with a useful node.
        graph_origins: per origin, how many live graphs have their newest node there (what a
            later classification compares against for rule (c)).
        graph_ops: per graph holding useful unconsumed op nodes, how many (what a later
            classification compares against for rule (b)).
    """

    kinds: tuple[Kind, ...]
    kept: Mapping[int, str]
    live_graphs: frozenset[int]
    useful_graphs: frozenset[int]
    graph_origins: Mapping[str, int]
    graph_ops: Mapping[int, int]


def classify(
    records: tuple[tg.NodeRecord, ...],
    *,
    baseline_last: int | None = None,
    baseline_origins: Mapping[str, int] | None = None,
    baseline_ops: Mapping[int, int] | None = None,
) -> Classification:
    """Classify every node (see the module doc). Linear in ``len(records)``.

    Args:
        records: ``tg.snapshot().nodes``.
        baseline_last: the baseline report's ``last_node_id`` (rule (b)), or ``None``.
        baseline_origins: the baseline's ``graph_origins`` (rule (c)), or ``None``.
        baseline_ops: the baseline's ``graph_ops`` (rule (b)); a graph it lacks held none.
    """
    useful: set[int] = set()
    live: set[int] = set()
    consumed: set[int] = set()
    ops: dict[int, int] = {}  # graph -> its useful unconsumed op nodes
    newest: dict[int, tg.NodeRecord] = {}  # graph -> its newest node
    for r in records:
        g = r.graph
        if r.useful:
            useful.add(g)
            if r.live:
                live.add(g)
            if r.consumed:
                consumed.add(r.id)
            elif r.kind == "op":
                ops[g] = ops.get(g, 0) + 1
        top = newest.get(g)
        if top is None or r.id > top.id:
            newest[g] = r
    origins: dict[str, int] = {}
    for g in live:
        origin = newest[g].origin
        origins[origin] = origins.get(origin, 0) + 1

    kept: dict[int, str] = {}
    before = baseline_ops or {}
    if consumed or baseline_last is not None:
        for r in records:
            if not r.useful or r.consumed or r.kind != "op" or r.graph in kept:
                continue
            if consumed and not consumed.isdisjoint(r.parents):
                kept[r.graph] = REASON_CONSUMED
            elif (
                baseline_last is not None
                and r.graph <= baseline_last < r.id
                and ops[r.graph] > before.get(r.graph, 0)
            ):
                kept[r.graph] = REASON_GREW
    if baseline_origins is not None:
        grown = {o for o, n in origins.items() if n > baseline_origins.get(o, n) > 0}
        for g in live:
            if g not in kept and newest[g].origin in grown:
                kept[g] = REASON_MORE_GRAPHS

    with_ops = ops.keys()
    kinds: list[Kind] = []
    for r in records:
        if not r.useful:
            kinds.append("hanging")
        elif r.graph in kept and ((r.kind == "op" and not r.consumed) or r.graph not in with_ops):
            kinds.append("kept-alive")
        elif r.consumed:
            kinds.append("consumed")
        else:
            kinds.append("live")
    return Classification(tuple(kinds), kept, frozenset(live), frozenset(useful), origins, ops)
