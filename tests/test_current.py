"""Tapes as values (tapegrad/current.py, tapegrad/tape.py): ``tg.Tape``, ``tg.current_tape()``,
``tg.use_tape``, ``tg.TapeMismatchError``, per-tape stats, cleanup, snapshot and policy, backward
on the root's tape, and bad input (docs/api.md and docs/design.md, "Tapes as values")."""

from __future__ import annotations

import contextvars
import threading
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _recount import check_tape
from _support import gc_off

import tapegrad as tg

X = np.arange(6.0, dtype=np.float32).reshape(2, 3) / 4


def graph(w: tg.Tensor) -> tg.Tensor:
    return ((tg.tensor(X) @ w).tanh() ** 2).sum()


def oracle(w: np.ndarray) -> np.ndarray:
    return np.asarray(jax.grad(lambda v: jnp.sum(jnp.tanh(jnp.asarray(X) @ v) ** 2))(w))


W = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(3, 2)


# ----------------------------------------------------------------------------- current_tape


def test_the_process_tape_is_current_by_default_and_in_new_threads() -> None:
    process = tg.current_tape()
    assert isinstance(process, tg.Tape) and process.name == "process"
    seen: list[tg.Tape] = []
    with tg.use_tape(tg.Tape()):
        t = threading.Thread(target=lambda: seen.append(tg.current_tape()))
        t.start()
        t.join(30)
    assert seen == [process]
    assert tg.current_tape() is process


def test_use_tape_records_there_restores_on_exit_and_nests() -> None:
    process = tg.current_tape()
    a, b = tg.Tape("a"), tg.Tape("b")
    before = process.stats()
    with tg.use_tape(a) as got:
        assert got is a and tg.current_tape() is a
        wa = tg.tensor(W).require_grad()
        with tg.use_tape(b):
            assert tg.current_tape() is b
            wb = tg.tensor(W).require_grad()
            yb = wb * 2.0
        assert tg.current_tape() is a
        ya = wa * 2.0
    assert tg.current_tape() is process
    assert (a.stats().nodes, b.stats().nodes) == (2, 2)
    assert process.stats() == before
    assert ya.requires_grad and yb.requires_grad


def test_use_tape_restores_the_previous_tape_after_an_exception() -> None:
    process = tg.current_tape()
    with pytest.raises(ZeroDivisionError), tg.use_tape(tg.Tape()):
        1 / 0  # noqa: B018
    assert tg.current_tape() is process


@pytest.mark.parametrize("bad", [None, 3, "process", object()])
def test_use_tape_refuses_what_is_not_a_tape(bad: Any) -> None:
    before = tg.graph_stats()
    with pytest.raises(TypeError, match=r"tg\.Tape"):
        tg.use_tape(bad)
    assert tg.graph_stats() == before and tg.current_tape().name == "process"


def test_tape_name_must_be_a_string_and_shows_in_repr() -> None:
    with pytest.raises(TypeError, match="name"):
        tg.Tape(3)  # type: ignore[arg-type]
    assert "'mine'" in repr(tg.Tape("mine"))
    assert tg.Tape().name != tg.Tape().name  # default names are distinct


def test_a_copied_context_carries_the_tape_and_grad_mode() -> None:
    tape = tg.Tape()
    with tg.use_tape(tape), tg.no_grad():
        ctx = contextvars.copy_context()
    assert ctx.run(lambda: (tg.current_tape(), tg.is_grad_enabled())) == (tape, False)
    assert tg.current_tape() is not tape and tg.is_grad_enabled()


# ----------------------------------------------------------------------------- per-tape state


def test_module_functions_act_on_the_current_tape() -> None:
    tape = tg.Tape()
    with tg.use_tape(tape):
        junk = tg.ones(3).require_grad()
        del junk
        assert tg.graph_stats() == tape.stats()
        assert tg.graph_stats().hanging_leaves == 1
        assert [r.kind for r in tg.snapshot().nodes] == ["leaf"]
        tg.set_cleanup_policy("auto")
        assert tg.get_cleanup_policy() == "auto" == tape.get_cleanup_policy()
        assert tape.stats().nodes == 0  # switching to auto swept this tape
    assert tg.get_cleanup_policy() == "manual"


def test_cleanup_of_one_tape_never_touches_another() -> None:
    a, b = tg.Tape(), tg.Tape()
    params = []
    for tape in (a, b):
        with tg.use_tape(tape):
            w = tg.tensor(W).require_grad()
            params.append(w)
            graph(w)  # dropped: a hanging graph
            junk = tg.ones(2).require_grad()
            del junk
    assert a.stats() == b.stats()
    held = b.stats()
    assert held.hanging_nodes > 0
    removed = a.cleanup()
    assert removed.nodes_removed == held.hanging_nodes
    assert b.stats() == held and a.stats().hanging_nodes == 0
    with tg.use_tape(b):
        check_tape()
        assert tg.graph_cleanup().nodes_removed == held.hanging_nodes


def test_policies_are_per_tape() -> None:
    a = tg.Tape()
    a.set_cleanup_policy("threshold", threshold=3)
    assert a.get_cleanup_policy() == "threshold" and tg.get_cleanup_policy() == "manual"
    with tg.use_tape(a):
        for _ in range(5):
            tg.ones(2).require_grad()  # dropped at once: hanging leaves
    assert a.stats().nodes < 5  # a threshold sweep ran on a
    with pytest.raises(ValueError, match="threshold"):
        a.set_cleanup_policy("threshold")
    assert a.get_cleanup_policy() == "threshold"


# ----------------------------------------------------------------------------- mismatch


def test_mixing_tapes_in_one_op_raises_and_leaves_both_tapes_as_they_were() -> None:
    other = tg.Tape("other")
    with tg.use_tape(other):
        w = tg.tensor(W).require_grad()
    x = tg.tensor(X).require_grad()  # on the process tape
    before_p, before_o = tg.graph_stats(), other.stats()
    assert issubclass(tg.TapeMismatchError, RuntimeError)
    with pytest.raises(tg.TapeMismatchError, match=r"'other'.*'process'.*no_grad"):
        x @ w
    with tg.use_tape(other), pytest.raises(tg.TapeMismatchError, match="input 0"):
        x * 2.0
    assert tg.graph_stats() == before_p and other.stats() == before_o
    with tg.no_grad():  # evaluating another tape's parameters: no_grad or detach
        np.testing.assert_allclose((x @ w).numpy(), X @ W, rtol=1e-6)
    y = (x @ w.detach()).sum()
    y.backward()
    assert x.grad is not None and w.grad is None


def test_the_issue_example_no_longer_gives_a_silently_wrong_gradient() -> None:
    # Issue 10: a parent from another tape was accepted, node ids collided and the gradient
    # came out -4.2 instead of 0.6. Now the op refuses, and each tape alone is right.
    other = tg.Tape()
    a = tg.tensor(0.3).require_grad()
    with tg.use_tape(other):
        b = tg.tensor(2.0).require_grad()
        with pytest.raises(tg.TapeMismatchError):
            a * b
        c = b * 0.3
    loss = a * 2.0
    loss.backward()
    c.backward()
    assert float(a.grad) == pytest.approx(2.0) and float(b.grad) == pytest.approx(0.3)


def test_grad_across_tapes_raises_before_any_vjp() -> None:
    other = tg.Tape()
    with tg.use_tape(other):
        w = tg.tensor(W).require_grad()
    x = tg.tensor(X).require_grad()
    loss = (x * 2.0).sum()
    with pytest.raises(tg.TapeMismatchError, match="different tapes"):
        tg.grad(loss, [x, w])
    (gx,) = tg.grad(loss, x)  # nothing was consumed by the refused call
    np.testing.assert_allclose(gx.numpy(), np.full_like(X, 2.0))


# ----------------------------------------------------------------------------- backward


def test_backward_runs_on_the_roots_tape_whatever_is_current() -> None:
    tape = tg.Tape()
    with tg.use_tape(tape):
        w = tg.tensor(W).require_grad()
        loss = graph(w)
    before = tg.graph_stats()
    loss.backward()  # the process tape is current here
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), oracle(W), rtol=1e-5)
    assert tg.graph_stats() == before
    del loss
    assert tape.stats().nodes == 1  # only w: rule 4 on the tape's own graph
    with tg.use_tape(tape):
        check_tape()


def test_retain_grad_goes_through_the_tape() -> None:
    tape = tg.Tape()
    with tg.use_tape(tape):
        w = tg.tensor(W).require_grad()
        h = tg.tensor(X) @ w
        h.retain_grad()
        (h**2).sum().backward()
    assert h.grad is not None
    np.testing.assert_allclose(h.grad.numpy(), 2 * (X @ W), rtol=1e-5)


def test_requires_grad_false_releases_the_leaf_on_its_own_tape() -> None:
    tape = tg.Tape()
    with tg.use_tape(tape):
        w = tg.tensor(W).require_grad()
    assert tape.stats().live_nodes == 1
    w.requires_grad_(False)  # no graph uses it: off its tape at once, nothing hangs
    assert tape.stats() == tg.GraphStats()


# ----------------------------------------------------------------------------- lifetime


def test_a_tensor_keeps_its_tape_alive_and_a_dropped_tape_is_freed_at_once() -> None:
    with gc_off():
        tape = tg.Tape()
        gone = weakref.ref(tape)
        with tg.use_tape(tape):
            w = tg.tensor(W).require_grad()
            loss = graph(w)
            junk = tg.ones(4).require_grad()
            del junk  # a hanging leaf the tape holds
        saved = [  # the residuals, without cached Python-scalar constants (0-d)
            weakref.ref(a) for n in tape._nodes.values() for a in _arrays(n.saved) if a.ndim
        ]
        del tape
        assert gone() is not None  # loss and w keep it
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), oracle(W), rtol=1e-5)  # type: ignore[union-attr]
        del loss, w
        assert gone() is None  # no reference cycle: freed without the cycle collector
        assert saved and all(r() is None for r in saved)


def test_a_dropped_tape_with_a_hanging_graph_is_freed_at_once() -> None:
    with gc_off():
        tape = tg.Tape()
        gone = weakref.ref(tape)
        with tg.use_tape(tape):
            w = tg.tensor(W).require_grad()
            y = graph(w)
        del tape, y  # y's graph hangs on the tape; w still lives
        assert gone() is not None
        del w
        assert gone() is None


def _arrays(saved: Any) -> list[jax.Array]:
    return [a for a in jax.tree_util.tree_leaves(saved) if isinstance(a, jax.Array)]


# ----------------------------------------------------------------------------- tracers


def test_only_a_tape_that_allows_tracers_records_them() -> None:
    private = tg.Tape("trace", allow_tracers=True)
    assert private.allow_tracers and not tg.current_tape().allow_tracers

    def step(v: jax.Array) -> jax.Array:
        w = tg.Tensor(v).require_grad()
        loss = (w * w).sum()
        (g,) = tg.grad(loss, w)
        return g.data

    with pytest.raises(tg.TracerError, match="'process'"):
        jax.jit(step)(jnp.ones(3))
    with tg.use_tape(private):
        out = jax.jit(step)(jnp.ones(3))
    np.testing.assert_allclose(np.asarray(out), 2.0)
    assert private.stats().live_nodes == 0


def test_setting_a_tracer_as_data_is_refused_by_the_tensors_tape() -> None:
    w = tg.tensor(W).require_grad()

    def set_data(v: jax.Array) -> jax.Array:
        w.data = v
        return v

    with pytest.raises(tg.TracerError, match=r"Tensor\.data"):
        jax.jit(set_data)(jnp.zeros((3, 2)))
    np.testing.assert_allclose(w.numpy(), W)


# ----------------------------------------------------------------------------- residuals


def test_residuals_keep_their_provenance_as_node_and_array_at_forward_time() -> None:
    a = tg.tensor(X).require_grad()
    b = tg.tensor(X + 1)  # a constant input: no node
    y = (a * b).exp()
    mul, exp = y._node.parents[0], y._node  # type: ignore[union-attr]
    assert mul is not None and exp is not None
    a_array, b_array = a.data, b.data
    with tg.no_grad():
        a += 1.0  # a later in-place update does not change what was saved
    assert mul.residuals() == ((a._node, a_array), (None, b_array))
    assert exp.residuals() == ((exp, y.data),)
    s = a.sum()  # saves a shape only
    assert s._node.residuals() == ((None, X.shape),)  # type: ignore[union-attr]
    y.backward(np.ones_like(X))
    assert exp.residuals() is None  # consumed: released


def test_provenance_creates_no_reference_cycle() -> None:
    with gc_off():
        a = tg.tensor(X).require_grad()
        y = (a * a).exp()  # exp saves its own output: -1, not a reference to its node
        kept = weakref.ref(y.data)
        del y
        assert tg.graph_cleanup().nodes_removed == 2
        assert kept() is None  # the exp node and its residual went by reference counting


def test_a_cotangent_on_another_tape_is_refused_before_the_pass() -> None:
    """With ``create_graph`` a cotangent that requires grad is differentiated through: one on
    another tape is refused up front, naming the argument, and both tapes stay as they were."""
    w = tg.tensor([1.0, 2.0, 3.0]).require_grad()
    y = (w * w).tanh()
    other = tg.Tape("T")
    with tg.use_tape(other):
        v = tg.ones(3).require_grad()
    before_p, before_o = tg.graph_stats(), other.stats()
    with pytest.raises(tg.TapeMismatchError, match=r"backward\(grad=\.\.\.\).*'T'.*detach"):
        y.backward(v, create_graph=True)
    with pytest.raises(tg.TapeMismatchError, match=r"grad_outputs.*'T'"):
        tg.grad(y, w, v, create_graph=True)
    assert tg.graph_stats() == before_p and other.stats() == before_o
    y.backward(v.detach())  # a constant cotangent is fine
    want = 2 * np.arange(1.0, 4.0) * (1 - np.tanh(np.arange(1.0, 4.0) ** 2) ** 2)
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5, atol=1e-6)
