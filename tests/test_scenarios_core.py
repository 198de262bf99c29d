"""Public bug-report scenarios from PyTorch's and Burn's trackers (docs/lessons.md), replayed with
exact values: each either gives JAX's gradient or fails loudly, naming the fix."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of, origin_here

import tapegrad as tg

XS = np.array([[0.5, -1.0], [1.5, 0.25], [-0.75, 2.0], [1.0, 1.0]], np.float32)
YS = np.array([1.0, -0.5, 0.25, 2.0], np.float32)
W0 = np.array([0.3, -0.2], np.float32)


def loss_tg(w: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
    return tg.mse_loss(tg.tensor(XS) @ w + b, tg.tensor(YS))


def loss_jnp(w: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.mean((XS @ w + b - YS) ** 2)


def test_loss_total_kept_as_a_tensor_fails_loudly_and_item_is_the_fix() -> None:
    """PyTorch forum classic: `total_loss += loss` keeps every step's graph; backward of the
    total then meets consumed graphs. Here it raises naming .item(); with .item() the total
    is a number equal to JAX's."""
    w = tg.tensor(W0).require_grad()
    b = tg.tensor(0.1).require_grad()
    total: Any = 0.0
    for _ in range(3):
        loss = loss_tg(w, b)
        loss.backward()
        total = total + loss
    assert isinstance(total, tg.Tensor) and total.requires_grad
    err = error_of(RuntimeError, total.backward)
    assert ".item()" in str(err) and "mse_loss" in str(err)
    expected = float(loss_jnp(W0, np.float32(0.1)))
    numbers = 0.0
    for _ in range(3):
        loss = loss_tg(w, b)
        loss.backward()
        numbers += loss.item()
    assert numbers == pytest.approx(3 * expected, rel=1e-6)
    gw, gb = jax.grad(loss_jnp, argnums=(0, 1))(W0, np.float32(0.1))
    assert w.grad is not None and b.grad is not None  # six backward passes accumulated
    np.testing.assert_allclose(w.grad.numpy(), 6 * np.asarray(gw), rtol=1e-5)
    assert b.grad.item() == pytest.approx(6 * float(gb), rel=1e-5)


def rnn_step_jnp(wh: jax.Array, h: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(wh * h + x)


def test_truncated_bptt_without_detach_raises_and_detach_gives_per_step_gradients() -> None:
    """PyTorch forum: carrying an RNN hidden state across steps without .detach() makes the
    second backward go through the first step's consumed graph."""
    inputs = [np.float32(v) for v in (0.5, -0.25, 1.0)]
    wh = tg.tensor(0.8).require_grad()
    h = tg.tensor(0.0)
    h = (wh * h + inputs[0]).tanh()
    (h * h).backward()
    h = (wh * h + inputs[1]).tanh()
    err = error_of(RuntimeError, (h * h).backward)
    assert "detach" in str(err) and "'tanh'" in str(err)

    wh.grad = None
    h_t: tg.Tensor = tg.tensor(0.0)
    h_ref: jax.Array = jnp.float32(0.0)
    expected = np.float32(0.0)
    for x in inputs:
        h_t = (wh * h_t.detach() + x).tanh()
        (h_t * h_t).backward()
        expected += jax.grad(lambda w, h0=h_ref, x=x: rnn_step_jnp(w, h0, x) ** 2)(np.float32(0.8))
        h_ref = rnn_step_jnp(np.float32(0.8), h_ref, x)
    assert wh.grad is not None
    assert wh.grad.item() == pytest.approx(float(expected), rel=1e-5)
    assert h_t.item() == pytest.approx(float(h_ref), rel=1e-6)


def test_retain_graph_in_a_loop_accumulates_exactly_n_gradients() -> None:
    """PyTorch forum: backward(retain_graph=True) in a loop adds the gradient each time."""
    w = tg.tensor(W0).require_grad()
    b = tg.tensor(0.1).require_grad()
    loss = loss_tg(w, b)
    for _ in range(4):
        loss.backward(retain_graph=True)
    gw, _ = jax.grad(loss_jnp, argnums=(0, 1))(W0, np.float32(0.1))
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), 4 * np.asarray(gw), rtol=1e-5)
    loss.backward()  # the last one may release the graph
    np.testing.assert_allclose(w.grad.numpy(), 5 * np.asarray(gw), rtol=1e-5)
    error_of(RuntimeError, loss.backward)


def test_reusing_a_consumed_graph_never_gives_a_partial_gradient() -> None:
    """tracel-ai/burn#5645: a backward reaching an already consumed node silently skipped it
    and wrote a partial gradient. Here it raises before any VJP; with retain_graph the full
    gradient equals JAX's."""
    w = tg.tensor(W0).require_grad()
    h = (tg.tensor(XS) @ w).tanh()
    first = h.sum()
    first.backward()
    after_first = w.grad.numpy().copy() if w.grad is not None else None
    second = (h * h).sum() + (w * w).sum()  # h's graph is consumed; w * w is fresh
    err = error_of(RuntimeError, second.backward)
    assert "retain_graph" in str(err) and "'tanh'" in str(err)
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), after_first)  # nothing partial was added

    v = tg.tensor(W0).require_grad()
    h = (tg.tensor(XS) @ v).tanh()
    h.sum().backward(retain_graph=True)
    ((h * h).sum() + (v * v).sum()).backward()

    def both(w: jax.Array) -> jax.Array:
        t = jnp.tanh(XS @ w)
        return t.sum() + (t * t).sum() + (w * w).sum()

    assert v.grad is not None
    np.testing.assert_allclose(v.grad.numpy(), jax.grad(both)(W0), rtol=1e-5)


def test_weight_tying_sums_both_uses() -> None:
    """A parameter used twice (tied embeddings) receives the sum of both uses."""
    e = tg.tensor(XS[:2]).require_grad()  # (2, 2)
    x = tg.tensor(np.array([1.0, 2.0], np.float32))
    logits = (x @ e) @ e.T
    logits.sum().backward()
    ref = jax.grad(lambda m: jnp.sum((jnp.array([1.0, 2.0]) @ m) @ m.T))(XS[:2])
    assert e.grad is not None
    np.testing.assert_allclose(e.grad.numpy(), ref, rtol=1e-6)


def test_sgd_loop_with_in_place_updates_matches_jax() -> None:
    """The usual loop: forward, backward, update under no_grad, reset .grad. Five steps of
    tapegrad equal five steps of jax.grad; forgetting the reset doubles up gradients."""
    lr = np.float32(0.1)
    w = tg.tensor(W0).require_grad()
    b = tg.tensor(0.0).require_grad()
    ws, bs = jnp.asarray(W0), jnp.float32(0.0)
    step = jax.jit(jax.value_and_grad(loss_jnp, argnums=(0, 1)))
    for _ in range(5):
        loss = loss_tg(w, b)
        loss.backward()
        with tg.no_grad():
            assert w.grad is not None and b.grad is not None
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = None
        b.grad = None
        ref_loss, (gw, gb) = step(ws, bs)
        ws, bs = ws - lr * gw, bs - lr * gb
        assert loss.item() == pytest.approx(float(ref_loss), rel=1e-5)
    np.testing.assert_allclose(w.numpy(), ws, rtol=1e-5)
    assert b.item() == pytest.approx(float(bs), rel=1e-5, abs=1e-7)
    assert w.requires_grad and w.is_leaf
    # the forgotten reset: two steps' gradients add up instead of replacing each other
    loss_tg(w, b).backward()
    loss_tg(w, b).backward()
    _, (gw, _) = step(ws, bs)
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.asarray(gw), rtol=1e-5)


def test_in_place_update_under_grad_mode_is_refused() -> None:
    """PyTorch's 'a variable needed for gradient computation has been modified by an inplace
    operation': here in-place on a tensor that requires grad raises at once, naming no_grad."""
    w = tg.tensor(W0).require_grad()
    loss = loss_tg(w, tg.tensor(0.0))
    loss.backward()
    assert w.grad is not None
    err = error_of(RuntimeError, w.__isub__, w.grad * 0.1)
    assert "tg.no_grad()" in str(err)
    assert w.tolist() == W0.tolist()


def test_dropped_require_grad_tensors_are_hanging_leaves_that_cleanup_removes() -> None:
    """tracel-ai/burn#3976: a tensor made to require grad that never takes part in a
    backward left a node behind forever. Here it is counted, located and removed."""
    w = tg.tensor(W0).require_grad()
    before = tg.graph_stats()
    where = origin_here(2)
    for i in range(50):
        junk = tg.tensor(XS[i % 4]).require_grad()
        del junk
    stats = tg.graph_stats()
    assert stats.hanging_leaves == before.hanging_leaves + 50
    records = [r for r in tg.snapshot().nodes if r.kind == "leaf" and not r.useful]
    assert len(records) == 50
    assert {(r.origin, r.function) for r in records} == {
        (
            where,
            "test_dropped_require_grad_tensors_are_hanging_leaves_that_cleanup_removes",
        )
    }
    freed = tg.graph_cleanup()
    assert freed.leaves_removed >= 50
    assert tg.graph_stats().hanging_leaves == 0
    loss_tg(w, tg.tensor(0.0)).backward()  # the parameter is untouched
    gw, _ = jax.grad(loss_jnp, argnums=(0, 1))(W0, np.float32(0.0))
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-5)


def test_design_worked_example() -> None:
    """docs/design.md's worked example (manual policy), line by line, with the gradients."""
    base = tg.graph_stats().nodes
    x = tg.ones((4, 3))
    w = tg.randn((3, 2), key=0).require_grad()
    assert (tg.graph_stats().nodes - base, tg.graph_stats().hanging_nodes) == (1, 0)
    loss = ((x @ w).tanh() ** 2).sum()
    assert tg.graph_stats().nodes - base == 5
    loss.backward()
    assert tg.graph_stats().nodes - base == 2
    wv = jax.random.normal(jax.random.PRNGKey(0), (3, 2))
    ref = jax.grad(lambda m: jnp.sum(jnp.tanh(jnp.ones((4, 3)) @ m) ** 2))(wv)
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), ref, rtol=1e-5)
    del loss
    assert tg.graph_stats().nodes - base == 1
    junk = tg.ones(3).require_grad()
    del junk
    assert tg.graph_stats().hanging_leaves == 1
    e = (x @ w).sum().item()
    assert e == pytest.approx(float(jnp.sum(jnp.ones((4, 3)) @ wv)), rel=1e-5)
    assert tg.graph_stats().hanging_nodes == 3
    stats = tg.graph_cleanup()
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed) == (3, 1, 1)
    assert tg.graph_stats().nodes - base == 1
    running: Any = 0.0
    for _ in range(3):
        step_loss = ((x @ w) ** 2).mean()
        step_loss.backward()
        running = running + step_loss
    del step_loss
    now = tg.graph_stats()
    assert (now.nodes - base, now.hanging_nodes) == (7, 0)
    assert running.item() == pytest.approx(3 * float(jnp.mean((jnp.ones((4, 3)) @ wv) ** 2)))
