"""The reverse pass: ancestors first, VJPs in descending node id, cotangents summed to shape."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._arrays import filled
from tapegrad._tensor import Tensor
from tapegrad.errors import (
    NoGradError,
    NonScalarBackwardError,
    ShapeError,
    TapeMismatchError,
    VJPShapeError,
)
from tapegrad.node import Node
from tapegrad.tape import Tape

__all__ = ["backward", "grad", "sum_to_shape"]

_NO_PARAMS: dict[str, Any] = {}  # read-only: unpacked into VJP rules, never mutated


@partial(jax.jit, static_argnames=("axes", "shape"))
def _sum_axes(g: jax.Array, axes: tuple[int, ...], shape: tuple[int, ...]) -> jax.Array:
    return jnp.sum(g, axis=axes).reshape(shape)


def sum_to_shape(g: jax.Array, shape: tuple[int, ...]) -> jax.Array | None:
    """Sum a cotangent in a broadcast shape down to ``shape`` (the one unbroadcast in tapegrad).

    Returns:
        The reduced cotangent (one compiled dispatch), or ``None`` when ``g.shape`` is not a
        broadcast of ``shape``.
    """
    gshape = g.shape
    lead = len(gshape) - len(shape)
    if lead < 0:
        return None
    axes = list(range(lead))
    for i, s in enumerate(shape):
        gs = gshape[lead + i]
        if s == 1 and gs != 1:
            axes.append(lead + i)
        elif s != gs:
            return None
    out: jax.Array = _sum_axes(g, tuple(axes), shape)
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
            raise VJPShapeError(
                f"VJP of {node.name!r} returned shape {tuple(g.shape)} for input {index}, "
                f"expected {parent.shape}; return one cotangent per input in the input's (or "
                "the output's broadcast) shape."
            )
        g = reduced
    if g.dtype != parent.dtype:
        g = g.astype(parent.dtype)
    return g


def _run(
    tape: Tape,
    roots: Sequence[Node],
    seeds: Sequence[jax.Array],
    retain_graph: bool,
    wanted: frozenset[int] = frozenset(),
) -> dict[int, tuple[Node, jax.Array]]:
    """Run VJPs from ``roots`` on their ``tape``; return the cotangents of leaves, retained and
    wanted nodes.

    Consumption (rules 2-4) is reported to the tape in ``finally``: on an exception the nodes
    whose VJP ran stay consumed and no leaf counts as reached.
    """
    steps = tape.ancestors(roots, claim=not retain_graph)  # raises before any VJP runs
    cots: dict[int, Any] = {}
    for node, seed in zip(roots, seeds, strict=True):
        prev = cots.get(node.id)
        cots[node.id] = seed if prev is None else prev + seed
    out: dict[int, tuple[Node, jax.Array]] = {}
    done: list[Node] = []
    leaves: list[Node] = []
    ok = False
    try:
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
                needs = tuple(p is not None for p in parents)
                cts = op.call_vjp(saved, g, needs, params or _NO_PARAMS)
                if len(cts) != len(parents):
                    raise VJPShapeError(
                        f"VJP of {node.name!r} returned {len(cts)} cotangents for "
                        f"{len(parents)} inputs; return one per tensor input (None if unneeded)."
                    )
                for i, (p, ct) in enumerate(zip(parents, cts, strict=True)):
                    if p is None or ct is None:
                        continue
                    if not isinstance(ct, jax.Array) or ct.shape != p.shape or ct.dtype != p.dtype:
                        ct = _reduce(ct, p, node, i)  # sum down, cast, or raise VJPShapeError
                    prev = cots.get(p.id)
                    cots[p.id] = ct if prev is None else prev + ct
            done.append(node)
        ok = True
    finally:
        rest = () if ok else steps[len(done) + len(leaves) :]
        undone = [step[0] for step in rest if step[1] is not None]
        tape.consume(done, undone, leaves if ok else (), retain_graph)
    return out


def _tape_of(tensors: Sequence[Tensor]) -> Tape:
    """The one tape of ``tensors`` that require grad (a backward runs on its roots' tape).

    Raises:
        TapeMismatchError: the tensors belong to different tapes.
    """
    tapes = {id(t._tape): t._tape for t in tensors if t._tape is not None}
    if len(tapes) != 1:
        names = ", ".join(repr(t.name) for t in tapes.values())
        raise TapeMismatchError(
            f"The outputs and inputs of one backward belong to different tapes ({names}); a "
            "backward runs on one tape. Differentiate each tape's outputs separately."
        )
    (tape,) = tapes.values()
    return tape


def _seed(t: Tensor, grad: Any) -> jax.Array:
    if grad is None:
        if t._data.size != 1:
            raise NonScalarBackwardError(
                f"backward() without `grad` needs a one-element tensor, this one has shape "
                f"{t.shape}; reduce it (.sum(), .mean()) or pass grad= of shape {t.shape}."
            )
        ones: jax.Array = filled(t._data.shape, 1, t._data.dtype)
        return ones
    data = grad._data if isinstance(grad, Tensor) else grad
    if not isinstance(data, (jax.Array, np.ndarray, np.generic, float, int)):
        raise TypeError(f"grad must be a Tensor or an array, got {type(grad).__name__}.")
    data = jnp.asarray(data, dtype=t._data.dtype)
    if data.shape != t._data.shape:
        raise ShapeError(
            f"grad has shape {tuple(data.shape)}, but the tensor has shape {t.shape}; pass a "
            "cotangent of the tensor's own shape."
        )
    return data


def _root(t: Any, what: str) -> Node:
    if not isinstance(t, Tensor):
        raise TypeError(f"{what} must be a tapegrad Tensor, got {type(t).__name__}.")
    node = t._node
    if node is None:
        raise NoGradError(
            f"{what} does not require grad and has no graph to differentiate; make its inputs "
            "require grad (t.require_grad()) and compute it outside tg.no_grad()."
        )
    return node


def _no_create_graph(create_graph: bool) -> None:
    if create_graph:
        raise NotImplementedError(
            "create_graph=True (higher-order gradients) is not supported yet; compose "
            "jax.grad on a jnp function, or use tg.jax_op for the inner derivative."
        )


def backward(
    t: Tensor, grad: Any = None, *, retain_graph: bool = False, create_graph: bool = False
) -> None:
    """Accumulate d(t)/d(leaf) into ``.grad`` of live leaves (and ``retain_grad()`` tensors).

    ``.grad`` is written once, at the end of a successful pass, in each leaf's shape and dtype.

    Raises:
        NoGradError: ``t`` does not require grad (a ``RuntimeError``).
        NonScalarBackwardError: ``t`` has several elements and ``grad`` is ``None``.
        ShapeError: ``grad`` has another shape than ``t``.
        GraphConsumedError: the graph was consumed by an earlier backward.
        NotImplementedError: ``create_graph=True``.
    """
    _no_create_graph(create_graph)
    node = _root(t, "The tensor passed to backward()")
    seed = _seed(t, grad)
    assert t._tape is not None  # a tensor with a node has its tape
    results = _run(t._tape, [node], [seed], retain_graph)
    for target, g in results.values():
        tensor = target.ref() if target.ref is not None else None
        if tensor is None or tensor._node is not target:
            continue
        old = tensor._grad
        tensor._grad = Tensor._wrap(g if old is None else old._data + g)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Any = None,
    *,
    retain_graph: bool = False,
) -> tuple[Tensor, ...]:
    """Return the gradients of ``outputs`` with respect to ``inputs``, leaving ``.grad`` alone.

    Args:
        outputs: a tensor or a sequence of tensors that require grad.
        inputs: a tensor or a sequence of tensors that require grad (leaves or not).
        grad_outputs: cotangents for ``outputs`` (required for multi-element outputs).
        retain_graph: keep the graph for another backward.

    Returns:
        One tensor per input, in its shape and dtype; zeros where the outputs do not depend
        on it.

    Raises:
        TypeError: an input does not require grad.
        RuntimeError: an output does not require grad, or its graph was consumed.
    """
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    in_nodes = []
    for i, x in enumerate(ins):
        if not isinstance(x, Tensor) or x._node is None:
            raise TypeError(
                f"tg.grad: input {i} does not require grad, so it has no gradient; call "
                ".require_grad() on it before computing the outputs."
            )
        in_nodes.append(x._node)
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
    seeds = [_seed(o, g) for o, g in zip(outs, gouts, strict=True)]
    tape = _tape_of(outs + ins)
    results = _run(tape, roots, seeds, retain_graph, frozenset(n.id for n in in_nodes))
    grads = []
    for x, node in zip(ins, in_nodes, strict=True):
        hit = results.get(node.id)
        grads.append(Tensor._wrap(hit[1] if hit else filled(x._data.shape, 0, x._data.dtype)))
    return tuple(grads)
