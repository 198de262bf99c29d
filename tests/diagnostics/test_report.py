"""leak_report: the classes on small real tapes and synthetic snapshots, origins, bytes,
deltas, the kept-alive rules, purity, and the JSON round trip."""

from __future__ import annotations

import gc
import html
import json
import os
import re
import runpy
import sys
import types
import weakref
from io import StringIO
from pathlib import Path

import pytest
from _support import origin_path
from rich.console import Console

import diagnostics
import tapegrad as tg
from diagnostics.render import render_line, render_text
from diagnostics.report import (
    REASON_CONSUMED,
    REASON_GREW,
    REASON_MORE_GRAPHS,
    Explanation,
    GraphNode,
    LeakReport,
    LeakRow,
    build_report,
)


def at(tag: str) -> str:
    """The origin (``path:line``, as tapegrad spells it) of the line of this file marked
    ``# @tag``."""
    with open(__file__) as f:
        lines = [i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# @{tag}")]
    assert len(lines) == 1, tag
    return f"{origin_path(__file__)}:{lines[0]}"


def mine(report: LeakReport) -> dict[tuple[str, str, str], LeakRow]:
    """Rows created by this file, keyed by (origin, op, kind)."""
    name = os.path.basename(__file__)
    return {(r.origin, r.op, r.kind): r for r in report.rows if name in r.origin}


# ----------------------------------------------------------------------------- real tapes


def test_hanging_leaves_nodes_dead_graphs_and_bytes_by_origin() -> None:
    for _ in range(3):
        tg.ones(3).require_grad()  # the seed mistake: marked, dropped, never used  # @junk
    w = tg.ones((256,)).require_grad()  # @w
    w.exp()  # an op on a live parameter, dropped: hanging inside a live graph  # @exp
    a = tg.ones((256,)).require_grad()  # @a
    b = a * 2.0  # @mul
    del a, b  # a whole graph with no useful node: dead
    leaf_line, w_line, exp_line, a_line, mul_line = map(at, ("junk", "w", "exp", "a", "mul"))
    report = diagnostics.leak_report()

    rows = mine(report)
    assert rows[(leaf_line, "leaf", "hanging")].count == 3
    assert rows[(exp_line, "exp", "hanging")].count == 1
    assert rows[(exp_line, "exp", "hanging")].bytes == 256 * 4  # exp saves its output
    # multiply saves a, and the constant 2.0 as a 0-d float32 array (tapegrad caches scalars)
    assert rows[(mul_line, "multiply", "hanging")].bytes == 256 * 4 + 4
    assert rows[(a_line, "leaf", "hanging")].count == 1
    assert rows[(w_line, "leaf", "live")].count == 1  # w itself
    assert {r.function for r in rows.values()} == {
        "test_hanging_leaves_nodes_dead_graphs_and_bytes_by_origin"
    }
    assert report.hanging_leaves == 4
    assert report.hanging_nodes == 6
    assert report.dead_graphs == 4  # three lone leaves and a * 2.0; w's graph is live
    assert report.bytes_held == 2 * 256 * 4 + 4  # exp's output, a, the constant 2.0
    assert all(r.delta is None for r in report.rows)
    freed = tg.graph_cleanup()
    assert freed.bytes_freed == report.bytes_held  # what it said cleanup frees, it frees
    assert freed.nodes_removed == report.hanging_nodes
    assert freed.graphs_removed == report.dead_graphs
    del w


def test_a_correct_loop_whose_last_loss_is_bound_is_not_kept_alive() -> None:
    x = tg.ones((4, 3))
    w = tg.randn((3, 2), key=0).require_grad()
    history = []
    for _ in range(3):
        loss = ((x @ w).tanh() ** 2).sum()
        loss.backward()
        history.append(loss.item())
        w.grad = None
    first = diagnostics.leak_report()
    for _ in range(3):
        loss = ((x @ w).tanh() ** 2).sum()  # @loop-loss
        loss.backward()
        w.grad = None
    second = diagnostics.leak_report(baseline=first)
    for report in (first, second):
        assert report.kept_alive_graphs == 0
        assert report.hanging_nodes == 0
        assert report.count("kept-alive") == 0
    rows = mine(second)
    assert rows[(at("loop-loss"), "sum", "consumed")].count == 1  # the bound loss: a marker
    assert rows[(at("loop-loss"), "sum", "consumed")].delta == 1  # (a new line since first)
    del loss, w


def test_a_loss_total_kept_as_a_tensor_is_kept_alive_and_survives_cleanup() -> None:
    x = tg.ones((4, 3))
    w = tg.randn((3, 2), key=0).require_grad()
    running = 0.0
    for _ in range(3):
        loss = ((x @ w) ** 2).mean()  # @mean
        loss.backward()
        running = running + loss  # the mistake (docs/design.md worked example)  # @running
    add_line, loss_line = at("running"), at("mean")
    del loss
    report = diagnostics.leak_report()
    assert report.kept_alive_graphs == 1
    assert report.hanging_nodes == 0
    rows = mine(report)
    assert rows[(add_line, "add", "kept-alive")].count == 3
    assert rows[(loss_line, "mean", "consumed")].count == 3
    assert report.explanations == ()  # only with explain=True
    assert tg.graph_cleanup().nodes_removed == 0  # useful: cleanup must not touch it
    assert diagnostics.leak_report().kept_alive_graphs == 1
    del running, w


def test_a_graph_that_grows_against_a_baseline_is_kept_alive() -> None:
    w = tg.randn((3,), key=1).require_grad()
    outputs = [(w * 2.0).sum()]  # outputs kept as tensors: the graph of w grows  # @out1
    epoch1 = diagnostics.leak_report()
    assert epoch1.kept_alive_graphs == 0  # nothing to compare with yet
    outputs.append((w * 2.0).sum())  # @out2
    fresh = (tg.ones(3).require_grad() * 3.0).sum()  # a new graph: not "already existed"  # @new
    epoch2 = diagnostics.leak_report(baseline=epoch1)
    assert epoch2.kept_alive_graphs == 1
    assert diagnostics.leak_report().kept_alive_graphs == 0  # rule (b) needs the baseline
    rows = mine(epoch2)
    assert rows[(at("out1"), "multiply", "kept-alive")].count == 1
    assert rows[(at("out1"), "multiply", "kept-alive")].delta == 1  # it was "live" in epoch 1
    assert rows[(at("out2"), "sum", "kept-alive")].count == 1
    assert rows[(at("new"), "multiply", "live")].count == 1  # fresh's graph: counted only
    assert epoch2.live_graphs - epoch1.live_graphs == 1
    explained = diagnostics.leak_report(baseline=epoch1, explain=True).explanations
    assert [e.reason for e in explained] == [REASON_GREW]
    del outputs, fresh, w


def test_deltas_count_changes_against_the_baseline() -> None:
    keep = [tg.ones(2).require_grad() for _ in range(2)]  # @two
    before = diagnostics.leak_report()
    for _ in range(3):
        keep.append(tg.ones(2).require_grad())  # @three
    after = diagnostics.leak_report(baseline=before)
    rows = mine(after)
    assert rows[(at("two"), "leaf", "live")].delta == 0
    assert rows[(at("three"), "leaf", "live")].count == 3
    assert rows[(at("three"), "leaf", "live")].delta == 3
    assert mine(before)[(at("two"), "leaf", "live")].delta is None
    del keep


def test_taking_a_report_is_pure() -> None:
    w = tg.ones(3).require_grad()
    running = 0.0
    for _ in range(2):
        loss = (w * w).sum()
        loss.backward()
        running = running + loss
    tg.ones(3).require_grad()
    refs = [weakref.ref(t) for t in (w, running, loss)]
    before = tg.graph_stats()
    collected = []
    real_collect = gc.collect
    gc.collect = lambda *a: collected.append(a) or 0  # type: ignore[assignment,func-returns-value]
    try:
        reports = [diagnostics.leak_report(explain=True) for _ in range(2)]
    finally:
        gc.collect = real_collect
    assert collected == []
    assert gc.isenabled()  # paused while the report is built, enabled again after
    assert tg.graph_stats() == before
    assert reports[0] == reports[1]  # no hidden state
    assert reports[0].explanations[0].chain == ("local running in test_taking_a_report_is_pure()",)
    del w, running, loss
    assert [r() for r in refs] == [None, None, None]  # the reports hold no tensor
    assert tg.graph_stats().live_nodes == before.live_nodes - 3


def test_graph_nodes_are_the_blamed_records_with_their_kept_parents() -> None:
    w = tg.ones(3).require_grad()  # @leaf
    leaf = max(r.id for r in tg.snapshot().nodes)
    (w * 2.0).exp()  # @blamed
    report = diagnostics.leak_report()
    fn = "test_graph_nodes_are_the_blamed_records_with_their_kept_parents"
    mul, exp = leaf + 1, leaf + 2
    assert [n for n in report.graph_nodes if n.id >= leaf] == [
        GraphNode(leaf, leaf, "live", "leaf", at("leaf"), fn, 0, ()),  # a parent kept
        GraphNode(mul, leaf, "hanging", "multiply", at("blamed"), fn, 16, (leaf,)),  # w, 2.0
        GraphNode(exp, leaf, "hanging", "exp", at("blamed"), fn, 12, (mul,)),  # its output
    ]
    del w
    tg.graph_cleanup()


def test_to_dict_is_json_and_round_trips() -> None:
    w = tg.ones(2).require_grad()
    total = 0.0
    for _ in range(2):
        loss = (w * 3.0).sum()
        loss.backward()
        total = total + loss
    tg.ones(2).require_grad()
    base = diagnostics.leak_report()
    report = diagnostics.leak_report(baseline=base, explain=True)
    data = report.to_dict()
    text = json.dumps(data)
    assert json.loads(text) == data
    assert LeakReport.from_dict(json.loads(text)) == report
    assert data["title"] == "tapegrad leak report"
    assert data["explanations"][0]["chain"] == [
        "local total in test_to_dict_is_json_and_round_trips()"
    ]
    del w, total, loss


# ----------------------------------------------------------------------------- synthetic


def rec(
    nid: int,
    graph: int,
    *,
    kind: str = "op",
    op: str = "add",
    live: bool = False,
    useful: bool = True,
    consumed: bool = False,
    parents: tuple[int, ...] = (),
    saved: int = 0,
    origin: str = "train.py:1",
) -> tg.NodeRecord:
    return tg.NodeRecord(
        id=nid,
        kind=kind,
        op="leaf" if kind == "leaf" else op,
        graph=graph,
        live=live,
        useful=useful,
        consumed=consumed,
        origin=origin,
        function="train",
        saved_bytes=saved,
        parents=parents,
        tensor=None,
    )


def snap(*records: tg.NodeRecord, saved_bytes: int = 10**9, hanging_bytes: int = 0) -> tg.Snapshot:
    stats = tg.GraphStats(nodes=len(records), saved_bytes=saved_bytes)
    return tg.Snapshot(records, stats, hanging_bytes=hanging_bytes)


def test_kept_alive_needs_an_unconsumed_op_between_live_tensor_and_consumed_record() -> None:
    marker_alone = snap(rec(0, 0, op="sum", live=True, consumed=True))
    assert build_report(marker_alone).kept_alive_graphs == 0
    # w (leaf, live) <- matmul (consumed, no parent links) ; total = add(marker) live
    total = snap(
        rec(0, 0, kind="leaf", live=True),
        rec(1, 1, op="sum", consumed=True),
        rec(2, 1, live=True, parents=(1,), origin="train.py:42"),
    )
    report = build_report(total)
    assert report.kept_alive_graphs == 1
    assert [(r.origin, r.kind, r.count) for r in report.rows if r.kind == "kept-alive"] == [
        ("train.py:42", "kept-alive", 1)
    ]
    # the unconsumed op may sit deeper: live add -> mul (unconsumed, not live) -> marker
    deeper = snap(
        rec(0, 0, op="sum", consumed=True),
        rec(1, 0, op="multiply", parents=(0,)),
        rec(2, 0, live=True, parents=(1,)),
    )
    assert build_report(deeper).kept_alive_graphs == 1
    assert build_report(deeper).count("kept-alive") == 2
    # hanging ops above a consumed record are hanging, not kept-alive
    hanging = snap(
        rec(0, 0, op="sum", live=True, consumed=True),
        rec(1, 0, useful=False, parents=(0,)),
    )
    assert (build_report(hanging).kept_alive_graphs, build_report(hanging).hanging_nodes) == (0, 1)


def test_graph_identity_across_reports_uses_the_smallest_node_id() -> None:
    base = build_report(snap(rec(0, 0, kind="leaf", live=True), rec(1, 1, kind="leaf", live=True)))
    assert base.last_node_id == 1
    # graph 0 merged with graph 1 and gained op 5; graph 6 is new; graph 1 gained nothing new
    now = snap(
        rec(0, 0, kind="leaf", live=True),
        rec(1, 0, kind="leaf", live=True),
        rec(5, 0, live=True, parents=(0, 1)),
        rec(6, 6, kind="leaf", live=True),
        rec(7, 6, live=True, parents=(6,)),
    )
    report = build_report(now, baseline=base)
    assert report.kept_alive_graphs == 1
    assert {(r.op, r.kind) for r in report.rows} == {
        ("add", "kept-alive"),
        ("leaf", "live"),
        ("add", "live"),
    }


def test_rows_sort_by_bytes_then_count_and_the_summary_agrees_with_the_rows() -> None:
    report = build_report(
        snap(
            rec(0, 0, useful=False, origin="a.py:1", saved=10),
            rec(1, 1, useful=False, origin="b.py:1", saved=30),
            rec(2, 2, useful=False, origin="c.py:1"),
            rec(3, 3, useful=False, origin="c.py:1"),
            rec(4, 4, useful=False, origin="d.py:1"),
            saved_bytes=25,
            hanging_bytes=25,
        )
    )
    assert [(r.origin, r.count, r.bytes) for r in report.rows] == [
        ("b.py:1", 1, 30),
        ("a.py:1", 1, 10),
        ("c.py:1", 2, 0),
        ("d.py:1", 1, 0),
    ]
    # The summary's bytes held are what a cleanup would free, each array once (the tape's
    # figure); the rows add up to more (shared arrays count once a node), as the rendering says.
    assert report.bytes_held == 25 and report.rows_bytes == 40
    assert report.saved_bytes == 25
    assert "the rows add up to 40 bytes: an array saved by several nodes counts once" in re.sub(
        r"[│\s]+", " ", str(report)
    )
    assert (report.dead_graphs, report.graphs, report.total_nodes) == (5, 5, 5)


def test_since_counts_only_newer_nodes_but_classifies_the_whole_tape() -> None:
    tape = snap(
        rec(0, 0, op="sum", live=True, consumed=True),
        rec(1, 0, live=True, parents=(0,)),
        rec(2, 2, kind="leaf", useful=False),
        rec(3, 0, live=True, parents=(1,)),
        rec(4, 4, kind="leaf", useful=False),
    )
    assert build_report(tape).hanging_leaves == 2
    newer = build_report(tape, since=2)
    assert (newer.hanging_leaves, newer.kept_alive_graphs, newer.total_nodes) == (1, 1, 2)
    assert build_report(tape, since=3).kept_alive_graphs == 0


@pytest.mark.parametrize("explain", [False, True])
def test_an_empty_tape_gives_a_clean_report(explain: bool) -> None:
    report = build_report(snap(saved_bytes=0), explain=explain)
    assert report == LeakReport(last_node_id=-1)
    assert report.clean


# ----------------------------------------------------------------------------- the ledger


def with_ledger(snapshot: tg.Snapshot, *entries: tuple[str, str, int]) -> object:
    """``snapshot`` plus a ledger of ``(origin, op, count)`` entries, as the tape keeps one
    (``Snapshot.ledger``: records with origin, function, op, kind, count, bytes)."""
    ledger = tuple(
        types.SimpleNamespace(
            origin=o,
            function="train",
            op=op,
            kind="leaf" if op == "leaf" else "op",
            count=n,
            bytes=4 * n,
        )
        for o, op, n in entries
    )
    return types.SimpleNamespace(nodes=snapshot.nodes, stats=snapshot.stats, ledger=ledger)


def test_swept_nodes_count_in_the_hanging_rows_and_deltas_show_what_is_new() -> None:
    first = build_report(
        with_ledger(snap(rec(0, 0, kind="leaf", useful=False)), ("train.py:1", "leaf", 100))  # type: ignore[arg-type]
    )
    (row,) = first.rows
    assert (row.kind, row.count, row.swept, row.delta) == ("hanging", 101, 100, None)
    assert (first.hanging_nodes, first.swept_nodes, first.clean) == (1, 100, False)
    assert "100 swept" not in str(first) and "swept" in str(first)  # a swept column
    assert "(+100 nodes sweeps already removed)" in str(first)
    # the next report: the node on the tape was swept too, and 50 more leaked and were swept
    second = build_report(
        with_ledger(snap(), ("train.py:1", "leaf", 151)),  # type: ignore[arg-type]
        baseline=first,
    )
    (row,) = second.rows
    assert (row.count, row.swept, row.delta, row.bytes) == (151, 151, 50, 0)
    assert (second.hanging_nodes, second.swept_nodes) == (0, 151)


def test_bytes_held_is_what_cleanup_frees_with_or_without_a_baseline() -> None:
    """docs/api.md said a report against a baseline counts only the new rows' bytes; as the
    API contract says (bytes held by hanging nodes), the code counts every hanging node's (a
    baseline changes only the deltas and the kept-alive rules): what cleanup then frees."""
    tape = tg.Tape("bytes")
    with tg.use_tape(tape):
        for _ in range(3):
            tg.ones(100).require_grad() * 2.0
        before = diagnostics.leak_report()
        for _ in range(5):
            tg.ones(100).require_grad() * 2.0
        alone, against = diagnostics.leak_report(), diagnostics.leak_report(baseline=before)
        assert 0 < before.bytes_held < alone.bytes_held == against.bytes_held
        assert sorted(r.delta for r in against.rows) == [0, 0, 5, 5]  # leaf, multiply
        assert tg.graph_cleanup().bytes_freed == against.bytes_held


def test_the_guard_counts_only_what_was_swept_after_its_start() -> None:
    now = with_ledger(snap(), ("train.py:1", "leaf", 7), ("train.py:2", "exp", 3))
    report = build_report(now, since=-1, swept_before={("train.py:1", "train", "leaf"): 5})  # type: ignore[arg-type]
    assert {(r.origin, r.count, r.swept) for r in report.rows} == {
        ("train.py:1", 2, 2),
        ("train.py:2", 3, 3),
    }
    assert report.swept_nodes == 5


# ----------------------------------------------------------------------------- growth blamed


def test_losses_kept_in_a_list_after_backward_are_blamed_with_the_list() -> None:
    w = tg.ones(3).require_grad()
    kept = []

    def epoch(w: tg.Tensor, kept: list[tg.Tensor]) -> None:
        for _ in range(3):
            loss = (w * w).sum()  # @kept-loss
            loss.backward()
            kept.append(loss)  # the mistake: consumed, 0 saved bytes, but live

    epoch(w, kept)
    first = diagnostics.leak_report()
    assert first.kept_alive_graphs == 0  # nothing to compare with yet
    epoch(w, kept)
    second = diagnostics.leak_report(baseline=first, explain=True)
    assert second.kept_alive_graphs == 6
    rows = mine(second)
    row = rows[(at("kept-loss"), "sum", "kept-alive")]
    assert (row.count, row.delta, row.bytes) == (6, 6, 0)  # was "consumed" at the baseline
    assert second.explanations[0].reason == REASON_MORE_GRAPHS
    assert second.explanations[0].chain[0] == "local kept in " + (
        "test_losses_kept_in_a_list_after_backward_are_blamed_with_the_list()"
    )
    assert second.explanations[0].chain[1].startswith("[")
    del w, kept


CACHE: dict[int, tg.Tensor] = {}


def test_grad_mode_outputs_cached_in_a_container_are_blamed_with_the_container() -> None:
    w = tg.ones((3, 3)).require_grad()
    x = tg.ones((2, 3))
    reports = []
    for i in range(2):  # the cache grows, each entry with its graph and activations
        CACHE[i] = (x @ w).tanh()  # @cache
        reports.append(diagnostics.leak_report(baseline=reports[-1] if reports else None))
    second = diagnostics.leak_report(baseline=reports[0], explain=True)
    rows = mine(second)
    assert rows[(at("cache"), "tanh", "kept-alive")].count == 2
    assert rows[(at("cache"), "tanh", "kept-alive")].bytes > 0
    (why,) = second.explanations
    assert why.reason == REASON_GREW
    assert why.chain[0].endswith("CACHE") and why.chain[1] in ("[0]", "[1]")
    CACHE.clear()
    del w


def test_an_output_replaced_every_step_is_not_blamed_for_growth() -> None:
    # The last step's output, still bound at each epoch end (an eval pass under grad mode, a
    # second loss never backwarded): the parameters' graph holds it, but it does not grow.
    w = tg.ones((3, 3)).require_grad()
    x = tg.ones((2, 3))
    reports: list[LeakReport] = []
    for _ in range(3):
        out = (x @ w).tanh()  # @replaced
        reports.append(diagnostics.leak_report(baseline=reports[-1] if reports else None))
    assert [r.kept_alive_graphs for r in reports] == [0, 0, 0]
    assert mine(reports[-1])[(at("replaced"), "tanh", "live")].count == 1
    # the same graph growing (outputs kept in a list) is still blamed
    kept = [out]
    kept.append((x @ w).tanh())  # @grows
    grown = diagnostics.leak_report(baseline=reports[-1], explain=True)
    assert grown.kept_alive_graphs == 1
    assert [e.reason for e in grown.explanations] == [REASON_GREW]
    assert LeakReport.from_dict(json.loads(json.dumps(reports[-1].to_dict()))) == reports[-1]
    del out, kept, w


def test_a_baseline_that_is_not_a_report_says_what_to_pass() -> None:
    logged = diagnostics.leak_report().to_dict()  # a baseline kept as JSON
    with pytest.raises(TypeError, match=r"LeakReport\.from_dict") as caught:
        diagnostics.leak_report(baseline=logged)  # type: ignore[arg-type]
    assert "got dict" in str(caught.value)
    assert diagnostics.leak_report(baseline=LeakReport.from_dict(logged)).rows is not None


def test_a_line_making_its_first_live_graph_is_not_blamed() -> None:
    first = diagnostics.leak_report()
    fresh = (tg.ones(3).require_grad() * 3.0).sum()
    assert diagnostics.leak_report(baseline=first).kept_alive_graphs == 0
    del fresh


# ----------------------------------------------------------------------------- user text


WEIRD = ["[/]", "[bold red]x[/bold red]", "[link=http://x]y[/link]", "\\[", "a]b[c", "[/x"]


@pytest.mark.parametrize("text", WEIRD)
def test_user_text_is_never_read_as_markup(text: str) -> None:
    row = LeakRow(f"{text}/train.py:3", f"f{text}", f"op{text}", "hanging", 1, 8, 1)
    why = Explanation(0, REASON_CONSUMED, 1, 8, f"Tensor(origin={text})", (f"global {text}",))
    report = LeakReport(hanging_nodes=1, rows=(row,), explanations=(why,), label=f"epoch {text}")
    plain = render_text(report, width=300)
    for piece in (row.origin, row.function, row.op, why.path, report.title):
        assert piece in plain
    assert html.escape(why.path, quote=False) in report._repr_html_()
    assert str(report)  # the default width folds, never parses
    render_text(render_line(report))


def test_a_script_under_a_bracketed_path_reports_everywhere(tmp_path: Path) -> None:
    folder = tmp_path / "runs[" / "]x"
    folder.mkdir(parents=True)
    script = folder / "train.py"
    script.write_text("import tapegrad as tg\ndef step():\n    tg.ones(2).require_grad()\nstep()\n")
    runpy.run_path(str(script), run_name="__main__")
    report = diagnostics.leak_report(explain=True)
    assert any(r.origin.endswith("[/]x/train.py:3") for r in report.rows if r.kind == "hanging")
    assert "[/]x/train.py:3" in re.sub(r"\s*\n\s*", "", str(report)).replace(" ", "")
    report._repr_mimebundle_()
    report.save_html(tmp_path / "r.html")
    out = StringIO()
    diagnostics.clear_history()
    try:
        diagnostics.epoch_end("[/]", console=Console(file=out, width=100))
    finally:
        diagnostics.clear_history()
    assert "epoch [/]" in out.getvalue()


def test_a_jupyter_cell_is_named_by_its_input_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """In Jupyter, code runs from ``/tmp/ipykernel_<pid>/<hash>.py`` files; rows name the cell
    as IPython's tracebacks do (``In[3]``), read from IPython's compiler in this process."""
    cell = "/tmp/ipykernel_4242/1234567890.py"
    other = "/tmp/ipykernel_4242/9999999999.py"  # a file IPython did not compile: unchanged
    shell = types.SimpleNamespace(compile=types.SimpleNamespace(_filename_map={cell: 3}))
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: shell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    code = "import tapegrad as tg\ndef step():\n    tg.ones(2).require_grad()\nstep()\n"
    for path in (cell, other):
        exec(compile(code, path, "exec"), {"__name__": "__cell__"})
    origins = {r.origin for r in diagnostics.leak_report().rows if r.kind == "hanging"}
    assert {"In[3]:3", f"{other}:3"} <= origins
    shell.compile = None  # an IPython without that map: paths stay as they are
    origins = {r.origin for r in diagnostics.leak_report().rows if r.kind == "hanging"}
    assert {f"{cell}:3", f"{other}:3"} <= origins
    tg.graph_cleanup()


def test_bytes_held_is_what_cleanup_frees_with_a_shared_array() -> None:
    """100 hanging matmuls all saving one live 400 kB input: the summary's "held → freed by
    graph_cleanup()" is that array once (the review found 100 times it), and exactly the
    bytes the cleanup then frees; an array a useful node also holds is not counted."""
    tape = tg.Tape("shared")
    with tg.use_tape(tape):
        tape.set_cleanup_policy("manual")
        x = tg.ones((100, 1000))  # 400 kB, alive throughout
        w = tg.ones((1000, 1)).require_grad()
        for _ in range(100):
            (x @ w).sum()  # hanging: each matmul saves x and w
        report = diagnostics.leak_report()
        assert report.hanging_nodes == 200
        assert report.rows_bytes > 50 * 400_000  # once a node in the rows
        keep = (x @ w).sum()  # a useful node now holds x and w too
        assert diagnostics.leak_report().bytes_held == 0  # a cleanup frees nothing: keep holds them
        del keep
        held = diagnostics.leak_report().bytes_held
        assert held == report.bytes_held == tape.snapshot().hanging_bytes == 404_000
        assert tape.cleanup().bytes_freed == held
