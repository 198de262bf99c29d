"""explain=True and referrer_chain: from a user-visible name to the live tensor."""

from __future__ import annotations

import builtins
import functools
import gc
import sys
import weakref
from typing import Any

import pytest

import diagnostics
import tapegrad as tg
from diagnostics.explain import referrer_chain
from diagnostics.report import REASON_CONSUMED

TRAIN = """\
import tapegrad as tg
w = tg.ones(3).require_grad()
def step():
    loss = (w * w).sum()
    loss.backward()
    return loss
running = 0.0
for _ in range(3):
    running = running + step()
"""


@pytest.fixture(autouse=True)
def unhurried_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reports here search without the 2 s budget: in a test process that has already
    run hundreds of tests (one pytest-xdist worker), each ``gc.get_referrers`` scan walks far
    more objects than a user's script, and the answer, not the bound, is under test (the
    bound has its own test, which calls ``referrer_chain`` itself)."""
    monkeypatch.setattr(
        "diagnostics.report.referrer_chain", functools.partial(referrer_chain, time_limit=300.0)
    )


def run_script(source: str) -> dict[str, Any]:
    """Run ``source`` as a script named train.py would run: its own ``__main__`` globals."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    exec(compile(source, "train.py", "exec"), namespace)
    return namespace


def test_a_global_running_total_is_explained_by_its_name() -> None:
    namespace = run_script(TRAIN)
    report = diagnostics.leak_report(explain=True)
    (explanation,) = report.explanations
    assert explanation.path == "global running → Tensor(shape=(), origin=train.py:9)"
    assert explanation.reason == REASON_CONSUMED
    assert explanation.nodes == 3  # the three adds
    namespace.clear()


def test_a_list_element_and_an_attribute_are_named() -> None:
    namespace = run_script(
        TRAIN
        + "class Trainer:\n    pass\n"
        + "trainer = Trainer()\ntrainer.total = running\nhistory = [0.0, running]\n"
        + "del running\n"
    )
    chain = diagnostics.leak_report(explain=True).explanations[0].chain
    assert chain in {("global trainer", ".total"), ("global history", "[1]")}
    del namespace["trainer"]
    chain = diagnostics.leak_report(explain=True).explanations[0].chain
    assert chain == ("global history", "[1]")
    namespace.clear()


def test_ipython_out_is_named_before_underscore_names() -> None:
    namespace = run_script(TRAIN)
    namespace["Out"] = {7: namespace["running"]}  # what IPython keeps for ``Out[7]``
    namespace["_7"] = namespace["_"] = namespace.pop("running")
    chain = diagnostics.leak_report(explain=True).explanations[0].chain
    assert chain == ("global Out", "[7]")
    del namespace["Out"]
    assert diagnostics.leak_report(explain=True).explanations[0].chain == ("global _",)
    namespace.clear()


def test_a_local_of_a_running_function_is_named() -> None:
    w = tg.ones(2).require_grad()
    carried = 0.0
    for _ in range(2):
        loss = (w * 2.0).sum()
        loss.backward()
        carried = carried + loss
    (explanation,) = diagnostics.leak_report(explain=True).explanations
    assert explanation.chain == ("local carried in test_a_local_of_a_running_function_is_named()",)
    del w, carried, loss


def test_referrer_chain_is_bounded_in_depth_and_time(monkeypatch: pytest.MonkeyPatch) -> None:
    class Box:
        pass

    holder = [[[Box()]]]
    target = weakref.ref(holder[0][0][0])  # no name of ours binds the box itself
    namespace = {"__name__": "__main__", "__builtins__": builtins, "nested": holder}
    local = holder  # found first: a local of this test
    # generous time limits for the answers (a loaded CI machine scans slowly); the bound on
    # time itself is checked with time_limit=0 below
    assert referrer_chain(target(), time_limit=30.0) == (
        "local holder in test_referrer_chain_is_bounded_in_depth_and_time()",
        "[0]",
        "[0]",
        "[0]",
    )
    del local, holder
    assert referrer_chain(target(), time_limit=30.0) == ("global nested", "[0]", "[0]", "[0]")
    scans = _count_scans(monkeypatch)
    assert referrer_chain(target(), max_depth=3, time_limit=30.0) == ()
    assert len(scans) == 3  # one scan per level, whatever the level's width
    scans.clear()
    assert referrer_chain(target(), time_limit=0.0) == ()
    assert len(scans) == 1  # the time limit is checked after each scan: it stops after one
    namespace.clear()
    assert target() is None


def _count_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count ``gc.get_referrers`` scans (how the search's bounds are checked: counting, not
    timing, so a loaded machine cannot make the test flaky)."""
    scans: list[int] = []
    real = gc.get_referrers

    def counting(*objs: Any) -> list[Any]:
        scans.append(len(objs))
        return real(*objs)

    monkeypatch.setattr(gc, "get_referrers", counting)
    return scans


def _leaked(w: tg.Tensor) -> tg.Tensor:
    """A kept-alive tensor: a loss after its backward, plus one (an unconsumed add)."""
    loss = (w * 2.0).sum()
    loss.backward()
    return loss + 1.0


def _path_of_the_leak() -> tuple[str, ...]:
    (explanation,) = diagnostics.leak_report(explain=True).explanations
    return explanation.chain


def test_closure_variables_dict_items_and_partials_are_named() -> None:
    w = tg.ones(2).require_grad()

    def make() -> Any:
        total = _leaked(w)

        def step() -> Any:
            return total

        return step

    step = make()
    assert _path_of_the_leak() == (
        "local step in test_closure_variables_dict_items_and_partials_are_named()",
        "(closure variable total)",
    )
    del step
    state = {"epochs": [{"loss": _leaked(w)}]}
    assert _path_of_the_leak()[1:] == ("['epochs']", "[0]", "['loss']")
    del state
    callback = functools.partial(print, end="", sep=_leaked(w))
    assert _path_of_the_leak()[1:] == (".keywords", "['sep']")
    del callback


def test_module_attributes_are_named_as_code_reads_them() -> None:
    from tapegrad import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(2, 2, key=0)

    model = nn.Sequential(Block(), Block())
    model[1].fc.cache = _leaked(model[1].fc.weight)  # a tensor kept on a submodule
    assert _path_of_the_leak() == (
        "local model in test_module_attributes_are_named_as_code_reads_them()",
        "[1]",
        ".fc",
        ".cache",
    )
    del model


def test_a_demo_programs_frames_are_user_frames_not_the_reports() -> None:
    """The demos live in diagnostics/ but are user code: ``task`` in ``fit()`` names the
    leak; the frames of the report being made (whose locals hold the tensor) do not."""
    from diagnostics import explain

    assert explain._is_user_file(explain._HERE + "training.py")
    assert explain._is_user_file(explain._HERE + "demo_cnn.py")
    assert not explain._is_user_file(explain._HERE + "report.py")
    assert not explain._is_user_file(explain._HERE + "epoch.py")
    assert explain._is_user_file("/elsewhere/train.py")


def test_a_tensor_only_in_a_garbage_cycle_has_no_name() -> None:
    w = tg.ones(2).require_grad()
    loss = (w * 2.0).sum()
    loss.backward()
    cycle: list[Any] = [loss + 1.0]
    cycle.append(cycle)  # live until the cycle collector runs (tapegrad never runs it)
    del cycle
    (explanation,) = diagnostics.leak_report(explain=True).explanations
    assert explanation.chain == ()
    assert explanation.path.startswith("(no name found) → Tensor(shape=(), origin=")
    gc.collect()  # the test may collect; the report must not
    assert diagnostics.leak_report().kept_alive_graphs == 0
    del w, loss


def test_a_locals_dict_the_function_holds_is_not_emptied() -> None:
    w = tg.ones(2).require_grad()
    carried = 0.0
    for _ in range(2):
        loss = (w * 2.0).sum()
        loss.backward()
        carried = carried + loss
    seen = locals()
    (explanation,) = diagnostics.leak_report(explain=True).explanations
    assert explanation.chain[0].startswith("local carried in ")
    assert seen["carried"] is carried and seen["w"] is w
    seen.clear()  # (it holds itself since the refresh, as after a second locals() call)
    del seen, w, carried, loss


def test_under_a_debugger_the_paused_frame_keeps_its_locals() -> None:
    explained = []

    def victim() -> float:
        w = tg.ones(2).require_grad()
        running = 0.0
        for _ in range(2):
            loss = (w * w).sum()
            loss.backward()
            running = running + loss
        pause = True  # a debugger stops here and the user asks for a report
        return float(running) + float(w.sum()) + float(loss) + pause

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code is victim.__code__ and event == "line" and "pause" in frame.f_locals:
            if not explained:
                explained.append(diagnostics.leak_report(explain=True).explanations)
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        total = victim()  # pdb writes f_locals back after each callback: nothing may be lost
    finally:
        sys.settrace(previous)
    assert total == 2 * 2.0 + 2.0 + 2.0 + 1  # running, w.sum(), loss, pause
    (explanation,) = explained[0]
    assert explanation.chain == (f"local running in {victim.__qualname__}()",)
