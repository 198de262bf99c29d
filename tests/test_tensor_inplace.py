"""In-place operators on tensors that are not leaves (issue 16, item 5; docs/api.md
"Tensors"): under grad mode ``c += x`` rebinds ``c`` to ``c + x`` (as on a ``jax.Array``),
gradients flow through it, and the classic ``total += loss`` builds the kept-alive graph the
leak report names."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import assert_close, error_of

import diagnostics
import tapegrad as tg

IN_PLACE: list[tuple[str, Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = [
    ("+=", operator.iadd, operator.add),
    ("-=", operator.isub, operator.sub),
    ("*=", operator.imul, operator.mul),
    ("/=", operator.itruediv, operator.truediv),
]
A = np.array([1.0, -2.0, 3.0], np.float32)
B = np.array([0.5, 4.0, -1.5], np.float32)


@pytest.mark.parametrize(("symbol", "inplace", "plain"), IN_PLACE, ids=[s for s, *_ in IN_PLACE])
def test_in_place_on_a_non_leaf_rebinds_and_differentiates(
    symbol: str, inplace: Callable[[Any, Any], Any], plain: Callable[[Any, Any], Any]
) -> None:
    x = tg.tensor(A, requires_grad=True)
    y = tg.tensor(B, requires_grad=True)
    c = x * 2.0
    before = c
    c = inplace(c, y)
    assert c is not before, f"{symbol} on a non-leaf must rebind to a new tensor"
    assert c.requires_grad and not c.is_leaf and c.shape == before.shape
    assert_close(before.data, 2.0 * A)  # the old tensor (saved by no one) is unchanged
    c.sum().backward()

    def f(a: jax.Array, b: jax.Array) -> jax.Array:
        return plain(a * 2.0, b).sum()

    ga, gb = jax.grad(f, argnums=(0, 1))(jnp.asarray(A), jnp.asarray(B))
    assert_close(c.data, plain(2.0 * A, B))
    assert x.grad is not None and y.grad is not None
    assert_close(x.grad.data, ga)
    assert_close(y.grad.data, gb)


@pytest.mark.parametrize(("symbol", "inplace", "plain"), IN_PLACE, ids=[s for s, *_ in IN_PLACE])
def test_in_place_with_a_constant_on_a_non_leaf_rebinds(
    symbol: str, inplace: Callable[[Any, Any], Any], plain: Callable[[Any, Any], Any]
) -> None:
    x = tg.tensor(A, requires_grad=True)
    c = x + 0.0
    c = inplace(c, 3.0)
    (g,) = tg.grad(c.sum(), x)
    assert_close(g.data, jax.grad(lambda a: plain(a + 0.0, 3.0).sum())(jnp.asarray(A)))


def test_in_place_keeps_shape_and_dtype_kind_on_a_non_leaf() -> None:
    c = tg.tensor(A, requires_grad=True) * 1.0
    err = error_of(ValueError, operator.iadd, c, tg.ones((2, 3)))
    assert "In-place +=" in str(err)
    h = tg.tensor(A.astype(np.float16), requires_grad=True) * 1.0
    h += tg.tensor(B, requires_grad=True)  # float32 into float16: same kind, cast back
    assert h.dtype == np.float16 and h.requires_grad


def test_a_refused_in_place_result_leaves_no_hanging_node() -> None:
    """An in-place operator whose result does not fit the target (shape, or a dtype of
    another kind) raises after the op ran: its node is freed with the result, not left
    hanging for the leak report to blame on the failed line."""
    w = tg.tensor(A, requires_grad=True)
    c = w * 1.0
    n, f = tg.tensor(np.ones(3, np.int32)), tg.tensor(np.ones(3, np.float32), requires_grad=True)
    before = tg.graph_stats()
    error_of(ValueError, operator.iadd, c, tg.ones((2, 3)))
    error_of(TypeError, operator.iadd, n, f)
    after = tg.graph_stats()
    assert (after.nodes, after.hanging_nodes) == (before.nodes, before.hanging_nodes)
    c.sum().backward()  # the graph still works
    assert_close(w.grad.data, np.ones_like(A))


def test_in_place_on_a_non_leaf_under_no_grad_replaces_the_value() -> None:
    x = tg.tensor(A, requires_grad=True)
    c = x * 1.0
    node = c._node
    with tg.no_grad():
        c += 1.0
    assert c._node is node  # same tensor, same node, new value
    assert_close(c.data, A + 1.0)


def test_a_running_total_is_a_kept_alive_graph_named_by_the_report() -> None:
    w = tg.tensor(A, requires_grad=True)
    total_loss = tg.tensor(0.0)
    for _ in range(3):
        loss = (w * w).sum()
        loss.backward()
        total_loss += loss  # the classic mistake: works, and keeps each step's graph
    line = _line_of("total_loss += loss  # the classic")
    assert total_loss.requires_grad and total_loss.item() == pytest.approx(3 * float(A @ A))
    report = diagnostics.leak_report(explain=True)
    rows = [r for r in report.rows if r.kind == "kept-alive"]
    assert [(r.op, r.count) for r in rows] == [("add", 3)]
    assert rows[0].origin.endswith(f"test_tensor_inplace.py:{line}")
    assert any("total_loss" in " ".join(e.chain) for e in report.explanations)
    del total_loss, loss


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, s in enumerate(f, 1) if text in s and "_line_of" not in s)


POW_MATMUL: list[tuple[str, Callable[[Any, Any], Any], Any]] = [
    ("**=", operator.ipow, 2),
    ("@=", operator.imatmul, np.eye(3, dtype=np.float32) * 2.0),
]


@pytest.mark.parametrize(("symbol", "inplace", "other"), POW_MATMUL, ids=["**=", "@="])
def test_pow_and_matmul_in_place_on_a_leaf_raise_under_grad_mode(
    symbol: str, inplace: Callable[[Any, Any], Any], other: Any
) -> None:
    """``w **= 2`` and ``w @= m`` follow ``+=``: on a leaf that requires grad, under grad mode,
    an ``InPlaceError`` (not a silent rebinding of ``w`` to a non-leaf), nothing recorded."""
    w = tg.tensor(A, requires_grad=True)
    stats = tg.graph_stats()
    err = error_of(tg.InPlaceError, inplace, w, other)
    assert symbol in str(err) and "tg.no_grad()" in str(err)
    assert f"x = x {symbol[:-1]} y" in str(err) and "total" not in str(err)
    assert w.tolist() == A.tolist() and w.is_leaf
    assert tg.graph_stats() == stats


@pytest.mark.parametrize(("symbol", "inplace", "other"), POW_MATMUL, ids=["**=", "@="])
def test_pow_and_matmul_in_place_under_no_grad_update_the_parameter(
    symbol: str, inplace: Callable[[Any, Any], Any], other: Any
) -> None:
    """Under ``no_grad`` the parameter itself is updated (the tensor an optimizer holds keeps
    its node), as for ``-=``; before, the name was rebound to a new tensor that did not
    require grad and the parameter kept its old value."""
    w = tg.tensor(A, requires_grad=True)
    params = [w]
    node = w._node
    with tg.no_grad():
        w = inplace(w, other)
    assert w is params[0] and w._node is node and w.requires_grad and w.is_leaf
    expected = A**2 if symbol == "**=" else A @ other
    assert_close(w.data, expected)
    (g,) = tg.grad((w * w).sum(), w)  # the node still works, at the new value
    assert_close(g.data, 2 * expected)


def test_pow_and_matmul_in_place_on_a_non_leaf_rebind_and_differentiate() -> None:
    x = tg.tensor(A, requires_grad=True)
    c = x * 2.0
    c **= 3
    m = jnp.asarray(np.arange(9, dtype=np.float32).reshape(3, 3))
    c @= m
    (g,) = tg.grad(c.sum(), x)
    ref = jax.grad(lambda a: (((a * 2.0) ** 3) @ m).sum())(jnp.asarray(A))
    assert_close(g.data, ref)
    t = tg.tensor(A)
    before = t
    t **= 2  # nothing requires grad: the value is replaced in place, as for +=
    assert t is before and t.tolist() == (A**2).tolist()
    err = error_of(ValueError, operator.imatmul, tg.tensor(A), np.ones(3, np.float32))
    assert "In-place @=" in str(err) and "x = x @ y" in str(err)


@pytest.mark.parametrize(
    ("symbol", "inplace", "plain"),
    [
        ("&=", operator.iand, operator.and_),
        ("|=", operator.ior, operator.or_),
        ("^=", operator.ixor, operator.xor),
    ],
    ids=["&=", "|=", "^="],
)
def test_bitwise_in_place_follows_the_in_place_rules(
    symbol: str, inplace: Callable[[Any, Any], Any], plain: Callable[[Any, Any], Any]
) -> None:
    """``mask &= other`` updates the mask itself (an alias sees it), as ``+=`` does on a tensor
    that does not require grad and as PyTorch's ``&=`` does; the result keeps the target's
    shape and dtype kind (a boolean mask is not silently rebound to an int32 or broadcast
    tensor); on a float leaf that requires grad, the dtype error says what to do (compare
    first), not to wrap it in ``no_grad``."""
    a, b = np.array([True, False, True]), np.array([True, True, False])
    mask = tg.tensor(a)
    alias = mask
    mask = inplace(mask, tg.tensor(b))
    assert mask is alias and mask.tolist() == plain(a, b).tolist()
    n = tg.tensor(np.array([1, 2, 6], np.int32))
    same = n
    n = inplace(n, 3)
    assert (
        n is same and n.dtype == np.int32 and n.tolist() == plain(np.array([1, 2, 6]), 3).tolist()
    )
    err = error_of(TypeError, inplace, tg.tensor(a), tg.tensor(np.array([1, 2, 3], np.int32)))
    assert f"In-place {symbol}" in str(err)
    err = error_of(ValueError, inplace, tg.tensor(a), tg.tensor(np.ones((2, 3), bool)))
    assert f"In-place {symbol}" in str(err)
    w = tg.tensor(A, requires_grad=True)
    stats = tg.graph_stats()
    err = error_of(TypeError, inplace, w, 1)
    assert "compare first" in str(err) and "no_grad" not in str(err)
    assert w.is_leaf and tg.graph_stats() == stats
