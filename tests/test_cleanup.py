"""graph_cleanup() (docs/design.md rules 6-8): safety, idempotence and completeness as Hypothesis
properties over random programs, and the cases Burn got wrong (hanging nodes next to a live
parameter, deep dead chains, graphs that split)."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _recount import check_tape, checked_cleanup, delta, plain
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg

GS = tg.GraphStats
SHAPES: tuple[tuple[int, ...], ...] = ((), (3,), (2, 3))
UNARY = {
    "tanh": lambda t: t.tanh(),
    "sin": lambda t: t.sin(),
    "sigmoid": lambda t: t.sigmoid(),
    "neg": lambda t: -t,
    "half": lambda t: t * 0.5,
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
}


@functools.cache
def value(shape: tuple[int, ...], seed: int) -> jax.Array:
    """A fixed float32 array per (shape, seed), so both runs of a program see the same data."""
    return jax.random.normal(jax.random.PRNGKey(seed), shape, jnp.float32)


# ----------------------------------------------------------------------------- random programs

index = st.integers(0, 50)
leaf = st.tuples(
    st.just("leaf"),
    st.sampled_from(SHAPES),
    st.integers(0, 3),
    st.sampled_from([True] * 3 + [False]),
)
unary = st.tuples(st.just("unary"), index, st.sampled_from(sorted(UNARY)))
binary = st.tuples(st.just("binary"), index, index, st.sampled_from(sorted(BINARY)))
backward = st.tuples(st.just("backward"), index, st.booleans())
instructions = st.one_of(
    leaf,
    leaf,
    unary,
    binary,
    binary,
    st.tuples(st.just("reduce"), index, st.booleans()),
    st.tuples(st.just("eval"), index, st.sampled_from(sorted(UNARY))),
    st.tuples(st.just("drop"), index),
    backward,
    backward,
    st.tuples(st.just("cleanup")),
)
"""One step of a program; indices wrap around the tensors the program holds."""
programs = st.lists(instructions, min_size=10, max_size=30)


def _broadcastable(a: tg.Tensor, b: tg.Tensor) -> bool:
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return False
    return True


def execute(ins: tuple[Any, ...], regs: list[tg.Tensor], log: list[Any], clean: bool) -> None:
    """Run one instruction on the tensors ``regs`` holds, appending what it observed to ``log``
    (``cleanup`` calls ``graph_cleanup`` on the current tape only when ``clean``)."""
    kind = ins[0]
    if kind == "leaf":
        t = tg.tensor(value(ins[1], ins[2]))
        regs.append(t.require_grad() if ins[3] else t)
        return
    if kind == "cleanup":
        if clean:
            checked_cleanup()
        return
    if not regs:
        return
    at = ins[1] % len(regs)
    x = regs[at]
    if kind == "unary":
        regs.append(UNARY[ins[2]](x))
    elif kind == "binary":
        other = regs[ins[2] % len(regs)]
        if not _broadcastable(x, other):
            other = other.sum()
        regs.append(BINARY[ins[3]](x, other))
    elif kind == "reduce":
        regs.append(x.mean(axis=-1) if ins[2] and x.ndim else x.sum())
    elif kind == "eval":  # a forward under grad mode whose result is only read
        log.append(UNARY[ins[2]](x).sum().item())
    elif kind == "drop":
        del regs[at]
    elif kind == "backward" and x.requires_grad:
        targets = _leaves(regs)
        for t in targets:
            t.grad = None
        try:
            x.sum().backward(retain_graph=ins[2])
        except tg.GraphConsumedError:
            log.append("consumed")
        else:
            log.append([None if t.grad is None else t.grad.numpy() for t in targets])


def _leaves(regs: list[tg.Tensor]) -> list[tg.Tensor]:
    return [t for t in regs if t.requires_grad and t.is_leaf]


def final_gradients(regs: list[tg.Tensor], log: list[Any]) -> None:
    """Append the gradient of every tensor that still requires grad w.r.t. the leaves held."""
    targets = _leaves(regs)
    for t in regs:
        if t.requires_grad and targets:
            try:
                grads = tg.grad(t.sum(), targets, retain_graph=True)
            except tg.GraphConsumedError:
                log.append("consumed")
            else:
                log.append([g.numpy() for g in grads])


def run(program: list[tuple[Any, ...]], clean: bool) -> list[Any]:
    """Run ``program`` (calling ``graph_cleanup`` at its ``cleanup`` steps only when ``clean``)
    and return what it observed: values, gradients, and which backward passes raised.

    Every tensor is local: when this returns, the program's tensors are gone.
    """
    regs: list[tg.Tensor] = []
    log: list[Any] = []
    for ins in program:
        execute(ins, regs, log, clean)
    final_gradients(regs, log)
    return log


def assert_same(a: Any, b: Any) -> None:
    """Two observation logs are identical (arrays bit for bit)."""
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@given(program=programs)
def test_cleanup_never_changes_a_gradient(program: list[tuple[Any, ...]]) -> None:
    base = tg.graph_stats()
    without = run(program, clean=False)
    tg.graph_cleanup()
    with_cleanup = run(program, clean=True)
    assert_same(without, with_cleanup)
    assert delta(base).live_nodes == 0


@given(program=programs)
def test_cleanup_is_idempotent(program: list[tuple[Any, ...]]) -> None:
    # checked_cleanup() asserts that a second call frees 0 and changes nothing, at every
    # cleanup step of the program and once more here, mid-state
    base = tg.graph_stats()
    regs_log = run(program + [("cleanup",)], clean=True)
    assert isinstance(regs_log, list)
    checked_cleanup()
    assert delta(base) == GS()


@given(program=programs)
def test_cleanup_after_dropping_everything_empties_the_tape(program: list[tuple[Any, ...]]) -> None:
    base = tg.graph_stats()
    run(program, clean=False)  # returns with every tensor dropped
    check_tape()
    assert delta(base).live_nodes == 0
    stats = checked_cleanup()
    assert stats.nodes_removed >= 0
    assert delta(base) == GS()  # zero nodes, zero graphs, zero bytes


# ----------------------------------------------------------------------------- two tapes

two_tape_programs = st.lists(st.tuples(st.integers(0, 1), instructions), min_size=10, max_size=30)
"""Each step runs on tape 0 (the process tape) or tape 1 (a private ``tg.Tape``)."""


def run_on_two_tapes(
    program: list[tuple[int, tuple[Any, ...]]], cleaned: int | None, second: tg.Tape
) -> list[Any]:
    """Run ``program`` over two tapes, each with its own tensors; ``cleanup`` steps clean tape
    ``cleaned`` only (``None``: never). Each such cleanup must leave the other tape exactly as
    it was (its records, before and after). Returns what both halves observed."""
    tapes = (tg.current_tape(), second)
    regs: tuple[list[tg.Tensor], list[tg.Tensor]] = ([], [])
    log: list[Any] = []
    for which, ins in program:
        with tg.use_tape(tapes[which]):
            if ins[0] == "cleanup" and which == cleaned:
                with tg.use_tape(tapes[1 - which]):
                    other = plain(tg.snapshot().nodes)
                execute(ins, regs[which], log, clean=True)
                with tg.use_tape(tapes[1 - which]):
                    assert plain(tg.snapshot().nodes) == other
            else:
                execute(ins, regs[which], log, clean=False)
    for which in (0, 1):
        with tg.use_tape(tapes[which]):
            final_gradients(regs[which], log)
    return log


@given(program=two_tape_programs, cleaned=st.integers(0, 1))
def test_cleanup_of_one_tape_never_changes_a_gradient_on_either(
    program: list[tuple[int, tuple[Any, ...]]], cleaned: int
) -> None:
    base = tg.graph_stats()
    second = tg.Tape("second")
    without = run_on_two_tapes(program, None, second)
    with_cleanup = run_on_two_tapes(program, cleaned, second)
    assert_same(without, with_cleanup)
    assert delta(base).live_nodes == 0
    assert second.stats().live_nodes == 0
    for tape in (tg.current_tape(), second):
        with tg.use_tape(tape):
            checked_cleanup()
    assert delta(base) == GS() and second.stats() == GS()


# ----------------------------------------------------------------------------- targeted cases


def test_hanging_nodes_next_to_a_live_parameter_are_swept(base: tg.GraphStats) -> None:
    # tracel-ai/burn#4970: Burn skipped any graph holding one live node
    w = tg.randn((3, 2), key=0).require_grad()
    x = tg.ones((4, 3))
    for _ in range(5):
        (x @ w).relu().sum()  # never backwarded
    got = delta(base)
    assert got == GS(
        graphs=1, nodes=16, leaves=1, live_nodes=1, hanging_nodes=15, saved_bytes=got.saved_bytes
    )
    stats = checked_cleanup()
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed) == (15, 0, 0)
    assert stats.bytes_freed == got.saved_bytes > 0
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    del w


def test_a_dead_chain_of_depth_10000_goes_in_one_call(base: tg.GraphStats) -> None:
    depth = 10_000
    t = tg.zeros(2).require_grad()
    for _ in range(depth):
        t = t + 1.0
    del t  # the whole chain and its leaf are hanging now (iteratively, no recursion)
    assert delta(base) == GS(
        graphs=1,
        nodes=depth + 1,
        leaves=1,
        hanging_nodes=depth + 1,
        hanging_leaves=1,
        dead_graphs=1,
    )
    stats = tg.graph_cleanup()
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed) == (depth + 1, 1, 1)
    assert delta(base) == GS()


def test_a_consumed_chain_of_depth_10000_goes_without_cleanup(base: tg.GraphStats) -> None:
    depth = 10_000
    w = tg.ones(2).require_grad()
    t = w
    for _ in range(depth):
        t = t * 1.0
    t.sum().backward()
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), np.ones(2, np.float32))
    del t
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    del w
    assert delta(base) == GS()


def test_graphs_split_when_a_sweep_removes_the_nodes_joining_them(base: tg.GraphStats) -> None:
    params = [tg.randn((3,), key=k).require_grad() for k in range(4)]
    joined = params[0]
    for p in params[1:]:
        joined = joined * p  # one graph of four parameters
    assert delta(base).graphs == 1
    del joined
    assert delta(base).graphs == 1 and delta(base).hanging_nodes == 3
    stats = checked_cleanup()
    assert (stats.nodes_removed, stats.graphs_removed) == (3, 0)
    assert delta(base) == GS(graphs=4, nodes=4, leaves=4, live_nodes=4)
    del params


@tg.jax_op
def _scaled(x: jax.Array) -> jax.Array:
    """2x; as a ``jax_op`` its node saves its input array itself (no copy)."""
    return x * 2.0


def test_bytes_freed_counts_arrays_no_remaining_node_holds(base: tg.GraphStats) -> None:
    start = max((r.id for r in tg.snapshot().nodes), default=-1)
    w = tg.randn((64, 32), key=1).require_grad()
    nbytes = int(w.data.nbytes)  # 8 KiB
    first, second = _scaled(w), _scaled(w)  # both nodes save w's array: the same object
    snap, _ = check_tape()
    mine = [r for r in snap.nodes if r.id > start]
    assert [r.saved_bytes for r in mine if r.op == "_scaled"] == [nbytes, nbytes]
    held = delta(base).saved_bytes
    # rule 7: the shared array counts once on the tape, once in each record
    assert sum(r.saved_bytes for r in mine) == held + nbytes
    del second
    stats = checked_cleanup()  # the array is still held by `first`'s node
    assert (stats.nodes_removed, stats.bytes_freed) == (1, 0)
    assert delta(base).saved_bytes == held
    del first
    stats = checked_cleanup()  # now no remaining node holds it (the tensor w still does)
    assert (stats.nodes_removed, stats.bytes_freed) == (1, nbytes)
    assert delta(base).saved_bytes == held - nbytes == 0
    del w
    checked_cleanup()
    assert delta(base) == GS()


def test_cleanup_from_inside_a_vjp(base: tg.GraphStats) -> None:
    # rule 6: safe at any time, from any thread; VJPs never run under the tape's lock
    seen: list[tg.CleanupStats] = []

    def forward(x: jax.Array) -> tuple[jax.Array, tuple[jax.Array]]:
        return jnp.sin(x), (x,)

    def vjp(res: tuple[jax.Array], g: jax.Array) -> tuple[jax.Array]:
        seen.append(tg.graph_cleanup())
        return (g * jnp.cos(res[0]),)

    sin = tg.Op(forward, name="sin_cleaning")
    sin.defvjp(vjp)
    w = tg.randn((3,), key=2).require_grad()
    tg.zeros(2).require_grad()  # a hanging leaf for the inner cleanup to remove
    loss = (sin(w) * 2.0).sum()
    loss.backward()
    assert [(s.nodes_removed, s.leaves_removed) for s in seen] == [(1, 1)]
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), 2.0 * np.cos(w.numpy()), rtol=1e-6)
    del loss
    assert delta(base) == GS(graphs=1, nodes=1, leaves=1, live_nodes=1)
    del w
