"""Node: one record on a tape (a leaf or an op node), and the per-node pass data."""

from __future__ import annotations

import weakref
from types import CodeType
from typing import TYPE_CHECKING, Any

from tapegrad.origin import format_origin, line_of

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor
    from tapegrad.op import Op
    from tapegrad.tape import Tape

__all__ = ["Node", "Step"]


Step = tuple["Node", "Op | None", tuple["Node | None", ...], Any, "dict[str, Any] | None"]
"""What a backward needs of one node, read under the lock (``Tape.ancestors``): the node, its
op, parents, residuals and parameters (a plain tuple: one is built per node per pass)."""


class Node(weakref.ref):  # type: ignore[type-arg]
    """One record on the tape: a leaf (``op is None``) or an op node.

    A node *is* the weak reference to its tensor (one object per record, and the reference's
    callback receives the node itself): ``node()`` is the tensor while it exists. It never
    holds a ``Tensor`` strongly. ``parents`` has one entry per tensor input of the op
    (``None`` where that input does not require grad). Nodes compare and hash by identity.

    The tape builds nodes (``Tape.record``), setting every field listed here:

    - ``id``: its number on the tape (parents have smaller ids); ``op``, ``parents``,
      ``saved`` (the residuals), ``params``, ``shape``, ``dtype``, ``code``/``lasti`` (its
      origin: the code object and its instruction offset; ``lineno`` is the line);
    - ``live``: its tensor exists and still requires grad; ``uc``: useful children linking
      to it, counted per link; ``useful``, ``consumed``, ``reached`` (a leaf a backward
      reached, or an op node a ``create_graph`` backward ran), ``retain``
      (``retain_grad()``), ``on_tape``, ``claimed`` (the thread of a backward without
      ``retain_graph`` running its VJPs);
    - ``tape``: its tape, weakly (the tape's one shared weak reference: the tensor keeps the
      tape alive, so no dead node ever holds a dropped tape);
    - ``prov``: residual provenance (docs/design.md "Residuals with provenance"): per entry of
      a tuple of residuals, the index of the op input whose array it is, -1 for the op's
      output, ``None`` for an array the forward derived. Plain ints: no reference, no cycle.
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
        "lasti",
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

    id: int
    op: Op | None
    parents: tuple[Node | None, ...]
    saved: Any
    params: dict[str, Any] | None
    shape: tuple[int, ...]
    dtype: Any
    code: CodeType | None
    lasti: int
    live: bool
    uc: int
    useful: bool
    consumed: bool
    reached: bool
    retain: bool
    on_tape: bool
    claimed: int
    tape: weakref.ref[Tape] | None
    prov: tuple[int | None, ...] | None

    # a weak reference compares (and hashes) its referent; a node is only ever itself
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def tensor(self) -> Tensor | None:
        """The node's tensor while it exists and still requires grad, else ``None``."""
        return self() if self.live else None

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
    def lineno(self) -> int:
        """The line where the node was created (0 when unknown)."""
        return line_of(self.code, self.lasti)

    @property
    def origin(self) -> str:
        """``"path:line"`` where the node was created (path relative to the cwd when under it)."""
        return format_origin(self.code, self.lineno)
