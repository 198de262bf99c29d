"""no_leaks: the guard as a context manager, a decorator and a pytest fixture."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tapegrad as tg
from diagnostics import LeakError, no_leaks


def test_a_leaking_block_raises_with_the_origin_table() -> None:
    with pytest.raises(LeakError) as info:
        with no_leaks():
            tg.ones(3).require_grad()  # @leak
    assert isinstance(info.value, AssertionError)
    message = str(info.value)
    assert message.startswith("no_leaks: the block left 1 hanging node (1 leaf)")
    line = next(
        i for i, t in enumerate(Path(__file__).read_text().splitlines(), 1) if "# @leak" in t
    )
    assert f"test_guard.py:{line}" in message
    assert "tapegrad leak report" in message
    assert info.value.report.hanging_leaves == 1
    tg.graph_cleanup()


def test_a_clean_block_passes_and_older_leaks_do_not_count() -> None:
    tg.ones(3).require_grad()  # before the block: not its business
    w = tg.ones(3).require_grad()
    with no_leaks():
        loss = (w * w).sum()
        loss.backward()
    with no_leaks(allow=2):
        tg.ones(3).require_grad()
        tg.ones(3).require_grad()
    assert tg.graph_cleanup().leaves_removed == 3
    del w, loss


def make_hanging(n: int) -> None:
    for _ in range(n):
        (tg.ones(3).require_grad() * 2.0).sum()  # one line: one ledger key per op


def test_a_sweep_inside_the_block_blames_only_what_the_block_made() -> None:
    make_hanging(2)  # before the block: 6 hanging nodes
    old = tg.ones(3).require_grad()  # made before the block, dropped inside it
    with no_leaks():
        del old
        assert tg.graph_cleanup().nodes_removed == 7  # sweeps what was there before
    make_hanging(1)
    with pytest.raises(LeakError) as info:
        with no_leaks():
            make_hanging(2)  # the same lines as the nodes made (and swept) before the block
            tg.graph_cleanup()
    assert info.value.report.swept_nodes == 6
    assert "6 hanging nodes (0 still on the tape, 0 leaves among them; 6 already swept)" in str(
        info.value
    )


def test_freezing_fresh_parameters_is_not_a_leak() -> None:
    with no_leaks(strict=True):
        model = tg.nn.Linear(3, 2)
        model.requires_grad_(False)
        assert float(model(tg.ones((1, 3))).sum()) == float(model(tg.ones((1, 3))).sum())
    del model


def test_strict_also_fails_on_a_kept_alive_graph() -> None:
    w = tg.ones(3).require_grad()
    running = 0.0
    with no_leaks():  # not strict: a kept-alive graph is allowed
        for _ in range(2):
            loss = (w * w).sum()
            loss.backward()
            running = running + loss
    with pytest.raises(LeakError, match="1 kept-alive graph"):
        with no_leaks(strict=True):
            loss = (w * w).sum()
            loss.backward()
            running = running + loss
    running = running.item()
    with no_leaks(strict=True):
        loss = (w * w).sum()
        loss.backward()
        running = running + loss.item()
    del w, loss


CACHE: list[tg.Tensor] = []


def test_strict_fails_on_a_graph_that_outlives_the_block_holding_saved_arrays() -> None:
    w = tg.ones((3, 3)).require_grad()
    x = tg.ones((2, 3))
    with no_leaks():  # not strict: a live graph is allowed
        CACHE.append((x @ w).tanh())
    with pytest.raises(LeakError, match=r"2 op nodes created inside it still live .*holding"):
        with no_leaks(strict=True):
            CACHE.append((x @ w).tanh())  # @outlives
    CACHE.clear()
    with no_leaks(strict=True):  # a graph whose backward ran holds nothing: fine
        loss = (x @ w).tanh().sum()
        loss.backward()
        kept = (x @ w.detach()).tanh()  # and values that track nothing
    del w, loss, kept


def test_the_decorator_checks_each_call_and_nests() -> None:
    calls = []

    @no_leaks(allow=1)
    def step(n: int) -> float:
        calls.append(n)
        for _ in range(n):
            tg.ones(2).require_grad()
        return float(n)

    assert step(1) == 1.0
    with pytest.raises(LeakError, match="2 hanging nodes"):
        step(2)
    with no_leaks(allow=10):
        step(1)
        with no_leaks(allow=0):
            pass
    assert calls == [1, 2, 1]
    tg.graph_cleanup()


def test_an_exception_in_the_block_propagates_unchanged() -> None:
    with pytest.raises(KeyError, match="boom"):
        with no_leaks():
            tg.ones(2).require_grad()
            raise KeyError("boom")
    tg.graph_cleanup()
    with pytest.raises(ValueError, match="non-negative int"):
        no_leaks(allow=-1)


PLUGIN_TESTS = """\
import pytest
import tapegrad as tg

def test_leaks(no_leaks):
    tg.ones(3).require_grad()

def test_clean(no_leaks):
    w = tg.ones(3).require_grad()
    (w * 2.0).sum().backward()

@pytest.mark.no_leaks(allow=1)
def test_marker_allows_one():
    tg.ones(3).require_grad()

def test_unguarded():
    tg.ones(3).require_grad()
"""


def test_the_pytest_plugin_fixture_fails_a_leaking_test(tmp_path: Path) -> None:
    (tmp_path / "test_plugin_use.py").write_text(PLUGIN_TESTS)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--strict-markers",
            "-rf",
            "test_plugin_use.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "1 failed, 3 passed" in out
    assert "FAILED test_plugin_use.py::test_leaks - diagnostics.guard.LeakError" in out
    assert "test_plugin_use.py:5" in out  # the origin of the dropped leaf
    # the failure points at the test, not at the plugin or the guard
    assert "no_leaks: test_leaks (test_plugin_use.py:4) left 1 hanging node" in out
    assert "pytest_plugin.py" not in out and "guard.py" not in out
