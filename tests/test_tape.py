"""tapegrad/tape.py: what is recorded, liveness and usefulness, graphs (components), stats and
snapshot records, origins; reading changes nothing and holds nothing (docs/design.md "Graph
lifetime", docs/api.md "Graph memory")."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import weakref
from typing import NamedTuple

import jax
import numpy as np
import pytest
from _recount import check_tape, checked_cleanup, delta, plain, recount
from _support import gc_off, origin_here

import tapegrad as tg
from tapegrad import census
from tapegrad.origin import line_of

GS = tg.GraphStats


def mine(start: int) -> list[tg.NodeRecord]:
    """The records of the nodes this test created, in id order."""
    return sorted((r for r in tg.snapshot().nodes if r.id > start), key=lambda r: r.id)


# ----------------------------------------------------------------------------- the public types


def test_stats_types_are_frozen_dataclasses() -> None:
    for cls in (tg.GraphStats, tg.CleanupStats, tg.Snapshot):
        assert dataclasses.is_dataclass(cls)
    assert [f.name for f in dataclasses.fields(tg.GraphStats)] == [
        "graphs",
        "nodes",
        "leaves",
        "live_nodes",
        "hanging_nodes",
        "hanging_leaves",
        "dead_graphs",
        "saved_bytes",
    ]
    assert [f.name for f in dataclasses.fields(tg.CleanupStats)] == [
        "nodes_removed",
        "leaves_removed",
        "graphs_removed",
        "bytes_freed",
        "seconds",
    ]
    stats = tg.graph_stats()
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.nodes = 3  # type: ignore[misc]
    cleanup = tg.graph_cleanup()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cleanup.nodes_removed = 3  # type: ignore[misc]
    snap = tg.snapshot()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.stats = stats  # type: ignore[misc]


# ----------------------------------------------------------------------------- recording


def test_ops_without_grad_record_nothing(base: tg.GraphStats) -> None:
    x = tg.randn((3, 2), key=0)
    y = (x * 2.0 + 1.0).tanh().sum()
    assert not y.requires_grad
    w = tg.randn((2,), key=1).require_grad()
    with tg.no_grad():
        z = (x @ w).exp().sum()
    assert not z.requires_grad
    assert (w > 0).requires_grad is False  # comparisons record nothing
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)


def test_each_op_records_one_node_with_its_parents(base: tg.GraphStats, start: int) -> None:
    x = tg.ones((4, 3))
    w = tg.randn((3, 2), key=2).require_grad()
    b = tg.zeros(2, requires_grad=True)
    out = ((x @ w + b).tanh() ** 2).sum()
    recs = mine(start)
    assert [(r.kind, r.op) for r in recs] == [
        ("leaf", "leaf"),
        ("leaf", "leaf"),
        ("op", "matmul"),
        ("op", "add"),
        ("op", "tanh"),
        ("op", "integer_pow"),
        ("op", "sum"),
    ]
    ids = [r.id for r in recs]
    # parents are the inputs' nodes that require grad (x does not)
    assert [r.parents for r in recs] == [
        (),
        (),
        (ids[0],),
        (ids[2], ids[1]),
        (ids[3],),
        (ids[4],),
        (ids[5],),
    ]
    assert [r.live for r in recs] == [True, True, False, False, False, False, True]
    assert all(r.useful and not r.consumed for r in recs)
    assert {r.graph for r in recs} == {ids[0]}  # one graph, named by its smallest id
    check_tape()
    del out, w, b
    checked_cleanup()
    assert delta(base) == GS()


def test_origin_is_the_first_frame_outside_tapegrad(start: int) -> None:
    w = tg.zeros(2).require_grad()
    at_w = origin_here(-1)
    y = (w * 3.0).sum()
    at_y = origin_here(-1)

    def helper(t: tg.Tensor) -> tg.Tensor:
        return t.exp()

    z = helper(w)
    at_z = origin_here(-3)
    origins = [(r.op, r.origin, r.function) for r in mine(start)]
    fn = "test_origin_is_the_first_frame_outside_tapegrad"
    assert origins == [
        ("leaf", at_w, fn),
        ("multiply", at_y, fn),
        ("sum", at_y, fn),
        ("exp", at_z, f"{fn}.<locals>.helper"),
    ]
    del w, y, z


# a Tensor method's arguments, for the methods that call their op with a frame count
# (``Op.from_method``); every such method must appear here (the test below finds them)
_METHOD_ARGS: dict[str, tuple[object, ...]] = {
    "astype": (tg.float32,),
    "reshape": (4,),
    "clip": (0.3, 0.6),
    "logaddexp": ("other",),
    "hypot": ("other",),
    "xlogy": ("other",),
    "fmod": ("other",),
    "copysign": ("other",),
    "masked_fill": ("mask", 0.0),
    "__getitem__": (0,),
    "flip": (0,),
    "__invert__": (),  # refused on floats: checked to raise, not to record
}


def _calls_from_method(fn: object) -> bool:
    fn = fn.fget if isinstance(fn, property) else fn
    try:
        return ".from_method(" in inspect.getsource(inspect.unwrap(fn))  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False


def test_a_tensor_method_names_its_callers_line_not_the_callers_caller() -> None:
    # Op.from_method reads the origin at the method's caller at once: a depth one too large
    # would name the line that called the user's function; one too small steps over a frame
    x = tg.tensor([[0.5, 0.25], [0.75, 0.5]]).require_grad()
    y = tg.tensor([[0.25, 0.5], [0.5, 0.75]]).require_grad()
    mask = tg.tensor([[True, False], [False, True]])
    methods = sorted(name for name, fn in vars(tg.Tensor).items() if _calls_from_method(fn))
    assert len(methods) > 60, methods  # the unary methods, reductions, indexing

    def call(name: str) -> tuple[tg.Tensor, str]:
        args = [
            {"other": y, "mask": mask}.get(a, a) if isinstance(a, str) else a
            for a in _METHOD_ARGS.get(name, ())
        ]
        return getattr(x, name)(*args), origin_here()

    start = tg.snapshot().nodes[-1].id
    recorded = 0
    for name in methods:
        if name == "__invert__":
            with pytest.raises(TypeError):
                call(name)
            continue
        out, here = call(name)
        made = [r for r in tg.snapshot().nodes if r.id > start]
        if made:  # differentiable: one node (two for clip), made on the line in `call`
            assert {(r.origin, r.function) for r in made} == {
                (
                    here,
                    f"{test_a_tensor_method_names_its_callers_line_not_the_callers_caller.__name__}.<locals>.call",
                )
            }, name
            recorded += 1
            start = made[-1].id
        del out
    assert recorded > 40
    # a method under a checking decorator, called without it, still names this line
    wrapped = tg.Tensor.sum.__wrapped__  # type: ignore[attr-defined]
    out, here = wrapped(x, axis=1), origin_here()
    assert [(r.origin, r.function) for r in tg.snapshot().nodes if r.id > start] == [
        (here, test_a_tensor_method_names_its_callers_line_not_the_callers_caller.__name__)
    ]
    del out


def test_an_instruction_offset_gives_the_line_f_lineno_gives() -> None:
    # a node keeps its frame's instruction offset (f_lasti) and turns it into a line only
    # when shown (``line_of``); it must be the line ``f_lineno`` gave at that moment
    seen: list[tuple[int, int]] = []

    def here(_: object = None) -> int:
        frame = sys._getframe(1)
        seen.append((frame.f_lasti, frame.f_lineno))
        return 1

    code = test_an_instruction_offset_gives_the_line_f_lineno_gives.__code__
    x = here()
    y = (
        here()
        + here(
            x,
        )
    )  # fmt: skip
    for _ in range(2):
        y += here()
    assert len(seen) == 5
    assert [line_of(code, lasti) for lasti, _ in seen] == [line for _, line in seen]
    assert line_of(None, 0) == 0


def test_swept_nodes_of_one_line_are_one_ledger_row() -> None:
    tape = tg.Tape()
    with tg.use_tape(tape):
        w = tg.zeros(2).require_grad()
        for _ in range(3):
            (w * 2.0).exp() + 1.0  # three ops of one line, each swept; fmt: skip
        here = origin_here(-1)
        tape.cleanup()
        rows = {(r.origin, r.op): r.count for r in tape.snapshot().ledger}
    assert rows == {(here, "multiply"): 3, (here, "exp"): 3, (here, "add"): 3}
    del w


def test_a_node_saving_one_array_twice_counts_its_bytes_once() -> None:
    # x * x saves (x, x): the ledger's bytes and the bytes freed count the array once, and
    # the holder count reaches zero (the array is released) only with the last entry
    tape = tg.Tape()
    with tg.use_tape(tape):
        x = tg.ones((4,)).require_grad()
        y = x * x
        z = y.sum()  # saves only y's shape: y's array dies with y
        del x, y, z
        stats = tape.cleanup()
        rows = {r.op: r.bytes for r in tape.snapshot().ledger}
    assert stats.nodes_removed == 3
    assert stats.bytes_freed == 16  # x's array, held only by the multiply node
    assert rows == {"leaf": 0, "multiply": 16, "sum": 0}
    assert tape._held == {}


def _traced_op_on(w: tg.Tensor) -> None:
    def traced(x: jax.Array) -> jax.Array:
        return (w * x).data

    jax.jit(traced)(jax.numpy.ones(3))


def test_no_tracer_reaches_the_tape(base: tg.GraphStats) -> None:
    # rule 9: an op that would be recorded on a tracer raises instead of recording
    w = tg.randn((3,), key=14).require_grad()
    with pytest.raises(RuntimeError, match="tracer"):
        _traced_op_on(w)
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    check_tape()

    def untracked(x: jax.Array) -> jax.Array:  # tensors that do not require grad work
        return (tg.tensor(x) * 2.0).tanh().data

    np.testing.assert_allclose(jax.jit(untracked)(jax.numpy.ones(3)), np.tanh(2.0) * np.ones(3))
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    del w


def test_a_failed_op_records_nothing(base: tg.GraphStats) -> None:
    w = tg.randn((3,), key=15).require_grad()
    with pytest.raises(ValueError):
        w + tg.ones(4)  # shapes do not broadcast
    with pytest.raises(ValueError):
        w.reshape(2, 2)
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    check_tape()
    loss = (w * 2.0).sum()  # the tape still works
    loss.backward()
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), np.full(3, 2.0, np.float32))
    del loss, w


# ----------------------------------------------------------------------------- liveness


def test_live_follows_the_tensor_and_snapshot_holds_it_weakly(start: int) -> None:
    w = tg.randn((3,), key=3).require_grad()
    y = w.sin()
    recs = mine(start)
    assert [r.live for r in recs] == [True, True]
    assert recs[0].tensor is not None and recs[0].tensor() is w
    assert recs[1].tensor is not None and recs[1].tensor() is y
    with gc_off():
        snap = tg.snapshot()
        ref_y, ref_value = weakref.ref(y), weakref.ref(y.data)
        del y
        assert ref_y() is None and ref_value() is None  # the snapshot kept neither alive
        assert [r.tensor() for r in snap.nodes if r.id > start and r.tensor][1:] == [None]
        after = mine(start)
        assert [r.live for r in after] == [True, False]
        assert after[1].tensor is None and not after[1].useful
    del w
    checked_cleanup()


def test_node_records_are_immutable_named_records_and_gc_state_is_kept(start: int) -> None:
    """Records are named tuples (a fifth of a frozen dataclass's build time: a snapshot makes
    one per node), built with the cyclic collector paused; the collector's state is as it
    was after (enabled stays enabled, disabled stays disabled)."""
    import gc

    from tapegrad.census import paused_gc

    w = tg.randn((3,), key=3).require_grad()
    y = w.sin() * w
    assert gc.isenabled()
    recs = mine(start)
    assert gc.isenabled()
    with gc_off():
        assert mine(start) == recs
        assert not gc.isenabled()  # not re-enabled by the snapshot
    assert tg.NodeRecord._fields == (
        "id",
        "kind",
        "op",
        "graph",
        "live",
        "useful",
        "consumed",
        "origin",
        "function",
        "saved_bytes",
        "parents",
        "tensor",
    )
    r = recs[1]
    assert (r.kind, r.op, r.parents) == ("op", "sin", (recs[0].id,))
    assert r._replace(live=True).live is True and r.live is False  # its output was dropped
    with pytest.raises(AttributeError):
        r.live = False  # type: ignore[misc]
    with pytest.raises(RuntimeError), paused_gc():
        assert not gc.isenabled()
        raise RuntimeError("restored on the way out")
    assert gc.isenabled()
    del w, y
    checked_cleanup()


def test_snapshot_holds_no_strong_reference_to_residuals(base: tg.GraphStats) -> None:
    shape = (9, 4)
    before = {id(a): a for a in jax.live_arrays() if a.shape == shape}
    w = tg.randn(shape, key=4).require_grad()
    (w.tanh() * w).exp()  # hanging nodes holding residuals of this shape
    snap = tg.snapshot()
    residuals = [
        weakref.ref(a)
        for a in jax.live_arrays()
        if a.shape == shape and id(a) not in before and a is not w.data
    ]
    assert residuals and sum(r.saved_bytes for r in snap.nodes) > 0
    with gc_off():
        checked_cleanup()
        assert [r() for r in residuals] == [None] * len(residuals)
    assert len(snap.nodes) == base.nodes + 4  # the old snapshot still describes that moment
    del w


def test_requires_grad_false_on_a_leaf(base: tg.GraphStats, start: int) -> None:
    w = tg.randn((3,), key=5).require_grad()
    assert w.requires_grad_(False) is w
    assert not w.requires_grad and w.is_leaf and w.grad is None
    # no graph used it: it leaves the tape at once (freezing is not a leak: nothing hangs)
    assert delta(base) == GS()
    check_tape()
    y = w * 2.0
    assert not y.requires_grad and delta(base) == GS()  # records nothing now
    assert checked_cleanup().leaves_removed == 0
    assert not tg.current_tape()._ledger  # nothing was swept
    np.testing.assert_allclose(y.numpy(), 2.0 * w.numpy())

    v = tg.randn((3,), key=6).require_grad()
    out = (v * 2.0).sum()
    v.requires_grad_(False)  # still reachable from `out`: useful, but no longer v's
    recs = mine(start)
    assert [(r.op, r.live, r.useful) for r in recs[-3:]] == [
        ("leaf", False, True),
        ("multiply", False, True),
        ("sum", True, True),
    ]
    out.backward()
    assert v.grad is None  # the node is not v's any more (as in PyTorch)
    del out
    assert delta(base) == GS()  # reached by the backward: freed when not useful (rule 4)
    v.requires_grad_(True)
    assert v.requires_grad and delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    del v


def test_unfreezing_a_leaf_that_a_pending_graph_uses_takes_its_node_back(
    base: tg.GraphStats,
) -> None:
    """Frozen then unfrozen while a graph made before still uses it, a leaf is that graph's
    leaf again (PyTorch: its place in a graph is the tensor): a backward through the old
    and a new graph accumulates both, [2] + [3] per element, as torch gives."""
    w = tg.ones((3,)).require_grad()
    y = (w * 2.0).sum()
    w.requires_grad_(False)
    y.backward(retain_graph=True)
    assert w.grad is None  # frozen: no gradient written
    w.requires_grad_(True)
    got = delta(base)  # the same leaf, live again: leaf, multiply, sum (y's node)
    assert (got.graphs, got.nodes, got.leaves, got.live_nodes) == (1, 3, 1, 2)
    check_tape()
    z = (w * 3.0).sum()
    (y + z).backward()
    assert w.grad is not None and w.grad.tolist() == [5.0, 5.0, 5.0]
    del y, z
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    # once the graph is gone the old node is too: unfreezing makes a new leaf
    w.requires_grad_(False)
    assert delta(base) == GS()
    w.requires_grad_(True)
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    # a graph dropped while the leaf was frozen leaves it hanging with that graph (rule 5)
    y = (w * 2.0).sum()
    w.requires_grad_(False)
    del y
    w.requires_grad_(True)
    assert delta(base).hanging_nodes == 3 and delta(base).live_nodes == 1
    assert checked_cleanup().nodes_removed == 3
    del w
    check_tape()


# ----------------------------------------------------------------------------- graphs


def test_graphs_merge_on_mixing_ops_and_split_on_sweeps(base: tg.GraphStats, start: int) -> None:
    a = tg.randn((3,), key=7).require_grad()
    b = tg.randn((3,), key=8).require_grad()
    assert delta(base).graphs == 2
    c = a * b  # mixing merges
    assert delta(base).graphs == 1
    del c  # the hanging node still joins them
    assert delta(base) == GS(graphs=1, nodes=3, leaves=2, live_nodes=2, hanging_nodes=1,
                             saved_bytes=delta(base).saved_bytes)  # fmt: skip
    stats = checked_cleanup()
    assert (stats.nodes_removed, stats.graphs_removed) == (1, 0)
    assert delta(base).graphs == 2  # split: removing the joining node
    recs = mine(start)
    assert [r.graph for r in recs] == [r.id for r in recs]  # each named by its own id

    s = (a * b).sum()
    s.backward()  # consuming drops links: a, b and the marker are three graphs
    assert delta(base) == GS(graphs=3, nodes=3, leaves=2, live_nodes=3)
    del s
    assert delta(base).graphs == 2
    del a, b
    assert delta(base) == GS()


def test_graph_ids_are_smallest_ids_of_components(start: int) -> None:
    p = tg.randn((2,), key=9).require_grad()
    q = tg.randn((2,), key=10).require_grad()
    r = tg.randn((2,), key=11).require_grad()
    pq = p + q
    qr = q * r  # q joins both: one component
    lone = tg.ones(2).require_grad()
    snap, expected = check_tape()
    recs = mine(start)
    ids = [rec.id for rec in recs]
    assert [rec.graph for rec in recs] == [ids[0]] * 5 + [ids[5]]
    assert expected.graph_of == {rec.id: rec.graph for rec in snap.nodes}
    del p, q, r, pq, qr, lone
    checked_cleanup()


# ----------------------------------------------------------------------------- reading


def test_reading_stats_changes_nothing(base: tg.GraphStats) -> None:
    w = tg.randn((3,), key=12).require_grad()
    total = (w * 2.0).sum()
    total.backward()  # a live consumed marker
    (w.exp() * 3.0).sum()  # hanging op nodes in w's graph
    tg.zeros(4).require_grad()  # a hanging leaf
    first = tg.snapshot()
    for _ in range(5):
        assert tg.graph_stats() == first.stats
        assert plain(tg.snapshot().nodes) == plain(first.nodes)
    assert recount(first).stats == first.stats
    assert delta(base, first.stats) == GS(
        graphs=3,
        nodes=6,
        leaves=2,
        live_nodes=2,
        hanging_nodes=4,
        hanging_leaves=1,
        dead_graphs=1,
        saved_bytes=delta(base, first.stats).saved_bytes,
    )
    del total, w
    checked_cleanup()


def test_snapshot_stats_are_of_the_same_moment(base: tg.GraphStats) -> None:
    w = tg.randn((3,), key=13).require_grad()
    snap = tg.snapshot()
    y = w * 2.0
    assert recount(snap, saved_bytes=snap.stats.saved_bytes).stats == snap.stats
    assert tg.graph_stats().nodes == snap.stats.nodes + 1
    del y, w
    checked_cleanup()


def test_cleanup_on_an_empty_tape_removes_nothing(base: tg.GraphStats) -> None:
    stats = tg.graph_cleanup()
    assert isinstance(stats, tg.CleanupStats)
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed, stats.bytes_freed) == (
        0,
        0,
        0,
        0,
    )
    assert stats.seconds >= 0.0
    assert tg.graph_stats() == base


class Res(NamedTuple):
    x: jax.Array
    shape: tuple[int, ...]


def test_residual_pytrees_are_walked_for_their_arrays() -> None:
    # named tuples and dicts inside residuals hold arrays too; shapes (tuples of ints) none
    a, b, c = jax.numpy.ones(3), jax.numpy.ones(2), jax.numpy.ones(4)
    saved = (a, Res(b, (2, 3)), {"k": [c, 1.5]}, (), None)
    assert census.saved_arrays(saved) == [a, b, c]
    assert census.saved_arrays(Res(b, ())) == [b]
    assert census.saved_arrays(a) == [a]
    held: dict[int, int] = {}
    census.hold(held, saved)
    census.hold(held, (a, a))
    assert held == {id(a): 3, id(b): 1, id(c): 1}
    assert census.unhold(held, (a, a), census.sizes_cache()) == (
        12,
        0,
    )  # a once; still held by the first
    assert census.unhold(held, saved, census.sizes_cache()) == (12 + 8 + 16, 12 + 8 + 16)
    assert held == {}
