"""Threads (docs/design.md rule 10, rule 6 "safe from any thread"): training threads beside a thread
that cleans up in a loop, and a bounded stress of concurrent backward, cleanup and graph
merging. Every loop is bounded and every join has a timeout, so a deadlock fails, not hangs."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _recount import check_tape, checked_cleanup, delta

import tapegrad as tg

GS = tg.GraphStats
JOIN_S = 120.0  # generous: the machine is shared; a deadlock still fails


def run_threads(targets: list[Callable[[], None]]) -> list[str]:
    """Start one thread per target, join them with a timeout; return the errors they raised."""
    errors: list[str] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def body() -> None:
            try:
                fn()
            except BaseException as err:
                errors.append(f"{type(err).__name__}: {err}")

        return body

    threads = [threading.Thread(target=guarded(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_S)
    assert not any(t.is_alive() for t in threads), "a thread did not finish: deadlock?"
    return errors


def train(seed: int, steps: int) -> list[np.ndarray]:
    """Train one parameter for ``steps`` steps, dropping a require-grad tensor each step;
    return the gradient of every step."""
    x = tg.randn((5, 4), key=100 + seed)
    w = tg.randn((4, 3), key=seed).require_grad()
    grads = []
    for _ in range(steps):
        junk = tg.zeros((2, 2)).require_grad()
        del junk  # a hanging leaf for the cleaner
        loss = ((x @ w).tanh() ** 2).mean()
        loss.backward()
        del loss
        assert w.grad is not None
        grads.append(w.grad.numpy())
        with tg.no_grad():
            w -= 0.05 * w.grad
        w.grad = None
    return grads


def test_scenario_6_training_threads_beside_a_cleaning_thread(base: tg.GraphStats) -> None:
    seeds, steps = range(4), 200
    expected = {s: train(s, steps) for s in seeds}  # single-threaded reference
    checked_cleanup()
    got: dict[int, list[np.ndarray]] = {}
    done = threading.Event()
    sweeps: list[int] = []

    def trainer(seed: int) -> Callable[[], None]:
        def body() -> None:
            got[seed] = train(seed, steps)

        return body

    def cleaner() -> None:
        for _ in range(1_000_000):  # bounded
            if done.is_set():
                return
            sweeps.append(tg.graph_cleanup().leaves_removed)

    cleaning = threading.Thread(target=cleaner, daemon=True)
    cleaning.start()
    errors = run_threads([trainer(s) for s in seeds])
    done.set()
    cleaning.join(timeout=JOIN_S)
    assert not cleaning.is_alive()
    assert errors == []
    assert sum(sweeps) > 0  # the cleaner did remove leaves while the trainers ran
    for s in seeds:
        assert len(got[s]) == steps
        for step, (a, b) in enumerate(zip(got[s], expected[s], strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"thread {s}, step {step}")
    check_tape()
    checked_cleanup()
    assert delta(base) == GS()


def test_eight_threads_on_their_own_tapes_beside_the_process_tape_and_a_sweeper(
    base: tg.GraphStats,
) -> None:
    # docs/design.md "Tapes as values": each thread trains on its own tg.Tape, one more on the
    # process tape, while a sweeper cleans every tape in a loop; gradients equal the
    # single-threaded ones and no tape sees another's nodes
    seeds, steps = range(8), 60
    expected = {s: train(s, steps) for s in range(9)}  # single-threaded, process tape
    checked_cleanup()
    tapes: dict[int, tg.Tape] = {s: tg.Tape(f"thread {s}") for s in seeds}
    got: dict[int, list[np.ndarray]] = {}
    seen: dict[int, tg.Tape] = {}  # the tape each thread recorded on
    done = threading.Event()
    sweeps: list[int] = []

    def trainer(seed: int) -> Callable[[], None]:
        def body() -> None:
            if seed in tapes:
                with tg.use_tape(tapes[seed]):
                    got[seed] = train(seed, steps)
                    seen[seed] = tg.current_tape()
            else:  # a new thread starts on the process tape
                got[seed] = train(seed, steps)
                seen[seed] = tg.current_tape()

        return body

    def sweeper() -> None:
        for _ in range(1_000_000):  # bounded
            if done.is_set():
                return
            sweeps.append(tg.graph_cleanup().leaves_removed)
            for tape in tapes.values():
                sweeps.append(tape.cleanup().leaves_removed)

    sweeping = threading.Thread(target=sweeper, daemon=True)
    sweeping.start()
    errors = run_threads([trainer(s) for s in range(9)])
    done.set()
    sweeping.join(timeout=JOIN_S)
    assert not sweeping.is_alive()
    assert errors == []
    assert sum(sweeps) > 0
    for s in range(9):
        for step, (a, b) in enumerate(zip(got[s], expected[s], strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"thread {s}, step {step}")
    assert seen[8] is tg.current_tape()
    for s in seeds:
        assert seen[s] is tapes[s]
        # train() returned: its tensors are gone, so its tape holds nothing useful
        tapes[s].cleanup()
        assert tapes[s].stats() == GS()
    check_tape()
    checked_cleanup()
    assert delta(base) == GS()


def test_stress_concurrent_backward_cleanup_and_merging(base: tg.GraphStats) -> None:
    # every thread's graph merges with `shared` (held in a dict the test clears at the end)
    state = {"shared": tg.randn((3,), key=50).require_grad()}
    published: list[tg.Tensor] = []  # live tensors one thread offers the others
    lock = threading.Lock()
    rounds, workers = 60, 4
    stop = threading.Event()
    reads: list[tg.GraphStats] = []

    def worker(seed: int) -> Callable[[], None]:
        def body() -> None:
            p = tg.randn((3,), key=seed).require_grad()
            shared = state["shared"]
            for r in range(rounds):
                merged = (p * shared).tanh()  # merges p's graph with shared's
                loss = merged.sum()
                (gp,) = tg.grad(loss, [p])  # consumes loss and merged; shared is a leaf
                expected = shared.data * (1 - jnp.tanh(p.data * shared.data) ** 2)
                np.testing.assert_allclose(gp.numpy(), expected, rtol=1e-5, atol=1e-6)
                offer = p * float(r + 1)  # an unconsumed node another thread may use
                with lock:
                    published.append(offer)
                    theirs = published[(seed + r) % len(published)]
                # mixing another thread's graph: retain_graph so nobody's nodes are consumed
                joined = (offer * theirs).sum()
                (gj,) = tg.grad(joined, [p], retain_graph=True)
                assert np.all(np.isfinite(gj.numpy()))
                tg.zeros(2).require_grad()  # a hanging leaf for the cleaners
                del merged, loss, offer, theirs, joined
                if r % 10 == 9:
                    with lock:
                        published.clear()

        return body

    def cleaner() -> None:
        for _ in range(1_000_000):
            if stop.is_set():
                return
            tg.graph_cleanup()

    def reader() -> None:
        for _ in range(1_000_000):
            if stop.is_set():
                return
            reads.append(tg.graph_stats())
            tg.snapshot()

    side = [threading.Thread(target=fn, daemon=True) for fn in (cleaner, reader)]
    for t in side:
        t.start()
    errors = run_threads([worker(s) for s in range(workers)])
    stop.set()
    for t in side:
        t.join(timeout=JOIN_S)
    assert not any(t.is_alive() for t in side)
    assert errors == []
    assert reads and all(s.nodes >= 0 and s.hanging_nodes <= s.nodes for s in reads)
    check_tape()
    published.clear()
    state.clear()
    checked_cleanup()
    assert delta(base) == GS()


def test_vjps_run_outside_the_tape_lock(base: tg.GraphStats) -> None:
    # rule 10: while a VJP runs, another thread can read and clean the tape
    finished: list[str] = []

    def other_thread() -> None:
        tg.graph_stats()
        tg.graph_cleanup()
        tg.snapshot()
        finished.append("done")

    def forward(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
        return x * 1.0, ()

    def vjp(res: tuple[()], g: jax.Array) -> tuple[jax.Array]:
        thread = threading.Thread(target=other_thread, daemon=True)
        thread.start()
        thread.join(timeout=30)  # would time out if this thread held the tape's lock
        return (g,)

    probe = tg.Op(forward, name="lock_probe")
    probe.defvjp(vjp)
    w = tg.randn((3,), key=8).require_grad()
    probe(w).sum().backward()
    assert finished == ["done"]
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), np.ones(3, np.float32))
    del w
    assert delta(base) == GS()


# ----------------------------------------------------------------------------- a known race


def _gate(name: str, on_vjp: Callable[[], None]) -> tg.Op:
    """An identity op whose VJP calls ``on_vjp`` first (to force an interleaving)."""

    def forward(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
        return x + 0.0, ()

    def vjp(res: tuple[()], g: jax.Array) -> tuple[jax.Array]:
        on_vjp()
        return (g,)

    op = tg.Op(forward, name=name)
    op.defvjp(vjp)
    return op


def _two_passes_through_a_shared_node() -> dict[str, Any]:
    """Thread A backwards through a shared node ``h`` and is held inside a VJP; meanwhile the
    main thread starts a backward through ``h`` too and holds itself until A finished.
    Return plain results only (no tensor outlives this function)."""
    a_inside, a_may_go, a_done = threading.Event(), threading.Event(), threading.Event()

    def hold_a() -> None:
        a_inside.set()
        a_may_go.wait(10)

    def hold_b() -> None:
        a_may_go.set()
        a_done.wait(10)

    gate_a, gate_b = _gate("gate_a", hold_a), _gate("gate_b", hold_b)
    w = tg.randn((3,), key=7).require_grad()
    h = (w * 2.0).tanh()
    held = {"a": gate_a(h).sum(), "w": w}
    loss_b = gate_b(h * 3.0).sum()
    del h
    out: dict[str, Any] = {}

    def run_a() -> None:
        try:
            (g,) = tg.grad(held["a"], [held["w"]])
            out["a"] = g.numpy()
        except Exception as err:
            out["a"] = type(err).__name__
        a_done.set()

    thread = threading.Thread(target=run_a, daemon=True)
    thread.start()
    assert a_inside.wait(10)
    try:
        tg.grad(loss_b, [w])
        out["b"] = "ok"
    except Exception as err:
        out["b"] = type(err).__name__
    a_may_go.set()
    thread.join(10)
    out["alive"] = thread.is_alive()
    out["expected_a"] = np.asarray(2.0 * (1 - jnp.tanh(2.0 * w.data) ** 2))
    held.clear()
    del loss_b, w
    tg.graph_cleanup()
    return out


def test_concurrent_backward_through_a_shared_node_raises_graph_consumed() -> None:
    out = _two_passes_through_a_shared_node()
    assert out["alive"] is False
    assert not isinstance(out["a"], str), out["a"]
    np.testing.assert_allclose(out["a"], out["expected_a"], rtol=1e-5, atol=1e-7)
    # docs/design.md rule 1: the walk meets a node consumed by the other pass: RuntimeError
    # naming retain_graph, before any VJP runs (docs/api.md "Errors")
    assert out["b"] == "GraphConsumedError"


def _second_pass_while_the_first_is_inside_its_vjps(
    first_retains: bool, second_retains: bool
) -> dict[str, Any]:
    """A first pass (on a thread) through a shared node ``h`` is held inside a VJP that runs
    before ``h``'s; a second pass through ``h`` runs to its end meanwhile; then the first
    resumes. Return plain results only."""
    inside, may_go = threading.Event(), threading.Event()

    def hold() -> None:
        inside.set()
        may_go.wait(10)

    gate = _gate("gate_first", hold)
    w = tg.randn((3,), key=9).require_grad()
    h = (w * 2.0).tanh()
    held = {"first": gate(h).sum(), "w": w}
    second = (h * 3.0).sum()
    del h
    out: dict[str, Any] = {}

    def run_first() -> None:
        try:
            (g,) = tg.grad(held["first"], [held["w"]], retain_graph=first_retains)
            out["first"] = g.numpy()
        except Exception as err:
            out["first"] = type(err).__name__

    thread = threading.Thread(target=run_first, daemon=True)
    thread.start()
    assert inside.wait(10)
    try:
        (g,) = tg.grad(second, [w], retain_graph=second_retains)
        out["second"] = g.numpy()
    except Exception as err:
        out["second"] = type(err).__name__
    may_go.set()
    thread.join(10)
    out["alive"] = thread.is_alive()
    dh = 1 - jnp.tanh(2.0 * w.data) ** 2
    out["expected_first"] = np.asarray(2.0 * dh)
    out["expected_second"] = np.asarray(6.0 * dh)
    held.clear()
    del second, w
    tg.graph_cleanup()
    return out


def test_a_retaining_pass_completes_while_another_pass_consumes_its_nodes() -> None:
    # the first pass collected h before the second consumed it: it runs on what it collected
    out = _second_pass_while_the_first_is_inside_its_vjps(True, False)
    assert out["alive"] is False
    assert not isinstance(out["second"], str), out["second"]
    assert not isinstance(out["first"], str), out["first"]  # not an exception's name
    np.testing.assert_allclose(out["second"], out["expected_second"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out["first"], out["expected_first"], rtol=1e-5, atol=1e-7)


def test_a_pass_meeting_nodes_another_pass_is_consuming_raises() -> None:
    # the first pass (no retain_graph) claimed h: the second meets it as consumed, before any
    # VJP runs, whether or not it retains the graph itself
    for second_retains in (False, True):
        out = _second_pass_while_the_first_is_inside_its_vjps(False, second_retains)
        assert out["alive"] is False
        assert out["second"] == "GraphConsumedError"
        assert not isinstance(out["first"], str), out["first"]
        np.testing.assert_allclose(out["first"], out["expected_first"], rtol=1e-5, atol=1e-7)


def test_threads_backwarding_into_one_leaf_lose_no_gradient() -> None:
    """Workers sharing a parameter: each backward's add into ``.grad`` is whole (as in
    PyTorch), so the sum is exact however the threads interleave."""
    w = tg.tensor([1.0, 2.0, 3.0]).require_grad()
    n = 150
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible

    def worker() -> None:
        for _ in range(n):
            (w * 2.0).sum().backward()

    try:
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        sys.setswitchinterval(switch)
    assert not any(t.is_alive() for t in threads)
    np.testing.assert_array_equal(w.grad.numpy(), [4.0 * n] * 3)
