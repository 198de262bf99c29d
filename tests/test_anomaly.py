"""``tg.detect_anomaly()`` (issue 16, item 9): a backward that produces NaN or inf raises at the
first VJP that did, naming the op, its origin (file:line) and function; the tape stays usable."""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of, origin_here

import tapegrad as tg

ZERO = np.array([0.0, 1.0], np.float32)


def _program(kind: str, x: tg.Tensor) -> tuple[tg.Tensor, str]:
    """A loss whose backward goes non-finite at one op; returns it and that op's origin."""
    if kind == "sqrt":
        y = x.sqrt()  # d sqrt / dx at 0 = inf
        origin = origin_here(-1)
    elif kind == "log":
        y = x.log()  # 1 / 0 = inf, and -inf * 0 = NaN in the forward's children
        origin = origin_here(-1)
    elif kind == "divide":
        y = 1.0 / x  # d(1/x)/dx = -1/x**2 = -inf
        origin = origin_here(-1)
    elif kind == "power":
        y = x**0.5
        origin = origin_here(-1)
    else:
        y = _user_op(x)
        origin = origin_here(-1)
    return (y * 2.0).sum(), origin


@tg.jax_op
def _user_op(a: jnp.ndarray) -> jnp.ndarray:
    return jnp.sqrt(a)


@pytest.mark.parametrize("kind", ["sqrt", "log", "divide", "power", "jax_op"])
def test_the_first_op_whose_vjp_goes_non_finite_is_named(kind: str) -> None:
    x = tg.tensor(ZERO, requires_grad=True)
    loss, origin = _program(kind, x)
    name = loss._node.parents[0].parents[0].name  # type: ignore[union-attr]
    stats = tg.graph_stats()
    with tg.detect_anomaly():
        err = error_of(RuntimeError, loss.backward)
    assert isinstance(err, tg.AnomalyError)
    message = str(err)
    assert f"op {name!r}" in message and origin in message and "_program" in message
    assert "inf" in message or "NaN" in message
    assert x.grad is None  # nothing written, as when a VJP raises
    assert tg.graph_stats().nodes <= stats.nodes
    del loss
    tg.graph_cleanup()
    y = (x * 3.0).sum()  # the tape still works, also in anomaly mode
    with tg.detect_anomaly():
        y.backward()
    assert x.grad is not None and x.grad.tolist() == [3.0, 3.0]


def test_the_op_nearest_the_loss_is_named_when_several_go_bad() -> None:
    x = tg.tensor(ZERO, requires_grad=True)
    a = x.sqrt()  # also non-finite, but reached later by the backward
    b = (a * 1.0).log()
    line = origin_here(-1)
    with tg.detect_anomaly():
        err = error_of(tg.AnomalyError, b.sum().backward)
    assert "op 'log'" in str(err) and line in str(err)
    del a, b


def test_a_non_finite_starting_gradient_is_named() -> None:
    x = tg.tensor(ZERO, requires_grad=True)
    y = x * 2.0
    with tg.detect_anomaly():
        err = error_of(tg.AnomalyError, y.backward, np.array([np.nan, 1.0], np.float32))
    assert "started from" in str(err) and "NaN" in str(err)
    assert y._node is not None and not y._node.consumed  # refused before any VJP ran


def test_finite_backwards_agree_with_and_without_anomaly_mode() -> None:
    x = tg.tensor(np.array([0.5, 2.0], np.float32), requires_grad=True)

    def run() -> list[float]:
        (g,) = tg.grad(((x.sqrt() + 1.0).log() / x).sum(), x)
        return list(g.tolist())

    plain = run()
    with tg.detect_anomaly():
        checked = run()
    assert plain == checked and np.isfinite(plain).all()


def test_outside_the_block_nothing_is_checked_and_it_works_as_a_decorator() -> None:
    x = tg.tensor(ZERO, requires_grad=True)
    x.sqrt().sum().backward()  # inf gradient, no error: anomaly mode is off
    assert x.grad is not None and np.isinf(x.grad.numpy()[0])
    assert not tg.anomaly.is_anomaly_enabled()

    @tg.detect_anomaly()
    def step() -> None:
        assert tg.anomaly.is_anomaly_enabled()
        x.sqrt().sum().backward()

    assert "sqrt" in str(error_of(tg.AnomalyError, step))
    assert not tg.anomaly.is_anomaly_enabled()


def test_grad_is_checked_too() -> None:
    x = tg.tensor(ZERO, requires_grad=True)
    f: Callable[[], object] = lambda: tg.grad(x.sqrt().sum(), x)  # noqa: E731
    with tg.detect_anomaly():
        assert "sqrt" in str(error_of(tg.AnomalyError, f))
