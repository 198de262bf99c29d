"""``create_graph=True``: each VJP application recorded as one node whose VJP JAX derives.

A VJP rule is written once, in jnp, over arrays (the fast path of ``backward``). With
``create_graph=True`` the pass runs on tensors instead: for a node and each parent that needs
a gradient, the rule becomes the jnp function ``h(g, *residuals)`` (the rule's cotangent for
that parent, summed to the parent's shape), recorded through ``derived_op`` as one op named
``vjp(<op>)``. Its inputs are the incoming cotangent and the node's residual arrays, linked
by provenance to the nodes they came from: an input's node, or the node itself for its
output (docs/design.md "Residuals with provenance"). JAX derives that op's VJP from ``h``, compiled
and cached, so the recorded backward is differentiable again, to any order.

The cache key is the op, the parent slot, the residuals' structure and static values (by type
and value) and the parent's shape and dtype: the same node kind in the next step reuses the
compiled ``h``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._arrays import broadcast_axes
from tapegrad._dtypes import DIFFERENTIABLE
from tapegrad._tensor import Tensor, array_of, node_of, wrap
from tapegrad.derived import derived_op
from tapegrad.errors import VJPShapeError
from tapegrad.kernels import static_key
from tapegrad.node import Node
from tapegrad.op import Op, TensorVJPRule, apply

__all__ = ["vjp_on_tensors"]

_ARRAYS = (jax.Array, np.ndarray)
_tree_flatten = jax.tree_util.tree_flatten


class _Dyn:
    """The placeholder of an array leaf in a cached template."""

    def __repr__(self) -> str:
        return "<array>"


_DYN = _Dyn()


_CACHE: OrderedDict[tuple[Any, ...], tuple[Op, Callable[..., jax.Array]]] = OrderedDict()
_CACHE_SIZE = 512
_LOCK = threading.Lock()
_USED: OrderedDict[tuple[Any, ...], tuple[bool, ...]] = OrderedDict()
"""Which inputs a rule's function reads, by function and input avals (bounded like
``_CACHE``)."""


def _aval(a: Any) -> Any:
    """The abstract value (shape, dtype, weak type) of a tensor or array: a ``_used`` key."""
    data = array_of(a) if a.__class__ is Tensor else a
    aval = getattr(data, "aval", None)  # arrays and tracers; NumPy arrays have none
    return aval if aval is not None else jax.core.ShapedArray(np.shape(data), data.dtype)


def _used(fn: Callable[..., jax.Array], args: list[Any]) -> tuple[bool, ...]:
    """Which of ``args`` the output of ``fn(*args)`` depends on, from its jaxpr with the dead
    code removed (traced once per function and input avals).

    A residual the rule does not read for this parent (the output ``y`` of ``a ** b`` for
    ``a``'s cotangent) would otherwise get a zero cotangent from JAX's pullback, and that zero
    would flow back through the residual's own node: ``0 * inf`` is NaN where that node's
    derivative is infinite (``x ** 0.5`` at 0), where nested ``jax.grad`` keeps the zero
    symbolic and gives ``-inf``. All inputs count as read when JAX's dead-code pass is not
    available (its internals moved) or the function does not trace abstractly."""
    avals = tuple([_aval(a) for a in args])
    key = (fn, avals)
    with _LOCK:
        used = _USED.get(key)
    if used is not None:
        return used
    try:
        from jax._src.interpreters import partial_eval as pe  # JAX's dead-code pass

        specs = [
            jax.ShapeDtypeStruct(v.shape, v.dtype, weak_type=v.weak_type)  # type: ignore[no-untyped-call]
            for v in avals
        ]
        closed = jax.make_jaxpr(fn)(*specs)
        used = tuple(pe.dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))[1])
    except Exception:  # noqa: BLE001 (any failure: keep every link, as before)
        used = (True,) * len(args)
    with _LOCK:
        _USED[key] = used
        if len(_USED) > _CACHE_SIZE:
            _USED.popitem(last=False)
    return used


def _constant(a: Any) -> Any:
    """``a`` without its link to the tape: the array itself."""
    return array_of(a) if isinstance(a, Tensor) else a


def _vjp_op(
    op: Op,
    index: int,
    needs: tuple[bool, ...],
    treedef: Any,
    leaves: tuple[Any, ...],
    shape: tuple[int, ...],
    dtype: Any,
) -> tuple[Op, Callable[..., jax.Array]]:
    """The op computing ``op``'s cotangent for input ``index`` and the jnp function it
    computes, from a bounded LRU cache.
    Static values are keyed by type and value (``static_key``): the op made for ``x[True]``
    (a new axis) is not the one for ``x[1]`` (a row)."""
    try:
        key = (op, index, needs, treedef, static_key(leaves), shape, dtype)
        hash(key)
    except TypeError:  # an unhashable static value: build (and compile) for this call only
        return _build(op, index, needs, treedef, leaves, shape, dtype)
    with _LOCK:  # building is cheap (nothing compiles before the first call)
        vop = _CACHE.get(key)
        if vop is None:
            vop = _CACHE[key] = _build(op, index, needs, treedef, leaves, shape, dtype)
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        else:
            _CACHE.move_to_end(key)
    return vop


def _build(
    op: Op,
    index: int,
    needs: tuple[bool, ...],
    treedef: Any,
    leaves: tuple[Any, ...],
    shape: tuple[int, ...],
    dtype: Any,
) -> tuple[Op, Callable[..., jax.Array]]:
    """``derived_op`` of ``h(g, *dyn)``, with ``h``: the rule's cotangent for input ``index``
    in the input's shape and dtype; ``leaves`` holds the static leaves of ``(residuals,
    params)``, ``_DYN`` where an array goes (the arrays are ``h``'s inputs after ``g``, in
    leaf order)."""
    dyn_at = tuple(i for i, leaf in enumerate(leaves) if leaf is _DYN)
    name = op.name

    def h(g: jax.Array, *dyn: jax.Array) -> jax.Array:
        full = list(leaves)
        for i, a in zip(dyn_at, dyn, strict=True):
            full[i] = a
        saved, params = jax.tree_util.tree_unflatten(treedef, full)
        ct = op.call_vjp(saved, g, needs, params)[index]
        if ct is None:
            return jnp.zeros(shape, dtype)
        if ct.shape != shape:
            axes = broadcast_axes(ct.shape, shape)
            if axes is None:
                raise VJPShapeError.of(name, ct.shape, index, shape)
            ct = jnp.sum(ct, axis=axes).reshape(shape)
        out: jax.Array = ct.astype(dtype) if ct.dtype != dtype else ct
        return out

    return derived_op(h, f"vjp({name})"), h


def _rule_on_tensors(
    op: Op,
    rule: TensorVJPRule,
    parents: tuple[Node | None, ...],
    saved: Any,
    params: dict[str, Any] | None,
    g: Tensor,
    wanted: tuple[bool, ...],
    made: list[Node] | None,
) -> list[tuple[Node, Tensor]]:
    """``vjp_on_tensors`` for an op whose VJP is written with tapegrad ops on tensors."""
    needs = tuple(p is not None and w for p, w in zip(parents, wanted, strict=True))
    cts = rule(saved, g, needs, **(params or {}))
    for ct in cts:
        if ct is not g:  # a rule may pass the cotangent on as it is: not a node it made
            _note(ct, made)
    out = []
    for i, (p, ct) in enumerate(zip(parents, cts, strict=True)):
        if p is None or ct is None or not needs[i]:
            continue
        if ct.shape != p.shape:
            raise VJPShapeError.of(op.name, ct.shape, i, p.shape)
        out.append((p, ct))
    return out


def _note(ct: Tensor | None, made: list[Node] | None) -> None:
    """Append the node of the cotangent ``ct``, when it has one, to ``made``."""
    if made is not None and ct is not None and (node := node_of(ct)) is not None:
        made.append(node)


def vjp_on_tensors(
    node: Node,
    op: Op,
    parents: tuple[Node | None, ...],
    saved: Any,
    params: dict[str, Any] | None,
    g: Tensor,
    wanted: tuple[bool, ...],
    made: list[Node] | None = None,
) -> list[tuple[Node, Tensor]]:
    """Apply ``op``'s VJP rule to the cotangent tensor ``g``, recording it on the tape.

    Returns ``(parent, cotangent)`` for each parent whose entry in ``wanted`` is true (one
    per parent: it requires grad and, under ``tg.grad``, leads to an input); each cotangent is
    the output of a ``vjp(<op>)`` node (when grad mode is on and something requires grad),
    appended to ``made`` as soon as it is recorded (so a pass that fails later can free it).

    An op with a rule on tensors (``Op.defvjp_on_tensors``) records that rule's ops instead.

    Raises:
        RuntimeError: a floating residual is neither an input nor the output of the op (its
            dependence on the inputs is unknown, so its VJP cannot be differentiated).
        VJPShapeError: a rule on tensors returned a cotangent not in its input's shape.
    """
    if op.tensor_vjp is not None:
        return _rule_on_tensors(op, op.tensor_vjp, parents, saved, params, g, wanted, made)
    # Each residual entry with a provenance links to its node by position: one array may
    # be two inputs of different nodes (``x.detach() * x``), so identity alone cannot say
    # which. An array met elsewhere (inside a container, among the parameters) links by
    # identity to the entry it is, when all such entries agree.
    prov = node.prov
    by_position: list[Node | None | _Dyn] = []
    by_id: dict[int, Node | None | _Dyn] = {}
    if prov is not None:
        for s, slot in zip(saved, prov, strict=True):
            if slot is not None and isinstance(s, _ARRAYS):
                link = node if slot == -1 else parents[slot]
                by_position.append(link)
                by_id[id(s)] = link if by_id.get(id(s), link) is link else _DYN  # ambiguous
            else:
                by_position.extend([_DYN] * len(_tree_flatten(s)[0]))
    leaves, treedef = _tree_flatten((saved, params or {}))
    n_saved = len(_tree_flatten(saved)[0])
    statics: list[Any] = []
    dyn: list[Any] = []
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, _ARRAYS):
            source: Node | None | _Dyn = by_position[k] if k < len(by_position) else _DYN
            if source is _DYN:
                source = by_id.get(id(leaf), _DYN)
            if source is _DYN and k >= n_saved:
                source = None  # a parameter (clip's array bounds): a constant, not a residual
            if source is _DYN and DIFFERENTIABLE[leaf.dtype]:
                raise RuntimeError(
                    f"create_graph=True: op {op.name!r} keeps a floating residual that is "
                    "neither one of its input arrays nor its output array (by identity), so "
                    "its VJP cannot be differentiated; save the inputs (or the output) and "
                    "recompute the rest in the VJP rule (a forward compiled whole with "
                    "jax.jit returns copies: compile its computation instead)."
                )
            if isinstance(source, Node):
                tape = None if source.tape is None else source.tape()
                dyn.append(wrap(leaf, source, tape))  # linked residuals: input or output arrays
            else:  # not linked: an integer or boolean constant, or an input without grad
                dyn.append(leaf)
            statics.append(_DYN)
        else:
            statics.append(leaf)
    frozen = tuple(statics)
    out = []
    count = len(parents)
    for i, p in enumerate(parents):
        if p is None or not wanted[i]:
            continue
        needs = tuple(j == i for j in range(count))
        vop, fn = _vjp_op(op, i, needs, treedef, frozen, p.shape, p.dtype)
        args = [g, *dyn]
        used = _used(fn, args)
        if False in used:  # unlinked: no zero cotangent flows into a node it does not read
            args = [a if u else _constant(a) for a, u in zip(args, used, strict=True)]
        ct = apply(vop, tuple(args), {}, depth=2)
        _note(ct, made)
        out.append((p, ct))
    return out
