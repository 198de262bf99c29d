"""The current tape of this context (``contextvars``) and the module-level forms acting on it.

``tg.current_tape()`` is the tape ops record on: the process tape unless ``tg.use_tape``
says otherwise, in every thread (a new thread starts with the process tape) and in every
``contextvars`` context (asyncio tasks, ``contextvars.copy_context().run``).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from types import TracebackType

from tapegrad.records import CleanupStats, GraphStats, Snapshot
from tapegrad.tape import Policy, Tape

__all__ = [
    "current_tape",
    "use_tape",
    "graph_cleanup",
    "graph_stats",
    "set_cleanup_policy",
    "get_cleanup_policy",
    "snapshot",
]

# The process tape is the default of every context: sharing it is the point (B039).
_CURRENT: ContextVar[Tape] = ContextVar("tapegrad_tape", default=Tape("process"))  # noqa: B039


def current_tape() -> Tape:
    """Return the tape ops record on in this context (the process tape by default)."""
    return _CURRENT.get()


tape_now = _CURRENT.get
"""``current_tape`` without a Python frame, for the engine's hot path."""


class use_tape:  # noqa: N801 - a context manager, named like no_grad
    """Context manager: ops inside the block record on ``tape``; the previous tape returns on
    exit (also on an exception). Blocks nest; each thread and context has its own.

    ``with tg.use_tape(tg.Tape()) as tape: ...`` gives the tape to the block.

    Args:
        tape: a ``tg.Tape``.

    Raises:
        TypeError: ``tape`` is not a ``tg.Tape`` (``None`` included).
    """

    __slots__ = ("_tape", "_tokens")

    def __init__(self, tape: Tape) -> None:
        if not isinstance(tape, Tape):
            raise TypeError(
                f"use_tape needs a tg.Tape, got {type(tape).__name__}; make one with "
                "tg.Tape(), or use tg.current_tape() for the tape in use."
            )
        self._tape = tape
        self._tokens: list[Token[Tape]] = []

    def __enter__(self) -> Tape:
        self._tokens.append(_CURRENT.set(self._tape))
        return self._tape

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _CURRENT.reset(self._tokens.pop())


def graph_cleanup() -> CleanupStats:
    """Remove every hanging node of the current tape and its saved arrays (docs/design.md rule 6).

    A node hangs when its tensor is gone and no live tensor's graph reaches it: a tensor that
    required grad dropped without a backward, or the graph of an output dropped unused (an
    evaluation outside ``tg.no_grad()``). Never removes a useful node, so every gradient
    computed afterwards equals the one computed without it. Safe at any time, from any thread,
    repeatedly. Linear in the number of hanging nodes (O(1) when there is none). Raises
    nothing.

    Returns:
        ``CleanupStats`` (a frozen dataclass): ``nodes_removed`` (leaves included),
        ``leaves_removed``, ``graphs_removed`` (connected components removed whole),
        ``bytes_freed`` (bytes of the saved arrays no remaining node holds; device memory,
        every shard counted) and ``seconds`` (wall time of the call).
    """
    return _CURRENT.get().cleanup()


def graph_stats() -> GraphStats:
    """Return the counts over the current tape now; reading them changes nothing.

    Returns:
        ``GraphStats`` (a frozen dataclass of ints): ``graphs`` (connected components),
        ``nodes`` (every record, consumed ones included), ``leaves``, ``live_nodes`` (their
        tensor still exists), ``hanging_nodes`` (what ``graph_cleanup()`` would remove, leaves
        included), ``hanging_leaves``, ``dead_graphs`` (graphs with no useful node) and
        ``saved_bytes`` (bytes of the distinct arrays the nodes save for backward).
    """
    return _CURRENT.get().stats()


def set_cleanup_policy(policy: str, *, threshold: int | None = None) -> None:
    """Choose when the current tape frees hanging nodes (docs/design.md rule 5); the process
    tape's policy is process-wide. What a backward consumed is freed as soon as nothing live
    reaches it, under every policy.

    Args:
        policy: ``"threshold"`` (the default, with ``threshold=10_000``): one sweep whenever
            the tape reaches ``survivors + max(threshold, survivors)`` nodes, each sweep
            recorded in the tape's ledger so the leak report still names what it removed;
            ``"manual"``: only ``tg.graph_cleanup()`` frees hanging nodes; ``"auto"``: each
            node is freed the moment it hangs (switching to it sweeps at once).
        threshold: a positive node count; required by ``"threshold"``, refused by the others.

    Raises:
        ValueError: unknown policy, or a missing, non-positive or misplaced ``threshold``.
    """
    _CURRENT.get().set_cleanup_policy(policy, threshold=threshold)


def get_cleanup_policy() -> Policy:
    """Return the current tape's cleanup policy name."""
    return _CURRENT.get().get_cleanup_policy()


def snapshot() -> Snapshot:
    """Return every node on the current tape as plain ``NodeRecord``s, with the stats of that
    moment.

    The snapshot holds no strong reference to any tensor, node or array (only weak
    references to live tensors).
    """
    return _CURRENT.get().snapshot()
