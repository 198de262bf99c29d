"""explain=True and referrer_chain: from a user-visible name to the live tensor."""

from __future__ import annotations

import builtins
import gc
import sys
import time
import weakref
from typing import Any

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


def test_referrer_chain_is_bounded_in_depth_and_time() -> None:
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
    assert referrer_chain(target(), max_depth=3, time_limit=30.0) == ()
    start = time.perf_counter()
    assert referrer_chain(target(), time_limit=0.0) == ()
    assert time.perf_counter() - start < 5.0  # one gc.get_referrers scan, then it stops
    namespace.clear()
    assert target() is None


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
