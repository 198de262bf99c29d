"""Cleanup policies (docs/design.md rule 5): "manual" keeps unconsumed hanging nodes for a sweep,
"auto" frees each node the moment it becomes hanging, "threshold" sweeps when the node count
reaches ``survivors + max(threshold, survivors)``; the policy is process-wide."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from _recount import check_tape, checked_cleanup, delta, tape_ids

import tapegrad as tg


@pytest.fixture
def manual_after() -> Iterator[None]:
    """Restore the default policy whatever the test did."""
    try:
        yield
    finally:
        tg.set_cleanup_policy("manual")


def useful_is_tape() -> None:
    """The tape holds exactly the useful set (brute-force recount)."""
    snap, recount = check_tape()
    assert {r.id for r in snap.nodes} == recount.useful
    assert snap.stats.hanging_nodes == 0 and snap.stats.dead_graphs == 0


# ----------------------------------------------------------------------------- manual


def test_manual_keeps_hanging_nodes(base: tg.GraphStats) -> None:
    assert tg.get_cleanup_policy() == "manual"  # the suite's policy (conftest)
    w = tg.randn((3,), key=0).require_grad()
    (w * 2.0).sum()  # a second loss never backwarded
    tg.zeros(2).require_grad()  # a dropped require-grad tensor
    for _ in range(3):
        tg.graph_stats()
        tg.snapshot()
    got = delta(base)
    assert (got.nodes, got.hanging_nodes, got.hanging_leaves) == (4, 3, 1)
    stats = checked_cleanup()
    assert (stats.nodes_removed, stats.leaves_removed, stats.graphs_removed) == (3, 1, 1)
    del w


# ----------------------------------------------------------------------------- the default


def test_the_default_is_threshold_10000_in_a_fresh_process_and_on_a_new_tape() -> None:
    code = (
        "import tapegrad as tg; t = tg.current_tape(); "
        "print(tg.get_cleanup_policy(), t.threshold, tg.Tape().get_cleanup_policy())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["threshold", "10000", "threshold"]
    assert tg.Tape().threshold == 10_000


def test_the_default_bounds_an_eval_loop_without_no_grad_and_the_ledger_counts_it() -> None:
    # Evaluation without no_grad, a dropped output, .item() on an intermediate: the default
    # sweeps them in bounded batches, and the ledger still counts every one with its origin.
    tape = tg.Tape()
    with tg.use_tape(tape):
        w = tg.randn((4, 4), key=0).require_grad()
        x = tg.ones((2, 4))
        peak = 0
        for _ in range(7_000):
            (x @ w).tanh().sum().item()  # 3 op nodes hang per step  # noqa: B018
            peak = max(peak, tape.stats().nodes) if _ % 500 == 0 else peak
        stats = tape.stats()
        ledger = tape.snapshot().ledger
    assert stats.nodes <= 1 + 2 * 10_000 and peak <= 1 + 2 * 10_000
    swept = {r.op: r.count for r in ledger}
    assert set(swept) == {"matmul", "tanh", "sum"}
    assert all(swept[op] + stats.hanging_nodes // 3 == 7_000 for op in swept)
    record = next(r for r in ledger if r.op == "tanh")
    assert record.kind == "op" and record.origin.endswith(":" + str(_line_of("(x @ w)")))
    assert record.function.endswith("ledger_counts_it") and record.bytes == record.count * 32


def _line_of(text: str) -> int:
    lines = open(__file__).read().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "item()" in line)


def test_every_sweep_explicit_or_automatic_adds_to_the_ledger() -> None:
    tape = tg.Tape()
    tape.set_cleanup_policy("manual")
    with tg.use_tape(tape):
        w = tg.randn((3,), key=0).require_grad()
        (w * 2.0).sum()  # two hanging op nodes
        tg.ones(2).require_grad()  # a hanging leaf
        loss = (w * 3.0).sum()
        loss.backward()  # consumed, then freed by rule 4: never in the ledger
        del loss
        assert tape.snapshot().ledger == ()
        removed = tape.cleanup()
        tape.set_cleanup_policy("auto")
        (w * 4.0).sum()  # freed at once by "auto": counted too
    ledger = [(r.op, r.kind, r.count) for r in tape.snapshot().ledger]  # one per origin and op
    assert removed.nodes_removed == 3
    assert sorted(ledger) == [  # the cleanup's three and the two "auto" freed
        ("leaf", "leaf", 1),
        ("multiply", "op", 1),
        ("multiply", "op", 1),
        ("sum", "op", 1),
        ("sum", "op", 1),
    ]
    assert tape.stats().nodes == 1


# ----------------------------------------------------------------------------- auto


def test_switching_to_auto_sweeps(base: tg.GraphStats, manual_after: None) -> None:
    w = tg.randn((3,), key=1).require_grad()
    for _ in range(4):
        (w.tanh() * 3.0).sum()
        tg.ones(2).require_grad()
    assert delta(base).hanging_nodes == 4 * 3 + 4
    tg.set_cleanup_policy("auto")
    assert tg.get_cleanup_policy() == "auto"
    assert delta(base) == tg.GraphStats(graphs=1, nodes=1, leaves=1, live_nodes=1)
    useful_is_tape()
    del w  # an unused leaf: hanging, so freed at once under "auto"
    assert delta(base) == tg.GraphStats()


def test_auto_frees_each_node_the_moment_it_becomes_hanging(
    base: tg.GraphStats, manual_after: None
) -> None:
    tg.set_cleanup_policy("auto")
    w = tg.randn((4, 3), key=2).require_grad()
    x = tg.ones((2, 4))
    junk = tg.zeros(3).require_grad()
    assert delta(base).nodes == 2
    del junk
    assert delta(base) == tg.GraphStats(graphs=1, nodes=1, leaves=1, live_nodes=1)

    h = x @ w
    y = h.tanh()
    out = (y * y).sum()
    assert delta(base).nodes == 5
    del y  # still useful: out reaches it
    assert delta(base).nodes == 5
    useful_is_tape()
    del out  # sum and multiply are hanging now, tanh with them: freed at once
    got = delta(base)
    assert got == tg.GraphStats(
        graphs=1, nodes=2, leaves=1, live_nodes=2, saved_bytes=got.saved_bytes
    )
    useful_is_tape()

    value = (x @ w).sum().item()  # an eval pass under grad mode leaves nothing
    assert isinstance(value, float)
    useful_is_tape()
    del h
    assert delta(base) == tg.GraphStats(graphs=1, nodes=1, leaves=1, live_nodes=1)

    chain = w
    for _ in range(50):
        chain = chain * 1.0
    assert delta(base).nodes == 51
    del chain  # a dead chain goes at once, whatever its depth
    assert delta(base) == tg.GraphStats(graphs=1, nodes=1, leaves=1, live_nodes=1)
    stats = tg.graph_cleanup()
    assert (stats.nodes_removed, stats.bytes_freed) == (0, 0)
    del w
    assert delta(base) == tg.GraphStats()


def test_auto_keeps_an_ops_temporary_inputs_until_its_node_is_registered(
    base: tg.GraphStats, manual_after: None
) -> None:
    # rule 10: the temporary leaf dies only after the op linked it, so it stays useful
    tg.set_cleanup_policy("auto")
    y = tg.ones(3).require_grad() * 2.0
    snap, _ = check_tape()
    leaf, op = [r for r in snap.nodes if r.id not in {n.id for n in snap.nodes if n.live}] + [
        r for r in snap.nodes if r.tensor is not None and r.tensor() is y
    ]
    assert (leaf.kind, leaf.live, leaf.useful) == ("leaf", False, True)
    assert op.parents == (leaf.id,)
    y.backward(tg.ones(3))
    del y
    assert delta(base) == tg.GraphStats()


# ----------------------------------------------------------------------------- threshold


def _hanging_record(param: tg.Tensor, i: int) -> None:
    """Record one node that hangs as soon as this returns: a leaf or an op on ``param``."""
    if i % 2:
        tg.zeros(2).require_grad()
    else:
        param * 2.0


@pytest.mark.parametrize(("kept", "threshold"), [(2, 4), (6, 2), (3, 3)])
def test_threshold_sweeps_at_exact_counts(
    base: tg.GraphStats, manual_after: None, kept: int, threshold: int
) -> None:
    params = [tg.zeros(2).require_grad() for _ in range(kept)]
    checked_cleanup()  # a sweep: survivors are what it kept
    survivors = tg.graph_stats().nodes
    assert survivors == base.nodes + kept
    tg.set_cleanup_policy("threshold", threshold=threshold)
    assert tg.get_cleanup_policy() == "threshold"
    hanging = 0
    for sweep in range(4):
        gap = max(threshold, survivors)  # records until the count reaches the limit
        for i in range(1, gap):
            _hanging_record(params[0], i)
            stats = tg.graph_stats()
            # no sweep yet: never a sweep per op
            assert stats.nodes == survivors + i, (sweep, i)
            assert stats.hanging_nodes == hanging + i, (sweep, i)
        _hanging_record(params[0], gap)  # the count reaches survivors + gap: a sweep
        stats = tg.graph_stats()
        # the sweep kept the parameters and the node just recorded (live during the sweep)
        survivors = base.nodes + kept + 1
        assert stats.nodes == survivors, sweep
        assert stats.hanging_nodes == 1, sweep
        check_tape()
        hanging = 1
    del params


def test_threshold_counts_survivors_of_a_manual_cleanup(
    base: tg.GraphStats, manual_after: None
) -> None:
    tg.set_cleanup_policy("threshold", threshold=3)
    kept = [tg.zeros(2).require_grad() for _ in range(5)]
    checked_cleanup()  # graph_cleanup() is a sweep: it resets the survivors
    survivors = base.nodes + 5
    gap = max(3, survivors)
    for i in range(1, gap):
        tg.ones(2).require_grad()
        assert tg.graph_stats().hanging_leaves == i
    tg.ones(2).require_grad()
    assert tg.graph_stats().nodes == survivors + 1
    del kept


def test_threshold_never_sweeps_on_reads(base: tg.GraphStats, manual_after: None) -> None:
    tg.set_cleanup_policy("threshold", threshold=2)
    survivors = tg.graph_stats().nodes
    gap = max(2, survivors)
    for _ in range(gap - 1):
        tg.zeros(1).require_grad()
    before = tg.snapshot()
    for _ in range(3):
        assert tg.graph_stats() == before.stats
        assert tg.snapshot().stats == before.stats
    assert tape_ids() == {r.id for r in before.nodes}


def test_threshold_frees_consumed_nodes_at_once(base: tg.GraphStats, manual_after: None) -> None:
    tg.set_cleanup_policy("threshold", threshold=1000)
    w = tg.randn((3,), key=3).require_grad()
    loss = (w.exp() * 2.0).sum()
    loss.backward()
    del loss
    assert delta(base) == tg.GraphStats(graphs=1, nodes=1, leaves=1, live_nodes=1)
    del w
    assert delta(base) == tg.GraphStats()


def test_threshold_survivors_are_what_the_last_sweep_kept(manual_after: None) -> None:
    tg.graph_cleanup()  # the last sweep: it keeps what others hold live
    survivors = tg.graph_stats().nodes
    w = tg.zeros(2).require_grad()
    for _ in range(survivors + 8):
        tg.zeros(2).require_grad()  # hanging leaves under "manual"
    threshold = 3
    tg.set_cleanup_policy("threshold", threshold=threshold)
    v = tg.zeros(2).require_grad()  # a record: the count is now far past the limit
    count = survivors + 1 + (survivors + 8) + 1
    assert count >= survivors + max(threshold, survivors)
    hanging = tg.graph_stats().hanging_leaves
    tg.set_cleanup_policy("manual")
    tg.graph_cleanup()
    del w, v
    assert hanging == 0  # docs/design.md: the record that reached the limit swept


# ----------------------------------------------------------------------------- errors, scope


@pytest.mark.parametrize("kwargs", [{}, {"threshold": None}, {"threshold": 0}, {"threshold": -5}])
def test_threshold_needs_a_positive_threshold(kwargs: dict[str, int], manual_after: None) -> None:
    with pytest.raises(ValueError, match="threshold"):
        tg.set_cleanup_policy("threshold", **kwargs)
    assert tg.get_cleanup_policy() == "manual"  # unchanged by the failed call


def test_unknown_policy_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="manual"):
        tg.set_cleanup_policy("sometimes")
    assert tg.get_cleanup_policy() == "manual"


def test_policy_is_process_wide(base: tg.GraphStats, manual_after: None) -> None:
    seen: list[str] = []
    done = threading.Event()

    def worker() -> None:
        seen.append(tg.get_cleanup_policy())
        tg.set_cleanup_policy("auto")
        tg.zeros(2).require_grad()  # hanging in this thread: freed at once under auto
        done.set()

    tg.set_cleanup_policy("threshold", threshold=7)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and done.is_set()
    assert seen == ["threshold"]  # the worker saw the main thread's choice
    assert tg.get_cleanup_policy() == "auto"  # and the main thread sees the worker's
    assert delta(base) == tg.GraphStats()
    tg.zeros(2).require_grad()  # hanging in the main thread: freed under auto too
    assert delta(base) == tg.GraphStats()
