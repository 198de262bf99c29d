"""Shared fixtures: a seeded key, the tape's state at a test's start, and a guard that every test
leaves the tape as it found it."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import jax
import pytest
from hypothesis import HealthCheck, settings

import tapegrad as tg

settings.register_profile(
    "dev",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

if jax.default_backend() != "cpu":
    # A GPU multiplies float32 matrices in TF32 under JAX's default precision (~1e-3
    # relative): the oracles (jax.grad, PyTorch on the CPU) are compared in full float32.
    jax.config.update("jax_default_matmul_precision", "highest")


@pytest.fixture
def key() -> jax.Array:
    """A fixed PRNG key, so every test draws the same numbers."""
    return jax.random.PRNGKey(0)


@pytest.fixture
def base(tape_guard: None) -> tg.GraphStats:
    """The stats at the start of the test (after the guard's cleanup): what other modules keep
    live. A test's own counts are ``_recount.delta(base)``."""
    return tg.graph_stats()


@pytest.fixture
def start(tape_guard: None) -> int:
    """The largest node id on the tape at the start of the test: the test's nodes are above."""
    return max((r.id for r in tg.snapshot().nodes), default=-1)


@pytest.fixture(scope="session", autouse=True)
def manual_policy() -> Iterator[None]:
    """The suite runs the process tape under "manual", the seed's workflow the tests were
    written for (a sweep only when a test asks); users get "threshold" (test_policies.py checks
    that default, and tests of the other policies set theirs)."""
    tape = tg.current_tape()
    policy, threshold = tape.get_cleanup_policy(), tape.threshold
    tape.set_cleanup_policy("manual")
    yield
    tape.set_cleanup_policy(policy, threshold=threshold)


@pytest.fixture(autouse=True)
def tape_guard() -> Iterator[None]:
    """Fail a test that leaves nodes behind (after a cleanup) or changes grad mode or policy
    (MyGrad's state-guard pattern).

    When the count differs, Python's cycle collector runs and the count is taken again: a
    reference cycle the test left (a module holding itself through a closure, a frame in a
    traceback) would otherwise be collected at a random allocation inside a later test and
    change that test's counts. (Collecting only then keeps the guard cheap: one full
    collection with JAX and torch loaded costs about 0.1 s.)"""
    tg.graph_cleanup()
    tg.current_tape()._ledger.clear()  # each test reads only its own sweeps in the ledger
    before = tg.graph_stats()
    yield
    mode_changed = not tg.is_grad_enabled()
    policy = tg.get_cleanup_policy()
    tg.set_grad_enabled(True)
    if policy != "manual":
        tg.set_cleanup_policy("manual")
    tg.graph_cleanup()
    after = tg.graph_stats()
    if after.nodes != before.nodes:
        gc.collect()
        tg.graph_cleanup()
        after = tg.graph_stats()
    assert not mode_changed, "the test left grad mode disabled"
    assert policy == "manual", f"the test left the cleanup policy at {policy!r}"
    assert after.nodes == before.nodes, (
        f"the test left {after.nodes - before.nodes} nodes on the tape after cleanup "
        f"(before: {before}, after: {after})"
    )


QUICK = {
    "test_scenarios_core.py",
    "test_errors.py",
    "test_tensor_inplace.py",
    "test_silent_numerics.py",
    "test_anomaly.py",
    "test_report.py",
}
"""Test files in the ``quick`` subset (``pytest -m quick``, under a minute): the seed bug
reports, every error message, the first-hour behaviours and the leak report's classes."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of the files in ``QUICK`` with ``quick``."""
    for item in items:
        if item.path.name in QUICK:
            item.add_marker(pytest.mark.quick)
