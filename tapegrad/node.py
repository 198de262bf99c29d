"""Node: one record on a tape (a leaf or an op node), and the per-node pass data."""

from __future__ import annotations

import weakref
from types import CodeType
from typing import TYPE_CHECKING, Any

from tapegrad.origin import format_origin

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor
    from tapegrad.op import Op
    from tapegrad.tape import Tape

__all__ = ["Node", "Step"]


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
        "tape",
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
        prov: tuple[int | None, ...] | None = None,
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
        self.claimed = 0  # the thread of a backward without retain_graph running its VJPs
        # its tape, weakly (the tape's one shared weak reference, set by the tape): the
        # tensor keeps the tape alive, so no dead node ever holds a dropped tape
        self.tape: weakref.ref[Tape] | None = None
        # Residual provenance (docs/design.md "Residuals with provenance"): per entry of a tuple
        # of residuals, the index of the op input whose array it is, -1 for the op's output,
        # None for an array the forward derived. Plain ints: no reference, so no cycle.
        self.prov = prov

    @property
    def name(self) -> str:
        """The op name, or ``"leaf"``."""
        return "leaf" if self.op is None else self.op.name

    def residuals(self) -> tuple[tuple[Node | None, Any], ...] | None:
        """The residuals as ``(node, array)`` pairs: ``node`` is the parent whose input the
        array was at forward time, this node for its own output, ``None`` for a constant or
        a derived value. ``None`` when the residuals are not a tuple or were released."""
        saved = self.saved
        if saved.__class__ is not tuple:
            return None
        prov = self.prov or (None,) * len(saved)
        parents = self.parents
        return tuple(
            (None if i is None else self if i < 0 else parents[i], a)
            for i, a in zip(prov, saved, strict=True)
        )

    @property
    def origin(self) -> str:
        """``"path:line"`` where the node was created (path relative to the cwd when under it)."""
        return format_origin(self.code, self.lineno)
