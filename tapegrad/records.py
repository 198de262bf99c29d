"""Plain records of the tape's state: GraphStats, CleanupStats, NodeRecord, Snapshot."""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["CleanupStats", "GraphStats", "NodeRecord", "LedgerRecord", "Snapshot"]


@dataclass(frozen=True)
class CleanupStats:
    """What one ``graph_cleanup()`` freed.

    Attributes:
        nodes_removed: nodes removed from the tape, leaves included.
        leaves_removed: leaves among ``nodes_removed``.
        graphs_removed: graphs (connected components) removed entirely.
        bytes_freed: bytes of saved arrays released that no remaining node holds.
        seconds: wall time of the call, in seconds.
    """

    nodes_removed: int = 0
    leaves_removed: int = 0
    graphs_removed: int = 0
    bytes_freed: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class GraphStats:
    """Counts over the tape at one moment (docs/design.md rules 7-8). Reading them changes nothing.

    Attributes:
        graphs: connected components of the nodes on the tape.
        nodes: every record on the tape, consumed ones included.
        leaves: leaf nodes (tensors the user made require grad).
        live_nodes: nodes whose tensor still exists.
        hanging_nodes: nodes that are not useful (leaves included).
        hanging_leaves: leaves that are not useful.
        dead_graphs: graphs with no useful node.
        saved_bytes: bytes of the distinct saved arrays (residuals) the tape holds.
    """

    graphs: int = 0
    nodes: int = 0
    leaves: int = 0
    live_nodes: int = 0
    hanging_nodes: int = 0
    hanging_leaves: int = 0
    dead_graphs: int = 0
    saved_bytes: int = 0


class NodeRecord(NamedTuple):
    """A plain description of one node; holds no strong reference to a tensor, node or array.

    An immutable named tuple (fields by name, ``_replace``, ``_asdict``): a snapshot builds
    one per node, and a named tuple is built in a fifth of a frozen dataclass's time
    (~0.4 us against ~2 us; 100,000 nodes make that 0.15 s of a leak report).

    Attributes:
        id: the node id (creation order).
        kind: ``"leaf"`` or ``"op"``.
        op: the op name (``"leaf"`` for leaves).
        graph: the id of the node's graph (the smallest node id in its component).
        live: its tensor still exists.
        useful: live, or reachable from a live node (docs/design.md).
        consumed: its VJP ran in a backward without ``retain_graph``.
        origin: ``"path:line"`` of the first frame outside tapegrad that created it.
        function: the qualified name of that frame's function.
        saved_bytes: bytes of the distinct arrays it saves for its VJP.
        parents: ids of its parents on the tape.
        tensor: a weak reference to its live tensor, or ``None``.
    """

    id: int
    kind: str
    op: str
    graph: int
    live: bool
    useful: bool
    consumed: bool
    origin: str
    function: str
    saved_bytes: int
    parents: tuple[int, ...]
    tensor: weakref.ref[Tensor] | None


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """What sweeps removed from a tape since it was made, for one origin and op: hanging nodes
    (never consumed, never reached by a backward) that a sweep or the ``"auto"`` policy freed.

    Attributes:
        origin: ``"path:line"`` where those nodes were created.
        function: the qualified name of that frame's function.
        op: the op name (``"leaf"`` for leaves).
        kind: ``"leaf"`` or ``"op"``.
        count: how many such nodes were removed.
        bytes: the bytes of the distinct arrays each saved, summed over them.
    """

    origin: str
    function: str
    op: str
    kind: str
    count: int
    bytes: int


@dataclass(frozen=True)
class Snapshot:
    """Every node on the tape as a ``NodeRecord``, with the ``GraphStats`` of the same moment,
    the tape's ledger of swept hanging nodes (one ``LedgerRecord`` per origin and op),
    ``bytes_by_device``: the saved arrays' bytes on each device, as sorted ``(device name,
    bytes)`` pairs that add up to ``stats.saved_bytes``, and ``hanging_bytes``: the bytes
    of the distinct saved arrays only hanging nodes hold, what ``graph_cleanup()`` would
    free now (an array several hanging nodes share counts once; one a useful node also
    holds, not at all)."""

    nodes: tuple[NodeRecord, ...]
    stats: GraphStats
    ledger: tuple[LedgerRecord, ...] = ()
    bytes_by_device: tuple[tuple[str, int], ...] = ()
    hanging_bytes: int = 0
