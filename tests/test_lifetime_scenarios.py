"""Graph lifetime end to end (docs/design.md "Graph lifetime"): the worked example line by line, the
scenarios of issue 3 with exact values, rule 4 in every policy, and freeing by refcount alone."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _recount import check_tape, checked_cleanup, delta
from _support import gc_off, origin_here

import tapegrad as tg

GS = tg.GraphStats


def expect(base: tg.GraphStats, **fields: int) -> None:
    """Assert the tape's stats relative to ``base``: ``fields`` exactly, every other count 0.

    ``saved_bytes`` is checked exactly by ``check_tape()`` (rule 7, recounted by identity);
    it is compared here only when given.
    """
    check_tape()
    got = delta(base)
    if "saved_bytes" not in fields:
        fields["saved_bytes"] = got.saved_bytes
    assert got == GS(**fields)


@contextmanager
def policy(name: str) -> Iterator[None]:
    """Run a block under a cleanup policy, restoring "manual" after."""
    if name == "threshold":
        tg.set_cleanup_policy("threshold", threshold=10_000)
    else:
        tg.set_cleanup_policy(name)
    try:
        yield
    finally:
        tg.set_cleanup_policy("manual")


def new_arrays(shape: tuple[int, ...], before: dict[int, jax.Array]) -> list[jax.Array]:
    """Live JAX arrays of ``shape`` that were not in ``before``."""
    return [a for a in jax.live_arrays() if a.shape == shape and id(a) not in before]


def live_of(shape: tuple[int, ...]) -> dict[int, jax.Array]:
    """The live JAX arrays of ``shape`` now, by id (holding them keeps the ids unique)."""
    return {id(a): a for a in jax.live_arrays() if a.shape == shape}


# ----------------------------------------------------------------------------- worked example


def test_worked_example_line_by_line(base: tg.GraphStats) -> None:
    x = tg.ones((4, 3))  # no grad: nodes 0
    expect(base)

    def f(w: tg.Tensor) -> tg.Tensor:
        return ((x @ w) ** 2).mean()

    w = tg.randn((3, 2), key=0).require_grad()  # nodes 1, graphs 1, hanging_nodes 0
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)

    loss = ((x @ w).tanh() ** 2).sum()  # nodes 5 (leaf + matmul, tanh, pow, sum)
    expect(base, graphs=1, nodes=5, leaves=1, live_nodes=2)
    assert [r.op for r in tg.snapshot().nodes][-5:] == [
        "leaf",
        "matmul",
        "tanh",
        "integer_pow",
        "sum",
    ]

    loss.backward()  # nodes 2, graphs 2: w and the consumed loss
    expect(base, graphs=2, nodes=2, leaves=1, live_nodes=2, saved_bytes=0)
    (marker,) = [r for r in tg.snapshot().nodes if r.op == "sum"]
    assert marker.consumed and marker.parents == () and marker.useful

    del loss  # nodes 1: only w (rule 4)
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)

    junk = tg.ones(3).require_grad()
    del junk  # nodes 2, graphs 2, hanging_leaves 1
    expect(
        base,
        graphs=2,
        nodes=2,
        leaves=2,
        live_nodes=1,
        hanging_nodes=1,
        hanging_leaves=1,
        dead_graphs=1,
        saved_bytes=0,
    )

    e = (x @ w).sum().item()  # nodes 4, hanging_nodes 3 (matmul, sum, junk)
    assert isinstance(e, float)
    expect(
        base,
        graphs=2,
        nodes=4,
        leaves=2,
        live_nodes=1,
        hanging_nodes=3,
        hanging_leaves=1,
        dead_graphs=1,
    )
    held = delta(base).saved_bytes
    assert held > 0  # the matmul's residuals

    stats = checked_cleanup()  # removed 3 (leaves 1, graphs 1); nodes 1
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed) == (3, 1, 1)
    assert stats.bytes_freed == held
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)

    running: float | tg.Tensor = 0.0
    for _ in range(3):
        step = f(w)
        step.backward()
        running = running + step
    # nodes 7: w, 3 consumed loss markers, 3 adds (useful: running is live); hanging 0
    expect(base, graphs=2, nodes=7, leaves=1, live_nodes=3, saved_bytes=0)
    ops = sorted(r.op for r in tg.snapshot().nodes if r.op != "leaf")
    assert ops == ["add"] * 3 + ["mean"] * 3

    assert isinstance(running, tg.Tensor)
    del running, step
    # the adds (one chain) are unconsumed, so hanging until a sweep; the markers go at once
    expect(
        base,
        graphs=2,
        nodes=4,
        leaves=1,
        live_nodes=1,
        hanging_nodes=3,
        dead_graphs=1,
        saved_bytes=0,
    )
    assert checked_cleanup().nodes_removed == 3
    del w
    expect(base)  # a leaf a backward reached goes when its tensor dies (rule 4)


# ----------------------------------------------------------------------------- issue 3 scenarios


def test_scenario_1_twenty_thousand_dropped_leaves(base: tg.GraphStats) -> None:
    n = 20_000
    for _ in range(n):
        t = tg.zeros((2, 2)).require_grad()
        del t
    expect(
        base,
        graphs=n,
        nodes=n,
        leaves=n,
        hanging_nodes=n,
        hanging_leaves=n,
        dead_graphs=n,
        saved_bytes=0,
    )
    stats = tg.graph_cleanup()
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed) == (n, n, n)
    assert stats.bytes_freed == 0
    expect(base)
    again = tg.graph_cleanup()
    assert (again.nodes_removed, again.leaves_removed, again.graphs_removed) == (0, 0, 0)


def _jnp_loss(x: jax.Array) -> Callable[[jax.Array], jax.Array]:
    return lambda w: jnp.mean((x @ w) ** 2)


def test_scenario_2_running_total_kept_as_a_tensor(base: tg.GraphStats) -> None:
    x = tg.randn((4, 3), key=1)
    w = tg.randn((3, 2), key=2).require_grad()
    reference = jax.grad(_jnp_loss(x.data))
    running: float | tg.Tensor = 0.0
    steps = 30
    for _ in range(steps):
        loss = ((x @ w) ** 2).mean()
        where = origin_here(-1)
        loss.backward()
        assert w.grad is not None
        np.testing.assert_allclose(w.grad.numpy(), reference(w.data), rtol=1e-5, atol=1e-6)
        with tg.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
        running = running + loss
        del loss
    # w, `steps` consumed markers, `steps` adds: one graph kept alive by `running`
    expect(base, graphs=2, nodes=1 + 2 * steps, leaves=1, live_nodes=2, saved_bytes=0)

    assert isinstance(running, tg.Tensor)
    w.grad = tg.ones((3, 2))
    with pytest.raises(RuntimeError, match="retain_graph") as info:
        running.backward()
    assert isinstance(info.value, tg.GraphConsumedError)
    message = str(info.value)
    assert "'mean'" in message and where in message  # the op and its origin
    assert ".item()" in message and ".detach()" in message  # the fixes (rule 1)
    np.testing.assert_array_equal(w.grad.numpy(), np.ones((3, 2), np.float32))  # untouched
    del info  # its traceback holds the frame that holds `running`
    expect(base, graphs=2, nodes=1 + 2 * steps, leaves=1, live_nodes=2, saved_bytes=0)

    del running
    # the chain of adds hangs until a sweep; the consumed markers went at once (rule 4)
    expect(
        base,
        graphs=2,
        nodes=1 + steps,
        leaves=1,
        live_nodes=1,
        hanging_nodes=steps,
        dead_graphs=1,
        saved_bytes=0,
    )
    assert checked_cleanup().nodes_removed == steps
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)  # only w


def test_scenario_3_eval_loop_under_grad_mode(base: tg.GraphStats, start: int) -> None:
    x = tg.randn((4, 3), key=3)
    w = tg.randn((3, 2), key=4).require_grad()
    evals = 50
    for _ in range(evals):
        value = (x @ w).tanh().sum().item()
        assert np.isfinite(value)
    hanging = 3 * evals  # matmul, tanh, sum per pass
    expect(
        base,
        graphs=1,
        nodes=1 + hanging,
        leaves=1,
        live_nodes=1,
        hanging_nodes=hanging,
    )
    mine = [r for r in tg.snapshot().nodes if r.id > start]
    assert [r.useful for r in mine] == [True] + [False] * hanging  # the parameter, then passes
    assert mine[0].tensor is not None and mine[0].tensor() is w

    stats = checked_cleanup()
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed) == (hanging, 0, 0)
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)

    loss = (x @ w).tanh().sum()
    loss.backward()
    assert w.grad is not None
    expected = jax.grad(lambda v: jnp.sum(jnp.tanh(x.data @ v)))(w.data)
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=1e-5, atol=1e-6)
    del loss
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)


def test_scenario_4_training_loop_needs_no_cleanup(base: tg.GraphStats) -> None:
    x = tg.randn((8, 3), key=5)
    target = tg.randn((8, 2), key=6)
    w = tg.randn((3, 2), key=7).require_grad()
    b = tg.zeros(2).require_grad()

    def jnp_loss(w_: jax.Array, b_: jax.Array) -> jax.Array:
        return jnp.mean((jnp.tanh(x.data @ w_ + b_) - target.data) ** 2)

    reference = jax.jit(jax.grad(jnp_loss, argnums=(0, 1)))
    for _ in range(20):
        gw, gb = reference(w.data, b.data)
        loss = (((x @ w + b).tanh() - target) ** 2).mean()
        loss.backward()
        del loss
        stats = tg.graph_stats()
        assert delta(base, stats).nodes == 2  # the parameters, and nothing else
        assert delta(base, stats).saved_bytes == 0
        assert delta(base, stats).hanging_nodes == 0
        assert w.grad is not None and b.grad is not None
        np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.grad.numpy(), gb, rtol=1e-5, atol=1e-6)
        with tg.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
        w.grad = b.grad = None
    expect(base, graphs=2, nodes=2, leaves=2, live_nodes=2, saved_bytes=0)


def test_scenario_5_one_mib_saved_array_is_freed(base: tg.GraphStats) -> None:
    shape = (1024, 256)  # float32: exactly 1 MiB
    mib = 1024 * 1024
    w = tg.ones(shape).require_grad()
    before = live_of(shape)
    y = w.exp()  # exp saves its output: one 1 MiB residual
    del y  # the tensor and its own array go; the residual stays with the hanging node
    (saved,) = new_arrays(shape, before)
    ref = weakref.ref(saved)
    del saved
    expect(
        base,
        graphs=1,
        nodes=2,
        leaves=1,
        live_nodes=1,
        hanging_nodes=1,
        saved_bytes=mib,
    )
    (node,) = [r for r in tg.snapshot().nodes if r.op == "exp"]
    assert node.saved_bytes == mib and not node.useful
    with gc_off():
        stats = checked_cleanup()
        assert (stats.nodes_removed, stats.bytes_freed) == (1, mib)
        assert ref() is None  # freed by refcount, at once
        assert new_arrays(shape, before) == []  # jax.live_arrays agrees
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)


# ----------------------------------------------------------------------------- rule 4


@pytest.mark.parametrize("name", ["manual", "auto", "threshold"])
def test_rule_4_what_a_backward_consumed_goes_at_once(
    base: tg.GraphStats, start: int, name: str
) -> None:
    with policy(name):
        x = tg.randn((4, 3), key=8)
        w = tg.randn((3, 2), key=9).require_grad()
        v = tg.randn((2,), key=10).require_grad()
        h = x @ w  # kept alive across the backward
        loss = (h.tanh() ** 2).sum() + (v * 3.0).sum()
        del v  # a leaf reachable only through the graph
        expect(base, graphs=1, nodes=9, leaves=2, live_nodes=3)

        loss.backward()
        # tanh, power, sum, multiply, sum and v are freed at once; h and loss stay as markers
        expect(base, graphs=3, nodes=3, leaves=1, live_nodes=3, saved_bytes=0)
        for rec in tg.snapshot().nodes:
            if rec.id > start and rec.kind == "op":
                assert rec.consumed and rec.parents == () and rec.saved_bytes == 0

        del loss
        expect(base, graphs=2, nodes=2, leaves=1, live_nodes=2, saved_bytes=0)
        del h
        expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)
        del w  # reached by a backward: freed when its tensor dies, with no cleanup
        expect(base)


@pytest.mark.parametrize("name", ["manual", "threshold"])
def test_rule_4_with_retain_graph_frees_reached_leaves_only(base: tg.GraphStats, name: str) -> None:
    with policy(name):
        w = tg.randn((3,), key=11).require_grad()
        loss = (w.sin() * 2.0).sum()
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)  # nothing consumed: a second pass works
        assert w.grad is not None
        np.testing.assert_allclose(w.grad.numpy(), 4.0 * np.cos(w.numpy()), rtol=1e-6)
        del loss
        # unconsumed op nodes wait for a sweep (rule 5); w is still live
        expect(base, graphs=1, nodes=4, leaves=1, live_nodes=1, hanging_nodes=3)
        del w  # reached: freed the moment it is not useful, in every policy
        expect(base, graphs=1, nodes=3, hanging_nodes=3, dead_graphs=1)
        assert checked_cleanup().nodes_removed == 3
        expect(base)


def test_consumed_marker_keeps_its_ancestors_unreachable(base: tg.GraphStats) -> None:
    w = tg.randn((3,), key=12).require_grad()
    h = w.tanh()
    total = h.sum()
    total.backward()
    later = h * 2.0  # a new op on a consumed, live tensor
    expect(base, graphs=3, nodes=4, leaves=1, live_nodes=4)
    (h_rec,) = [r for r in tg.snapshot().nodes if r.op == "tanh"]
    assert h_rec.consumed and h_rec.parents == ()
    with pytest.raises(tg.GraphConsumedError, match="retain_graph"):
        later.sum().backward()
    assert w.grad is not None  # from the first pass only
    np.testing.assert_allclose(w.grad.numpy(), 1 - np.tanh(w.numpy()) ** 2, rtol=1e-6)
    del later, total, h, w
    # the `sum` of the failed call and `later` are unconsumed: hanging until a sweep
    expect(base, graphs=1, nodes=2, hanging_nodes=2, dead_graphs=1)
    assert checked_cleanup().nodes_removed == 2
    expect(base)


def test_a_vjp_that_raises_leaves_a_consistent_tape(base: tg.GraphStats) -> None:
    # rule 2: the exception propagates, no .grad is written, visited nodes stay consumed;
    # rule 4 then frees them as usual, and what the pass never reached is left as it was
    def forward(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
        return x * 1.0, ()

    def vjp(res: tuple[()], g: jax.Array) -> tuple[jax.Array]:
        raise ArithmeticError("planted failure")

    failing = tg.Op(forward, name="failing_vjp")
    failing.defvjp(vjp)
    w = tg.randn((3,), key=15).require_grad()
    loss = failing(w).tanh().sum()
    with pytest.raises(ArithmeticError, match="planted"):
        loss.backward()
    assert w.grad is None
    # sum and tanh ran and were consumed (tanh, not live, went at once); the failing node
    # never finished: unconsumed, and hanging now that tanh let go of it
    expect(base, graphs=2, nodes=3, leaves=1, live_nodes=2, hanging_nodes=1, saved_bytes=0)
    recs = {r.op: r for r in tg.snapshot().nodes if r.op in ("sum", "failing_vjp")}
    assert recs["sum"].consumed and not recs["failing_vjp"].consumed
    with pytest.raises(tg.GraphConsumedError):
        loss.backward()
    del loss
    assert checked_cleanup().nodes_removed == 1
    expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)
    del w


# ----------------------------------------------------------------------------- no cycles


def test_a_user_cycle_keeps_a_tensor_live_until_the_collector_runs(base: tg.GraphStats) -> None:
    with gc_off():
        box: list[object] = [tg.zeros(2).require_grad()]
        box.append(box)  # the user's cycle
        del box
        for _ in range(2):
            stats = tg.graph_cleanup()  # tapegrad never calls gc.collect() on its own
            assert stats.nodes_removed == 0
        expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)
        gc.collect()  # the user's (or Python's) collection: now the leaf hangs
        expect(
            base,
            graphs=1,
            nodes=1,
            leaves=1,
            hanging_nodes=1,
            hanging_leaves=1,
            dead_graphs=1,
            saved_bytes=0,
        )
        assert checked_cleanup().leaves_removed == 1
    expect(base)


def test_dropping_tensors_frees_arrays_by_refcount_alone(base: tg.GraphStats) -> None:
    shape = (7, 5)
    before = live_of(shape)
    with gc_off():
        const = tg.ones(shape)
        w = tg.randn(shape, key=13).require_grad()
        h = (w * const).exp()  # saves w, const (copies) and its output
        loss = h.sum()
        refs = [weakref.ref(t) for t in (const, w, h, loss)]
        refs += [weakref.ref(a) for a in new_arrays(shape, before)]
        loss.backward()
        del const, w, h, loss
        assert [r() for r in refs] == [None] * len(refs)  # tensors, values and residuals
        assert new_arrays(shape, before) == []
        expect(base)


@pytest.mark.parametrize("name", ["manual", "auto"])
def test_dropped_graph_frees_its_residuals_without_the_collector(
    base: tg.GraphStats, name: str
) -> None:
    shape = (6, 5)
    before = live_of(shape)
    with gc_off(), policy(name):
        w = tg.randn(shape, key=14).require_grad()
        y = (w.sin() * w).tanh()  # never backwarded
        wr_y = weakref.ref(y)
        del y
        assert wr_y() is None  # the tensor itself goes by refcount
        residuals = [weakref.ref(a) for a in new_arrays(shape, before) if a is not w.data]
        assert residuals  # sin, multiply and tanh saved arrays of this shape
        if name == "manual":
            assert delta(base).hanging_nodes == 3
            checked_cleanup()
        else:
            tg.graph_stats()  # any entry point applies the queued death
        assert [r() for r in residuals] == [None] * len(residuals)
        expect(base, graphs=1, nodes=1, leaves=1, live_nodes=1, saved_bytes=0)
        del w
        if name == "manual":
            checked_cleanup()
        expect(base)
        assert new_arrays(shape, before) == []
