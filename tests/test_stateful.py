"""A stateful test of the tape (MyGrad's ``state_testing`` model, docs/style.md).

A ``RuleBasedStateMachine`` makes leaves, applies random ops to the tensors it holds (unary,
binary with broadcasting, reductions, mixing graphs), drops references, backwards from a
random live scalar (with and without ``retain_graph``), takes gradients with
``create_graph=True`` (which become tensors of the program, differentiable again), switches
the cleanup policy and sweeps, in random order. Beside the engine it keeps a reference model
written straight from docs/design.md "Graph lifetime" (which nodes exist, their parents,
consumption, reached leaves, policies) and the ``jnp`` expression of every tensor.
Invariants after every step:

- ``graph_stats()`` and every snapshot record equal the brute-force recount (``_recount``);
- the tape holds exactly the nodes the model says, with the same parents and flags;
- after each sweep, and after every step under ``"auto"``, that is exactly the useful set;
- a backward raises ``GraphConsumedError`` exactly when the model's walk meets a consumed
  node (and then nothing changes), and otherwise its gradients equal ``jax.grad`` of the
  equivalent ``jnp`` program.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _recount import check_tape, components, plain
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import tapegrad as tg

SHAPES: tuple[tuple[int, ...], ...] = ((), (3,), (2, 3))
UNARY: dict[str, tuple[Callable[[tg.Tensor], tg.Tensor], Callable[[jax.Array], jax.Array]]] = {
    "tanh": (lambda t: t.tanh(), jnp.tanh),
    "sin": (lambda t: t.sin(), jnp.sin),
    "sigmoid": (lambda t: t.sigmoid(), jax.nn.sigmoid),
    "neg": (lambda t: -t, jnp.negative),
    "half": (lambda t: t * 0.5, lambda a: a * 0.5),
}
BINARY: dict[str, tuple[Callable[[Any, Any], tg.Tensor], Callable[[Any, Any], jax.Array]]] = {
    "add": (lambda a, b: a + b, jnp.add),
    "sub": (lambda a, b: a - b, jnp.subtract),
    "mul": (lambda a, b: a * b, jnp.multiply),
    "matmul": (lambda a, b: a @ b, jnp.matmul),
}
REDUCE: dict[str, tuple[Callable[[tg.Tensor], tg.Tensor], Callable[[jax.Array], jax.Array]]] = {
    "sum": (lambda t: t.sum(), jnp.sum),
    "mean_last": (lambda t: t.mean(axis=-1), lambda a: jnp.mean(a, axis=-1)),
    "sum_first_keep": (
        lambda t: t.sum(axis=0, keepdims=True),
        lambda a: jnp.sum(a, axis=0, keepdims=True),
    ),
}


@functools.cache
def value(shape: tuple[int, ...], seed: int) -> jax.Array:
    """A fixed float32 array per (shape, seed)."""
    return jax.random.normal(jax.random.PRNGKey(seed), shape, jnp.float32)


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _matmuls(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) >= 1 and len(b) == 1 and a[-1] == b[0]


# ----------------------------------------------------------------------------- the model


@dataclass
class Expr:
    """A node of the ``jnp`` program: a leaf, a constant, or a function of other exprs."""

    kind: str  # "leaf" | "const" | "op"
    fn: Callable[..., jax.Array] | None = None
    args: tuple[int, ...] = ()
    leaf: int = -1  # for "leaf": the tape id of the leaf's node
    const: jax.Array | None = None


@dataclass
class Entry:
    """A tensor the machine holds, its tape node id (``None``: no grad) and its expr."""

    tensor: tg.Tensor
    node: int | None
    expr: int


@dataclass
class MNode:
    """The model of one tape node (docs/design.md's terms)."""

    kind: str  # "leaf" | "op"
    parents: tuple[int, ...]
    consumed: bool = False
    reached: bool = False
    on_tape: bool = True
    support: frozenset[int] = field(default_factory=frozenset)
    low: int | None = None  # consumed: the smallest id below it then, if known


class TapeMachine(RuleBasedStateMachine):
    """Random programs on the tape, checked against the model after every step."""

    def __init__(self) -> None:
        super().__init__()
        tg.graph_cleanup()
        self.others = frozenset(r.id for r in tg.snapshot().nodes)  # live nodes of others
        self.entries: list[Entry] = []
        self.exprs: list[Expr] = []
        self.model: dict[int, MNode] = {}
        self.leaf_values: dict[int, jax.Array] = {}
        self.policy = "manual"
        self.threshold = 0
        self.limit = 0
        self.swept = False  # a sweep ran in the last step

    def teardown(self) -> None:
        self.entries.clear()
        self.leaf_values.clear()
        tg.set_cleanup_policy("manual")
        tg.graph_cleanup()

    # ------------------------------------------------------------------ model helpers

    def live(self) -> set[int]:
        return {e.node for e in self.entries if e.node is not None}

    def useful(self) -> set[int]:
        """Live nodes and what they reach by parents, stopping at consumed nodes."""
        seen = set(self.live())
        stack = list(seen)
        while stack:
            node = self.model[stack.pop()]
            assert node.on_tape, "the model reached a node it removed"
            if node.consumed:
                continue
            for p in node.parents:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen

    def count(self) -> int:
        return len(self.others) + sum(n.on_tape for n in self.model.values())

    def settle(self) -> None:
        """Rules 4-5: a node that is not useful goes at once when consumed, reached (a leaf a
        backward reached, an op node a create_graph pass ran) or under "auto"; otherwise it
        hangs until a sweep."""
        useful = self.useful()
        for nid, node in self.model.items():
            if node.on_tape and nid not in useful:
                if node.consumed or node.reached or self.policy == "auto":
                    node.on_tape = False

    def sweep_model(self) -> set[int]:
        useful = self.useful()
        removed = {nid for nid, n in self.model.items() if n.on_tape and nid not in useful}
        for nid in removed:
            self.model[nid].on_tape = False
        survivors = self.count()
        self.limit = survivors + max(self.threshold, survivors)
        return removed

    def evaluate(self, root: int, env: dict[int, jax.Array]) -> jax.Array:
        """The value of expr ``root`` given leaf values (iterative, memoised)."""
        memo: dict[int, jax.Array] = {}
        stack = [root]
        while stack:
            eid = stack[-1]
            if eid in memo:
                stack.pop()
                continue
            ex = self.exprs[eid]
            if ex.kind == "leaf":
                memo[eid] = env[ex.leaf]
            elif ex.kind == "const":
                assert ex.const is not None
                memo[eid] = ex.const
            else:
                missing = [a for a in ex.args if a not in memo]
                if missing:
                    stack.extend(missing)
                    continue
                assert ex.fn is not None
                memo[eid] = ex.fn(*(memo[a] for a in ex.args))
            stack.pop()
        return memo[root]

    def add_expr(self, ex: Expr) -> int:
        self.exprs.append(ex)
        return len(self.exprs) - 1

    def node_of(self, t: tg.Tensor) -> int:
        """The tape id of ``t``'s node, found through the snapshot's weak references."""
        for rec in tg.snapshot().nodes:
            if rec.tensor is not None and rec.tensor() is t:
                return rec.id
        raise AssertionError("a tensor that requires grad has no live record")

    def recorded(self, t: tg.Tensor, kind: str, parents: tuple[int, ...], expr: int, keep: bool):
        """Account for a new tensor: its node (if any), a threshold sweep, a drop."""
        node = None
        if t.requires_grad:
            node = self.node_of(t)
            assert node not in self.model and node not in self.others
            support = frozenset().union(*(self.model[p].support for p in parents))
            if kind == "leaf":
                support = frozenset({node})
            self.model[node] = MNode(kind, parents, support=support)
        entry = Entry(t, node, expr)
        self.entries.append(entry)
        if node is not None and self.policy == "threshold" and self.count() >= self.limit:
            event("threshold sweep")
            self.sweep_model()  # the record that reached the limit swept; t was live
        if not keep:
            self.entries.pop()
            del entry, t
        self.settle()

    def pick(self, data: st.DataObject, entries: list[Entry] | None = None) -> Entry:
        pool = self.entries if entries is None else entries
        return pool[data.draw(st.integers(0, len(pool) - 1), label="index")]

    # ------------------------------------------------------------------ rules

    @initialize()
    def some_leaves(self) -> None:
        for shape in SHAPES:
            self.make_leaf(shape, seed=len(shape), grad=True)

    @rule(
        shape=st.sampled_from(SHAPES),
        seed=st.integers(0, 3),
        grad=st.sampled_from([True, True, False]),
    )
    def make_leaf(self, shape: tuple[int, ...], seed: int, grad: bool) -> None:
        self.swept = False
        data = value(shape, seed)
        t = tg.tensor(data)
        if grad:
            t.require_grad()
            # the expr refers to the leaf by its tape id, known once recorded
            eid = self.add_expr(Expr("leaf"))
            self.recorded(t, "leaf", (), eid, keep=True)
            node = self.entries[-1].node
            assert node is not None
            self.exprs[eid].leaf = node
            self.leaf_values[node] = data
        else:
            self.recorded(t, "const", (), self.add_expr(Expr("const", const=data)), keep=True)

    def _apply(
        self,
        inputs: list[Entry],
        tg_fn: Callable[..., tg.Tensor],
        jnp_fn: Callable[..., jax.Array],
        keep: bool,
    ) -> None:
        self.swept = False
        out = tg_fn(*(e.tensor for e in inputs))
        parents = tuple(e.node for e in inputs if e.node is not None)
        assert out.requires_grad == bool(parents)
        eid = self.add_expr(Expr("op", fn=jnp_fn, args=tuple(e.expr for e in inputs)))
        self.recorded(out, "op", parents, eid, keep)

    @precondition(lambda self: self.entries)
    @rule(data=st.data(), name=st.sampled_from(sorted(UNARY)), keep=st.booleans())
    def unary(self, data: st.DataObject, name: str, keep: bool) -> None:
        self._apply([self.pick(data)], *UNARY[name], keep)

    @precondition(lambda self: self.entries)
    @rule(data=st.data(), name=st.sampled_from(sorted(BINARY)), keep=st.booleans())
    def binary(self, data: st.DataObject, name: str, keep: bool) -> None:
        a = self.pick(data)
        fits = _matmuls if name == "matmul" else _broadcasts
        others = [e for e in self.entries if fits(a.tensor.shape, e.tensor.shape)]
        if not others:
            return
        self._apply([a, self.pick(data, others)], *BINARY[name], keep)

    @precondition(lambda self: self.entries)
    @rule(data=st.data(), name=st.sampled_from(sorted(REDUCE)), keep=st.booleans())
    def reduce(self, data: st.DataObject, name: str, keep: bool) -> None:
        x = self.pick(data)
        if name != "sum" and x.tensor.ndim == 0:
            name = "sum"
        self._apply([x], *REDUCE[name], keep)

    @precondition(lambda self: self.entries)
    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        self.swept = False
        entry = self.pick(data)
        self.entries = [e for e in self.entries if e is not entry]
        del entry
        self.settle()

    @precondition(lambda self: any(self._leaf_entries()))
    @rule(data=st.data())
    def stop_requiring_grad(self, data: st.DataObject) -> None:
        self.swept = False
        entry = self.pick(data, self._leaf_entries())
        entry.tensor.requires_grad_(False)
        nid, entry.node = entry.node, None  # its node is no longer live
        if nid not in self.useful():  # no graph uses it: off the tape at once, never hanging
            self.model[nid].on_tape = False
        entry.expr = self.add_expr(Expr("const", const=entry.tensor.data))
        self.settle()

    def _leaf_entries(self) -> list[Entry]:
        return [e for e in self.entries if e.node is not None and self.model[e.node].kind == "leaf"]

    def _scalar_roots(self) -> list[Entry]:
        return [e for e in self.entries if e.node is not None and e.tensor.shape == ()]

    @precondition(lambda self: self._scalar_roots())
    @rule(data=st.data(), retain=st.booleans())
    def backward(self, data: st.DataObject, retain: bool) -> None:
        self._backward(self.pick(data, self._scalar_roots()), retain)

    @precondition(lambda self: self._tracked())
    @rule(data=st.data(), retain=st.booleans())
    def backward_from_sum(self, data: st.DataObject, retain: bool) -> None:
        self._apply([self.pick(data, self._tracked())], *REDUCE["sum"], keep=True)
        self._backward(self.entries[-1], retain)

    def _tracked(self) -> list[Entry]:
        return [e for e in self.entries if e.node is not None]

    def _walk(self, root: int, wanted: frozenset[int] = frozenset()) -> tuple[set[int], bool]:
        """The model's walk (rule 1): the ancestors of ``root``, and whether it met a
        consumed node the pass needs. With ``wanted`` (``tg.grad``'s inputs; this machine
        never unfreezes a leaf) a consumed node is spared (neither walked below nor counted)
        when no input is older than it, or when the pass that consumed it walked none of the
        older ones (``MNode.low``: the smallest id below it when consumed)."""
        seen, stack = {root}, [root]
        while stack:
            nid = stack.pop()
            node = self.model[nid]
            if node.consumed:
                older = [w for w in wanted if w < nid]
                if wanted and (not older or (node.low is not None and max(older) < node.low)):
                    seen.discard(nid)
                    continue
                return seen, True
            for p in node.parents:
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen, False

    def _raises_consumed(self, call: Callable[[], Any]) -> None:
        before = plain(tg.snapshot().nodes)
        try:
            call()
        except tg.GraphConsumedError as err:
            assert isinstance(err, RuntimeError) and "retain_graph" in str(err)
        else:
            raise AssertionError("a backward through a consumed node did not raise")
        event("backward raised GraphConsumedError")
        assert plain(tg.snapshot().nodes) == before  # nothing changed

    def _consume(
        self,
        seen: set[int],
        retain: bool,
        create_graph: bool = False,
        wanted: set[int] | None = None,
    ) -> None:
        """Rules 3-4 in the model: leaves reached; op nodes consumed without retain_graph, and
        reached when a create_graph pass retained them (the recorded gradient's history:
        freed with their tensors, never hanging). With ``wanted`` (``tg.grad``), only the op
        nodes with a parent on a path toward a wanted node ran: the others are reached."""
        ran = set(seen)
        if wanted is not None:
            toward: set[int] = set()
            for nid in sorted(seen):  # parents before their consumers
                if nid in wanted or any(p in toward for p in self.model[nid].parents):
                    toward.add(nid)
            ran = {n for n in seen if any(p in toward for p in self.model[n].parents)}
        below = {nid: self._below(nid) for nid in seen}  # before consumption cuts parents
        for nid in seen:
            node = self.model[nid]
            if node.kind == "leaf" or create_graph or nid not in ran:
                node.reached = True
            if node.kind != "leaf" and not retain and nid in ran:
                node.consumed = True
                node.parents = ()
                node.low = below[nid]

    def _below(self, nid: int) -> int | None:
        """The smallest id below ``nid`` (itself included) through unconsumed parents and
        the records of the consumed nodes the last walk spared; ``None`` if one has none."""
        low, seen, stack = nid, {nid}, [nid]
        while stack:
            node = self.model[stack.pop()]
            if node.consumed:  # spared by the walk (it would have raised otherwise)
                if node.low is None:
                    return None
                low = min(low, node.low)
                continue
            for p in node.parents:
                low = min(low, p)
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return low

    def _leaf_env(self) -> dict[int, jax.Array]:
        return dict(self.leaf_values)

    def _backward(self, root: Entry, retain: bool) -> None:
        self.swept = False
        assert root.node is not None
        seen, consumed = self._walk(root.node)
        leaves = self._leaf_entries()
        for e in leaves:
            e.tensor.grad = None
        if consumed:
            self._raises_consumed(lambda: root.tensor.backward(retain_graph=retain))
            assert all(e.tensor.grad is None for e in leaves)
            return
        root.tensor.backward(retain_graph=retain)
        event(f"backward ok, retain_graph={retain}")
        expected = jax.grad(lambda env: self.evaluate(root.expr, env))(self._leaf_env())
        for e in leaves:
            assert e.node is not None
            if e.node in seen:
                assert e.tensor.grad is not None and e.tensor.grad.shape == e.tensor.shape
                np.testing.assert_allclose(
                    e.tensor.grad.numpy(), expected[e.node], rtol=2e-5, atol=1e-5
                )
            else:
                assert e.tensor.grad is None
        self._consume(seen, retain)
        self.settle()

    @precondition(
        lambda self: self.policy != "threshold" and self._scalar_roots() and self._leaf_entries()
    )
    @rule(data=st.data(), retain=st.sampled_from([None, True, False]))
    def grad_create_graph(self, data: st.DataObject, retain: bool | None) -> None:
        """tg.grad with create_graph=True: the gradients require grad and join the program as
        tensors whose jnp expression is jax.grad of the root's; the nodes the pass recorded
        join the model with the parents the snapshot shows (a later backward from them is a
        second-order check). Not under "threshold": a sweep may run in the middle of the pass."""
        self.swept = False
        root = self.pick(data, self._scalar_roots())
        assert root.node is not None
        pool = self._leaf_entries()
        picks = data.draw(st.sets(st.integers(0, len(pool) - 1), min_size=1), label="inputs")
        targets = [pool[i] for i in sorted(picks)]
        seen, consumed = self._walk(
            root.node, frozenset(e.node for e in targets if e.node is not None)
        )
        if consumed:
            self._raises_consumed(
                lambda: tg.grad(root.tensor, [e.tensor for e in targets], create_graph=True)
            )
            return
        last = max((r.id for r in tg.snapshot().nodes), default=-1)
        grads = tg.grad(
            root.tensor, [e.tensor for e in targets], create_graph=True, retain_graph=retain
        )
        event(f"create_graph ok, retain_graph={retain}")
        for rec in sorted(tg.snapshot().nodes, key=lambda r: r.id):
            if rec.id > last:
                assert rec.op.startswith("vjp(") or rec.op in ("add", "where"), rec
                support = frozenset().union(*(self.model[p].support for p in rec.parents))
                self.model[rec.id] = MNode("op", rec.parents, support=support)
        wanted = {e.node for e in targets if e.node is not None}
        self._consume(seen, retain is not False, create_graph=True, wanted=wanted)
        ids = sorted(self.leaf_values)
        leaf_exprs = {ex.leaf: i for i, ex in enumerate(self.exprs) if ex.kind == "leaf"}
        full = jax.grad(lambda env: self.evaluate(root.expr, env))(self._leaf_env())
        for e, g in zip(targets, grads, strict=True):
            assert e.node is not None and g.requires_grad
            np.testing.assert_allclose(g.numpy(), full[e.node], rtol=2e-5, atol=1e-5)

            def gradient(*vals: jax.Array, target: int = e.node, top: int = root.expr) -> Any:
                env = dict(zip(ids, vals, strict=True))
                return jax.grad(lambda env: self.evaluate(top, env))(env)[target]

            eid = self.add_expr(Expr("op", fn=gradient, args=tuple(leaf_exprs[i] for i in ids)))
            self.entries.append(Entry(g, self.node_of(g), eid))
        del grads, g
        self.settle()

    @rule()
    def sweep(self) -> None:
        useful = self.useful()
        removed = {nid for nid, n in self.model.items() if n.on_tape and nid not in useful}
        on_tape = {nid: n for nid, n in self.model.items() if n.on_tape}
        graph_of = _model_components(on_tape)
        dead = {g for g in graph_of.values()} - {graph_of[nid] for nid in useful}
        stats = tg.graph_cleanup()
        event("sweep removed nodes" if removed else "sweep removed nothing")
        assert stats.nodes_removed == len(removed)
        assert stats.leaves_removed == sum(self.model[n].kind == "leaf" for n in removed)
        assert stats.graphs_removed == len(dead)
        assert self.sweep_model() == removed
        self.swept = True

    @rule(name=st.sampled_from(["manual", "auto", "threshold"]), threshold=st.integers(1, 6))
    def set_policy(self, name: str, threshold: int) -> None:
        self.swept = False
        if name == "threshold":
            # sweep first, so that "what the last sweep kept" is the node count now
            tg.graph_cleanup()
            self.threshold = threshold
            self.sweep_model()
            tg.set_cleanup_policy("threshold", threshold=threshold)
            self.swept = True
        else:
            tg.set_cleanup_policy(name)
            self.threshold = 0
            if name == "auto":
                self.sweep_model()  # switching to "auto" sweeps
                self.swept = True
        self.policy = name
        assert tg.get_cleanup_policy() == name
        self.settle()

    # ------------------------------------------------------------------ invariants

    @invariant()
    def tape_matches_recount_and_model(self) -> None:
        snap, recount = check_tape()
        records = {r.id: r for r in snap.nodes if r.id not in self.others}
        expected = {nid: n for nid, n in self.model.items() if n.on_tape}
        assert set(records) == set(expected), (sorted(records), sorted(expected))
        live = self.live()
        for nid, rec in records.items():
            node = expected[nid]
            assert rec.kind == node.kind, (rec, node)
            assert rec.consumed == node.consumed, (rec, node)
            assert rec.live == (nid in live), (rec, node)
            assert rec.parents == tuple(p for p in node.parents if self.model[p].on_tape), (
                rec,
                node,
            )
        useful = self.useful()
        assert recount.useful - self.others == useful
        if self.swept or self.policy == "auto":
            assert set(records) == useful  # exactly the useful set
        assert tg.get_cleanup_policy() == self.policy


def _model_components(nodes: dict[int, MNode]) -> dict[int, int]:
    """Components of the model's nodes on the tape, through ``_recount.components``."""
    records = [
        tg.NodeRecord(
            id=nid,
            kind=n.kind,
            op="leaf" if n.kind == "leaf" else "op",
            graph=-1,
            live=False,
            useful=False,
            consumed=n.consumed,
            origin="",
            function="",
            saved_bytes=0,
            parents=tuple(p for p in n.parents if p in nodes),
            tensor=None,
        )
        for nid, n in nodes.items()
    ]
    return components(records)


TapeMachine.TestCase.settings = settings(stateful_step_count=30)
TestTapeMachine = TapeMachine.TestCase


class TwoTapeMachine(TapeMachine):
    """The same random programs on a private ``tg.Tape`` while the process tape holds a graph
    of its own (a live output, a hanging node, a consumed graph's leaf): every sweep, policy
    change and backward of the machine happens on the private tape, and the process tape's
    records stay exactly as they were after every step (docs/design.md "Tapes as values")."""

    def __init__(self) -> None:
        self.process = tg.current_tape()
        self.w = tg.randn((3,), key=7).require_grad()
        self.kept = (self.w * 2.0).tanh()  # live
        (self.w + 1.0).sin()  # hanging: never backwarded, never swept here
        (self.w * self.w).sum().backward()  # consumed, freed; w reached
        self.bystander = plain(tg.snapshot().nodes)
        tape = tg.Tape("machine")
        tape.set_cleanup_policy("manual")  # the machine's start, as on the suite's process tape
        self.private = tg.use_tape(tape)
        self.private.__enter__()
        super().__init__()
        assert tg.current_tape() is not self.process

    def teardown(self) -> None:
        super().teardown()
        self.private.__exit__(None, None, None)
        assert tg.current_tape() is self.process
        assert plain(tg.snapshot().nodes) == self.bystander
        del self.kept, self.w
        tg.graph_cleanup()

    @invariant()
    def process_tape_untouched(self) -> None:
        with tg.use_tape(self.process):
            assert plain(tg.snapshot().nodes) == self.bystander


TwoTapeMachine.TestCase.settings = settings(stateful_step_count=30, max_examples=25)
TestTwoTapeMachine = TwoTapeMachine.TestCase
