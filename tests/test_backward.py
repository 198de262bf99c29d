"""The reverse pass (docs/design.md rules 1-3, docs/api.md "Gradients"): graph shapes, broadcast
reduction, ``grad=``, ``.grad`` writing and accumulation, ``retain_grad``/``retain_graph``,
rejected backwards, ``tg.grad``, deep chains, raising VJPs and node origins."""

from __future__ import annotations

import gc
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import M, X, assert_close, error_of, grad_of, origin_here, without_frames

import tapegrad as tg
from tapegrad._tensor import node_of
from tapegrad.op import Op

# ----------------------------------------------------------------------------- graph shapes


def test_diamond_graph_matches_jax_grad() -> None:
    x = tg.tensor(X).require_grad()
    a = x * 2.0
    b = x.exp()
    y = (a * b).sum()
    y.backward()
    assert_close(grad_of(x), jax.grad(lambda v: jnp.sum((v * 2.0) * jnp.exp(v)))(X))


def test_fan_out_accumulates_every_branch() -> None:
    x = tg.tensor(X).require_grad()
    y = (x * x).sum() + (x * 3.0).sum() + x.sin().sum() + x.sum()
    y.backward()
    ref = jax.grad(lambda v: jnp.sum(v * v) + jnp.sum(v * 3.0) + jnp.sum(jnp.sin(v)) + v.sum())
    assert_close(grad_of(x), ref(X))


def test_a_first_pass_compiles_its_cotangent_sums_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass of a new structure starts compiling, ahead, one cotangent sum per shape
    and dtype of a node used twice or more (here the leaf ``w`` and the product ``h``),
    deepest first; a node used once needs none, and the structure's next pass starts
    nothing."""
    from tapegrad import backward

    started: list[tuple[Any, ...]] = []
    monkeypatch.setattr(backward._accumulate, "compile_ahead", lambda *a: started.append(a))
    w = tg.tensor(np.ones((3, 7), np.float32)).require_grad()
    b = tg.tensor(np.ones((3, 5), np.float32)).require_grad()

    def step() -> None:
        h = w * w  # w: two useful children
        (h.sum() + h.mean() + b.sum()).backward()  # h: two; b: one

    step()
    want = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((3, 7), (3, 7))]
    assert started == [tuple(want)]  # w first (deepest), h of the same shape and dtype: one
    step()
    assert len(started) == 1
    np.testing.assert_allclose(w.grad.numpy(), 2 * 2 * (1 + 1 / 21) * np.ones((3, 7)), rtol=1e-6)


def test_shared_intermediate_used_twice() -> None:
    x = tg.tensor(X).require_grad()
    h = x.tanh()
    y = (h * h + h).sum()
    y.backward()
    assert_close(grad_of(x), jax.grad(lambda v: jnp.sum(jnp.tanh(v) ** 2 + jnp.tanh(v)))(X))


def test_broadcast_operands_receive_gradients_summed_to_their_shape() -> None:
    w = tg.tensor(X.reshape(1, 3)).require_grad()  # (1, 3) against (2, 3)
    b = tg.tensor(np.float32(0.5)).require_grad()  # () against (2, 3)
    c = tg.tensor(np.array([[1.0], [2.0]], np.float32)).require_grad()  # (2, 1)
    y = ((tg.tensor(M) * w + b) * c).sum()
    y.backward()

    def f(w: Any, b: Any, c: Any) -> Any:
        return jnp.sum((M * w + b) * c)

    gw, gb, gc = jax.grad(f, argnums=(0, 1, 2))(w.data, b.data, c.data)
    assert grad_of(w).shape == (1, 3) and grad_of(b).shape == () and grad_of(c).shape == (2, 1)
    assert_close(grad_of(w), gw)
    assert_close(grad_of(b), gb)
    assert_close(grad_of(c), gc)


def test_vjps_run_in_descending_node_id() -> None:
    calls: list[str] = []

    def spy(name: str) -> Op:
        op = Op(lambda a: (a * 1.0, ()), name=name)
        op.defvjp(lambda res, g: (calls.append(name), g)[1:])
        return op

    first, second, third = spy("first"), spy("second"), spy("third")
    x = tg.tensor(X).require_grad()
    a = first(x)  # lower id
    b = second(x)
    c = third(a + b)  # highest id
    c.sum().backward()
    assert calls == ["third", "second", "first"]


def test_a_cotangent_is_dropped_once_its_vjp_ran() -> None:
    seen: dict[str, Any] = {}

    def middle_vjp(res: Any, g: jax.Array) -> tuple[jax.Array]:
        seen["middle"] = weakref.ref(g)  # not the seed: the caller holds that one
        return (g * 2.0,)

    def lower_vjp(res: Any, g: jax.Array) -> tuple[jax.Array]:
        seen["alive_in_lower"] = seen["middle"]() is not None
        return (g * 3.0,)

    lower = Op(lambda a: (a + 0.0, ()), name="lower")
    lower.defvjp(lower_vjp)
    middle = Op(lambda a: (a + 0.0, ()), name="middle")
    middle.defvjp(middle_vjp)
    x = tg.tensor(X).require_grad()
    (middle(lower(x)) * 5.0).backward(np.ones(3, np.float32))
    assert seen["alive_in_lower"] is False
    assert_close(grad_of(x), np.full(3, 30.0))


# ----------------------------------------------------------------------------- roots and grad=


def test_leaf_as_root() -> None:
    w = tg.tensor(X).require_grad()
    w.backward(np.array([1.0, 2.0, 3.0], np.float32))
    assert grad_of(w).tolist() == [1.0, 2.0, 3.0]
    s = tg.tensor([4.0]).require_grad()
    s.backward()
    assert grad_of(s).tolist() == [1.0]


@pytest.mark.parametrize(
    "make", [tg.tensor, np.asarray, jnp.asarray], ids=["tensor", "numpy", "jax"]
)
def test_grad_argument_for_non_scalar_output(make: Callable[[Any], Any]) -> None:
    x = tg.tensor(M).require_grad()
    y = x.sin() * 2.0
    cot = np.arange(6, dtype=np.float32).reshape(2, 3)
    y.backward(make(cot))
    _, pullback = jax.vjp(lambda v: jnp.sin(v) * 2.0, M)
    assert_close(grad_of(x), pullback(cot)[0])


def test_grad_shape_mismatch_is_value_error_and_changes_nothing() -> None:
    x = tg.tensor(X).require_grad()
    y = x * 2.0
    stats = tg.graph_stats()
    err = error_of(ValueError, y.backward, np.ones(4, np.float32))
    assert "(4,)" in str(err) and "(3,)" in str(err)
    assert x.grad is None
    assert tg.graph_stats() == stats
    y.backward(np.ones(3, np.float32))  # the graph was not consumed
    assert grad_of(x).tolist() == [2.0, 2.0, 2.0]


def test_missing_grad_on_multi_element_output_is_runtime_error_and_changes_nothing() -> None:
    x = tg.tensor(X).require_grad()
    y = x * 2.0
    stats = tg.graph_stats()
    err = error_of(RuntimeError, y.backward)
    assert "grad=" in str(err) and ".sum()" in str(err)
    assert x.grad is None and tg.graph_stats() == stats
    y.sum().backward()
    assert grad_of(x).tolist() == [2.0, 2.0, 2.0]


def test_one_element_non_scalar_output_needs_no_grad() -> None:
    x = tg.tensor(X).require_grad()
    (x * x).sum(keepdims=True).backward()  # shape (1,)
    assert_close(grad_of(x), 2 * X)


# ----------------------------------------------------------------------------- .grad


def test_grad_is_written_in_the_leaf_shape_and_dtype_without_a_node() -> None:
    w16 = tg.tensor(X.reshape(1, 3), dtype=tg.float16).require_grad()
    y = (w16.astype(tg.float32) * tg.tensor(M)).sum()
    y.backward()
    g = w16.grad
    assert g is not None
    assert g.shape == (1, 3) and g.dtype == np.float16
    assert g.requires_grad is False and g.is_leaf
    assert_close(g.numpy(), M.sum(0, keepdims=True).astype(np.float16), rtol=1e-3)
    nodes = tg.graph_stats().nodes
    _ = g * 2  # using a gradient records nothing
    assert tg.graph_stats().nodes == nodes


def test_grad_accumulates_across_backward_calls() -> None:
    w = tg.tensor(X).require_grad()
    (w * 2.0).sum().backward()
    first = w.grad
    (w * w).sum().backward()
    assert_close(grad_of(w), 2.0 + 2 * X)
    assert first is not None and first.tolist() == [2.0, 2.0, 2.0]  # a new tensor, not mutated
    w.grad = None
    (w * 5.0).sum().backward()
    assert grad_of(w).tolist() == [5.0, 5.0, 5.0]


def test_grad_is_written_once_at_the_end_of_the_pass() -> None:
    written: list[Any] = []

    def watch(res: Any, g: jax.Array) -> tuple[jax.Array]:
        written.append(w.grad)  # the leaf's cotangent is complete, but .grad is not written yet
        return (g,)

    op = Op(lambda a: (a + 0.0, ()), name="watch")
    op.defvjp(watch)
    w = tg.tensor(X).require_grad()
    v = tg.tensor(X).require_grad()
    y = (op(v) + w * 3.0).sum()  # w's branch runs first (higher id); watch runs after
    y.backward()
    assert written == [None]
    assert grad_of(w).tolist() == [3.0, 3.0, 3.0]


def test_non_leaves_get_no_grad_unless_retained() -> None:
    w = tg.tensor(X).require_grad()
    h = w * 3.0
    k = h.exp()
    h.retain_grad()
    y = k.sum()
    y.retain_grad()
    y.backward()
    assert_close(grad_of(h), np.exp(3.0 * X), rtol=1e-5)
    assert grad_of(y).tolist() == 1.0
    with pytest.warns(UserWarning, match="not a leaf"):  # as PyTorch warns
        assert k.grad is None
    assert_close(grad_of(w), 3.0 * np.exp(3.0 * X), rtol=1e-5)
    err = error_of(RuntimeError, tg.ones(2).retain_grad)
    assert "require_grad" in str(err)


def test_retain_grad_accumulates_too() -> None:
    w = tg.tensor(X).require_grad()
    h = w * 2.0
    h.retain_grad()
    y = (h * h).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(grad_of(h), 2 * (2 * 2 * X))


def test_dropped_leaf_gets_nothing_and_the_pass_succeeds() -> None:
    w = tg.tensor(X).require_grad()
    v = tg.tensor(X).require_grad()
    y = (w * v).sum()
    del w
    y.backward()
    assert_close(grad_of(v), X)


# ----------------------------------------------------------------------------- retain_graph


def test_retain_graph_twice_then_a_third_backward_raises() -> None:
    w = tg.tensor(X).require_grad()
    y = (w * w).sum()
    line = origin_here(-1)
    y.backward(retain_graph=True)
    y.backward()
    assert_close(grad_of(w), 2 * (2 * X))
    err = error_of(RuntimeError, y.backward)
    assert isinstance(err, tg.GraphConsumedError)
    msg = str(err)
    assert "retain_graph" in msg
    assert "'sum'" in msg
    assert line in msg
    assert "test_retain_graph_twice_then_a_third_backward_raises" in msg
    assert ".item()" in msg and ".detach()" in msg
    assert_close(grad_of(w), 2 * (2 * X))  # unchanged by the rejected call


def test_consumed_ancestor_names_the_first_consumed_op_and_its_origin() -> None:
    w = tg.tensor(X).require_grad()
    h = w.tanh()
    line = origin_here(-1)
    h.sum().backward()
    z = h * 2.0
    err = error_of(tg.GraphConsumedError, z.sum().backward)
    assert "'tanh'" in str(err)
    assert line in str(err)


def test_retain_graph_consumes_nothing_and_default_consumes_every_visited_op() -> None:
    w = tg.tensor(X).require_grad()
    y = (w * 2.0).exp().sum()
    y.backward(retain_graph=True)
    ops = [r for r in tg.snapshot().nodes if r.kind == "op"]
    assert {r.op for r in ops} == {"multiply", "exp", "sum"}
    assert not any(r.consumed for r in ops)
    y.backward()
    records = {r.op: r for r in tg.snapshot().nodes}
    assert records["sum"].consumed
    assert not records["leaf"].consumed  # leaves are never consumed
    assert_close(grad_of(w), 2 * 2.0 * np.exp(2.0 * X), rtol=1e-5)


def test_rejected_backward_changes_nothing_and_a_fresh_branch_still_works() -> None:
    ran: list[str] = []
    spy = Op(lambda a: (a * 1.0, ()), name="spy")
    spy.defvjp(lambda res, g: (ran.append("spy"), g)[1:])
    w = tg.tensor(X).require_grad()
    spent = (w * 2.0).sum()
    spent.backward()
    before_grad = grad_of(w).copy()
    fresh = (spy(w) * w).sum()
    both = fresh + spent  # the fresh branch has the higher ids: its VJPs would run first
    stats = tg.graph_stats()
    consumed = {r.id: r.consumed for r in tg.snapshot().nodes}
    err = error_of(RuntimeError, both.backward)
    assert "retain_graph" in str(err)
    assert tg.graph_stats() == stats
    assert {r.id: r.consumed for r in tg.snapshot().nodes} == consumed
    np.testing.assert_array_equal(grad_of(w), before_grad)
    assert ran == []  # rule 1: raised before any VJP ran
    fresh.backward()
    assert ran == ["spy"]
    assert_close(grad_of(w), before_grad + 2 * X)


def test_two_losses_sharing_only_a_parameter_add_up() -> None:
    w = tg.tensor(X).require_grad()
    loss1 = (w * 3.0).sum()
    loss2 = (w * w).sum()
    loss1.backward()
    loss2.backward()
    assert_close(grad_of(w), 3.0 + 2 * X)


def test_create_graph_retains_the_graph_and_grad_requires_grad() -> None:
    """retain_graph defaults to create_graph: a second backward works; .grad has a node."""
    w = tg.tensor(X).require_grad()
    y = (w * w).sum()
    y.backward(create_graph=True)
    assert w.grad is not None and w.grad.requires_grad
    y.backward()  # the graph was retained
    assert_close(grad_of(w), 4 * X)


# ----------------------------------------------------------------------------- tg.grad


def test_grad_returns_a_tuple_and_leaves_dot_grad_alone() -> None:
    x = tg.tensor(X).require_grad()
    u = tg.tensor([3.0]).require_grad()
    out = (x * x).sum()
    gx, gu = tg.grad(out, [x, u])
    assert_close(gx.numpy(), 2 * X)
    assert gu.tolist() == [0.0] and gu.dtype == np.float32  # unrelated input: zeros
    assert gx.requires_grad is False and gu.requires_grad is False
    assert x.grad is None and u.grad is None
    single = tg.grad((x * 4.0).sum(), x)
    assert isinstance(single, tuple) and len(single) == 1
    assert single[0].tolist() == [4.0, 4.0, 4.0]


def test_grad_with_respect_to_non_leaves() -> None:
    x = tg.tensor(X).require_grad()
    h = x * 2.0
    out = (h * h).sum()
    (gh,) = tg.grad(out, h)
    assert_close(gh.numpy(), 2 * (2 * X))
    assert h._grad is None and x.grad is None  # tg.grad leaves .grad alone
    k = x.exp()
    out2 = (k * 3.0).sum()
    gk, gx = tg.grad(out2, [k, x])
    assert gk.tolist() == [3.0, 3.0, 3.0]
    assert_close(gx.numpy(), 3.0 * np.exp(X), rtol=1e-5)


def test_grad_with_several_outputs_and_grad_outputs() -> None:
    x = tg.tensor(X).require_grad()
    y1, y2 = x * 2.0, x.sin()
    cot1, cot2 = np.array([1.0, 2.0, 3.0], np.float32), np.array([-1.0, 0.5, 2.0], np.float32)
    (gx,) = tg.grad([y1, y2], [x], [cot1, tg.tensor(cot2)])
    assert_close(gx.numpy(), 2.0 * cot1 + np.cos(X) * cot2, rtol=1e-5)
    err = error_of(ValueError, tg.grad, [x * 1.0, x * 2.0], x, [cot1])
    assert "one per output" in str(err)


def test_grad_consumes_unless_retain_graph() -> None:
    x = tg.tensor(X).require_grad()
    y = (x * x).sum()
    (g1,) = tg.grad(y, x, retain_graph=True)
    (g2,) = tg.grad(y, x)
    assert_close(g1.numpy(), g2.numpy())
    err = error_of(RuntimeError, tg.grad, y, x)
    assert "retain_graph" in str(err)


def _consumed_below_h() -> tuple[tg.Tensor, tg.Tensor]:
    """A leaf ``a`` and ``h = a.sin()``, whose graph (``h``'s own node) a training backward
    consumed: the state of the features after ``loss.backward()``."""
    a = tg.tensor(X).require_grad()
    h = a.sin()
    (h * h).sum().backward()
    return a, h


def _nothing_left(base: tg.GraphStats) -> None:
    gc.collect()
    tg.graph_cleanup()
    assert tg.graph_stats().nodes == base.nodes


def test_grad_wrt_a_consumed_non_leaf_needs_no_vjp_below_it(base: tg.GraphStats) -> None:
    """Only the VJPs on a path toward the inputs must be unconsumed: ``h``'s consumed node is
    an input, and nothing below it is wanted, so ``tg.grad`` does not raise (PyTorch returns
    the gradient too)."""
    torch = pytest.importorskip("torch")
    a, h = _consumed_below_h()
    grad_a = grad_of(a).copy()
    l2 = (h * 3.0).sum()
    (gh,) = tg.grad(l2, h, allow_unused=False)
    ta = torch.tensor(X, requires_grad=True)
    th = ta.sin()
    (th * th).sum().backward()
    (want,) = torch.autograd.grad((th * 3.0).sum(), th)
    assert_close(gh.numpy(), want.numpy())
    np.testing.assert_array_equal(grad_of(a), grad_a)  # tg.grad leaves .grad alone
    err = error_of(tg.GraphConsumedError, tg.grad, l2, h)  # its own VJPs were consumed
    assert "'sum'" in str(err)
    del a, h, l2, gh
    _nothing_left(base)


def test_backward_inputs_a_consumed_non_leaf_fills_its_grad(base: tg.GraphStats) -> None:
    a, h = _consumed_below_h()
    grad_a = grad_of(a).copy()
    (h * 3.0).sum().backward(inputs=[h])
    assert grad_of(h).tolist() == [3.0, 3.0, 3.0]
    np.testing.assert_array_equal(grad_of(a), grad_a)  # not an input: untouched
    del a, h
    _nothing_left(base)


def test_a_consumed_branch_older_than_every_input_is_not_needed(base: tg.GraphStats) -> None:
    """A consumed node older than every input cannot lie above one (parents are older than
    their children), so a loss that also reaches it differentiates in the younger inputs: a
    fresh leaf, an op's output, the consumed non-leaf itself beside them (PyTorch's values)."""
    a, h = _consumed_below_h()
    z = tg.tensor(X * 2.0).require_grad()  # younger than h's node
    y = z * 1.0
    loss = (h * 3.0).sum() + (y * y).sum()
    (gz,) = tg.grad(loss, z, retain_graph=True)
    assert_close(gz.numpy(), 2 * (X * 2.0))
    gh, gy = tg.grad(loss, [h, y], retain_graph=True)
    assert_close(gh.numpy(), np.full_like(X, 3.0))
    assert_close(gy.numpy(), 2 * (X * 2.0))
    loss.backward(inputs=[z])
    assert_close(grad_of(z), 2 * (X * 2.0))
    del a, h, z, y, loss, gz, gh, gy
    _nothing_left(base)


def test_a_consumed_branch_that_never_reached_an_older_input_is_not_needed(
    base: tg.GraphStats,
) -> None:
    """An input older than a consumed node need not lie below it: the pass that consumed it
    walked what is below, and an input it never walked is not. ``tg.grad`` and
    ``backward(inputs=)`` toward such an input give PyTorch's gradient (they raised
    ``GraphConsumedError``); toward an input that pass walked they still raise."""
    a = tg.tensor(X).require_grad()  # the input, made first: older than everything below
    b = tg.tensor(X * 2.0).require_grad()
    h = b * b
    h.sum().backward()  # consumes h's node; a is not below it
    out = (h + a * 3.0).sum()
    (ga,) = tg.grad(out, a, retain_graph=True)
    assert_close(ga.numpy(), np.full_like(X, 3.0))
    gh, ga2 = tg.grad(out, [h, a], retain_graph=True)
    assert_close(gh.numpy(), np.ones_like(X))
    assert_close(ga2.numpy(), np.full_like(X, 3.0))
    out.backward(inputs=[a])
    assert_close(grad_of(a), np.full_like(X, 3.0))
    out2 = (h * 2.0).sum()
    with pytest.raises(tg.GraphConsumedError):  # b is below h: its VJP is gone
        tg.grad(out2, b)
    with pytest.raises(tg.GraphConsumedError):
        tg.grad(out2, [a, b])
    del a, b, h, out, out2, ga, gh, ga2
    _nothing_left(base)


def test_what_lies_below_a_consumed_node_is_its_own_not_its_passs(base: tg.GraphStats) -> None:
    """Sparing asks what is below the consumed node, not what its pass walked: an input the
    pass reached by another branch (``a`` through ``m``) is not below ``h``; a pass that
    itself spared a node records below its nodes what that node recorded; a leaf frozen and
    unfrozen before a graph was built spares that graph as any leaf does. PyTorch's values."""
    a = tg.tensor(X).require_grad()
    b = tg.tensor(X * 2.0).require_grad()
    h = b * b
    m = h * a
    tg.grad(m.sum(), [b])  # consumes h (and m); this pass walked a through m only
    (ga,) = tg.grad((h + a).sum(), a)
    assert_close(ga.numpy(), np.ones_like(X))
    c = tg.tensor(X).require_grad()
    k = h * c
    tg.grad(k.sum(), [c])  # spares h, consumes k
    (ga,) = tg.grad((k + a).sum(), a)
    assert_close(ga.numpy(), np.ones_like(X))
    with pytest.raises(tg.GraphConsumedError):
        tg.grad((k * 2.0).sum(), b)  # b is below h, which is below k: needed
    d = tg.tensor(X).require_grad()
    d.requires_grad_(False)
    d.requires_grad_(True)  # renewed before the graph below was built
    e = tg.tensor(X).require_grad()
    r = (e * 2.0).exp()
    r.sum().backward()
    (gd,) = tg.grad((r + d).sum(), d)
    assert_close(gd.numpy(), np.ones_like(X))
    del a, b, h, m, c, k, d, e, r, ga, gd
    _nothing_left(base)


def test_records_survive_what_a_pass_frees_and_keep_a_renewed_leafs_old_node(
    base: tg.GraphStats,
) -> None:
    """A consumed node's record carries the oldest node below it, so a leaf frozen and
    unfrozen (a new, younger node) whose old node lies below still makes the pass raise,
    also through a node a later pass spared (zeros before); and a spared node freed by the
    pass that spared it (``del h``) still hands its record to the nodes above it."""
    x = tg.tensor(X).require_grad()
    m = x.sin()
    m.sum().backward()  # consumes sin; m alive
    x.requires_grad_(False)
    x.requires_grad_(True)  # a new node, younger than sin
    c = tg.tensor(X * 2.0).require_grad()
    n = m * c
    tg.grad(n.sum(), [c])  # spares sin, consumes n: n's record reaches x's old node
    with pytest.raises(tg.GraphConsumedError):
        tg.grad(n.sum(), x)
    with pytest.raises(tg.GraphConsumedError):
        (n + x).sum().backward(inputs=[x])
    a = tg.tensor(X).require_grad()
    b = tg.tensor(X * 2.0).require_grad()
    h = b * b
    h.sum().backward()
    d = tg.tensor(X * 3.0).require_grad()  # younger than a: the record stays above a
    k = h * d
    del h  # only k's node holds h's now: the next pass frees it
    tg.grad(k.sum(), [d])
    (ga,) = tg.grad((k + a).sum(), a)
    assert_close(ga.numpy(), np.ones_like(X))
    del x, m, c, n, a, b, d, k, ga
    _nothing_left(base)


def test_a_leaf_unfrozen_after_its_graph_was_consumed_is_not_spared(base: tg.GraphStats) -> None:
    """Freezing and unfreezing a leaf after a backward consumed its graph gives it a new,
    younger node; the consumed ``sin`` above its tensor is still needed: the pass raises, as
    PyTorch's does (sparing it gave a zero gradient)."""
    a, h = _consumed_below_h()
    a.requires_grad_(False)
    a.requires_grad_(True)
    l2 = (h * 3.0).sum()
    with pytest.raises(tg.GraphConsumedError, match="'sin'"):
        tg.grad(l2, a)
    with pytest.raises(tg.GraphConsumedError, match="'sin'"):
        l2.backward(inputs=[a])
    del a, h, l2
    _nothing_left(base)


def test_a_needed_consumed_node_still_raises_and_changes_nothing(base: tg.GraphStats) -> None:
    """The gradient of ``a`` needs the consumed ``sin`` VJP: the same error as a plain
    backward's, raised before any VJP runs, with nothing claimed or consumed, so a later pass
    that needs only unconsumed VJPs works and everything is freed afterwards."""
    ran: list[str] = []
    spy = Op(lambda x: (x * 1.0, ()), name="spy")
    spy.defvjp(lambda res, g: (ran.append("spy"), g)[1:])
    a, h = _consumed_below_h()
    grad_a = grad_of(a).copy()
    l2 = (spy(h) * 3.0).sum()
    plain = str(error_of(tg.GraphConsumedError, l2.backward, retain_graph=True))
    assert "'sin'" in plain
    stats = tg.graph_stats()
    consumed = {r.id: r.consumed for r in tg.snapshot().nodes}
    attempts: list[tuple[Callable[..., object], tuple[Any, ...], dict[str, Any]]] = [
        (tg.grad, (l2, a), {}),
        (tg.grad, (l2, [h, a]), {}),  # h's own node is wanted, but a lies below it
        (l2.backward, (), {"inputs": [a]}),
        (l2.backward, (), {"inputs": [h, a]}),
        (tg.grad, (l2, a), {"create_graph": True}),
    ]
    for fn, args, kwargs in attempts:
        err = error_of(tg.GraphConsumedError, fn, *args, **kwargs)
        assert str(err) == plain
        assert tg.graph_stats() == stats
        assert {r.id: r.consumed for r in tg.snapshot().nodes} == consumed
    assert ran == []
    np.testing.assert_array_equal(grad_of(a), grad_a)
    with tg.current_tape()._lock:  # a refused pass claims nothing
        assert not any(n.claimed for n in tg.current_tape()._nodes.values())
    (gh,) = tg.grad(l2, h)  # a correct pass: l2's nodes were neither claimed nor consumed
    assert gh.tolist() == [3.0, 3.0, 3.0]
    assert ran == ["spy"]
    del a, h, l2, gh, attempts, fn, args, kwargs
    _nothing_left(base)


def test_a_pass_spares_an_input_another_thread_is_consuming(base: tg.GraphStats) -> None:
    """A node a pass on another thread claimed counts as consumed: spared when no input lies
    below it (its claim is left alone), refused when one does."""
    entered, may_go = threading.Event(), threading.Event()

    def wait(res: Any, g: Any) -> tuple[Any]:
        entered.set()
        may_go.wait(10)
        return (g,)

    gate = Op(lambda x: (x * 1.0, ()), name="gate")
    gate.defvjp(wait)
    a = tg.tensor(X).require_grad()
    h = a.sin()
    first = gate(h).sum()
    l2 = (h * 3.0).sum()
    thread = threading.Thread(target=first.backward)
    thread.start()
    try:
        assert entered.wait(10)  # the first pass claimed h's node and waits in gate's VJP
        node = node_of(h)
        assert node is not None and node.claimed == thread.ident
        (gh,) = tg.grad(l2, h, retain_graph=True)
        assert gh.tolist() == [3.0, 3.0, 3.0]
        (gh,) = tg.grad(l2, h)
        assert gh.tolist() == [3.0, 3.0, 3.0]
        assert node.claimed == thread.ident and not node.consumed  # still the first pass's
        err = error_of(tg.GraphConsumedError, tg.grad, (h * 2.0).sum(), a)
        assert "'sin'" in str(err) and "another thread" in str(err)
    finally:
        may_go.set()
        thread.join(10)
    assert not thread.is_alive()
    assert node.consumed and node.claimed == 0
    assert_close(grad_of(a), np.cos(X), rtol=1e-6)
    del a, h, first, l2, gh, node, gate, thread
    _nothing_left(base)


def test_retain_graph_and_a_consumed_input(base: tg.GraphStats) -> None:
    """A retained first backward consumes nothing, so even the gradient of ``a`` works; after
    a consuming one, passes toward ``h`` keep working while they retain the graph, and the
    first without ``retain_graph`` consumes the VJPs it ran (not the spared ``sin``)."""
    a = tg.tensor(X).require_grad()
    h = a.sin()
    (h * h).sum().backward(retain_graph=True)
    l2 = (h * 3.0).sum()
    (ga,) = tg.grad(l2, a, retain_graph=True)
    assert_close(ga.numpy(), 3.0 * np.cos(X), rtol=1e-6)
    (h * h).sum().backward()  # consumes h's node
    for _ in range(2):
        (gh,) = tg.grad(l2, h, retain_graph=True)
        assert gh.tolist() == [3.0, 3.0, 3.0]
    l2.backward(inputs=[h], retain_graph=True)
    assert grad_of(h).tolist() == [3.0, 3.0, 3.0]
    (gh,) = tg.grad(l2, h)
    assert gh.tolist() == [3.0, 3.0, 3.0]
    consumed = {r.op for r in tg.snapshot().nodes if r.consumed}
    assert consumed == {"sin", "sum"}  # h's and l2's; l2's multiply was freed (rule 4)
    err = error_of(tg.GraphConsumedError, l2.backward, inputs=[h])
    assert "'sum'" in str(err)
    del a, h, l2, ga, gh
    _nothing_left(base)


def test_grad_input_not_requiring_grad_is_type_error() -> None:
    x = tg.tensor(X).require_grad()
    y = (x * 2.0).sum()
    err = error_of(TypeError, tg.grad, y, [x, tg.ones(3)])
    assert "input 1" in str(err) and "require_grad" in str(err)
    error_of(TypeError, tg.grad, y, X)
    (g,) = tg.grad(y, x)  # nothing was consumed by the rejected calls
    assert g.tolist() == [2.0, 2.0, 2.0]


def test_grad_output_not_requiring_grad_is_runtime_error() -> None:
    x = tg.tensor(X).require_grad()
    err = error_of(RuntimeError, tg.grad, tg.ones(3).sum(), x)
    assert "require" in str(err)
    with tg.no_grad():
        y = (x * 2.0).sum()
    error_of(RuntimeError, tg.grad, y, x)


def test_backward_on_tensor_not_requiring_grad_is_runtime_error() -> None:
    err = error_of(RuntimeError, tg.ones(3).sum().backward)
    assert "require_grad" in str(err) and "no_grad" in str(err)


def test_scalar_cotangents_are_accepted() -> None:
    def body() -> None:
        x = tg.tensor(X).require_grad()
        y = (x * 3.0).sum()
        (g,) = tg.grad(y, x, 2.0, retain_graph=True)
        assert g.tolist() == [6.0, 6.0, 6.0]
        y.backward(np.float32(2.0))
        assert grad_of(x).tolist() == [6.0, 6.0, 6.0]

    without_frames(body)


# ----------------------------------------------------------------------------- deep chains


def test_deep_chain_backwards_without_recursion() -> None:
    n = 100_000
    v = tg.tensor(1.0).require_grad()
    y = v
    for _ in range(n):
        y = y * 1.0001
    limit = sys.getrecursionlimit()
    assert n > 50 * limit  # any recursive walk would fail here
    y.backward()
    # JAX's float32 derivative of the same n multiplications, compiled as one loop
    ref = jax.grad(lambda s: jax.lax.fori_loop(0, n, lambda i, t: t * 1.0001, s))(1.0)
    assert grad_of(v) == pytest.approx(float(ref), rel=1e-5)
    assert y.item() == pytest.approx(float(ref), rel=1e-5)


# ----------------------------------------------------------------------------- raising VJPs


class VJPBoom(Exception):
    """Raised by a test's VJP."""


def boom_op(err: BaseException) -> Op:
    """An unregistered op (identity) whose VJP raises ``err``."""

    def vjp(res: Any, g: jax.Array) -> tuple[jax.Array]:
        raise err

    op = Op(lambda a: (a * 1.0, ()), name="boom")
    op.defvjp(vjp)
    return op


def test_raising_vjp_propagates_unchanged_and_writes_no_grad() -> None:
    err = VJPBoom("inside the VJP")
    boom = boom_op(err)
    v = tg.tensor(X).require_grad()
    low = boom(v)  # lower id than w's branch: its VJP runs after w's cotangent is complete
    w = tg.tensor(X).require_grad()
    m = w * 2.0
    s = low + m
    y = s.sum()
    got = error_of(VJPBoom, y.backward)
    assert got is err
    assert w.grad is None and v.grad is None
    # nodes whose VJP ran stay consumed (rule 2): sum, add and multiply; boom's did not finish
    consumed = {r.op: r.consumed for r in tg.snapshot().nodes if r.kind == "op"}
    assert consumed == {"sum": True, "add": True, "multiply": True, "boom": False}
    error_of(tg.GraphConsumedError, y.backward)
    del low, m, s, y
    # the tape stays usable: stats, cleanup and a fresh backward
    tg.graph_stats()
    tg.graph_cleanup()
    (w * v).sum().backward()
    assert_close(grad_of(w), X)
    assert_close(grad_of(v), X)


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (lambda res, g: (jnp.ones(7),), "returned shape (7,)"),
        (lambda res, g: (g, g), "returned 2 cotangents for 1 inputs"),
        (lambda res, g: g * 2.0, "of type ArrayImpl, not a tuple"),  # rows taken for inputs
        (lambda res, g: [g], None),  # a list is taken as a tuple
    ],
)
def test_malformed_vjp_results_raise_vjp_shape_error(bad: Any, fragment: str | None) -> None:
    op = Op(lambda a: (a * 1.0, ()), name="malformed")
    op.defvjp(bad)
    w = tg.tensor(X).require_grad()
    y = op(w).sum()
    if fragment is None:
        y.backward()
        assert_close(grad_of(w), np.ones_like(X))
        return
    err = error_of(RuntimeError, y.backward)
    assert isinstance(err, tg.VJPShapeError)
    assert fragment in str(err) and "'malformed'" in str(err)
    assert w.grad is None


# ----------------------------------------------------------------------------- origins


def make_in_helper() -> tuple[tg.Tensor, tg.Tensor, str, str]:
    w = tg.tensor(X).require_grad()
    leaf_line = origin_here(-1)
    y = w.exp()
    op_line = origin_here(-1)
    return w, y, leaf_line, op_line


def test_nodes_record_the_first_frame_outside_tapegrad() -> None:
    w, y, leaf_line, op_line = make_in_helper()
    z = tg.maximum(y, w)  # a module-level function
    z_line = origin_here(-1)
    s = z.sum()  # a method
    s_line = origin_here(-1)
    p = tg.tensor(X, requires_grad=True)  # a constructor argument
    p_line = origin_here(-1)
    q = 2.0 * p  # a reflected dunder
    q_line = origin_here(-1)
    records = {r.id: r for r in tg.snapshot().nodes}
    expected = [
        (w, leaf_line, "make_in_helper"),
        (y, op_line, "make_in_helper"),
        (z, z_line, "test_nodes_record_the_first_frame_outside_tapegrad"),
        (s, s_line, "test_nodes_record_the_first_frame_outside_tapegrad"),
        (p, p_line, "test_nodes_record_the_first_frame_outside_tapegrad"),
        (q, q_line, "test_nodes_record_the_first_frame_outside_tapegrad"),
    ]
    for t, line, function in expected:
        assert t._node is not None
        r = records[t._node.id]
        assert (r.origin, r.function) == (line, function)
        under_cwd = not os.path.relpath(__file__).startswith("..")
        assert os.path.isabs(r.origin) is not under_cwd  # relative when under the cwd
        assert "tapegrad" + os.sep not in r.origin


def test_origin_of_a_nested_function_uses_its_qualified_name() -> None:
    def inner() -> tg.Tensor:
        return tg.tensor(X).require_grad() * 2.0

    t = inner()
    assert t._node is not None
    record = next(r for r in tg.snapshot().nodes if r.id == t._node.id)
    qual = "test_origin_of_a_nested_function_uses_its_qualified_name.<locals>.inner"
    assert record.function == qual


def test_non_scalar_messages_name_the_callers_keyword() -> None:
    w = tg.ones((3,)).require_grad()
    err = error_of(tg.NonScalarBackwardError, lambda: (w * 2).backward())
    assert "backward() without `grad`" in str(err) and "grad= of shape (3,)" in str(err)
    err = error_of(tg.NonScalarBackwardError, lambda: tg.grad(w * 2, w))
    assert "tg.grad without `grad_outputs`" in str(err) and "grad_outputs= of shape" in str(err)
    err = error_of(tg.ShapeError, lambda: tg.grad((w * 2).sum(), w, grad_outputs=tg.ones(2)))
    assert str(err).startswith("grad_outputs has shape (2,)")
