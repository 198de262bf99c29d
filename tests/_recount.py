"""Brute-force recount of the tape from docs/design.md's definitions (a reference for the tests).

Everything here is recomputed from ``tg.snapshot()`` records, never from the engine's
``useful`` flags or its incremental counters:

- **useful**: live, or reachable from a live node by walking to parents, where the walk
  includes a consumed node but does not continue past it;
- **hanging**: on the tape and not useful;
- **graph**: a connected component of the nodes on the tape (over parent links), its id the
  smallest node id in it; a **dead graph** has no useful node.

The one number a snapshot cannot give is ``saved_bytes`` (rule 7: distinct arrays *by
identity* across nodes), so ``distinct_saved_bytes`` reads the residual pytrees of the tape's
nodes directly and deduplicates them by identity, independently of the engine's own count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

import jax

import tapegrad as tg

__all__ = [
    "Recount",
    "recount",
    "useful_ids",
    "components",
    "distinct_saved_bytes",
    "record_saved_bytes",
    "check_tape",
    "delta",
    "plain",
    "tape_ids",
    "expected_bytes_freed",
    "checked_cleanup",
]


@dataclass(frozen=True)
class Recount:
    """What docs/design.md's definitions give for one snapshot.

    Attributes:
        stats: the ``GraphStats`` recomputed from the records (``saved_bytes`` deduplicated
            by array identity over the tape's residuals).
        useful: ids of the useful nodes.
        graph_of: node id -> graph id (smallest node id of its component).
        dead_graphs: ids of the graphs with no useful node.
    """

    stats: tg.GraphStats
    useful: frozenset[int]
    graph_of: dict[int, int]
    dead_graphs: frozenset[int]


def useful_ids(records: Iterable[tg.NodeRecord]) -> frozenset[int]:
    """Ids of the useful nodes: live ones and what they reach, stopping at consumed nodes."""
    by_id = {r.id: r for r in records}
    seen = {r.id for r in by_id.values() if r.live}
    stack = sorted(seen)
    while stack:
        rec = by_id[stack.pop()]
        if rec.consumed:  # a marker: included, but the walk does not continue past it
            continue
        for pid in rec.parents:
            if pid in by_id and pid not in seen:
                seen.add(pid)
                stack.append(pid)
    return frozenset(seen)


def components(records: Iterable[tg.NodeRecord]) -> dict[int, int]:
    """Map node id -> smallest node id of its connected component (over parent links)."""
    by_id = {r.id: r for r in records}
    neighbours: dict[int, set[int]] = {nid: set() for nid in by_id}
    for rec in by_id.values():
        for pid in rec.parents:
            if pid in by_id:
                neighbours[rec.id].add(pid)
                neighbours[pid].add(rec.id)
    graph_of: dict[int, int] = {}
    for start in sorted(by_id):
        if start in graph_of:
            continue
        members = [start]
        graph_of[start] = start
        stack = [start]
        while stack:
            for other in neighbours[stack.pop()]:
                if other not in graph_of:
                    graph_of[other] = start
                    members.append(other)
                    stack.append(other)
        low = min(members)
        for nid in members:
            graph_of[nid] = low
    return graph_of


def _arrays(saved: object) -> list[jax.Array]:
    return [a for a in jax.tree_util.tree_leaves(saved) if isinstance(a, jax.Array)]


def distinct_saved_bytes() -> int:
    """Sum of ``nbytes`` over the distinct residual arrays (by identity) on the tape now."""
    with tg.current_tape()._lock:
        held = {
            id(a): int(a.nbytes)
            for n in tg.current_tape()._nodes.values()
            for a in _arrays(n.saved)
        }
    return sum(held.values())


def record_saved_bytes() -> dict[int, int]:
    """Map node id -> bytes of the distinct arrays that node saves, read from the tape."""
    with tg.current_tape()._lock:
        return {
            nid: sum({id(a): int(a.nbytes) for a in _arrays(n.saved)}.values())
            for nid, n in tg.current_tape()._nodes.items()
        }


def recount(snap: tg.Snapshot, saved_bytes: int | None = None) -> Recount:
    """Recompute the stats of ``snap`` from its records alone (and ``saved_bytes`` if given;
    else the distinct residual bytes on the tape now)."""
    records = snap.nodes
    useful = useful_ids(records)
    graph_of = components(records)
    graphs = set(graph_of.values())
    alive = {graph_of[nid] for nid in useful}
    dead = frozenset(graphs - alive)
    hanging = [r for r in records if r.id not in useful]
    stats = tg.GraphStats(
        graphs=len(graphs),
        nodes=len(records),
        leaves=sum(r.kind == "leaf" for r in records),
        live_nodes=sum(r.live for r in records),
        hanging_nodes=len(hanging),
        hanging_leaves=sum(r.kind == "leaf" for r in hanging),
        dead_graphs=len(dead),
        saved_bytes=distinct_saved_bytes() if saved_bytes is None else saved_bytes,
    )
    return Recount(stats, useful, graph_of, dead)


def plain(records: Iterable[tg.NodeRecord]) -> tuple[tuple[object, ...], ...]:
    """The records as comparable tuples, without the weak reference (whose ``==`` would
    compare tensors elementwise)."""
    return tuple(tuple(getattr(r, name) for name in r._fields if name != "tensor") for r in records)


def tape_ids() -> frozenset[int]:
    """Ids of every node on the tape now."""
    return frozenset(r.id for r in tg.snapshot().nodes)


def check_tape() -> tuple[tg.Snapshot, Recount]:
    """Assert that the engine agrees with the brute-force recount; return both.

    Checks ``snapshot().stats`` and ``graph_stats()`` against the recount, every record's
    ``useful`` flag and graph id, that consumed nodes keep no parent links, that live records
    (and only they) resolve their weak reference, and each record's ``saved_bytes``.
    """
    snap = tg.snapshot()
    expected = recount(snap)
    assert snap.stats == expected.stats, f"snapshot stats {snap.stats} != recount {expected.stats}"
    stats = tg.graph_stats()
    assert stats == expected.stats, f"graph_stats {stats} != recount {expected.stats}"
    per_node = record_saved_bytes()
    for rec in snap.nodes:
        assert rec.useful == (rec.id in expected.useful), f"useful flag wrong for {rec}"
        assert rec.graph == expected.graph_of[rec.id], f"graph id wrong for {rec}"
        assert rec.kind in ("leaf", "op") and (rec.kind == "leaf") == (rec.op == "leaf")
        assert not (rec.kind == "leaf" and rec.consumed), f"a consumed leaf: {rec}"
        if rec.consumed:
            assert rec.parents == (), f"a consumed node keeps parent links: {rec}"
            assert rec.saved_bytes == 0, f"a consumed node keeps saved arrays: {rec}"
        assert all(p < rec.id for p in rec.parents), f"a parent id above its child: {rec}"
        assert rec.saved_bytes == per_node[rec.id], f"saved_bytes wrong for {rec}"
        if rec.live:
            assert rec.tensor is not None and rec.tensor() is not None, f"live, no tensor: {rec}"
        else:
            assert rec.tensor is None, f"not live but holds a weak reference: {rec}"
    return snap, expected


def delta(base: tg.GraphStats, now: tg.GraphStats | None = None) -> tg.GraphStats:
    """``now - base`` field by field (``now`` defaults to ``graph_stats()``).

    A test takes ``base`` after a cleanup at its start; nodes that other modules keep alive
    are live, separate graphs, so every count of the test's own nodes is the difference.
    """
    now = tg.graph_stats() if now is None else now
    return tg.GraphStats(
        **{
            f.name: getattr(now, f.name) - getattr(base, f.name)
            for f in dataclasses.fields(tg.GraphStats)
        }
    )


def expected_bytes_freed(removed: frozenset[int]) -> int:
    """Rule 7: bytes of the distinct residual arrays held by the ``removed`` nodes and by no
    other node on the tape (read from the tape now, before the sweep)."""
    with tg.current_tape()._lock:
        nodes = tg.current_tape()._nodes
        released = {id(a): int(a.nbytes) for nid in removed for a in _arrays(nodes[nid].saved)}
        for nid, node in nodes.items():
            if nid not in removed:
                for a in _arrays(node.saved):
                    released.pop(id(a), None)
    return sum(released.values())


def checked_cleanup() -> tg.CleanupStats:
    """``graph_cleanup()``, checked against the recount before and after (rules 6-8).

    Asserts that it removes exactly the hanging nodes (leaves and dead graphs counted), frees
    the bytes rule 7 defines, leaves exactly the useful set, and that a second call frees
    nothing and changes nothing (idempotence).
    """
    snap, before = check_tape()
    hanging = frozenset(r.id for r in snap.nodes) - before.useful
    freed = expected_bytes_freed(hanging)
    stats = tg.graph_cleanup()
    assert stats.nodes_removed == len(hanging), (stats, before.stats)
    assert stats.leaves_removed == before.stats.hanging_leaves, (stats, before.stats)
    assert stats.graphs_removed == before.stats.dead_graphs, (stats, before.stats)
    assert stats.bytes_freed == freed, (stats, freed)
    assert stats.seconds >= 0.0
    after_snap, after = check_tape()
    assert frozenset(r.id for r in after_snap.nodes) == before.useful
    assert after.stats.hanging_nodes == 0 and after.stats.dead_graphs == 0
    again = tg.graph_cleanup()
    assert (again.nodes_removed, again.leaves_removed, again.graphs_removed, again.bytes_freed) == (
        0,
        0,
        0,
        0,
    )
    assert plain(tg.snapshot().nodes) == plain(after_snap.nodes)
    return stats
