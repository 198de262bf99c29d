"""A KeyboardInterrupt at any line of tapegrad's bookkeeping leaves the tape consistent
(docs/design.md "Interrupts", issue 16 item 8): stats agree with the snapshot, cleanup frees what
it should, a graph built before the interrupt either backwards or says it was consumed (never
that another thread holds it), and new graphs differentiate correctly.

Interrupts are injected with ``sys.settrace``: one run of a small training step per line of
the tape's modules (and backward's) that the step executes, the interrupt raised the first
time that line runs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _recount import check_tape

import tapegrad as tg
from tapegrad import compiled_backward, kernels

PACKAGE = Path(tg.__file__).parent
BOOKKEEPING = {
    str(PACKAGE / name)
    for name in ("tape.py", "census.py", "node.py", "backward.py", "compiled_backward.py")
}
X = np.arange(6.0, dtype=np.float32).reshape(2, 3) / 4
W = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(3, 2)


def oracle(w: np.ndarray) -> np.ndarray:
    return np.asarray(jax.grad(lambda v: jnp.sum(jnp.tanh(jnp.asarray(X) @ v) ** 2))(w))


def step(state: dict[str, Any]) -> None:
    """A training step with the usual mistakes; what it made so far stays in ``state``."""
    state["w"] = w = tg.tensor(W).require_grad()
    junk = tg.ones(2).require_grad()
    del junk  # a hanging leaf
    (w * 2.0).sum()  # a hanging graph
    state["loss"] = loss = ((tg.tensor(X) @ w).tanh() ** 2).sum()
    state["kept"] = (w * 3.0).sum()  # another graph, never backwarded
    loss.backward()
    del loss
    state.pop("loss")
    with tg.no_grad():
        w -= 0.1 * w.grad  # type: ignore[operator]
    tg.current_tape().cleanup()


Line = tuple[str, int]


class Injector:
    """A ``sys.settrace`` tracer recording the lines run in the bookkeeping modules (in first-run
    order) and raising ``KeyboardInterrupt`` the first time line ``at`` runs (never, if None)."""

    def __init__(self, at: Line | None) -> None:
        self.at = at
        self.lines: dict[Line, None] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if frame.f_code.co_filename in BOOKKEEPING:
            return self.local
        return None

    def local(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            line = (frame.f_code.co_filename, frame.f_lineno)
            self.lines[line] = None
            if line == self.at:
                self.at = None
                raise KeyboardInterrupt(f"injected at {frame.f_code.co_name}:{frame.f_lineno}")
        return self.local


def traced(at: Line | None, state: dict[str, Any]) -> tuple[bool, list[Line]]:
    """Run ``step`` with an interrupt at line ``at``; return (interrupted, lines run)."""
    injector = Injector(at)
    sys.settrace(injector)
    try:
        step(state)
    except KeyboardInterrupt:
        return True, list(injector.lines)
    finally:
        sys.settrace(None)
    return False, list(injector.lines)


def check_after(tape: tg.Tape, state: dict[str, Any]) -> None:
    with tg.use_tape(tape):
        check_tape()  # stats agree with a recount of the snapshot
        ids = {r.id for r in tape.snapshot().nodes}
        probe = tg.ones(1).require_grad()  # a new node takes an id no node on the tape has
        assert {r.id for r in tape.snapshot().nodes} - ids != set()
        del probe
        loss = state.pop("loss", None)
        if loss is not None:  # built before the interrupt: backwards, or says it was consumed
            try:
                loss.backward()
            except tg.GraphConsumedError as err:
                assert "another thread" not in str(err)
            del loss
        state.clear()
        tape.cleanup()
        assert tape.stats() == tg.GraphStats()  # everything dropped: the tape is empty
        w = tg.tensor(W).require_grad()
        ((tg.tensor(X) @ w).tanh() ** 2).sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), oracle(W), rtol=1e-5)  # type: ignore[union-attr]
        del w
        tape.cleanup()
        assert tape.stats() == tg.GraphStats()


@pytest.fixture(params=["eager", "compiled"])
def backward_mode(request: pytest.FixtureRequest) -> Any:
    """Every backward of the test eager, or every one compiled (``compiled_backward``): each run
    must take the same lines, so the pass is compiled before the first traced run."""
    before = compiled_backward.compile_after()
    compiled_backward.clear()
    if request.param == "compiled":
        compiled_backward.set_compile_after(0)
        for _ in range(3):  # eager, then compiled once the background thread compiled it
            with tg.use_tape(tg.Tape()):
                step({})
            pool = kernels._background()
            if pool is not None:
                pool.submit(int).result()
        assert any(e.compiled is not None for e in compiled_backward.cached())
    else:
        compiled_backward.set_compile_after(None)
    yield request.param
    compiled_backward.set_compile_after(before)
    compiled_backward.clear()


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["manual", "auto"])
def test_an_interrupt_at_any_line_of_the_bookkeeping_leaves_the_tape_consistent(
    policy: str, backward_mode: str
) -> None:
    def fresh() -> tg.Tape:
        tape = tg.Tape()
        tape.set_cleanup_policy(policy)
        return tape

    tape, state = fresh(), {}
    with tg.use_tape(tape):
        interrupted, lines = traced(None, state)
    assert not interrupted and len(lines) > 50
    check_after(tape, state)
    missed = []
    for at in lines:
        tape, state = fresh(), {}
        with tg.use_tape(tape):
            interrupted, _ = traced(at, state)
        if not interrupted:  # a line only a first run takes (a cache filled once)
            missed.append(at)
        check_after(tape, state)
    assert len(missed) <= len(lines) // 20, missed
