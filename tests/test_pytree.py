"""Tensor as a JAX pytree, and JAX transformations (docs/design.md rule 9): ops on tensors that do
not require grad work under jit/vmap/grad; recording with a tracer raises RuntimeError and
leaves the tape consistent; no cache keeps a value made under a trace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import M, X, error_of

import tapegrad as tg

# ----------------------------------------------------------------------------- the pytree


@pytest.mark.parametrize("requires_grad", [False, True])
def test_the_only_child_is_the_array(requires_grad: bool) -> None:
    t = tg.tensor(X, requires_grad=requires_grad)
    leaves, treedef = jax.tree_util.tree_flatten(t)
    assert len(leaves) == 1 and leaves[0] is t.data
    assert treedef.num_leaves == 1
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert isinstance(back, tg.Tensor)
    assert back is not t
    assert back.data is t.data
    assert back.requires_grad is False and back.is_leaf


def test_tree_map_over_nested_tensors() -> None:
    w = tg.tensor(M).require_grad()
    params = {"w": w, "b": [tg.tensor(X)]}
    doubled = jax.tree_util.tree_map(lambda a: a * 2, params)
    assert isinstance(doubled["w"], tg.Tensor) and isinstance(doubled["b"][0], tg.Tensor)
    np.testing.assert_array_equal(doubled["w"].numpy(), M * 2)
    np.testing.assert_array_equal(doubled["b"][0].numpy(), X * 2)
    assert doubled["w"].requires_grad is False
    leaves = jax.tree_util.tree_leaves(params)  # dict keys sorted: "b", then "w"
    assert leaves[0] is params["b"][0].data and leaves[1] is w.data


# ----------------------------------------------------------------------------- transformations


def test_jit_of_a_function_of_a_tensor() -> None:
    stats = tg.graph_stats()
    out = jax.jit(lambda t: (t * 2).sum())(tg.tensor(X))
    assert isinstance(out, tg.Tensor)
    assert out.requires_grad is False
    assert out.item() == pytest.approx(float(X.sum() * 2))
    assert tg.graph_stats() == stats


def model(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
    """A small program over several op families, on tensors that do not require grad."""
    h = tg.softmax((x @ w.T).tanh(), axis=-1)
    return (h[jnp.array([1, 1])].max(axis=0) + tg.where(h > 0.4, h, 0.0).sum()).mean()


def model_jnp(x: jax.Array, w: jax.Array) -> jax.Array:
    h = jax.nn.softmax(jnp.tanh(x @ w.T), axis=-1)
    return (h[jnp.array([1, 1])].max(axis=0) + jnp.where(h > 0.4, h, 0.0).sum()).mean()


def test_ops_on_tensors_without_grad_work_under_jit_and_match_eager() -> None:
    x, w = tg.tensor(M), tg.tensor(M[::-1].copy())
    stats = tg.graph_stats()
    eager = model(x, w)
    jitted = jax.jit(model)(x, w)
    ref = model_jnp(M, M[::-1].copy())
    assert isinstance(jitted, tg.Tensor)
    np.testing.assert_allclose(jitted.numpy(), eager.numpy(), rtol=1e-5)
    np.testing.assert_allclose(eager.numpy(), ref, rtol=1e-5)
    assert tg.graph_stats() == stats


def test_vmap_over_tensors() -> None:
    stats = tg.graph_stats()
    out = jax.vmap(lambda t: (t * t).sum() + t.max())(tg.tensor(M))
    assert isinstance(out, tg.Tensor) and out.shape == (2,)
    np.testing.assert_allclose(out.numpy(), (M * M).sum(1) + M.max(1), rtol=1e-6)
    assert tg.graph_stats() == stats


def test_jax_grad_through_tensor_code() -> None:
    g = jax.grad(lambda t: (t.sin() * t).sum().data)(tg.tensor(X))
    assert isinstance(g, tg.Tensor)  # the cotangent mirrors the input pytree
    np.testing.assert_allclose(g.numpy(), np.sin(X) + X * np.cos(X), rtol=1e-6)


def test_a_tensor_requiring_grad_passed_into_jit_arrives_without_grad() -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    out = jax.jit(lambda t: (t * 3.0).sum())(w)
    assert out.requires_grad is False
    assert out.item() == pytest.approx(float(X.sum() * 3.0))
    assert tg.graph_stats() == stats
    assert w.requires_grad


# ----------------------------------------------------------------------------- tracers


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: jax.jit(f)(jnp.asarray(X)),
        lambda f: jax.vmap(f)(jnp.asarray(M)),
        lambda f: jax.grad(lambda a: jnp.sum(f(a)))(jnp.asarray(X)),
    ],
    ids=["jit", "vmap", "grad"],
)
def test_recording_with_a_tracer_raises_and_leaves_the_tape_consistent(
    transform: Callable[[Callable[..., Any]], Any],
) -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    snap = tg.snapshot().nodes
    err = error_of(RuntimeError, transform, lambda a: (w * a).data)
    assert isinstance(err, tg.TracerError)
    msg = str(err)
    assert "tracer" in msg.lower()
    assert "multiply" in msg  # names the op
    assert "no_grad" in msg and "detach" in msg  # and what to do
    assert tg.graph_stats() == stats
    assert tg.snapshot().nodes == snap
    (w * 2.0).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [2.0, 2.0, 2.0]
    tg.graph_cleanup()
    assert tg.graph_stats().nodes == stats.nodes


def test_an_op_on_a_tensor_requiring_grad_inside_jit_raises_even_without_traced_inputs() -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    err = error_of(RuntimeError, jax.jit(lambda: (w.exp() * 2.0).data))
    assert "tracer" in str(err).lower()
    assert tg.graph_stats() == stats


def test_tracer_error_for_traced_tensor_combined_with_grad_tensor() -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    err = error_of(RuntimeError, jax.jit(lambda t: (t + w).data), tg.tensor(X))
    assert "'add'" in str(err) or "add" in str(err)
    assert tg.graph_stats() == stats


def test_no_grad_inside_the_transformation_is_the_documented_way_out() -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()

    def f(a: jax.Array) -> jax.Array:
        with tg.no_grad():
            return (w * a).sum().data

    assert float(jax.jit(f)(jnp.asarray(X))) == pytest.approx(float((X * X).sum()))
    assert float(jax.jit(lambda a: (w.detach() * a).sum().data)(X)) == pytest.approx(
        float((X * X).sum())
    )
    assert tg.graph_stats() == stats


def test_require_grad_and_data_setter_reject_tracers() -> None:
    stats = tg.graph_stats()
    err = error_of(RuntimeError, jax.jit(lambda t: t.require_grad().data), tg.tensor(X))
    assert "tracer" in str(err).lower()
    w = tg.tensor(X).require_grad()

    def set_data(a: jax.Array) -> jax.Array:
        w.data = a
        return a

    err = error_of(RuntimeError, jax.jit(set_data), jnp.asarray(X))
    assert "tracer" in str(err).lower()
    assert isinstance(w.data, jax.Array) and not isinstance(w.data, jax.core.Tracer)
    assert tg.graph_stats().nodes == stats.nodes + 1  # only the leaf


def test_no_cache_keeps_a_value_made_under_a_trace() -> None:
    def build(v: jax.Array) -> jax.Array:
        made = [tg.zeros(3), tg.ones(3), tg.full((3,), v), tg.zeros_like(tg.ones(3))]
        return sum((t.data for t in made), start=jnp.zeros(3))

    traced = jax.jit(build)(jnp.float32(2.0))
    np.testing.assert_array_equal(np.asarray(traced), [3.0, 3.0, 3.0])
    # the same constructors afterwards give concrete arrays with their own values
    for t, v in ((tg.zeros(3), 0.0), (tg.ones(3), 1.0), (tg.full((3,), 5.0), 5.0)):
        assert not isinstance(t.data, jax.core.Tracer)
        assert t.tolist() == [v, v, v]
    w = tg.full((3,), 4.0).require_grad()  # and can become leaves
    (w * w).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [8.0, 8.0, 8.0]
