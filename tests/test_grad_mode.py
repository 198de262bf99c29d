"""Grad mode (docs/api.md "Gradients"): no_grad / enable_grad / set_grad_enabled as context
managers and decorators, nesting, per-thread state, and no_grad recording nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _support import X

import tapegrad as tg


def test_grad_mode_is_on_by_default() -> None:
    assert tg.is_grad_enabled() is True


@pytest.mark.parametrize(
    ("make", "inside"),
    [
        (tg.no_grad, False),
        (tg.enable_grad, True),
        (lambda: tg.set_grad_enabled(False), False),
        (lambda: tg.set_grad_enabled(True), True),
    ],
    ids=["no_grad", "enable_grad", "set_false", "set_true"],
)
def test_context_managers_set_and_restore(make: Callable[[], Any], inside: bool) -> None:
    for outer in (True, False):
        with tg.set_grad_enabled(outer):
            with make():
                assert tg.is_grad_enabled() is inside
            assert tg.is_grad_enabled() is outer
    assert tg.is_grad_enabled() is True


def test_decorators_set_the_mode_for_each_call_and_restore_it() -> None:
    @tg.no_grad()
    def off() -> bool:
        return tg.is_grad_enabled()

    @tg.enable_grad()
    def on() -> bool:
        return tg.is_grad_enabled()

    @tg.set_grad_enabled(False)
    def set_off() -> bool:
        return tg.is_grad_enabled()

    assert tg.is_grad_enabled() is True  # decorating did not switch the mode
    assert (off(), on(), set_off()) == (False, True, False)
    assert tg.is_grad_enabled() is True
    with tg.no_grad():
        assert on() is True
        assert tg.is_grad_enabled() is False
    assert off() is False and off() is False  # the decorator works for repeated calls
    assert off.__name__ == "off"


def test_no_grad_and_enable_grad_decorate_without_parentheses() -> None:
    """``@tg.no_grad`` (no call), as PyTorch allows; a non-function argument says what to do."""
    w = tg.ones(3).require_grad()

    @tg.no_grad
    def off(x: tg.Tensor) -> tuple[bool, bool]:
        return (x * 2.0).requires_grad, tg.is_grad_enabled()

    @tg.enable_grad
    def on() -> bool:
        return tg.is_grad_enabled()

    assert tg.is_grad_enabled() is True
    assert off(w) == (False, False) and off(w) == (False, False)
    assert off.__name__ == "off"
    with tg.no_grad():
        assert on() is True
        assert tg.is_grad_enabled() is False
    assert tg.is_grad_enabled() is True
    with pytest.raises(TypeError, match=r"no_grad takes no arguments; use `with tg.no_grad\(\):`"):
        tg.no_grad(3)  # type: ignore[arg-type]


def test_nesting_restores_each_level() -> None:
    seen = []
    with tg.no_grad():
        seen.append(tg.is_grad_enabled())
        with tg.enable_grad():
            seen.append(tg.is_grad_enabled())
            with tg.set_grad_enabled(False):
                seen.append(tg.is_grad_enabled())
                with tg.no_grad():
                    seen.append(tg.is_grad_enabled())
                seen.append(tg.is_grad_enabled())
            seen.append(tg.is_grad_enabled())
        seen.append(tg.is_grad_enabled())
    seen.append(tg.is_grad_enabled())
    assert seen == [False, True, False, False, False, True, False, True]


def test_one_instance_reentered() -> None:
    ctx = tg.no_grad()
    with ctx:
        with ctx:
            assert tg.is_grad_enabled() is False
        assert tg.is_grad_enabled() is False
    assert tg.is_grad_enabled() is True


def test_set_grad_enabled_as_a_plain_call() -> None:
    tg.set_grad_enabled(False)
    try:
        assert tg.is_grad_enabled() is False
    finally:
        tg.set_grad_enabled(True)
    assert tg.is_grad_enabled() is True


def test_set_grad_enabled_rejects_non_bool() -> None:
    with pytest.raises(TypeError, match="bool"):
        tg.set_grad_enabled(1)  # type: ignore[arg-type]
    assert tg.is_grad_enabled() is True


def test_exception_inside_restores_the_mode() -> None:
    with pytest.raises(KeyError):
        with tg.no_grad():
            raise KeyError("x")
    assert tg.is_grad_enabled() is True

    @tg.no_grad()
    def fails() -> None:
        raise KeyError("y")

    with pytest.raises(KeyError):
        fails()
    assert tg.is_grad_enabled() is True


def test_no_grad_records_zero_nodes() -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    with tg.no_grad():
        y = ((w * 2.0).exp() @ w).sum() + w.max()
        z = tg.where(w > 0, w, -w).sum()
        v = tg.tensor(X, requires_grad=False) * w
    assert tg.graph_stats() == stats
    for t in (y, z, v):
        assert t.requires_grad is False and t.is_leaf
    np.testing.assert_allclose(y.item(), float(np.exp(2 * X) @ X + X.max()), rtol=1e-6)
    err = pytest.raises(RuntimeError, y.backward)
    assert "no_grad" in str(err.value)
    del err


def test_leaves_can_be_made_under_no_grad() -> None:
    with tg.no_grad():
        w = tg.tensor(X).require_grad()  # a leaf is the user's choice, not a recorded op
        assert w.requires_grad and w.is_leaf
        y = w * 2.0
    assert y.requires_grad is False
    (w * 3.0).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [3.0, 3.0, 3.0]


def test_enable_grad_inside_no_grad_records_again() -> None:
    w = tg.tensor(X).require_grad()
    with tg.no_grad():
        with tg.enable_grad():
            y = (w * w).sum()
        assert y.requires_grad
    y.backward()
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), 2 * X)


def test_grad_mode_is_per_thread() -> None:
    entered, checked = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def quiet() -> None:
        with tg.no_grad():
            entered.set()
            checked.wait(10)
            seen["quiet"] = tg.is_grad_enabled()

    def busy() -> None:
        entered.wait(10)
        seen["busy"] = tg.is_grad_enabled()
        w = tg.tensor(X).require_grad()
        seen["recorded"] = (w * 2.0).requires_grad
        checked.set()

    threads = [threading.Thread(target=quiet), threading.Thread(target=busy)]
    with tg.no_grad():  # this thread's mode affects neither
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert seen == {"quiet": False, "busy": True, "recorded": True}
    assert tg.is_grad_enabled() is True


def test_new_threads_start_with_grad_enabled() -> None:
    seen = []
    with tg.no_grad():
        t = threading.Thread(target=lambda: seen.append(tg.is_grad_enabled()))
        t.start()
        t.join(10)
    assert seen == [True]


def test_decorated_function_on_several_threads_at_once() -> None:
    barrier = threading.Barrier(4, timeout=10)
    seen: list[bool] = []
    lock = threading.Lock()

    @tg.no_grad()
    def work() -> None:
        barrier.wait()  # every thread is inside the decorated call at the same time
        with lock:
            seen.append(tg.is_grad_enabled())
        barrier.wait()

    def run() -> None:
        work()
        with lock:
            seen.append(tg.is_grad_enabled())

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(seen) == [False] * 4 + [True] * 4
    assert tg.is_grad_enabled() is True


def test_one_instance_shared_by_two_threads_restores_each_threads_mode() -> None:
    shared = tg.no_grad()
    a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def a() -> None:  # grad mode on before entering
        with shared:
            a_inside.set()
            b_inside.wait(10)
        seen["a"] = tg.is_grad_enabled()
        a_left.set()

    def b() -> None:  # grad mode off before entering
        tg.set_grad_enabled(False)
        a_inside.wait(10)
        with shared:
            b_inside.set()
            a_left.wait(10)
        seen["b"] = tg.is_grad_enabled()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"a": True, "b": False}
