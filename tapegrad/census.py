"""Counting what a tape holds: graphs (connected components), saved bytes, node records.

Pure functions over a tape's node table, called by the tape under its lock; they change
nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import jax

from tapegrad.node import Node
from tapegrad.origin import display_path
from tapegrad.records import NodeRecord

__all__ = ["saved_arrays", "array_bytes", "components", "saved_bytes", "node_records"]


def saved_arrays(saved: Any) -> Iterable[jax.Array]:
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


def array_bytes(a: jax.Array) -> int:
    """``a.nbytes`` without its Python property (several us): elements times item size."""
    return int(a.size) * a.dtype.itemsize


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


def saved_bytes(nodes: dict[int, Node]) -> tuple[dict[int, int], int]:
    """Per node, the bytes of its distinct saved arrays; and the distinct total (rule 7)."""
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
            total += n
        if total:
            per_node[nid] = total
    return per_node, sum(sizes.values())


def node_records(
    nodes: dict[int, Node], graphs: dict[int, int], per_node: dict[int, int]
) -> tuple[NodeRecord, ...]:
    """One plain ``NodeRecord`` per node (weak references to live tensors only)."""
    paths: dict[str, str] = {}  # co_filename -> displayed path, one relpath per file
    records = []
    for nid, node in nodes.items():
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
    return tuple(records)
