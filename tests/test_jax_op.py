"""``tg.jax_op``: a user's jnp function becomes a differentiable op whose gradient equals
jax.grad's, with keyword parameters, a compiled VJP cached per function, exceptions that
propagate unchanged, and redefinition that just works (a notebook cell run twice)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of, without_frames

import tapegrad as tg

A = np.array([0.5, -1.0, 2.0], np.float32)
B = np.array([1.5, 0.25, 3.0], np.float32)


def grads(op: Callable[..., tg.Tensor], *arrays: np.ndarray, **params: Any) -> list[np.ndarray]:
    """d sum(op(*leaves, **params)) / d leaf, as NumPy arrays."""
    leaves = [tg.tensor(a).require_grad() for a in arrays]
    op(*leaves, **params).sum().backward()
    out = []
    for leaf in leaves:
        assert leaf.grad is not None
        assert leaf.grad.shape == leaf.shape and leaf.grad.dtype == leaf.dtype
        out.append(leaf.grad.numpy())
    return out


def softplus_mix(a: jax.Array, b: jax.Array, *, k: float = 2.0) -> jax.Array:
    """softplus(a) * b**k (a user's jnp function)."""
    return jax.nn.softplus(a) * b**k


def test_gradient_equals_jax_grad_with_keyword_params() -> None:
    op = tg.jax_op(softplus_mix)
    for params in ({}, {"k": 3.0}):
        out = op(tg.tensor(A), tg.tensor(B), **params)
        np.testing.assert_allclose(out.numpy(), softplus_mix(A, B, **params), rtol=1e-6)
        ga, gb = grads(op, A, B, **params)
        ref = jax.grad(lambda a, b, p=params: jnp.sum(softplus_mix(a, b, **p)), argnums=(0, 1))
        ra, rb = ref(A, B)
        np.testing.assert_allclose(ga, ra, rtol=1e-6)
        np.testing.assert_allclose(gb, rb, rtol=1e-6)


def test_keeps_name_and_doc_and_stays_out_of_the_registry() -> None:
    op = tg.jax_op(softplus_mix)
    assert op.__name__ == "softplus_mix"
    assert op.__doc__ == softplus_mix.__doc__
    assert "softplus_mix" not in tg.registry()
    w = tg.tensor(A).require_grad()
    assert repr(op(w, B)).endswith("op=softplus_mix)")


def test_forward_and_vjp_are_compiled_once_per_function_and_params() -> None:
    traces: list[str] = []

    def counted(a: jax.Array, *, scale: float = 1.0) -> jax.Array:
        traces.append("run")  # runs once per trace: the forward's and the VJP's
        return jnp.tanh(a) * scale

    op = tg.jax_op(counted)
    for _ in range(3):
        grads(op, A)
    # 1 trace of the forward + 1 of the VJP: both compiled functions were reused twice
    assert len(traces) == 2
    grads(op, A, scale=2.0)  # new params: one more compile of each
    grads(op, A, scale=2.0)
    assert len(traces) == 2 + 2
    (g,) = grads(op, A, scale=2.0)
    np.testing.assert_allclose(g, 2.0 * (1 - np.tanh(A) ** 2), rtol=1e-5)  # a GPU's tanh: 2 ulp
    derived = importlib.import_module("tapegrad.derived")
    for cache in (derived.compiled_vjp, derived.compiled_forward):
        info = cache.cache_info()
        assert info.maxsize is not None and info.maxsize > 0  # bounded


def test_a_forward_that_needs_concrete_values_runs_eagerly() -> None:
    calls: list[str] = []

    def branchy(a: jax.Array) -> jax.Array:
        calls.append("run")
        if float(a.sum()) > 0:  # Python control flow on a value: cannot be traced
            return a * 2.0
        return a * -1.0

    op = tg.jax_op(branchy)
    with tg.no_grad():
        np.testing.assert_allclose(op(tg.tensor(A)).numpy(), A * 2.0)
        np.testing.assert_allclose(op(tg.tensor(-A)).numpy(), A)
    # the failed trace, then two eager runs: no second trace
    assert calls == ["run"] * 3


def test_redefining_the_same_name_uses_the_new_body() -> None:
    def cell(a: jax.Array) -> jax.Array:
        return a * 2.0

    first = tg.jax_op(cell)
    assert grads(first, A)[0].tolist() == [2.0, 2.0, 2.0]

    def cell(a: jax.Array) -> jax.Array:  # noqa: F811 - the notebook cell, edited and re-run
        return a * 5.0

    second = tg.jax_op(cell)
    assert grads(second, A)[0].tolist() == [5.0, 5.0, 5.0]
    assert grads(first, A)[0].tolist() == [2.0, 2.0, 2.0]
    assert "cell" not in tg.registry()


class ForwardBoom(Exception):
    """Raised by a test's forward."""


def test_forward_exception_propagates_unchanged_and_records_nothing() -> None:
    err = ForwardBoom("bad input")

    def broken(a: jax.Array) -> jax.Array:
        raise err

    op = tg.jax_op(broken)
    w = tg.tensor(A).require_grad()
    stats = tg.graph_stats()
    assert error_of(ForwardBoom, op, w) is err
    assert tg.graph_stats() == stats
    (w * 2.0).sum().backward()  # the tape is usable
    assert w.grad is not None and w.grad.tolist() == [2.0, 2.0, 2.0]


def test_vjp_exception_propagates_unchanged() -> None:
    err = ForwardBoom("bad cotangent")

    @jax.custom_vjp
    def guarded(a: jax.Array) -> jax.Array:
        return a * 3.0

    def fwd(a: jax.Array) -> tuple[jax.Array, None]:
        return a * 3.0, None

    def bwd(res: None, g: jax.Array) -> tuple[jax.Array]:
        raise err

    guarded.defvjp(fwd, bwd)
    op = tg.jax_op(guarded)
    w = tg.tensor(A).require_grad()
    y = op(w).sum()
    assert y.item() == pytest.approx(float(A.sum() * 3.0))
    assert error_of(ForwardBoom, y.backward) is err
    assert w.grad is None
    tg.graph_stats()
    tg.graph_cleanup()
    (w * 2.0).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [2.0, 2.0, 2.0]


def gather_rows(x: jax.Array, idx: jax.Array) -> jax.Array:
    return x[idx] * 2.0


def test_integer_inputs_and_constants_get_no_gradient() -> None:
    op = tg.jax_op(gather_rows)
    w = tg.tensor(A).require_grad()
    idx = tg.tensor([2, 0, 2])
    op(w, idx).sum().backward()
    assert w.grad is not None
    assert w.grad.tolist() == [2.0, 0.0, 4.0]
    w.grad = None
    op(w, np.array([1, 1])).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [0.0, 4.0, 0.0]


def test_no_node_without_grad_or_under_no_grad() -> None:
    op = tg.jax_op(softplus_mix)
    w = tg.tensor(A).require_grad()
    stats = tg.graph_stats()
    assert op(tg.tensor(A), tg.tensor(B)).requires_grad is False
    with tg.no_grad():
        assert op(w, B).requires_grad is False
    assert tg.graph_stats() == stats


def test_integer_output_is_not_recorded() -> None:
    op = tg.jax_op(lambda a: jnp.argmax(a))
    w = tg.tensor(A).require_grad()
    stats = tg.graph_stats()
    y = op(w)
    assert y.dtype == np.int32 and y.item() == 2
    assert y.requires_grad is False
    assert tg.graph_stats() == stats


def test_composes_with_built_in_ops() -> None:
    op = tg.jax_op(softplus_mix)
    w = tg.tensor(A).require_grad()
    v = tg.tensor(B).require_grad()
    (op(w * 2.0, v.exp(), k=1.0) * w).sum().backward()

    def f(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.sum(softplus_mix(a * 2.0, jnp.exp(b), k=1.0) * a)

    ra, rb = jax.grad(f, argnums=(0, 1))(A, B)
    assert w.grad is not None and v.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), ra, rtol=1e-5)
    np.testing.assert_allclose(v.grad.numpy(), rb, rtol=1e-5)


def scaled(a: jax.Array, *, k: Any) -> jax.Array:
    return a * k


def test_unhashable_keyword_parameter_is_rejected_at_call_time() -> None:
    def body() -> None:
        op = tg.jax_op(scaled)
        w = tg.tensor(A).require_grad()
        stats = tg.graph_stats()
        with pytest.raises(TypeError, match="hashable"):
            op(w, k=jnp.array(2.0))
        assert tg.graph_stats() == stats

    without_frames(body)


def pick(a: jax.Array, *, i: Any) -> jax.Array:
    """``a[i]``: ``i=1`` is a row, ``i=True`` a new axis (NumPy's rules)."""
    return a[i] * 2.0


def signed(a: jax.Array, *, s: float) -> jax.Array:
    return a * jnp.copysign(1.0, s)


def test_keyword_parameters_equal_in_value_but_not_in_type_compile_apart() -> None:
    """``1 == True`` and ``0.0 == -0.0`` in Python, but not to the function: each
    value gets its own compiled forward and VJP, in either order of first use."""
    M = np.arange(6, dtype=np.float32).reshape(3, 2)
    for order in ((1, True), (True, 1)):
        op = tg.jax_op(pick)
        for i in order:
            x = tg.tensor(M).require_grad()
            y = op(x, i=i)
            want_y, pull = jax.vjp(lambda a, i=i: pick(a, i=i), jnp.asarray(M))
            assert y.shape == want_y.shape, (order, i)
            (y * y).sum().backward()
            (want,) = pull(2.0 * want_y)
            assert x.grad is not None
            np.testing.assert_allclose(x.grad.numpy(), want, err_msg=f"i={i!r}")
    op = tg.jax_op(signed)
    for s in (0.0, -0.0, 0.0):
        x = tg.tensor(A).require_grad()
        np.testing.assert_array_equal(op(x, s=s).numpy(), signed(A, s=s))
        op(x, s=s).sum().backward()
        assert x.grad is not None
        np.testing.assert_array_equal(x.grad.numpy(), np.full(3, np.copysign(1.0, s)))


def test_a_function_returning_several_arrays_is_refused_with_the_fix() -> None:
    """A jax_op returns one array: a tuple (or None) is a TypeError naming the op and the
    type, and saying what to write, not JAX's "'tuple' object has no attribute 'aval'";
    nothing is recorded."""

    def both(a: jax.Array) -> Any:
        return a * 2.0, a * 3.0

    op = tg.jax_op(both)
    w = tg.tensor(A).require_grad()
    stats = tg.graph_stats()
    err = error_of(TypeError, op, w)
    assert "both: a jax_op's function returns one array" in str(err)
    assert "returned a tuple" in str(err) and "one jax_op per output" in str(err)
    assert tg.graph_stats() == stats
