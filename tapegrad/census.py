"""Counting what a tape holds: graphs (connected components), usefulness, saved arrays and
their bytes, node and ledger records.

Functions over a tape's tables, called by the tape under its lock; only ``hold`` and
``unhold`` change anything (the holder counts they are given).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import CodeType
from typing import Any

import jax

from tapegrad._placement import NBYTES, bytes_by_device, held_bytes, multi_device
from tapegrad.node import Node
from tapegrad.origin import display_path, line_of
from tapegrad.records import LedgerRecord, NodeRecord

__all__ = [
    "saved_arrays",
    "array_bytes",
    "hold",
    "unhold",
    "sizes_cache",
    "drop",
    "components",
    "dead_components",
    "useful_set",
    "saved_bytes",
    "device_bytes",
    "freeable_bytes",
    "node_records",
    "ledger_records",
    "paused_gc",
]

Ledger = dict[tuple[int, int, str], list[Any]]
"""(id(code), instruction offset, op name) -> [count, bytes, code] of the hanging nodes sweeps
removed. Keyed by the code's ``id``: a code object hashes its whole body on every call (a
sweep adds every node it frees), and the entry keeps the code alive, so the id stays its own."""

_KIND: dict[type, int] = {}  # type -> 1: a jax.Array, 2: a container, 0: other (cached:
# ``isinstance`` on the jax.Array ABC is slow)


def _kind(cls: type) -> int:
    kind = _KIND[cls] = (
        1 if issubclass(cls, jax.Array) else 2 if issubclass(cls, (tuple, list, dict)) else 0
    )
    return kind


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (``gc.disable``; re-enabled
    after it when it was enabled before). For building many acyclic objects at once: reference
    counting still frees them, and no collection walks the whole heap meanwhile."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def saved_arrays(saved: Any) -> list[jax.Array]:
    """The arrays in a residual pytree (an array, or tuples, lists and dicts, named tuples
    included, of arrays and statics such as shapes), in order."""
    out: list[jax.Array] = []
    kind = _KIND.get(saved.__class__)
    if kind is None:
        kind = _kind(saved.__class__)
    _collect(saved if kind == 2 else (saved,), out)
    return out


def _collect(items: Any, out: list[jax.Array]) -> None:
    for a in items.values() if isinstance(items, dict) else items:
        kind = _KIND.get(a.__class__)
        if kind is None:
            kind = _kind(a.__class__)
        if kind == 1:
            out.append(a)
        elif kind == 2 and a:  # a shape (a tuple of ints) holds no array, quickly
            _collect(a, out)


array_bytes = held_bytes
"""The device memory an array holds: its addressable shards' bytes (rule 7; on one device
``a.nbytes``, read without its Python property, which costs several us)."""


def hold(held: dict[int, int], saved: Any) -> None:
    """Count one more holder of each array in ``saved`` (a node's residuals) in ``held``.
    Every tracked op calls it: a flat tuple (the usual residuals) is read without a list."""
    if saved.__class__ is not tuple:
        saved = saved_arrays(saved)
    for a in saved:
        kind = _KIND.get(a.__class__)
        if kind is None:
            kind = _kind(a.__class__)
        if kind == 1:
            key = id(a)
            held[key] = held.get(key, 0) + 1
        elif kind == 2 and a:
            hold(held, a)


def drop(held: dict[int, int], saved: Any) -> None:
    """Count one holder less of each array in ``saved``, without sizing anything (what a
    backward's consumption and an unswept removal need: ``unhold`` without the bytes). The
    mirror of ``hold``: a flat tuple is read as is."""
    if saved.__class__ is not tuple:
        saved = saved_arrays(saved)
    for a in saved:
        kind = _KIND.get(a.__class__)
        if kind is None:
            kind = _kind(a.__class__)
        if kind == 1:
            key = id(a)
            n = held[key] - 1
            if n:
                held[key] = n
            else:
                del held[key]
        elif kind == 2 and a:
            drop(held, a)


def sizes_cache() -> dict[Any, int] | None:
    """What ``unhold`` sizes arrays with: the bytes per abstract value on a one-device
    process (``NBYTES``), ``None`` where an array's bytes are its shards' (read once a
    sweep, not once a node)."""
    return None if multi_device() else NBYTES


def unhold(held: dict[int, int], saved: Any, sizes: dict[Any, int] | None) -> tuple[int, int]:
    """Count one holder less of each array in ``saved``; return the bytes of its distinct
    arrays and the bytes of those no holder is left for (released by the tape, rule 7).
    ``sizes``: ``sizes_cache()``. Every node a sweep removes passes here, so the usual
    residuals (one or two arrays, on a one-device process) are read as they are (no list),
    told apart by identity without a set and sized from the cache by shape and dtype
    without a call."""
    arrays = saved
    if saved.__class__ is tuple:
        kinds = _KIND
        for a in saved:
            if kinds.get(a.__class__) != 1:
                arrays = saved_arrays(saved)
                break
    else:
        arrays = saved_arrays(saved)
    own = freed = 0
    seen: set[int] | None = set() if len(arrays) > 2 else None  # distinct arrays
    first: Any = None
    for a in arrays:
        key = id(a)
        n = held[key] - 1
        if n:
            held[key] = n
        else:
            del held[key]
        if seen is None:
            if a is first:  # the second entry of two, one array: its bytes count once
                if not n:
                    freed += array_bytes(a)
                continue
            first = a
        elif key in seen:  # a later entry of one array: its bytes count once
            if not n:
                freed += array_bytes(a)
            continue
        else:
            seen.add(key)
        size = None if sizes is None else sizes.get(a.aval)
        if size is None:
            size = array_bytes(a)
        own += size
        if not n:
            freed += size
    return own, freed


def components(nodes: dict[int, Node]) -> dict[int, int]:
    """Map node id -> graph id (the smallest node id of its connected component)."""
    up: dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while (nxt := up.get(root, root)) != root:
            root = nxt
        while (nxt := up.get(x, x)) != root:  # path compression
            up[x] = root
            x = nxt
        return root

    for nid, node in nodes.items():
        for p in node.parents:
            if p is not None and p.on_tape:
                a, b = find(nid), find(p.id)
                if a != b:
                    up[max(a, b)] = min(a, b)
    return {nid: find(nid) for nid in nodes}


def dead_components(hanging: dict[int, Node]) -> int:
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


def useful_set(nodes: dict[int, Node]) -> set[int]:
    """The ids of the useful nodes, recomputed from the definition: live, or reachable from a
    live node by parent links (consumed nodes have none). Linear in the nodes."""
    stack = [n for n in nodes.values() if n.live]
    useful = {n.id for n in stack}
    while stack:
        for p in stack.pop().parents:
            if p is not None and p.id not in useful and nodes.get(p.id) is p:
                useful.add(p.id)
                stack.append(p)
    return useful


def saved_bytes(
    nodes: dict[int, Node], distinct: dict[int, jax.Array] | None = None
) -> tuple[dict[int, int], int]:
    """Per node, the bytes of its distinct saved arrays; and the distinct total (rule 7).
    ``distinct``, when given, receives every distinct saved array by ``id`` (for
    ``device_bytes``, without a second walk)."""
    sizes: dict[int, int] = {}  # id(array) -> nbytes, each array read once
    per_node: dict[int, int] = {}
    for nid, node in nodes.items():
        if node.saved is None:
            continue
        mine: set[int] = set()
        total = 0
        for a in saved_arrays(node.saved):
            key = id(a)
            if key in mine:
                continue
            mine.add(key)
            n = sizes.get(key)
            if n is None:
                n = sizes[key] = array_bytes(a)
                if distinct is not None:
                    distinct[key] = a
            total += n
        if total:
            per_node[nid] = total
    return per_node, sum(sizes.values())


def freeable_bytes(hanging: Iterable[Node], held: dict[int, int]) -> int:
    """The bytes a sweep of the ``hanging`` nodes would release: their distinct saved arrays
    that no other node on the tape holds (``held``: holders per array id, as ``hold``
    counts them), each once (rule 7: what ``graph_cleanup()`` reports as ``bytes_freed``)."""
    counts: dict[int, int] = {}
    arrays: dict[int, jax.Array] = {}
    for node in hanging:
        if node.saved is not None:
            for a in saved_arrays(node.saved):
                key = id(a)
                counts[key] = counts.get(key, 0) + 1
                arrays[key] = a
    return sum(array_bytes(arrays[k]) for k, n in counts.items() if held.get(k, 0) == n)


def device_bytes(arrays: Iterable[jax.Array]) -> tuple[tuple[str, int], ...]:
    """The bytes of the distinct ``arrays`` (what ``saved_bytes`` collected) on each device,
    as sorted (device, bytes) pairs; they add up to ``saved_bytes``'s total."""
    return tuple(sorted(bytes_by_device(arrays).items()))


def node_records(
    nodes: dict[int, Node], graphs: dict[int, int], per_node: dict[int, int]
) -> tuple[NodeRecord, ...]:
    """One plain ``NodeRecord`` per node (weak references to live tensors only).

    Built with the cyclic garbage collector paused (``paused_gc``): the records are acyclic,
    and a snapshot of 100,000 nodes allocates ~300,000 objects, which would otherwise trigger
    collections over the whole heap (a third of the time, measured)."""
    paths: dict[str, str] = {}  # co_filename -> displayed path, one relpath per file
    # (id(code), offset) -> (origin, function); by identity: equal code objects compiled from
    # two files (two notebook cells of the same text) compare equal
    sites: dict[tuple[int, int], tuple[str, str]] = {}
    records: list[NodeRecord] = []
    append = records.append
    per_node_get = per_node.get
    make = NodeRecord._make  # tuple.__new__: no Python-level __new__ per record
    ref = weakref.ref
    with paused_gc():
        for nid, node in nodes.items():
            code = node.code
            key = (id(code), node.lasti)
            site = sites.get(key)
            if site is None:
                if code is None:
                    site = ("<unknown>:0", "<unknown>")
                else:
                    path = paths.get(code.co_filename)
                    if path is None:
                        path = paths[code.co_filename] = display_path(code.co_filename)
                    site = (f"{path}:{node.lineno}", code.co_qualname)
                sites[key] = site
            op = node.op
            parents = node.parents
            tensor = node() if node.live else None
            append(
                make(
                    (
                        nid,
                        "leaf" if op is None else "op",
                        "leaf" if op is None else op.name,
                        graphs[nid],
                        node.live,
                        node.useful,
                        node.consumed,
                        site[0],
                        site[1],
                        per_node_get(nid, 0),
                        tuple([p.id for p in parents if p is not None and p.on_tape])
                        if parents
                        else (),
                        None if tensor is None else ref(tensor),
                    )
                )
            )
            del tensor
        return tuple(records)


def ledger_records(ledger: Ledger) -> tuple[LedgerRecord, ...]:
    """The ledger as plain ``LedgerRecord``s, one per origin line and op, in the order their
    origins were first swept (the ledger is keyed by instruction offset: two ops of one line
    share a record)."""
    lines: dict[tuple[CodeType | None, int, str], list[int]] = {}
    for (_, lasti, op), (count, nbytes, code) in ledger.items():
        key = (code, line_of(code, lasti), op)
        entry = lines.get(key)
        if entry is None:
            lines[key] = [count, nbytes]
        else:
            entry[0] += count
            entry[1] += nbytes
    return tuple(
        LedgerRecord(
            "<unknown>:0" if code is None else f"{display_path(code.co_filename)}:{line}",
            "<unknown>" if code is None else code.co_qualname,
            op,
            "leaf" if op == "leaf" else "op",
            count,
            nbytes,
        )
        for (code, line, op), (count, nbytes) in lines.items()
    )
