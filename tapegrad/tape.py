"""The graph state: nodes, liveness, usefulness, consumption, cleanup, policies, the lock.

Only this module mutates the tape; ``census`` counts what it holds and ``sweep`` what a sweep
removes (docs/design.md, "Graph lifetime"). Terms used below:

- A node is **live** while its tensor exists and requires grad. A node is the weak reference
  to its tensor; the reference's callback only appends the node to ``_dead``; every entry
  point drains that queue first under the lock (rule 5), so counts are always current.
- A node is **useful** when it is live or a useful node links to it as a parent. Consumed
  nodes drop their parent links, so "reachable from a live node by parent links" is exactly
  docs/design.md's definition. The graph is a DAG (a parent has a smaller id than its child), so
  counting each node's useful children (``uc``) decides usefulness exactly and
  incrementally: a node stops being useful when it is not live and ``uc`` drops to 0, and it
  can never become useful again (new nodes only link to live tensors' nodes).
- A node that stops being useful is freed at once when it is *freeable* (consumed, a leaf
  reached by a backward, or an op node a ``create_graph`` backward ran: rule 4) or under the
  ``"auto"`` policy; otherwise it waits in
  ``_hanging`` for ``graph_cleanup()`` (rule 5). So a sweep is the removal of ``_hanging``:
  linear in what it frees, and O(1) when there is nothing to free.
- **Graphs** are connected components over parent links between nodes on the tape. They are
  computed on demand (``census.components``, cached until the tape changes), because
  removing nodes can split a component and union-find cannot split.
"""

from __future__ import annotations

import functools
import itertools
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import CodeType
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar, cast

import jax

from tapegrad.census import (
    Ledger,
    components,
    dead_components,
    device_bytes,
    drop,
    freeable_bytes,
    hold,
    ledger_records,
    node_records,
    sizes_cache,
    unhold,
    useful_set,
)
from tapegrad.census import saved_bytes as census_saved_bytes
from tapegrad.errors import GraphConsumedError, TapeMismatchError, TracerError
from tapegrad.node import Node, Step
from tapegrad.origin import function_name
from tapegrad.records import CleanupStats, GraphStats, Snapshot

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor
    from tapegrad.op import Op

__all__ = ["Tape", "Policy"]

Policy = Literal["manual", "auto", "threshold"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_Tracer = jax.core.Tracer
_numbers = itertools.count(1)
_TAPES: set[weakref.ref[Tape]] = set()
"""A weak reference to every live tape (tg.jit asks them all before donating an array); a
tape's reference removes itself when the tape dies."""


# The tensor's engine interface, as far as a tape needs it (``tapegrad._tensor``): a record
# attaches the node to its tensor, a repair reads which node a tensor points to. Tensors
# build on tapes, so this module cannot import them: ``_tensor`` hands these two over when
# it loads (``use_tensor_interface``), before any tape records.
_attach: Callable[[Tensor, Node, Tape], None]
_node_of: Callable[[Tensor], Node | None]


def use_tensor_interface(
    attach: Callable[[Tensor, Node, Tape], None],
    node_of: Callable[[Tensor], Node | None],
) -> None:
    """Called once, by ``tapegrad._tensor`` as it loads: the functions through which tapes
    read and write tensors (the tensor's layout is known to ``_tensor`` only)."""
    global _attach, _node_of
    _attach, _node_of = attach, node_of


DEFAULT_THRESHOLD = 10_000
"""The default policy's node count (docs/design.md rule 5: ``"threshold"``, 10,000 nodes)."""
_NEVER = sys.maxsize  # ``_sweep_at`` when no policy sweeps by count: one comparison per record


def _entry(
    method: Callable[Concatenate[Tape, _P], _R],
) -> Callable[Concatenate[Tape, _P], _R]:
    """The preamble of every tape entry point: take the lock, then apply the queued deaths
    (rule 5: counts are always current). An exception that escapes the bookkeeping half-way
    (a ``KeyboardInterrupt`` may arrive between any two bytecodes) first rebuilds what it
    may have left inconsistent (``Tape._repair``), so the tape stays usable."""

    def entry(self: Tape, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            try:
                if self._dead:
                    self._drain()
                return method(self, *args, **kwargs)
            except (GraphConsumedError, TapeMismatchError, TracerError):
                raise  # refusals, raised before anything changed
            except BaseException:
                self._repair()
                raise

    functools.update_wrapper(entry, method)
    return entry


# ----------------------------------------------------------------------------- the tape


def live_tapes() -> list[Tape]:
    """Every tape still alive, in no particular order (read-only: what ``python -m
    diagnostics run`` reports on)."""
    return [tape for tape in (ref() for ref in tuple(_TAPES)) if tape is not None]


def saved_on_any_tape(arrays: Sequence[Any]) -> bool:
    """Whether a node on any live tape saves one of ``arrays`` (what ``tg.jit``'s donation
    must spare, docs/design.md "Compiled steps")."""
    for ref in tuple(_TAPES):
        tape = ref()
        if tape is not None and tape.saves_any(arrays):
            return True
    return False


class Tape:
    """A graph store: the nodes recorded on it, their liveness, cleanup policy and stats.

    Ops record on ``tg.current_tape()`` (the process tape unless ``tg.use_tape`` says
    otherwise). A tensor that requires grad keeps its tape alive, and a node refers to its
    tape only weakly, so a dropped tape whose tensors are gone is freed at once with
    everything on it (no reference cycle). One re-entrant lock guards it; the graph-lifetime
    rules of docs/design.md hold per tape, and nothing done to one tape touches another.

    Args:
        name: shown in ``repr`` and in error messages (default: ``"tape <n>"``).
        allow_tracers: record ops whose arrays are JAX tracers (a private tape that lives
            while ``jax.jit`` traces, as ``tg.jit`` uses); otherwise recording a tracer raises
            ``TracerError`` (docs/design.md rule 9), when the op runs.

    Raises:
        TypeError: ``name`` is not a string.
    """

    def __init__(self, name: str | None = None, *, allow_tracers: bool = False) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Tape name must be a str, got {type(name).__name__}.")
        self._name = f"tape {next(_numbers)}" if name is None else name
        self._allow_tracers = bool(allow_tracers)
        self._lock = threading.RLock()
        self._nodes: dict[int, Node] = {}
        self._hanging: dict[int, Node] = {}
        self._dead: list[Node] = []
        self._enqueue = self._dead.append  # a node's weak-reference callback: only enqueues
        # every node's ``tape``: one shared object, also this tape's entry in _TAPES
        self._weak = weakref.ref(self, _TAPES.discard)
        self._next_id = 0
        self._leaves = 0
        self._live = 0
        self._hanging_leaves = 0
        self._held: dict[int, int] = {}  # id(saved array) -> holders among nodes on the tape
        self._ledger: Ledger = {}
        self._below: dict[int, int] = {}  # consumed node id -> the smallest id below it
        self._policy: Policy = "threshold"
        self._threshold = DEFAULT_THRESHOLD
        self._survivors = 0
        self._limit = 0
        self._sweep_at = _NEVER
        self._version = 0
        # ((version, next id), node -> graph): ``_version`` counts removals and cut links
        self._cache: tuple[tuple[int, int], dict[int, int]] | None = None
        self._set_limit()
        _TAPES.add(self._weak)

    @property
    def name(self) -> str:
        """The tape's name, as shown in messages."""
        return self._name

    @property
    def allow_tracers(self) -> bool:
        """Whether ops whose arrays are JAX tracers may be recorded on this tape."""
        return self._allow_tracers

    def __repr__(self) -> str:
        tracers = ", allow_tracers=True" if self._allow_tracers else ""
        return f"<tg.Tape {self._name!r}: {len(self._nodes)} nodes, {self._policy}{tracers}>"

    # ------------------------------------------------------------------ liveness queue

    def _drain(self) -> None:
        """Apply the queued deaths, and the loss of use they cause, in one loop.

        A node is its tensor's weak reference, and its callback is ``self._enqueue`` (it runs
        wherever the tensor died, so it only enqueues the node). A queued node that is still
        live dies here; a dead node with no useful child left stops being useful: its
        parents lose a useful child (a parent left with none, whose tensor is gone, is
        queued in turn) and it is released, taken off (``"auto"``) or hangs until a sweep.
        A node queued twice (released by ``requires_grad_(False)``, then its tensor died) or
        that stopped being useful already is skipped. Every tracked op whose output died
        pays this loop, so it is written out (no call per node)."""
        dead = self._dead
        auto = self._policy == "auto"
        while dead:
            node = dead.pop()
            if node.live:
                node.live = False  # liveness is not graph structure: no version bump
                self._live -= 1
            elif not node.useful:
                continue
            if node.uc:
                continue
            node.useful = False
            for p in node.parents:
                if p is not None and p.on_tape:
                    p.uc -= 1
                    if p.uc == 0 and not p.live:
                        dead.append(p)  # stops being useful too
            if node.consumed or node.reached:
                self._release(node)
            elif auto:
                self._take_off((node,))
            else:
                self._hanging[node.id] = node
                if node.op is None:
                    self._hanging_leaves += 1

    def _release(self, node: Node) -> None:
        """Take a consumed or reached node off the tape (rule 4): nothing is sized, nothing
        enters the ledger. One node per call: a backward's bookkeeping, node by node."""
        del self._nodes[node.id]
        node.on_tape = False
        if node.consumed and self._below:
            self._below.pop(node.id, None)
        node.parents = ()
        saved, node.saved = node.saved, None
        node.params = None
        if node.op is None:
            self._leaves -= 1
        self._version += 1
        if saved is not None:
            drop(self._held, saved)

    def _take_off(self, nodes: Iterable[Node]) -> int:
        """Take hanging ``nodes`` off the tape (a sweep, or one node under ``"auto"``): the
        ledger counts each with the bytes it saved, and the bytes no node holds any more are
        returned (rule 7). A sweep removes many, so the loop is written out (no call per
        node)."""
        on_tape, held, ledger = self._nodes, self._held, self._ledger
        sizes = sizes_cache()
        freed = leaves = count = 0
        entry: list[Any] = [0, 0, None]
        last: tuple[Any, int, Any] = (None, -1, None)  # the previous node's origin and op
        for node in nodes:
            del on_tape[node.id]
            node.on_tape = False
            node.parents = ()
            saved, node.saved = node.saved, None
            node.params = None
            op = node.op
            if op is None:
                leaves += 1
            count += 1
            mine = 0
            if saved is not None:
                mine, gone = unhold(held, saved, sizes)
                freed += gone
            code, lasti = node.code, node.lasti
            if code is not last[0] or lasti != last[1] or op is not last[2]:
                last = (code, lasti, op)  # nodes of one line come in runs: one lookup a run
                key = (id(code), lasti, "leaf" if op is None else op.name)  # see ``Ledger``
                found = ledger.get(key)
                if found is None:
                    found = ledger[key] = [0, 0, code]
                entry = found
            entry[0] += 1
            entry[1] += mine
        self._leaves -= leaves
        self._version += count
        return freed

    # ------------------------------------------------------------------ recording

    def record(
        self,
        op: Op | None,
        parents: tuple[Node | None, ...],
        saved: Any,
        params: dict[str, Any] | None,
        tensor: Tensor,
        data: Any,
        code: CodeType | None,
        lasti: int,
        prov: tuple[int | None, ...] | None = None,
    ) -> Node:
        """Record a node for ``tensor`` (whose array is ``data``): a leaf (``op is None``) or
        the output of ``op``, linked to ``parents``, its residuals ``saved`` with their
        provenance ``prov`` (see ``Node``). The tensor then points to the node and keeps this
        tape alive; the node is returned.

        The caller keeps the input tensors alive until this returns, so every parent is live
        or useful here and cannot be swept concurrently (docs/design.md rule 10). This is the hot
        path of every tracked op, so it spells out ``_entry``'s preamble (the lock, the queued
        deaths, repair on an interrupt) and builds the node in place. The node counts as
        recorded once it is in ``_nodes``; everything after that is derived (``_repair``).

        Raises:
            TapeMismatchError: a parent belongs to another tape; nothing was recorded.
            TracerError: ``tensor`` holds a JAX tracer and this tape does not allow tracers.
        """
        with self._lock:
            try:
                if self._dead:
                    self._drain()
                if isinstance(data, _Tracer):
                    self.check_value(data, "leaf" if op is None else op.name)
                weak = self._weak
                for p in parents:  # each parent gains a useful child (undone on a refusal)
                    if p is not None:
                        if p.tape is not weak:
                            for q in parents[: parents.index(p)]:
                                if q is not None:
                                    q.uc -= 1
                            raise TapeMismatchError(_mismatch_message(op, parents, self))
                        p.uc += 1
                aval = data.aval  # shape and dtype without two Python properties
                node = Node(tensor, self._enqueue)
                node.op = op
                node.parents = parents
                node.saved = saved
                node.params = params
                node.shape = aval.shape
                node.dtype = aval.dtype
                node.code = code
                node.lasti = lasti
                node.prov = prov
                node.tape = weak
                node.live = node.useful = node.on_tape = True
                node.consumed = node.reached = node.retain = False
                node.uc = node.claimed = 0
                nid = node.id = self._next_id
                self._nodes[nid] = node
                _attach(tensor, node, self)  # recorded: the tensor now points to it
                self._next_id = nid + 1
                self._live += 1  # a new node moves ``_next_id``: the graphs' cache key
                if op is None:
                    self._leaves += 1
                elif saved is not None:
                    hold(self._held, saved)
                if len(self._nodes) >= self._sweep_at:
                    self._sweep(count_graphs=False)
                return node
            except (TapeMismatchError, TracerError):
                raise  # refusals, raised before anything changed
            except BaseException:
                self._repair()
                raise

    def check_value(self, value: Any, what: str) -> None:
        """The one tracer refusal (docs/design.md rule 9): raise unless ``value`` may belong to a
        node on this tape (a concrete array; a tracer only on a tape that allows tracers).

        Raises:
            TracerError: ``value`` is a JAX tracer and this tape does not allow tracers.
        """
        if isinstance(value, _Tracer) and not self._allow_tracers:
            raise TracerError(
                f"{what}: a JAX tracer was met while recording on {self._name!r} a tensor that "
                "requires grad (inside jax.jit, vmap or grad?). This tape records only "
                "concrete arrays: run this code eagerly (or under tg.jit), wrap the traced "
                "code in tg.no_grad(), or pass tensors that do not require grad (.detach()) "
                "into the transformation."
            )

    @_entry
    def release(self, node: Node) -> bool:
        """The tensor of ``node`` stopped requiring grad (``requires_grad_(False)``): a leaf
        that no graph uses leaves the tape at once (freezing a parameter is not a leak: it
        never hangs); any other node dies as if its tensor had. Returns whether the node
        stays on the tape (a pending graph uses it)."""
        if not (node.on_tape and node.live):
            return False
        if node.op is None and not node.uc:
            node.live = node.useful = False
            self._live -= 1
            self._release(node)
            return False
        self._dead.append(node)  # applied as a death of its tensor
        self._drain()
        return node.on_tape

    @_entry
    def reattach(self, node: Node, tensor: Any) -> bool:
        """Make ``node`` (a leaf released by ``requires_grad_(False)`` that a pending graph
        still uses) ``tensor``'s node again, live (``requires_grad_(True)``). Returns
        ``False``, changing nothing, when the node left the tape or stopped being useful
        (the tensor then becomes a new leaf)."""
        if not (node.on_tape and node.useful) or node.live or node() is not tensor:
            return False
        node.live = True
        self._live += 1
        return True

    @_entry
    def retain_grad(self, node: Node) -> None:
        """Keep the gradient of ``node``'s tensor after backward (``Tensor.retain_grad``)."""
        node.retain = True

    @_entry
    def reach(self, nodes: Iterable[Node]) -> None:
        """Count ``nodes`` as reached (rule 4): not useful, they are freed with their tensors
        (at once if those died already) instead of hanging; used in a backward, they are
        consumed as any node. For leaves a compiled step trained, the nodes a failed
        ``create_graph`` pass recorded, and a layer's secondary output that PyTorch code drops
        unused as a matter of course (``out, _ = lstm(x)``)."""
        self._reach(nodes)

    def _reach(self, nodes: Iterable[Node]) -> None:
        for node in nodes:
            node.reached = True
            if not node.useful and node.on_tape:  # its tensor died already
                self._free_hanging(node)

    # ------------------------------------------------------------------ backward support

    @_entry
    def ancestors(
        self,
        roots: Sequence[Node],
        claim: bool,
        wanted: frozenset[int] = frozenset(),
        floor: int = -1,
    ) -> list[Step]:
        """Return the steps of a backward from ``roots``, in descending node id (rule 1).

        Each step holds the node with its op, parents, residuals and parameters as they are
        now, so the pass never reads a node another thread changes. With ``claim`` (a pass
        without ``retain_graph``) the op nodes are claimed by this thread: a pass on another
        thread that meets them before this one has finished raises, as it would after it
        finished. A claim whose pass cannot be running any more (its thread is this one, or
        has ended: an interrupt stopped it before it reported) is ignored.

        ``wanted``: the ids a pass with inputs (``tg.grad``, ``backward(inputs=...)``)
        differentiates with respect to; it needs a node's VJP only on a path toward one of
        them. A consumed (or claimed) node it cannot need is *spared*: no raise, no claim,
        no walk below it, and its step has no parents and no residuals (the pass still reads
        its cotangent when it is wanted). A consumed node has lost its parent links, so the
        walk cannot see what lies below it: it is needed when a wanted node is older (a
        smaller id; parents are older than their children) and no older than the smallest id
        below it that the pass consuming it recorded (``_maybe_below``; none recorded: any
        older wanted node), and spared otherwise — always when it is the oldest wanted node
        itself.
        Without ``wanted`` (a plain backward, which needs every ancestor) any consumed node
        raises; so does one older than ``floor`` (the node of a wanted leaf frozen and
        unfrozen: a graph older than it may lie above its tensor's earlier node).

        Raises:
            GraphConsumedError: the walk met a consumed (or claimed) node the pass needs;
                nothing changed.
        """
        me = threading.get_ident()
        seen: dict[int, Node] = {}
        spared: list[Node] = []
        stack: list[Node] = []
        for root in roots:
            if root.id not in seen:
                seen[root.id] = root
                stack.append(root)
        while stack:
            node = stack.pop()
            running = bool(node.claimed) and _running_elsewhere(node.claimed, me)
            if node.consumed or running:
                if (
                    not wanted
                    or node.id < floor
                    or (min(wanted) < node.id and self._maybe_below(node, wanted))
                ):
                    raise GraphConsumedError(_consumed_message(node, running))
                spared.append(node)  # no wanted node below it: its VJP never runs
                continue
            for p in node.parents:
                if p is not None and p.id not in seen:
                    seen[p.id] = p
                    stack.append(p)
        for node in spared:
            del seen[node.id]  # left unclaimed, outside the claiming loop below
        steps = []
        for nid in sorted(seen, reverse=True):  # ints: no key function called per node
            node = seen[nid]
            if claim and node.op is not None:
                node.claimed = me
            steps.append((node, node.op, node.parents, node.saved, node.params))
        if spared:
            steps.extend((node, node.op, (), None, None) for node in spared)
            steps.sort(key=lambda step: step[0].id, reverse=True)
        return steps

    def _maybe_below(self, node: Node, wanted: frozenset[int]) -> bool:
        """Whether a wanted node may lie below consumed ``node``: unknown (``True``) unless
        the pass that consumed it recorded the smallest id below it (``_note_walked``); then
        whether a wanted node older than ``node`` is at least that old. (A leaf frozen and
        unfrozen has a new node younger than its old ones: an old node below ``node`` keeps
        the record below the new one's id, so the new one counts as maybe below.)"""
        lowest = self._below.get(node.id)
        if lowest is None:
            return True
        return any(lowest <= w < node.id for w in wanted)

    @_entry
    def consume(
        self,
        done: Sequence[Node],
        undone: Sequence[Node],
        leaves: Sequence[Node],
        retain_graph: bool,
        create_graph: bool = False,
        walked: Sequence[Step] = (),
        roots: Sequence[Node] = (),
    ) -> None:
        """Mark what a backward visited (rules 3-4): the op nodes whose VJP ran are consumed
        unless ``retain_graph`` (``undone`` ones, left by a VJP that raised, are released
        again), leaves reached; free at once whatever that leaves without use.

        ``walked``: the pass's steps (``ancestors``), from ``roots``. For the consumed nodes
        that stay on the tape (a live tensor reaches them), the smallest id below each is
        kept (``_note_walked``), so that a later pass toward older inputs spares it
        (``ancestors``): nothing older than that is below it.

        A graph retained by ``create_graph`` (which implies ``retain_graph``) is the recorded
        gradient's history, not a graph kept for another pass: its op nodes are marked
        reached, so they are freed with their tensors like a consumed graph (a gradient
        penalty's first-order graph, as PyTorch frees it), never reported as hanging. A graph
        kept by an explicit ``retain_graph=True`` whose tensors die before a second backward
        hangs until a sweep (rule 5)."""
        self._reach(itertools.chain(leaves, done) if retain_graph and create_graph else leaves)
        if retain_graph:
            return
        below = self._below  # the spared steps' records, read before this pass frees them
        spared = {
            step[0].id: below.get(step[0].id, -1)
            for step in walked
            if step[1] is not None and not step[2]
        }
        held = self._held
        me = threading.get_ident()
        for node in undone:
            if node.claimed == me:  # only this pass's claims (a spared node may be another's)
                node.claimed = 0
        for node in done:
            node.consumed = True
            node.claimed = 0
            saved, node.saved = node.saved, None
            if saved is not None and node.on_tape:
                drop(held, saved)
        for node in done:
            if not node.on_tape:
                continue
            parents, node.parents = node.parents, ()
            self._version += 1
            if node.useful:
                for p in parents:
                    if p is not None and p.on_tape:
                        p.uc -= 1
                        if p.uc == 0 and not p.live:
                            self._dead.append(p)  # stops being useful: _drain below
            else:  # its tensor died while the VJPs ran: it waited in _hanging
                self._free_hanging(node)
        if self._dead:
            self._drain()
        if walked:
            self._note_walked(done, walked, roots, spared)

    def _note_walked(
        self,
        done: Sequence[Node],
        walked: Sequence[Step],
        roots: Sequence[Node],
        spared: dict[int, int],
    ) -> None:
        """``consume``'s record, for each consumed node left on the tape, of the smallest id
        below it (itself included; -1: unknown). A pass's only root has every step below it:
        the pass's smallest id. Other nodes take the smallest of their parents' in one sweep
        of the steps, oldest first. A spared step (an op without parents) brings its own
        record (``spared``, read before the pass freed anything; -1 without one)."""
        kept = [node for node in done if node.on_tape]
        if not kept:
            return
        below = self._below
        if len(kept) == 1 and len(roots) == 1 and kept[0] is roots[0]:
            lowest = min(walked[-1][0].id, *spared.values()) if spared else walked[-1][0].id
            if lowest >= 0:
                below[kept[0].id] = lowest
            return
        lows: dict[int, int] = {}
        for step in reversed(walked):  # ascending ids: parents before their children
            nid = step[0].id
            if step[1] is not None and not step[2]:
                low = spared.get(nid, -1)
            else:
                low = nid
                for p in step[2]:
                    if p is not None and lows[p.id] < low:
                        low = lows[p.id]
            lows[nid] = low
        for node in kept:
            if lows[node.id] >= 0:
                below[node.id] = lows[node.id]

    def _free_hanging(self, node: Node) -> None:
        del self._hanging[node.id]
        if node.op is None:
            self._hanging_leaves -= 1
        self._release(node)

    # ------------------------------------------------------------------ cleanup

    @_entry
    def cleanup(self) -> CleanupStats:
        """Remove every hanging node with its saved arrays (docs/design.md rule 6).

        Never removes a useful node, so every gradient computed afterwards equals the one
        computed without it. Safe at any time, from any thread, repeatedly.

        Returns:
            Counts of nodes, leaves and graphs removed, bytes freed, and seconds taken.
        """
        start = time.perf_counter()
        stats = self._sweep()
        return CleanupStats(
            stats.nodes_removed,
            stats.leaves_removed,
            stats.graphs_removed,
            stats.bytes_freed,
            time.perf_counter() - start,
        )

    def _sweep(self, count_graphs: bool = True) -> CleanupStats:
        """Remove every hanging node, adding each to the ledger: linear in what it removes.
        ``count_graphs``: count the graphs removed (``cleanup()``'s report); an automatic
        sweep, whose counts nobody reads, skips that union-find (~0.3 us a node)."""
        hanging = self._hanging
        if not hanging:
            self._set_survivors()
            return CleanupStats()
        graphs = dead_components(hanging) if count_graphs else 0
        leaves = self._hanging_leaves
        self._hanging = {}
        self._hanging_leaves = 0
        freed = self._take_off(node for node in hanging.values() if node.on_tape)
        self._set_survivors()
        return CleanupStats(len(hanging), leaves, graphs, freed, 0.0)

    def _set_survivors(self) -> None:
        self._survivors = len(self._nodes)
        self._set_limit()

    def _set_limit(self) -> None:
        """Rule 5: under "threshold", sweep when the count reaches survivors + max(threshold,
        survivors); ``_sweep_at`` is ``_NEVER`` under the other policies."""
        self._limit = self._survivors + max(self._threshold, self._survivors)
        self._sweep_at = self._limit if self._policy == "threshold" else _NEVER

    # ------------------------------------------------------------------ policy

    def set_cleanup_policy(self, policy: str, *, threshold: int | None = None) -> None:
        """Choose when this tape frees hanging nodes (docs/design.md rule 5).

        Args:
            policy: ``"manual"`` (only ``cleanup()`` frees unconsumed hanging nodes),
                ``"auto"`` (each node is freed the moment it becomes hanging; switching to it
                sweeps at once) or ``"threshold"`` (a sweep whenever the node count reaches
                ``survivors + max(threshold, survivors)``).
            threshold: a positive node count, required by ``"threshold"`` only.

        Raises:
            ValueError: unknown policy, or a missing, non-positive or misplaced ``threshold``.
        """
        if policy not in ("manual", "auto", "threshold"):
            raise ValueError(
                f"Unknown cleanup policy {policy!r}; use 'manual', 'auto' or 'threshold'."
            )
        if policy == "threshold":
            if threshold is None or isinstance(threshold, bool) or not isinstance(threshold, int):
                raise ValueError(
                    "The 'threshold' policy needs threshold=N, a positive int (nodes recorded "
                    "beyond the survivors of the last sweep before the next sweep); the "
                    f"default policy is set_cleanup_policy('threshold', "
                    f"threshold={DEFAULT_THRESHOLD})."
                )
            if threshold <= 0:
                raise ValueError(f"threshold must be positive, got {threshold}.")
        elif threshold is not None:
            raise ValueError(f"threshold applies only to the 'threshold' policy, not {policy!r}.")
        self._set_policy(cast(Policy, policy), threshold or 0)

    @_entry
    def _set_policy(self, policy: Policy, threshold: int) -> None:
        self._policy = policy
        self._threshold = threshold
        if policy == "auto":
            self._sweep(count_graphs=False)
        self._set_limit()  # survivors stay what the last sweep kept (rule 5)

    def get_cleanup_policy(self) -> Policy:
        """The name of this tape's cleanup policy."""
        return self._policy

    def saves_any(self, arrays: Sequence[Any]) -> bool:
        """Whether a node on this tape saves one of ``arrays`` (by identity): the holder
        counts' keys, no walk over the nodes."""
        with self._lock:
            held = self._held
            return bool(held) and any(id(a) in held for a in arrays)

    @property
    def threshold(self) -> int | None:
        """The node count of the ``"threshold"`` policy, ``None`` under the others."""
        return self._threshold if self._policy == "threshold" else None

    # ------------------------------------------------------------------ interrupts

    def _repair(self) -> None:
        """Rebuild every derived fact of the tape from the primary ones, after an exception
        (a ``KeyboardInterrupt``) stopped its bookkeeping at an arbitrary point.

        Primary: which nodes are in ``_nodes``, their parent links, their tensors (a live
        node's tensor still points to it) and consumed/reached flags. Derived, and rebuilt
        here: membership flags, liveness, usefulness and use counts, the hanging table,
        holder counts and counters. Linear in the tape; runs only on that rare path, with
        SIGINT deferred.
        """
        with _interrupts_deferred():
            nodes = self._nodes
            live = 0
            for node in nodes.values():
                node.on_tape = True
                tensor = node()
                node.live = tensor is not None and _node_of(tensor) is node
                live += node.live
                if node.consumed:
                    node.parents, node.saved = (), None
            for node in nodes.values():
                for p in node.parents:
                    if p is not None and nodes.get(p.id) is not p:
                        p.on_tape = False  # removed half-way: links to it are ignored
            useful = useful_set(nodes)
            held: dict[int, int] = {}
            for node in nodes.values():
                node.useful = node.id in useful
                node.uc = 0
                if node.saved is not None:
                    hold(held, node.saved)
            for node in nodes.values():
                if node.useful:
                    for p in node.parents:
                        if p is not None and p.on_tape:
                            p.uc += 1
            self._held = held
            self._hanging = {}
            for node in list(nodes.values()):
                if node.useful:
                    continue
                if node.consumed or node.reached:
                    self._release(node)
                elif self._policy == "auto":
                    self._take_off((node,))
                else:
                    self._hanging[node.id] = node
            self._live = live
            self._next_id = max(self._next_id, max(nodes, default=-1) + 1)  # ids never reused
            self._leaves = sum(n.op is None for n in nodes.values())
            self._hanging_leaves = sum(n.op is None for n in self._hanging.values())
            self._version += 1
            self._set_limit()

    # ------------------------------------------------------------------ reading

    def _graphs(self) -> dict[int, int]:
        """Map node id -> graph id (smallest node id of its component); cached per version."""
        cache = self._cache
        version = (self._version, self._next_id)  # removals and links cut; nodes recorded
        if cache is not None and cache[0] == version:
            return cache[1]
        result = components(self._nodes)
        self._cache = (version, result)
        return result

    def _stats(self, saved_bytes: int | None = None) -> GraphStats:
        graphs = self._graphs()
        useful_graphs = {graphs[nid] for nid, n in self._nodes.items() if n.useful}
        roots = set(graphs.values())
        if saved_bytes is None:
            saved_bytes = census_saved_bytes(self._nodes)[1]
        return GraphStats(
            graphs=len(roots),
            nodes=len(self._nodes),
            leaves=self._leaves,
            live_nodes=self._live,
            hanging_nodes=len(self._hanging),
            hanging_leaves=self._hanging_leaves,
            dead_graphs=len(roots - useful_graphs),
            saved_bytes=saved_bytes,
        )

    @_entry
    def stats(self) -> GraphStats:
        """Counts over the tape now (docs/design.md rules 7-8)."""
        return self._stats()

    @_entry
    def snapshot(self) -> Snapshot:
        """Plain records of every node on the tape, the stats of the same moment, and the
        ledger of the hanging nodes sweeps removed."""
        graphs = self._graphs()
        arrays: dict[int, jax.Array] = {}
        per_node, total = census_saved_bytes(self._nodes, arrays)
        records = node_records(self._nodes, graphs, per_node)
        return Snapshot(
            records,
            self._stats(total),
            ledger_records(self._ledger),
            device_bytes(arrays.values()),
            freeable_bytes(self._hanging.values(), self._held),
        )


def _running_elsewhere(ident: int, me: int) -> bool:
    """Whether a pass that claimed nodes on thread ``ident`` may still be running: not when
    that thread is this one (which is starting another pass) or has ended."""
    return ident != me and any(t.ident == ident for t in threading.enumerate())


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold back SIGINT (Ctrl-C) for the block when on the main thread with Python's default
    handler; a KeyboardInterrupt that arrived is raised when the block ends."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    arrived: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: arrived.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if arrived:
        raise KeyboardInterrupt


def _consumed_message(node: Node, running: bool) -> str:
    when = (
        "is being consumed right now by a backward() on another thread"
        if running
        else "was consumed by an earlier backward()"
    )
    return (
        f"Trying to backward through a graph a second time: op {node.name!r} "
        f"(created at {node.origin} in {function_name(node.code)}) {when} that did not keep "
        "the graph, so its saved arrays are (being) released. Fixes: pass "
        "retain_graph=True to the earlier backward() if you need to backward through this "
        "graph again; keep running totals as numbers with loss.item() (or loss.detach()) "
        "instead of adding loss tensors; call .detach() on state carried between steps "
        "(e.g. an RNN hidden state). Nothing was changed by this call."
    )


def _mismatch_message(op: Op | None, parents: tuple[Node | None, ...], tape: Tape) -> str:
    index, parent = next(
        (i, p) for i, p in enumerate(parents) if p is not None and p.tape is not tape._weak
    )
    theirs = parent.tape() if parent.tape is not None else None
    other = "another tape" if theirs is None else theirs.name
    name = "leaf" if op is None else op.name
    traced = (
        " Inside a tg.jit step (its ops record on a private tape): tg.jit finds the tensors "
        "that require grad in the step's arguments, closure and globals and in the attributes "
        "of what they hold, not in class attributes or __slots__; pass the model (or tensor) to "
        "the step as an argument."
        if tape.allow_tracers
        else ""
    )
    return (
        f"op {name!r}: input {index} requires grad and belongs to tape {other!r}, but ops "
        f"record on tape {tape.name!r} here (tg.current_tape()); one graph cannot span two "
        "tapes. To evaluate a model on another tape, run it under tg.no_grad() or pass "
        ".detach()ed tensors; or record everything inside one tg.use_tape(...) block." + traced
    )
