"""The reverse pass: ancestors first, VJPs in descending node id, cotangents summed to shape."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal, overload

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad import anomaly, compiled_backward
from tapegrad._arrays import broadcast_axes, filled
from tapegrad._placement import placed_like
from tapegrad._tensor import Tensor, array_of, grad_of, node_of, renewed, set_grad, tape_of, wrap
from tapegrad.current import use_tape
from tapegrad.errors import (
    NoGradError,
    NonScalarBackwardError,
    ShapeError,
    TapeMismatchError,
    VJPShapeError,
)
from tapegrad.grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from tapegrad.higher import vjp_on_tensors
from tapegrad.kernels import kernel
from tapegrad.node import Node
from tapegrad.ops.binary import where
from tapegrad.tape import Tape

__all__ = ["backward", "grad", "discard", "sum_to_shape"]

_NO_PARAMS: dict[str, Any] = {}  # read-only: unpacked into VJP rules, never mutated


@partial(kernel, static_argnames=("axes", "shape"))
def _sum_axes(g: jax.Array, axes: tuple[int, ...], shape: tuple[int, ...]) -> jax.Array:
    return jnp.sum(g, axis=axes).reshape(shape)


_accumulate = kernel(jnp.add)  # cotangent sums: one compiled call (jnp's ``+`` is ~3x slower)


def sum_to_shape(g: jax.Array, shape: tuple[int, ...]) -> jax.Array | None:
    """Sum a cotangent in a broadcast shape down to ``shape`` (the one unbroadcast in tapegrad).

    Returns:
        The reduced cotangent (one compiled dispatch), or ``None`` when ``g.shape`` is not a
        broadcast of ``shape``.
    """
    axes = broadcast_axes(g.shape, shape)
    if axes is None:
        return None
    out: jax.Array = _sum_axes(g, axes, shape)
    return out


def _reduce(g: jax.Array, parent: Node, node: Node, index: int) -> jax.Array:
    if not isinstance(g, jax.Array):
        raise VJPShapeError(
            f"VJP of {node.name!r} returned a {type(g).__name__} for input {index}; return a "
            "jax.Array cotangent (or None) for each tensor input."
        )
    if g.shape != parent.shape:
        reduced = sum_to_shape(g, parent.shape)
        if reduced is None:
            raise VJPShapeError.of(node.name, g.shape, index, parent.shape)
        g = reduced
    if g.dtype != parent.dtype:
        g = g.astype(parent.dtype)
    return g


def _propagate(
    steps: Sequence[Any],
    roots: Sequence[int],
    seeds: Sequence[Any],
    wanted: frozenset[int],
    done: list[Any] | None = None,
    leaves: list[Any] | None = None,
    check: Any = None,
    create_graph: bool = False,
    made: list[Node] | None = None,
) -> dict[int, tuple[Any, Any]]:
    """The VJP loop: seed the roots (by id; a root given twice gets the sum), run each step's
    VJP on its cotangent and add the results to its parents'; return the cotangents of
    leaves, retained and wanted nodes by id. Appends each op node to ``done`` once its step
    is over, each leaf to ``leaves``, and with ``create_graph`` each node the pass records
    to ``made``. The same loop runs eagerly and traced (``compiled_backward``, which passes
    none of these lists)."""
    done = [] if done is None else done
    leaves = [] if leaves is None else leaves
    # tg.grad: only paths toward the wanted nodes (a gradient nobody asked for is neither
    # computed nor, with create_graph, recorded as a node that would hang: PyTorch's pruning)
    toward = _toward(steps, wanted) if wanted else None
    cots: dict[int, Any] = {}
    for nid, seed in zip(roots, seeds, strict=True):
        prev = cots.get(nid)
        cots[nid] = seed if prev is None else prev + seed
    out: dict[int, tuple[Any, Any]] = {}
    for node, op, parents, saved, params in steps:
        g = cots.pop(node.id, None)
        if op is None:
            leaves.append(node)
            if g is not None:
                out[node.id] = (node, g)
            continue
        if g is not None:
            if node.retain or node.id in wanted:
                out[node.id] = (node, g)
            if toward is None:
                n = len(parents)  # the usual one or two inputs: a shared tuple, no loop
                needs: tuple[bool, ...]
                if n == 2:
                    needs = _NEEDS2[parents[0] is None][parents[1] is None]
                elif n == 1:
                    needs = _NEEDS1[parents[0] is None]
                else:
                    needs = tuple([p is not None for p in parents])
            else:
                needs = tuple(p is not None and p.id in toward for p in parents)
                if True not in needs:
                    done.append(node)
                    continue
            if create_graph:
                for target, tct in vjp_on_tensors(node, op, parents, saved, params, g, needs, made):
                    prev = cots.get(target.id)
                    if prev is not None:
                        tct = prev + tct
                        if made is not None and (added := node_of(tct)) is not None:
                            made.append(added)
                    cots[target.id] = tct
                done.append(node)
                continue
            cts = op.call_vjp(saved, g, needs, params or _NO_PARAMS)
            if check is not None:
                check(node, cts)
            if len(cts) != len(parents):
                raise VJPShapeError(
                    f"VJP of {node.name!r} returned {len(cts)} cotangents for "
                    f"{len(parents)} inputs; return one per tensor input (None if unneeded)."
                )
            for i, (p, ct) in enumerate(zip(parents, cts, strict=True)):
                if ct is None or not needs[i]:  # a rule without ``needs`` computes them all
                    continue
                aval = getattr(ct, "aval", None)  # arrays and tracers: no ABC check
                if aval is None or aval.shape != p.shape or aval.dtype != p.dtype:
                    ct = _reduce(ct, p, node, i)  # sum down, cast, or raise VJPShapeError
                prev = cots.get(p.id)
                cots[p.id] = ct if prev is None else _accumulate(prev, ct)
        done.append(node)
    return out


_NEEDS1: tuple[tuple[bool, ...], ...] = ((True,), (False,))
"""``needs`` of a one-input op, by ``parents[0] is None``."""
_NEEDS2: tuple[tuple[tuple[bool, ...], ...], ...] = (
    ((True, True), (True, False)),
    ((False, True), (False, False)),
)
"""``needs`` of a two-input op, by ``parents[0] is None`` then ``parents[1] is None``."""


def _toward(steps: Sequence[Any], wanted: frozenset[int]) -> set[int]:
    """The ids of the nodes of ``steps`` (consumers before their parents) on a path toward a
    wanted node: wanted themselves, or with a parent that is on such a path."""
    found: set[int] = set()
    for node, _, parents, _, _ in reversed(steps):
        if node.id in wanted or any(p is not None and p.id in found for p in parents):
            found.add(node.id)
    return found


def _run(
    tape: Tape,
    roots: Sequence[Node],
    seeds: Sequence[Any],
    retain_graph: bool,
    wanted: frozenset[int] = frozenset(),
    create_graph: bool = False,
    before: Callable[[Sequence[Any]], None] | None = None,
    floor: int = -1,
) -> dict[int, tuple[Node, Any]]:
    """Run VJPs from ``roots`` on their ``tape``; return the cotangents of leaves, retained and
    wanted nodes. ``before`` sees the steps before any VJP runs; what it raises propagates
    with nothing consumed. With ``wanted``, the walk spares consumed nodes no wanted node
    lies below (``Tape.ancestors``), but none older than ``floor`` (``_floor``: a wanted
    leaf frozen and unfrozen).

    Cotangents are arrays, or with ``create_graph`` tensors: each VJP application is then
    recorded on the tape (``higher.vjp_on_tensors``) and cotangents add up as recorded ops.
    A pass whose structure has run long enough eagerly runs compiled, as one XLA
    computation (``compiled_backward``). Consumption (rules 2-4) is reported to the tape in
    ``finally``: on an exception the nodes whose VJP ran stay consumed and no leaf counts as
    reached; the nodes a failed ``create_graph`` pass recorded count as reached, so they are
    freed with their tensors (held by the traceback until then) instead of hanging.
    """
    check = anomaly.checker(seeds)  # None unless tg.detect_anomaly() is on
    steps = tape.ancestors(roots, not retain_graph, wanted, floor)  # raises before any VJP
    done: list[Node] = []
    leaves: list[Node] = []
    made: list[Node] = []
    ok = False
    try:
        if before is not None:
            before(steps)
        found = None
        if not create_graph and check is None and not tape.allow_tracers:
            found = compiled_backward.lookup(steps, roots, wanted)
            if found is not None and not found[0].looked:
                found[0].stored(_propagate, seeds, found[1])
            if found is not None and found[0].buys_at_once():
                found[0].compile(_propagate, seeds, found[1])
        if found is not None and found[0].ready(seeds, found[1]):
            out = found[0].run(steps, seeds, found[1])
            if out is not None:
                for step in steps:
                    (leaves if step[1] is None else done).append(step[0])
                ok = True
                return out
        if found is not None and found[0].passes == 0:  # a new structure's first pass
            _sums_ahead(steps)
        start = 0.0 if found is None else time.perf_counter()
        ids = [node.id for node in roots]
        out = _propagate(steps, ids, seeds, wanted, done, leaves, check, create_graph, made)
        ok = True
        if found is not None:
            found[0].ran_eagerly(time.perf_counter() - start, _propagate, seeds, found[1])
    finally:
        rest = () if ok else steps[len(done) + len(leaves) :]
        undone = [step[0] for step in rest if step[1] is not None]
        pruned: list[Node] = []
        if wanted and not retain_graph:
            done, pruned = _split_pruned(steps, done, wanted)
            undone.extend(pruned)  # released, not consumed: no VJP of theirs ran
        tape.consume(done, undone, leaves if ok else (), retain_graph, create_graph, steps, roots)
        if pruned:
            tape.reach(pruned)
        if made and not ok:
            tape.reach(made)
    return out


def _sums_ahead(steps: Sequence[Any]) -> None:
    """Start compiling the cotangent sums (``_accumulate``) a first pass of a new structure
    will need on the background thread (``kernel.compile_ahead``): one per shape and dtype of
    a node with two useful children or more (a weight used at every time step, a tensor used
    twice), deepest first. The pass's VJP kernels were compiled ahead while the forward ran
    (``op._vjp_ahead``); without this, its sums compiled one by one here. A sum the pass
    meets before the background thread started it compiles here, as any queued program."""
    met: set[tuple[Any, Any]] = set()
    for step in reversed(steps):
        node = step[0]
        if node.uc > 1 and (node.shape, node.dtype) not in met:
            met.add((node.shape, node.dtype))
            cotangent = jax.ShapeDtypeStruct(node.shape, node.dtype)  # type: ignore[no-untyped-call]
            _accumulate.compile_ahead(cotangent, cotangent)


def _split_pruned(
    steps: Sequence[Any], done: list[Node], wanted: frozenset[int]
) -> tuple[list[Node], list[Node]]:
    """Split the op nodes of a ``tg.grad`` pass that are ``done`` into those whose VJP the
    pass needed (a parent on a path toward a wanted node: consumed) and those it pruned (the
    graph below a wanted non-leaf, branches toward no input: not consumed, as in PyTorch, so
    a later backward through them works; reached, so they are freed with their tensors).
    A node the walk spared (``Tape.ancestors``: consumed, or claimed by a pass on another
    thread; its step has no parents) is neither: this pass did not claim it."""
    toward = _toward(steps, wanted)
    needed: set[int] = set()
    spared: set[int] = set()
    for node, op, parents, _, _ in steps:
        if op is None:
            continue
        if not parents:
            spared.add(node.id)
        elif any(p is not None and p.id in toward for p in parents):
            needed.add(node.id)
    ran: list[Node] = []
    pruned: list[Node] = []
    for node in done:
        if node.id not in spared:
            (ran if node.id in needed else pruned).append(node)
    return ran, pruned


def _tape_of(tensors: Sequence[Tensor]) -> Tape:
    """The one tape of ``tensors`` that require grad (a backward runs on its roots' tape).

    Raises:
        TapeMismatchError: the tensors belong to different tapes.
    """
    tapes = {id(tape): tape for tape in map(tape_of, tensors) if tape is not None}
    if len(tapes) != 1:
        names = ", ".join(repr(t.name) for t in tapes.values())
        raise TapeMismatchError(
            f"The outputs and inputs of one backward belong to different tapes ({names}); a "
            "backward runs on one tape. Differentiate each tape's outputs separately."
        )
    (tape,) = tapes.values()
    return tape


_ONES: dict[tuple[Any, ...], jax.Array] = {}
"""The seed of a one-element output, by (shape, dtype, placement): made once, never traced."""


def _seed(t: Tensor, grad: Any, create_graph: bool = False, keyword: str = "grad") -> Any:
    """The cotangent of ``t``: an array, or with ``create_graph`` a tensor (``grad`` itself
    when it is a tensor, so a cotangent that requires grad is differentiated through). It is
    made on ``t``'s sharding when ``t`` was placed, so gradients land where the model lives,
    not on the default device. ``keyword``: the caller's name for ``grad``, for messages."""
    if create_graph:
        if isinstance(grad, Tensor):
            _seed(t, grad.data, keyword=keyword)  # the shape check
            return grad if grad.dtype == t.dtype else grad.astype(t.dtype)
        return wrap(_seed(t, grad, keyword=keyword))
    if grad is None:  # every loss.backward(): read from the array, no Tensor property
        data = array_of(t)
        aval = data.aval
        shape = aval.shape
        if shape and math.prod(shape) != 1:
            where = "backward()" if keyword == "grad" else "tg.grad"
            raise NonScalarBackwardError(
                f"{where} without `{keyword}` needs a one-element output, this one has shape "
                f"{shape}; reduce it (.sum(), .mean()) or pass {keyword}= of shape {shape}."
            )
        if isinstance(data, jax.core.Tracer):
            _real_root(aval.dtype, keyword)
            return placed_like(filled(shape, 1, aval.dtype), data)
        key = (shape, aval.dtype, data.sharding if data.committed else None)
        ones = _ONES.get(key)
        if ones is None:  # a dtype met first: checked here, never on the cached path
            _real_root(aval.dtype, keyword)
            ones = _ONES[key] = placed_like(filled(shape, 1, aval.dtype), data)
        return ones
    data = grad.data if isinstance(grad, Tensor) else grad
    if not isinstance(data, (jax.Array, np.ndarray, np.generic, float, int)):
        raise TypeError(f"{keyword} must be a Tensor or an array, got {type(grad).__name__}.")
    data = jnp.asarray(data, dtype=t.dtype)
    if data.shape != t.shape:
        raise ShapeError(
            f"{keyword} has shape {tuple(data.shape)}, but the tensor has shape {t.shape}; pass a "
            "cotangent of the tensor's own shape."
        )
    return placed_like(data, t.data)


def _real_root(dtype: Any, keyword: str) -> None:
    """Raise for an implied seed of a complex output (PyTorch and ``jax.grad`` refuse it).

    Raises:
        NonScalarBackwardError: ``dtype`` is complex.
    """
    if dtype.kind == "c":
        where = "backward()" if keyword == "grad" else "tg.grad"
        raise NonScalarBackwardError(
            f"{where} without `{keyword}` needs a real output, this one is {dtype}: its "
            f"gradient depends on the cotangent chosen. Reduce it to a real loss (.abs(), "
            f"** 2) or pass {keyword}= (a complex cotangent of its shape)."
        )


def _root(t: Any, what: str) -> Node:
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} must be a tapegrad Tensor, got {type(t).__name__}.")
    node = node_of(t)
    if node is None:
        raise NoGradError(
            f"{what} does not require grad and has no graph to differentiate; make its inputs "
            "require grad (t.require_grad()) and compute it outside tg.no_grad(). (The results "
            "of a tg.jit step carry no graph either: compute the loss and call backward() "
            "inside the compiled step, or call the model eagerly.)"
        )
    return node


def _tracked(g: Tensor, x: Tensor) -> Tensor:
    """With ``create_graph``: a gradient ``g`` of ``x`` that depends on nothing that requires
    grad is recorded as ``where(False, x, g)``, whose derivative in ``x`` is exactly zero, so
    every gradient requires grad and differentiating it again gives zeros, as in JAX."""
    if g.requires_grad or not is_grad_enabled():
        return g
    return where(False, x, g)


def backward(
    t: Tensor,
    grad: Any = None,
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """Accumulate d(t)/d(leaf) into ``.grad`` of live leaves (and ``retain_grad()`` tensors).

    ``.grad`` is written once, at the end of a successful pass, in each leaf's shape and dtype.
    With ``create_graph=True`` the pass itself is recorded (each VJP application a node whose
    origin is this call), ``.grad`` requires grad and accumulates as a recorded ``add``;
    ``retain_graph`` defaults to ``create_graph``. With ``inputs`` (PyTorch's), only those
    tensors' ``.grad`` is written (a non-leaf among them gets one too), and only the VJPs on a
    path toward them run and are consumed, as in ``tg.grad``.

    Raises:
        NoGradError: ``t`` does not require grad (a ``RuntimeError``).
        NonScalarBackwardError: ``t`` has several elements, or is complex, and ``grad`` is
            ``None``.
        ShapeError: ``grad`` has another shape than ``t``.
        GraphConsumedError: a node whose VJP the pass needs (with ``inputs``, only those on
            a path toward them) was consumed by an earlier backward; nothing changed.
        TapeMismatchError: with ``create_graph``, ``grad`` requires grad on another tape;
            an entry of ``inputs`` is on another tape than ``t``.
        TypeError: an entry of ``inputs`` does not require grad; ``retain_graph`` or
            ``create_graph`` is not a bool.
        ValueError: ``inputs`` is empty.
    """
    _check_flags(retain_graph, create_graph, "backward()")
    node = _root(t, "The tensor passed to backward()")
    tape = tape_of(t)
    assert tape is not None  # a tensor with a node has its tape
    wanted: frozenset[int] = frozenset()
    floor = -1
    if inputs is not None:
        ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
        if not ins:
            raise ValueError(
                "backward(inputs=[]): no tensor to fill .grad of; pass the tensors whose "
                ".grad you want, or leave inputs out to fill every leaf's."
            )
        nodes = _input_nodes(ins, "backward(inputs=...): entry")
        wanted = frozenset(n.id for n in nodes)
        floor = _floor(ins, nodes)
        _tape_of([t, *ins])
    _check_seed_tape(grad, tape, create_graph, "backward(grad=...)")
    seed = _seed(t, grad, create_graph)
    retain = create_graph if retain_graph is None else retain_graph
    if create_graph:
        # the pass and the gradients' sums record on the root's tape, in grad mode even
        # under no_grad (PyTorch runs a backward with grad mode = create_graph)
        with use_tape(tape), enable_grad():
            results = _run(tape, [node], [seed], retain, wanted, create_graph=True, floor=floor)
            _write_grads(_only(results, wanted), True)
    else:  # a pass on arrays records nothing: no tape to switch to
        results = _run(tape, [node], [seed], retain, wanted, floor=floor)
        _write_grads(_only(results, wanted), False)


def _only(
    results: dict[int, tuple[Node, Any]], wanted: frozenset[int]
) -> dict[int, tuple[Node, Any]]:
    """The results of ``backward(inputs=...)`` that go to ``.grad``: the wanted nodes' (and
    retained non-leaves' on the way), not the other leaves'; all of them without inputs."""
    if not wanted:
        return results
    return {i: r for i, r in results.items() if i in wanted or r[0].op is not None}


def _input_nodes(ins: Sequence[Any], what: str) -> list[Node]:
    """The nodes of the tensors ``ins`` a pass differentiates with respect to.

    Raises:
        TypeError: one is not a tensor that requires grad.
    """
    nodes = []
    for i, x in enumerate(ins):
        if not isinstance(x, Tensor):
            raise TypeError(
                f"{what} {i} is a {type(x).__name__}, not a Tensor; pass the tensors (or a "
                "sequence of them) whose gradients you want, the ones the outputs were computed "
                "from."
            )
        node = node_of(x)
        if node is None:
            raise TypeError(
                f"{what} {i} does not require grad, so it has no gradient; call "
                ".require_grad() on it before computing the outputs."
            )
        nodes.append(node)
    return nodes


def _floor(tensors: Sequence[Tensor], nodes: Sequence[Node]) -> int:
    """The node id below which a pass toward ``tensors`` (their ``nodes``) spares no
    consumed node: the newest node of a leaf that had another node before (frozen and
    unfrozen after a backward consumed a graph above it: its new node is younger than that
    graph, and sparing would give a zero gradient instead of PyTorch's error); -1 if none.
    A graph younger than that node was built on it, so the usual rules hold there."""
    return max(
        (n.id for t, n in zip(tensors, nodes, strict=True) if n.op is None and renewed(t)),
        default=-1,
    )


def _check_flags(retain_graph: Any, create_graph: Any, where: str) -> None:
    """Refuse a ``retain_graph`` or ``create_graph`` that is not a bool or an int (PyTorch
    takes 0 and 1; ``retain_graph`` may also be ``None``): a string such as ``"no"`` would
    count as true.

    Raises:
        TypeError: naming the argument and the value passed.
    """
    if retain_graph is None and create_graph is False:  # the defaults: every loop's call
        return
    for name, value, optional in (
        ("retain_graph", retain_graph, True),
        ("create_graph", create_graph, False),
    ):
        if not (isinstance(value, (int, np.bool_, np.integer)) or (optional and value is None)):
            raise TypeError(
                f"{where}: {name} must be True or False"
                + (" (or None for the default)" if optional else "")
                + f", got {value!r}; nothing ran."
            )


def _write_grads(results: dict[int, tuple[Node, Any]], create_graph: bool) -> None:
    """Add a pass's cotangents into ``.grad`` of the live leaves (and ``retain_grad()``
    tensors) they belong to: arrays, or with ``create_graph`` tensors (recorded sums)."""
    with _GRADS_LOCK:  # threads backwarding into one leaf: each read-add-write whole
        for target, g in results.values():
            tensor = target.tensor()
            if tensor is None or node_of(tensor) is not target:
                continue
            old = grad_of(tensor)
            if create_graph:
                g = _tracked(g, tensor)
                set_grad(tensor, g if old is None else old + g)
            else:
                g = placed_like(g, array_of(tensor))  # the leaf's sharding, not XLA's choice
                set_grad(tensor, wrap(g if old is None else _accumulate(old.data, g)))


_GRADS_LOCK = threading.Lock()
"""Held while a backward adds its gradients into ``.grad``: two threads backwarding into one
leaf (workers sharing parameters) would otherwise both read the old gradient and one sum
would be lost (PyTorch's accumulation is thread-safe too)."""


def _check_seed_tape(grad: Any, tape: Tape, create_graph: bool, keyword: str) -> None:
    """With ``create_graph``, a cotangent tensor that requires grad is differentiated
    through, so it must be on the pass's ``tape``.

    Raises:
        TapeMismatchError: it belongs to another tape; nothing ran.
    """
    other = tape_of(grad) if create_graph and isinstance(grad, Tensor) else None
    if other is not None and other is not tape:
        raise TapeMismatchError(
            f"{keyword}: the cotangent requires grad and belongs to tape {other.name!r}, but "
            f"the pass runs on tape {tape.name!r} (its outputs'); with create_graph=True it "
            "is differentiated through, so one graph would span two tapes. Compute it on "
            "the same tape, or pass its .detach()."
        )


@overload
def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: Literal[False] | None = None,
    materialize_grads: bool = False,
) -> tuple[Tensor, ...]: ...


@overload
def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]: ...


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    *,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool | None = None,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Return the gradients of ``outputs`` with respect to ``inputs``, leaving ``.grad`` alone.

    Args:
        outputs: a tensor or a sequence of tensors that require grad.
        inputs: a tensor or a sequence of tensors that require grad (leaves or not).
        grad_outputs: cotangents for ``outputs`` (required for multi-element outputs); with
            ``create_graph``, a cotangent tensor that requires grad is differentiated through.
        retain_graph: keep the graph for another backward (default: ``create_graph``).
            Without it, only the nodes whose VJP ran (on a path toward ``inputs``) are
            consumed: the graph below a non-leaf input stays usable, as in PyTorch.
        create_graph: record the pass, so the gradients require grad and can be
            differentiated again (higher-order gradients).
        allow_unused: what an input the outputs do not reach (no path from them) gets:
            ``None`` (the default), zeros; ``True``, ``None`` (PyTorch's ``allow_unused``);
            ``False``, a ``RuntimeError`` before any VJP runs (PyTorch's default).
        materialize_grads: zeros for such inputs (PyTorch's; tapegrad's default anyway).

    Returns:
        One tensor per input, in its shape and dtype; zeros where the outputs do not depend
        on it (with ``create_graph``, recorded with a zero derivative), or ``None`` for an
        input they do not reach with ``allow_unused=True``.

    Raises:
        TypeError: an input is not a tensor that requires grad; an output, or a
            ``grad_outputs`` entry, is not a tensor (or an array); ``retain_graph`` or
            ``create_graph`` is not a bool.
        ValueError: not one ``grad_outputs`` entry per output (``ShapeError``: one whose
            shape is not its output's); ``materialize_grads`` with ``allow_unused=False``.
        RuntimeError: with ``allow_unused=False``, an input the outputs do not reach;
            nothing changed.
        NoGradError: an output does not require grad (a ``RuntimeError``).
        NonScalarBackwardError: an output with more than one element, or complex, and no
            ``grad_outputs`` (a ``RuntimeError``).
        GraphConsumedError: a node on a path from an output toward an input was consumed
            by an earlier backward without ``retain_graph`` (a ``RuntimeError``); nothing
            changed. A consumed node no older input can lie below (the oldest input's own
            node, what lies below it) needs no VJP: no error (docs/design.md rule 1).
        TapeMismatchError: the outputs and inputs belong to different tapes, or (with
            ``create_graph``) a ``grad_outputs`` tensor that requires grad to another (a
            ``RuntimeError``).
    """
    _check_flags(retain_graph, create_graph, "tg.grad")
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "tg.grad: materialize_grads=True gives zeros for unused inputs, allow_unused=False "
            "refuses them; pass one of the two."
        )
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    in_nodes = _input_nodes(ins, "tg.grad: input")
    if grad_outputs is None:
        gouts: list[Any] = [None] * len(outs)
    elif isinstance(grad_outputs, (Tensor, jax.Array, np.ndarray, np.generic, float, int)):
        gouts = [grad_outputs]
    else:
        gouts = list(grad_outputs)
    if len(gouts) != len(outs):
        raise ValueError(
            f"tg.grad: {len(gouts)} grad_outputs for {len(outs)} outputs; pass one per output."
        )
    roots = [_root(o, f"tg.grad output {i}") for i, o in enumerate(outs)]
    tape = _tape_of(outs + ins)
    for cotangent in gouts:
        _check_seed_tape(cotangent, tape, create_graph, "tg.grad(grad_outputs=...)")
    seeds = [_seed(o, g, create_graph, "grad_outputs") for o, g in zip(outs, gouts, strict=True)]
    retain = create_graph if retain_graph is None else retain_graph
    wanted = frozenset(n.id for n in in_nodes)
    unused: set[int] = set()

    def find_unused(steps: Sequence[Any]) -> None:
        unused.update(wanted.difference(step[0].id for step in steps))
        if unused and allow_unused is False:
            i = next(i for i, n in enumerate(in_nodes) if n.id in unused)
            raise RuntimeError(
                f"tg.grad: input {i} is not used by the outputs (no path leads from them to "
                "it); pass allow_unused=True for None there, or leave allow_unused out for "
                "zeros. Nothing was consumed."
            )

    grads: list[Any] = []
    # with create_graph, the pass records on the roots' tape, in grad mode (as backward)
    with use_tape(tape), set_grad_enabled(create_graph or is_grad_enabled()):
        check = None if allow_unused is None and not materialize_grads else find_unused
        results = _run(
            tape, roots, seeds, retain, wanted, create_graph, check, floor=_floor(ins, in_nodes)
        )
        for x, node in zip(ins, in_nodes, strict=True):
            if node.id in unused and allow_unused and not materialize_grads:
                grads.append(None)
                continue
            hit = results.get(node.id)
            g: Any = hit[1] if hit else placed_like(filled(x.shape, 0, x.dtype), x.data)
            if create_graph:
                grads.append(_tracked(g if hit else wrap(g), x))
            else:
                grads.append(wrap(placed_like(g, x.data)))  # on the input's sharding
    return tuple(grads)


def discard(tensors: Sequence[Tensor]) -> None:
    """Consume the graphs behind ``tensors`` without running a VJP: what a backward without
    ``retain_graph`` leaves, so a function transform (``tg.hvp``) leaves none of its graphs
    on the tape. Leaves it reaches are freed when their tensors die (rule 4).

    Raises:
        GraphConsumedError: a graph was already consumed; nothing changed.
    """
    roots = [node for node in map(node_of, tensors) if node is not None]
    if roots:
        tape = _tape_of(tensors)
        steps = tape.ancestors(roots, claim=True)
        ops = [step[0] for step in steps if step[1] is not None]
        leaves = [step[0] for step in steps if step[1] is None]
        tape.consume(ops, (), leaves, False)
