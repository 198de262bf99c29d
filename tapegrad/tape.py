"""The graph state: nodes, liveness, usefulness, consumption, cleanup, policies, stats, snapshot.

Only this module mutates the tape (docs/design.md, "Graph lifetime"). Terms used below:

- A node is **live** while its tensor exists (a weak reference resolves). The weak
  reference's callback only appends the reference to ``_dead``; every entry point drains that
  queue first under the lock (rule 5), so counts are always current.
- A node is **useful** when it is live or a useful node links to it as a parent. Consumed
  nodes drop their parent links, so "reachable from a live node by parent links" is exactly
  docs/design.md's definition. The graph is a DAG (a parent has a smaller id than its child), so
  counting each node's useful children (``uc``) decides usefulness exactly and
  incrementally: a node stops being useful when it is not live and ``uc`` drops to 0, and it
  can never become useful again (new nodes only link to live tensors' nodes).
- A node that stops being useful is freed at once when it is *freeable* (consumed, or a leaf
  reached by a backward: rule 4) or under the ``"auto"`` policy; otherwise it waits in
  ``_hanging`` for ``graph_cleanup()`` (rule 5). So a sweep is the removal of ``_hanging``:
  linear in what it frees, and O(1) when there is nothing to free.
- **Graphs** are connected components over parent links between nodes on the tape. They are
  computed on demand (union-find, cached until the tape changes), because removing nodes can
  split a component and union-find cannot split.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from types import CodeType
from typing import TYPE_CHECKING, Any, Literal

import jax

from tapegrad.errors import GraphConsumedError
from tapegrad.origin import display_path, format_origin, function_name
from tapegrad.records import CleanupStats, GraphStats, NodeRecord, Snapshot

if TYPE_CHECKING:
    from tapegrad.op import Op
    from tapegrad.tensor import Tensor

__all__ = [
    "Node",
    "Tape",
    "TAPE",
    "current_tape",
    "use_tape",
    "graph_cleanup",
    "graph_stats",
    "set_cleanup_policy",
    "get_cleanup_policy",
    "snapshot",
]

Policy = Literal["manual", "auto", "threshold"]


Step = tuple["Node", "Op | None", tuple["Node | None", ...], Any, "dict[str, Any] | None"]
"""What a backward needs of one node, read under the lock (``Tape.ancestors``): the node, its
op, parents, residuals and parameters (a plain tuple: one is built per node per pass)."""


class Node:
    """One record on the tape: a leaf (``op is None``) or an op node.

    ``parents`` has one entry per tensor input of the op (``None`` where that input does not
    require grad). The node holds its tensor only weakly, and never holds a ``Tensor``.
    """

    __slots__ = (
        "id",
        "op",
        "parents",
        "saved",
        "params",
        "shape",
        "dtype",
        "code",
        "lineno",
        "ref",
        "live",
        "uc",
        "useful",
        "consumed",
        "reached",
        "retain",
        "on_tape",
        "claimed",
        "prov",
    )

    def __init__(
        self,
        op: Op | None,
        parents: tuple[Node | None, ...],
        saved: Any,
        params: dict[str, Any] | None,
        shape: tuple[int, ...],
        dtype: Any,
        code: CodeType | None,
        lineno: int,
    ) -> None:
        self.id = -1  # set by the tape when it registers the node
        self.op = op
        self.parents = parents
        self.saved = saved
        self.params = params
        self.shape = shape
        self.dtype = dtype
        self.code = code
        self.lineno = lineno
        self.ref: weakref.ref[Tensor] | None = None
        self.live = True
        self.uc = 0  # useful children linking to this node, counted per link
        self.useful = True
        self.consumed = False
        self.reached = False  # a leaf a backward reached (freed when no longer useful)
        self.retain = False  # retain_grad() was called on its tensor
        self.on_tape = True
        self.claimed = False  # a backward without retain_graph is running its VJPs
        # per residual: the input slot it is, -1 for the output, None otherwise (set by the
        # op that records the node; create_graph links residuals to their nodes with it)
        self.prov: tuple[int | None, ...] | None = None

    @property
    def name(self) -> str:
        """The op name, or ``"leaf"``."""
        return "leaf" if self.op is None else self.op.name

    @property
    def origin(self) -> str:
        """``"path:line"`` where the node was created (path relative to the cwd when under it)."""
        return format_origin(self.code, self.lineno)


# ----------------------------------------------------------------------------- saved bytes


def _saved_arrays(saved: Any) -> Iterable[jax.Array]:
    """Yield the arrays in a residual pytree (tuples, lists, dicts of arrays and statics)."""
    stack = [saved]
    while stack:
        item = stack.pop()
        if isinstance(item, jax.Array):
            yield item
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())


def _array_bytes(a: jax.Array) -> int:
    """``a.nbytes`` without its Python property (several us): elements times item size."""
    return int(a.size) * a.dtype.itemsize


# ----------------------------------------------------------------------------- the tape


class Tape:
    """The graph state of one process (or, later, of one trace). Guarded by one re-entrant lock."""

    def __init__(self, *, tracers: bool = False) -> None:
        self.tracers = tracers  # a private tape of a trace (tg.jit) records JAX tracers
        self._lock = threading.RLock()
        self._nodes: dict[int, Node] = {}
        self._hanging: dict[int, Node] = {}
        self._dead: list[weakref.ref[Tensor]] = []
        self._by_ref: dict[int, Node] = {}  # id(weak reference) -> node, for live nodes
        self._enqueue = self._dead.append  # the weak-reference callback: only enqueues
        self._next_id = 0
        self._leaves = 0
        self._live = 0
        self._hanging_leaves = 0
        self._policy: Policy = "manual"
        self._threshold = 0
        self._survivors = 0
        self._limit = 0
        self._sweep_at = 0
        self._version = 0
        self._cache: tuple[int, dict[int, int]] | None = None  # (version, node -> graph)

    # ------------------------------------------------------------------ liveness queue

    def _drain(self) -> None:
        # The weak-reference callback is ``self._enqueue`` (it runs wherever the tensor
        # died, so it only enqueues the dead reference); map each back to its node here.
        dead = self._dead
        by_ref = self._by_ref
        while dead:
            node = by_ref.pop(id(dead.pop()), None)
            if node is not None:
                self._unlinked(node)

    def _unlinked(self, node: Node) -> None:
        """``node``'s tensor is gone (or no longer requires grad); ``_by_ref`` forgot it."""
        node.live = False
        node.ref = None
        self._live -= 1
        self._version += 1
        if node.uc == 0:
            self._lose_use(node)

    def _lose_use(self, first: Node) -> None:
        """``first`` just stopped being useful: propagate to its parents, free what may go."""
        stack = [first]
        auto = self._policy == "auto"
        while stack:
            node = stack.pop()
            node.useful = False
            for p in node.parents:
                if p is not None and p.on_tape:
                    p.uc -= 1
                    if p.uc == 0 and not p.live:
                        stack.append(p)
            if auto or node.consumed or node.reached:
                self._remove(node)
            else:
                self._hanging[node.id] = node
                if node.op is None:
                    self._hanging_leaves += 1

    def _remove(self, node: Node) -> None:
        del self._nodes[node.id]
        node.on_tape = False
        node.parents = ()
        node.saved = None
        node.params = None
        if node.op is None:
            self._leaves -= 1
        self._version += 1

    # ------------------------------------------------------------------ recording

    def record(
        self,
        op: Op | None,
        parents: tuple[Node | None, ...],
        saved: Any,
        params: dict[str, Any] | None,
        tensor: Tensor,
        code: CodeType | None,
        lineno: int,
    ) -> Node:
        """Record a node for ``tensor``: a leaf (``op is None``) or the output of ``op``,
        linked to ``parents``.

        The caller keeps the input tensors alive until this returns, so every parent is live
        or useful here and cannot be swept concurrently (docs/design.md rule 10). This is the hot
        path of every tracked op: one lock, no calls but the node and its weak reference.
        """
        data = tensor._data
        node = Node(op, parents, saved, params, data.shape, data.dtype, code, lineno)
        ref = node.ref = weakref.ref(tensor, self._enqueue)
        with self._lock:
            if self._dead:
                self._drain()
            nid = node.id = self._next_id
            self._next_id = nid + 1
            self._by_ref[id(ref)] = node
            self._nodes[nid] = node
            self._live += 1
            self._version += 1
            if op is None:
                self._leaves += 1
            for p in parents:
                if p is not None:
                    p.uc += 1
            if self._sweep_at and len(self._nodes) >= self._sweep_at:
                self._sweep()
        return node

    def release(self, node: Node) -> None:
        """The tensor of ``node`` stopped requiring grad (``requires_grad_(False)``)."""
        with self._lock:
            if self._dead:
                self._drain()
            if node.on_tape and node.live:
                del self._by_ref[id(node.ref)]
                self._unlinked(node)

    # ------------------------------------------------------------------ backward support

    def ancestors(self, roots: Sequence[Node], claim: bool) -> list[Step]:
        """Return the steps of a backward from ``roots``, in descending node id (rule 1).

        Each step holds the node with its op, parents, residuals and parameters as they are
        now, so the pass never reads a node another thread changes. With ``claim`` (a pass
        without ``retain_graph``) the op nodes are claimed: another pass that meets them
        before this one has finished raises, as it would after it finished.

        Raises:
            GraphConsumedError: the walk met a consumed (or claimed) node; nothing changed.
        """
        with self._lock:
            if self._dead:
                self._drain()
            seen: dict[int, Node] = {}
            stack: list[Node] = []
            for root in roots:
                if root.id not in seen:
                    seen[root.id] = root
                    stack.append(root)
            while stack:
                node = stack.pop()
                if node.consumed or node.claimed:
                    raise GraphConsumedError(_consumed_message(node))
                for p in node.parents:
                    if p is not None and p.id not in seen:
                        seen[p.id] = p
                        stack.append(p)
            steps = []
            for node in sorted(seen.values(), key=_node_id, reverse=True):
                if claim and node.op is not None:
                    node.claimed = True
                steps.append((node, node.op, node.parents, node.saved, node.params))
            return steps

    def consume(
        self,
        done: Sequence[Node],
        undone: Sequence[Node],
        leaves: Sequence[Node],
        retain_graph: bool,
    ) -> None:
        """Mark what a backward visited (rules 3-4): the op nodes whose VJP ran are consumed
        unless ``retain_graph`` (``undone`` ones, left by a VJP that raised, are released
        again), leaves reached; free at once whatever that leaves without use."""
        with self._lock:
            if self._dead:
                self._drain()
            for leaf in leaves:
                leaf.reached = True
                if not leaf.useful and leaf.on_tape:
                    self._free_hanging(leaf)
            if retain_graph:
                return
            for node in undone:
                node.claimed = False
            for node in done:
                node.consumed = True
                node.claimed = False
                node.saved = None
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
                                self._lose_use(p)
                else:  # its tensor died while the VJPs ran: it waited in _hanging
                    self._free_hanging(node)

    def _free_hanging(self, node: Node) -> None:
        del self._hanging[node.id]
        if node.op is None:
            self._hanging_leaves -= 1
        self._remove(node)

    # ------------------------------------------------------------------ cleanup

    def cleanup(self) -> CleanupStats:
        """Remove every hanging node with its saved arrays (docs/design.md rule 6)."""
        start = time.perf_counter()
        with self._lock:
            if self._dead:
                self._drain()
            stats = self._sweep()
        return CleanupStats(
            stats.nodes_removed,
            stats.leaves_removed,
            stats.graphs_removed,
            stats.bytes_freed,
            time.perf_counter() - start,
        )

    def _sweep(self) -> CleanupStats:
        hanging = self._hanging
        if not hanging:
            self._set_survivors()
            return CleanupStats()
        graphs = _dead_components(hanging)
        freed = self._bytes_freed(hanging)
        nodes = self._nodes
        for nid, node in hanging.items():
            del nodes[nid]
            node.on_tape = False
            node.parents = ()
            node.saved = None
            node.params = None
        leaves = self._hanging_leaves
        stats = CleanupStats(len(hanging), leaves, graphs, freed, 0.0)
        self._leaves -= leaves
        self._hanging_leaves = 0
        self._hanging = {}
        self._version += 1
        self._set_survivors()
        return stats

    def _bytes_freed(self, hanging: dict[int, Node]) -> int:
        # Collect the distinct arrays first and size each once: ``jax.Array.nbytes`` is a
        # Python property (several us), and hanging nodes often share residuals.
        released: dict[int, jax.Array] = {}
        for node in hanging.values():
            if node.saved is not None:
                for a in _saved_arrays(node.saved):
                    released[id(a)] = a
        if not released:
            return 0
        for nid, node in self._nodes.items():
            if node.saved is not None and nid not in hanging:
                for a in _saved_arrays(node.saved):
                    released.pop(id(a), None)
        return sum(_array_bytes(a) for a in released.values())

    def _set_survivors(self) -> None:
        self._survivors = len(self._nodes)
        self._set_limit()

    def _set_limit(self) -> None:
        """Rule 5: under "threshold", sweep when the count reaches survivors + max(threshold,
        survivors); ``_sweep_at`` is 0 under the other policies (never)."""
        self._limit = self._survivors + max(self._threshold, self._survivors)
        self._sweep_at = self._limit if self._policy == "threshold" else 0

    # ------------------------------------------------------------------ policy

    def set_policy(self, policy: str, threshold: int | None = None) -> None:
        """Switch the cleanup policy (docs/design.md rule 5); switching to ``"auto"`` sweeps now."""
        if policy not in ("manual", "auto", "threshold"):
            raise ValueError(
                f"Unknown cleanup policy {policy!r}; use 'manual', 'auto' or 'threshold'."
            )
        if policy == "threshold":
            if threshold is None or isinstance(threshold, bool) or not isinstance(threshold, int):
                raise ValueError(
                    "The 'threshold' policy needs threshold=N, a positive int (nodes recorded "
                    "beyond the survivors of the last sweep before the next sweep)."
                )
            if threshold <= 0:
                raise ValueError(f"threshold must be positive, got {threshold}.")
        elif threshold is not None:
            raise ValueError(f"threshold applies only to the 'threshold' policy, not {policy!r}.")
        with self._lock:
            if self._dead:
                self._drain()
            self._policy = policy  # type: ignore[assignment]
            self._threshold = threshold or 0
            if policy == "auto":
                self._sweep()
            self._set_limit()  # survivors stay what the last sweep kept (rule 5)

    def saved_array_ids(self) -> set[int]:
        """The ids of the arrays the nodes on this tape save (what donation must spare)."""
        if len(self._nodes) == self._leaves:  # leaves save nothing (read without the lock:
            return set()  # a node recorded concurrently saves arrays of its own thread's ops)
        with self._lock:
            return {id(a) for n in self._nodes.values() for a in _saved_arrays(n.saved)}

    @property
    def policy(self) -> Policy:
        """The current cleanup policy."""
        return self._policy

    # ------------------------------------------------------------------ reading

    def _graphs(self) -> dict[int, int]:
        """Map node id -> graph id (smallest node id of its component); cached per version."""
        cache = self._cache
        if cache is not None and cache[0] == self._version:
            return cache[1]
        up: dict[int, int] = {}

        def find(x: int) -> int:
            root = x
            while (nxt := up.get(root, root)) != root:
                root = nxt
            while (nxt := up.get(x, x)) != root:  # path compression
                up[x] = root
                x = nxt
            return root

        for nid, node in self._nodes.items():
            for p in node.parents:
                if p is not None and p.on_tape:
                    a, b = find(nid), find(p.id)
                    if a != b:
                        up[max(a, b)] = min(a, b)
        result = {nid: find(nid) for nid in self._nodes}
        self._cache = (self._version, result)
        return result

    def _saved_bytes(self) -> tuple[dict[int, int], int]:
        """Per node, the bytes of its distinct saved arrays; and the tape's distinct total."""
        sizes: dict[int, int] = {}  # id(array) -> nbytes, each array read once
        per_node: dict[int, int] = {}
        for nid, node in self._nodes.items():
            if node.saved is None:
                continue
            mine: set[int] = set()
            total = 0
            for a in _saved_arrays(node.saved):
                key = id(a)
                if key in mine:
                    continue
                mine.add(key)
                n = sizes.get(key)
                if n is None:
                    n = sizes[key] = _array_bytes(a)
                total += n
            if total:
                per_node[nid] = total
        return per_node, sum(sizes.values())

    def _stats(self, saved_bytes: int | None = None) -> GraphStats:
        graphs = self._graphs()
        useful_graphs = {graphs[nid] for nid, n in self._nodes.items() if n.useful}
        roots = set(graphs.values())
        if saved_bytes is None:
            saved_bytes = self._saved_bytes()[1]
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

    def stats(self) -> GraphStats:
        """Counts over the tape now (docs/design.md rules 7-8)."""
        with self._lock:
            if self._dead:
                self._drain()
            return self._stats()

    def snapshot(self) -> Snapshot:
        """Plain records of every node on the tape, and the stats of the same moment."""
        with self._lock:
            if self._dead:
                self._drain()
            graphs = self._graphs()
            per_node, total = self._saved_bytes()
            paths: dict[str, str] = {}  # co_filename -> displayed path, one relpath per file
            records = []
            for nid, node in self._nodes.items():
                tensor = node.ref() if node.ref is not None else None
                code = node.code
                if code is None:
                    origin, function = "<unknown>:0", "<unknown>"
                else:
                    path = paths.get(code.co_filename)
                    if path is None:
                        path = paths[code.co_filename] = display_path(code.co_filename)
                    origin, function = f"{path}:{node.lineno}", code.co_qualname
                op = node.op
                records.append(
                    NodeRecord(
                        nid,
                        "leaf" if op is None else "op",
                        "leaf" if op is None else op.name,
                        graphs[nid],
                        node.live,
                        node.useful,
                        node.consumed,
                        origin,
                        function,
                        per_node.get(nid, 0),
                        tuple(p.id for p in node.parents if p is not None and p.on_tape),
                        None if tensor is None else weakref.ref(tensor),
                    )
                )
                del tensor
            return Snapshot(tuple(records), self._stats(total))


def _node_id(node: Node) -> int:
    return node.id


def _dead_components(hanging: dict[int, Node]) -> int:
    """Count the components made only of hanging nodes (graphs a sweep removes entirely).

    A useful node never links to a hanging parent, so a component is entirely hanging unless
    one of its hanging nodes links to a useful parent. Linear in ``len(hanging)``.
    """
    up: dict[int, int] = {}
    attached: set[int] = set()

    def find(x: int) -> int:
        root = x
        while (nxt := up.get(root, root)) != root:
            root = nxt
        while (nxt := up.get(x, x)) != root:
            up[x] = root
            x = nxt
        return root

    components = len(hanging)
    touching: list[int] = []
    for nid, node in hanging.items():
        for p in node.parents:
            if p is None or not p.on_tape:
                continue
            if p.useful:
                touching.append(nid)
            else:
                a, b = find(nid), find(p.id)
                if a != b:
                    up[a] = b
                    components -= 1
    for nid in touching:
        attached.add(find(nid))
    return components - len(attached)


def _consumed_message(node: Node) -> str:
    when = (
        "is being consumed right now by a backward() on another thread"
        if node.claimed
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


TAPE = Tape()
"""The process-wide tape every eager op records on."""

_CURRENT: ContextVar[Tape] = ContextVar("tapegrad_tape", default=TAPE)


def current_tape() -> Tape:
    """The tape ops record on in this context (the process tape unless ``use_tape`` says)."""
    return _CURRENT.get()


@contextmanager
def use_tape(tape: Tape) -> Iterator[Tape]:
    """Record on ``tape`` inside the block."""
    token = _CURRENT.set(tape)
    try:
        yield tape
    finally:
        _CURRENT.reset(token)


def graph_cleanup() -> CleanupStats:
    """Remove every hanging node and its saved arrays (docs/design.md rule 6).

    Never removes a useful node, so every gradient computed afterwards equals the one
    computed without it. Safe at any time, from any thread, repeatedly. Linear in the number
    of hanging nodes (O(1) when there is none).

    Returns:
        Counts of nodes, leaves and graphs removed, bytes freed, and seconds taken.
    """
    return TAPE.cleanup()


def graph_stats() -> GraphStats:
    """Return the counts over the tape now; reading them changes nothing.

    Returns:
        ``GraphStats`` (graphs, nodes, leaves, live/hanging counts, saved bytes).
    """
    return TAPE.stats()


def set_cleanup_policy(policy: str, *, threshold: int | None = None) -> None:
    """Choose when hanging nodes are freed, process-wide (docs/design.md rule 5).

    Args:
        policy: ``"manual"`` (default: only ``graph_cleanup()`` frees unconsumed hanging
            nodes), ``"auto"`` (each node is freed the moment it becomes hanging; switching
            to it sweeps at once) or ``"threshold"`` (a sweep whenever the node count reaches
            ``survivors + max(threshold, survivors)``).
        threshold: a positive node count, required by ``"threshold"`` only.

    Raises:
        ValueError: unknown policy, or a missing, non-positive or misplaced ``threshold``.
    """
    TAPE.set_policy(policy, threshold)


def get_cleanup_policy() -> str:
    """Return the current cleanup policy name."""
    return TAPE.policy


def snapshot() -> Snapshot:
    """Return every node on the tape as plain ``NodeRecord``s, with the stats of that moment.

    The snapshot holds no strong reference to any tensor, node or array (only weak
    references to live tensors).
    """
    return TAPE.snapshot()
