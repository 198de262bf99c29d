"""What a sweep removes: the hanging nodes' dead graphs and the bytes only they held.

Pure functions over a tape's node tables, called by the tape under its lock.
"""

from __future__ import annotations

import jax

from tapegrad.census import array_bytes, saved_arrays
from tapegrad.node import Node

__all__ = ["dead_components", "bytes_freed"]


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


def bytes_freed(hanging: dict[int, Node], nodes: dict[int, Node]) -> int:
    """Bytes of the distinct arrays the ``hanging`` nodes save and no other node of ``nodes``
    does (rule 7)."""
    # Collect the distinct arrays first and size each once: ``jax.Array.nbytes`` is a
    # Python property (several us), and hanging nodes often share residuals.
    released: dict[int, jax.Array] = {}
    for node in hanging.values():
        if node.saved is not None:
            for a in saved_arrays(node.saved):
                released[id(a)] = a
    if not released:
        return 0
    for nid, node in nodes.items():
        if node.saved is not None and nid not in hanging:
            for a in saved_arrays(node.saved):
                released.pop(id(a), None)
    return sum(array_bytes(a) for a in released.values())
