"""Neural-network composites with fused VJPs (softmax, log_softmax, the losses: cross_entropy,
nll_loss, the binary cross entropies, kl_div, mse_loss) and the label encoding one_hot."""

from __future__ import annotations

import math
import warnings
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import integer, numpy_keywords, torch_keywords
from tapegrad._arrays import axis_check, broadcast_axes, sum_to
from tapegrad.errors import ShapeError, TapegradWarning
from tapegrad.kernels import kernel
from tapegrad.op import broadcast_check, defop, refuse_torch
from tapegrad.origin import user_stacklevel

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = [
    "softmax",
    "log_softmax",
    "cross_entropy",
    "nll_loss",
    "binary_cross_entropy_with_logits",
    "binary_cross_entropy",
    "kl_div",
    "mse_loss",
    "one_hot",
]


def _one(x: jax.Array, axis: int) -> int | None:
    """``axis``, or ``None`` (all of its one element) for a 0-d ``x`` with axis 0 or -1: a
    0-d tensor's softmax is over itself, as PyTorch's (JAX's raises)."""
    return None if x.ndim == 0 and axis in (0, -1) else axis


_softmax = partial(kernel, static_argnames=("axis",))(jax.nn.softmax)
_log_softmax = partial(kernel, static_argnames=("axis",))(jax.nn.log_softmax)


@defop(check=axis_check)
def softmax(x: jax.Array, *, axis: int = -1) -> tuple[jax.Array, tuple[jax.Array]]:
    """exp(x) / sum(exp(x)) along ``axis``, computed stably (a 0-d x: its one element, 1)."""
    y = _softmax(x, axis=_one(x, axis))
    return y, (y,)


@softmax.defvjp
@partial(kernel, static_argnames=("axis",))
def _softmax_vjp(res: tuple[jax.Array], g: jax.Array, *, axis: int = -1) -> tuple[jax.Array]:
    """gx = y * (g - sum(g * y, axis)) (the softmax Jacobian y_i (delta_ij - y_j))."""
    (y,) = res
    return (y * (g - jnp.sum(g * y, axis=_one(y, axis), keepdims=True)),)


@defop(check=axis_check)
def log_softmax(x: jax.Array, *, axis: int = -1) -> tuple[jax.Array, tuple[jax.Array]]:
    """x - logsumexp(x) along ``axis`` (a 0-d x: its one element, 0)."""
    y = _log_softmax(x, axis=_one(x, axis))
    return y, (y,)


@log_softmax.defvjp
@partial(kernel, static_argnames=("axis",))
def _log_softmax_vjp(res: tuple[jax.Array], g: jax.Array, *, axis: int = -1) -> tuple[jax.Array]:
    """gx = g - exp(y) * sum(g, axis) (d log_softmax_i / dx_j = delta_ij - softmax_j)."""
    (y,) = res
    return (g - jnp.exp(y) * jnp.sum(g, axis=_one(y, axis), keepdims=True),)


Reduction = str
_REDUCTIONS = ("mean", "sum", "none")


def _reduce(per: jax.Array, reduction: Reduction, total: jax.Array | None = None) -> jax.Array:
    """Reduce per-element losses: "mean" (over all elements, or divided by ``total``: the
    weights of the labels not ignored), "sum", or "none" (unchanged)."""
    if reduction == "mean":
        return jnp.mean(per) if total is None else jnp.sum(per) / total
    return jnp.sum(per) if reduction == "sum" else per


def _spread(
    g: jax.Array,
    like: tuple[int, ...],
    reduction: Reduction,
    keep: jax.Array | None = None,
    total: jax.Array | None = None,
) -> jax.Array:
    """The cotangent of each per-element loss, given the reduced loss's cotangent ``g``: the
    mean divides by the element count, or by ``total`` (the weights of the labels kept); 0
    where ``keep`` is False (an ignored label), also when every label is ignored (PyTorch's)."""
    if reduction == "mean":
        count = max(math.prod(like), 1) if total is None else total
        rows = jnp.broadcast_to(g / count, like)
    else:
        rows = jnp.broadcast_to(g, like) if reduction == "sum" else g
    return rows if keep is None else jnp.where(keep, rows, 0)


def _check_reduction(name: str, reduction: Any) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction={reduction!r}; use 'mean', 'sum' or 'none'.")


def _check_labels(name: str, logits: jax.Array, labels: jax.Array, axis: int) -> None:
    """Refuse boolean scores, labels that are not integers or not of the scores' shape without
    the class axis, and a class axis out of range."""
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(
            f"{name}: labels must be integer class indices, got dtype {labels.dtype}; "
            "pass e.g. tg.tensor([3, 1, 4]) (int32), not one-hot floats."
        )
    shape = tuple(logits.shape)
    if not -len(shape) <= axis < len(shape):
        raise ShapeError(
            f"{name}: the class axis {axis} is out of range for scores of shape {shape}; "
            "classes are on the last axis by default (axis=-1)."
        )
    want = shape[: axis % len(shape)] + shape[axis % len(shape) + 1 :]
    if tuple(labels.shape) != want:
        raise ShapeError(
            f"{name}: scores of shape {shape} with classes on axis {axis} need labels of shape "
            f"{want} (one class index per row), got {tuple(labels.shape)}. tapegrad puts the "
            "classes on the last axis (axis=-1, optax's layout); PyTorch's (N, C, d1, ...) "
            "layout needs axis=1 (or moving the class axis last with t.swapaxes)."
        )


def _classes(scores: Any, axis: Any) -> int | None:
    """The number of classes of ``scores`` along ``axis``; ``None`` when there is no such axis
    (the op's shape check then says so)."""
    shape = np.shape(scores)
    ax = integer(axis, "axis")
    return shape[ax] if -len(shape) <= ax < len(shape) else None


def _host_labels(
    labels: Any, classes: int | None, name: str, ignore_index: int | None = None
) -> Any:
    """Host labels (a list or NumPy array) outside ``[0, classes)`` (other than
    ``ignore_index``) raise ``ValueError``; labels already on the device are not read back
    (that would stall JAX's dispatch). ``classes=None``: no class axis, nothing checked."""
    if isinstance(labels, (list, tuple, np.ndarray)):
        labels = np.asarray(labels)
        if classes is not None and np.issubdtype(labels.dtype, np.integer) and labels.size:
            out = (labels < 0) | (labels >= classes)
            if ignore_index is not None:
                out &= labels != ignore_index
            bad = int(np.count_nonzero(out))
            if bad:
                pad = (
                    f"; padding labels to skip must equal ignore_index={ignore_index}"
                    if ignore_index is not None
                    else ""
                )
                raise ValueError(
                    f"{name}: {bad} labels are outside [0, {classes}); each label is a class "
                    f"index below {classes}{pad}."
                )
    return labels


class _Labels(NamedTuple):
    """What the losses of integer labels share, classes last: the kept mask (labels not equal
    to ``ignore_index``), the one-hot labels (0 rows out of range), the class weights ``w``
    (C,), each label's weight times kept ``wy``, and the terms ``a`` (..., C) with loss
    ``sum_c w_c a_c`` per label: ``(1 - s) onehot * -logp[label] + s / C * -logp``, 0 on
    ignored rows, NaN on rows whose label is otherwise outside [0, C)."""

    keep: jax.Array
    onehot: jax.Array
    w: jax.Array
    wy: jax.Array
    a: jax.Array


def _labels(
    logp: jax.Array, labels: jax.Array, weight: jax.Array, smoothing: float, ignore_index: int
) -> _Labels:
    classes = logp.shape[-1]
    keep = labels != ignore_index
    valid = (labels >= 0) & (labels < classes)
    safe = jnp.clip(labels, 0, classes - 1)
    onehot = jax.nn.one_hot(labels, classes, dtype=logp.dtype)
    w = jnp.broadcast_to(weight, (classes,)).astype(logp.dtype)
    picked = jnp.take_along_axis(logp, safe[..., None], axis=-1)
    a = (1 - smoothing) * onehot * -picked
    if smoothing:
        a = a - smoothing / classes * logp
    a = jnp.where(keep[..., None], jnp.where(valid[..., None], a, jnp.nan), 0)
    return _Labels(keep, onehot, w, jnp.where(keep, w[safe], 0), a)


def _label_loss(
    logp: jax.Array,
    labels: jax.Array,
    weight: jax.Array,
    smoothing: float,
    reduction: Reduction,
    ignore_index: int,
) -> jax.Array:
    """The reduced loss of ``logp`` (classes last): the weighted mean divides by the weights
    of the labels kept (PyTorch's)."""
    t = _labels(logp, labels, weight, smoothing, ignore_index)
    return _reduce(jnp.sum(t.a * t.w, axis=-1), reduction, jnp.sum(t.wy))


def _label_grads(
    probs: jax.Array | float,
    logp: jax.Array,
    labels: jax.Array,
    weight: jax.Array,
    g: jax.Array,
    needs_weight: bool,
    smoothing: float,
    reduction: Reduction,
    ignore_index: int,
    axis: int,
) -> tuple[jax.Array, jax.Array | None]:
    """The cotangents of the scores and of the class weights.

    Scores: ``(probs * sum_c q_c - q) * r`` per label, q = kept * w * ((1 - s) onehot + s / C)
    the weighted target and r the label's cotangent (``g / sum wy`` for the mean); ``probs``
    is softmax(logits) for cross_entropy (d/dx of -sum q logp), 0 for nll_loss (d/dlogp), the
    classes moved back to ``axis``. Weights: ``sum_i r_i a_i`` (the loss is linear in w), less
    ``r * loss * onehot`` summed over the kept labels for the mean (its divisor is
    ``sum wy``)."""
    t = _labels(logp, labels, weight, smoothing, ignore_index)
    classes = logp.shape[-1]
    total = jnp.sum(t.wy)
    rows = _spread(g, labels.shape, reduction, t.keep, total)[..., None]
    q = t.w * ((1 - smoothing) * t.onehot + smoothing / classes) * t.keep[..., None]
    gx = (probs * jnp.sum(q, axis=-1, keepdims=True) - q) * rows
    valid = (labels >= 0) & (labels < classes)
    gx = jnp.moveaxis(jnp.where((valid | ~t.keep)[..., None], gx, jnp.nan), -1, axis)
    if not needs_weight:
        return gx, None
    a = t.a
    if reduction == "mean":
        loss = jnp.sum(t.a * t.w) / total
        a = a - loss * t.onehot * t.keep[..., None]
    gw = jnp.sum(a * rows, axis=tuple(range(a.ndim - 1)))
    return gx, gw.astype(weight.dtype)


def _check_weight(name: str, scores: jax.Array, weight: jax.Array, axis: int) -> None:
    if jnp.ndim(weight) and tuple(weight.shape) != (scores.shape[axis],):
        raise ShapeError(
            f"{name}: weight of shape {tuple(weight.shape)} must have one entry per class, "
            f"shape ({scores.shape[axis]},)."
        )


_LOSS_STATIC = ("reduction", "ignore_index", "axis")


@partial(kernel, static_argnames=("smoothing", *_LOSS_STATIC))
def _cross_entropy(
    logits: jax.Array,
    labels: jax.Array,
    weight: jax.Array,
    smoothing: float,
    reduction: Reduction,
    ignore_index: int,
    axis: int,
) -> jax.Array:
    """The loss in one dispatch; a label outside [0, C) (not ignored) gives NaN."""
    logp = jax.nn.log_softmax(jnp.moveaxis(logits, axis, -1), axis=-1)
    return _label_loss(logp, labels, weight, smoothing, reduction, ignore_index)


@defop(name="cross_entropy")
def _cross_entropy_op(
    logits: jax.Array,
    labels: jax.Array,
    weight: jax.Array,
    *,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    """-sum_c w_c q_c log softmax(logits)_c, q the (smoothed) one-hot label, reduced over the
    labels not equal to ``ignore_index`` (the mean divided by their weights); logits (..., C)
    (classes on ``axis``), labels (...) int, weight (C,) or a scalar."""
    _check_labels("cross_entropy", logits, labels, axis)
    _check_weight("cross_entropy", logits, weight, axis)
    loss = _cross_entropy(logits, labels, weight, label_smoothing, reduction, ignore_index, axis)
    return loss, (logits, labels, weight)  # the inputs: create_graph differentiates them


@_cross_entropy_op.defvjp
@partial(kernel, static_argnames=("needs", "label_smoothing", *_LOSS_STATIC))
def _cross_entropy_vjp(
    res: tuple[jax.Array, jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array | None, None, jax.Array | None]:
    """g_logits = r * (softmax(logits) sum(q) - q), q = w * ((1 - s) onehot(label) + s / C)
    the weighted smoothed target (softmax - onehot unweighted; one fused rule); 0 on ignored
    rows, NaN on rows whose label is out of range, as their loss; g_weight as
    ``_label_grads``."""
    logits, labels, weight = res
    logp = jax.nn.log_softmax(jnp.moveaxis(logits, axis, -1), axis=-1)
    gx, gw = _label_grads(
        jnp.exp(logp),
        logp,
        labels,
        weight,
        g,
        needs[2],
        label_smoothing,
        reduction,
        ignore_index,
        axis,
    )
    return (gx if needs[0] else None, None, gw)


def _weight(weight: Any) -> Any:
    """The op's weight input: 1.0 (every class alike) for ``None``."""
    return 1.0 if weight is None else weight


@numpy_keywords
def cross_entropy(
    logits: Any,
    labels: Any,
    weight: Any = None,
    *,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> Tensor:
    """-log softmax(logits)[label], one fused op and VJP (PyTorch's ``F.cross_entropy``, but
    with the class axis last by default, as ``optax``: logits (..., C) against labels (...)).

    PyTorch puts the classes on axis 1 of an (N, C, d1, ...) input; pass ``axis=1`` for that
    layout. Beware: logits (N, C, L) with labels (N, L) where C == L have the shape tapegrad's
    default expects too, and then give a different loss silently.

    Args:
        logits: a float tensor of shape (..., C), the classes on ``axis``.
        labels: integer class indices of the logits' shape without the class axis, as a
            tensor, JAX or NumPy array or list; or float class probabilities of the logits'
            shape (PyTorch's soft targets: the loss of a row is ``-sum_c w_c t_c logp_c``, the
            mean is over the rows, ``ignore_index`` must stay negative (PyTorch's), and
            targets that require grad get their gradient).
        weight: optional per-class weights (C,) (PyTorch's): label ``y``'s loss is scaled by
            ``weight[y]`` and the mean divides by the sum of the weights of the labels not
            ignored. With smoothing, PyTorch's form: ``(1 - s) w[y] (-logp[y]) + s / C *
            sum_c w_c (-logp_c)``. A tensor that requires grad gets its gradient.
        label_smoothing: in [0, 1]; the target becomes ``(1 - s) onehot + s / C`` (PyTorch's).
        reduction: "mean" (over the labels not ignored, weighted), "sum", or "none" (one loss
            per label, 0 for an ignored one).
        ignore_index: labels equal to it contribute no loss and no gradient (PyTorch's default
            -100, the usual padding label); the mean is over the others (NaN when every label
            is ignored, and zero gradients, as PyTorch).
        axis: the class axis of ``logits`` (default -1, the last; 1 for PyTorch's layout).

    Raises:
        TypeError: labels are neither integers nor floats, or float labels (probabilities)
            do not have the logits' shape.
        ShapeError: integer labels do not have the logits' shape without the class axis,
            ``axis`` is out of range, or ``weight`` is not (C,).
        OperandTypeError: labels that are a PyTorch tensor (says to convert them).
        ValueError: host labels (a NumPy array or a list) outside ``[0, C)`` other than
            ``ignore_index``, a smoothing outside [0, 1], an unknown reduction, or an
            ``ignore_index >= 0`` with class probabilities. Labels already
            on the device are not read back (that would stall JAX's asynchronous dispatch every
            step): an out-of-range one (other than ``ignore_index``) gives a NaN loss and NaN
            gradients for its row, JAX's out-of-bounds convention.
    """
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing={label_smoothing} must be in [0, 1].")
    ignore = integer(ignore_index, "cross_entropy: ignore_index")
    refuse_torch(labels, "cross_entropy")  # before its dtype is read
    if _floating(labels):
        if ignore >= 0:  # PyTorch refuses it too: a padding row would silently count
            raise ValueError(
                f"cross_entropy: ignore_index={ignore} does not apply to class probabilities "
                "(float labels); give padding rows all-zero probabilities (they add 0 to a "
                "sum) or mask the 'none' losses, and leave ignore_index at its default."
            )
        return _soft_cross_entropy(logits, labels, weight, label_smoothing, reduction, axis)
    labels = _host_labels(labels, _classes(logits, axis), "cross_entropy", ignore)
    return _cross_entropy_op(
        logits,
        labels,
        _weight(weight),
        label_smoothing=float(label_smoothing),
        reduction=reduction,
        ignore_index=ignore,
        axis=axis,
    )


def _floating(labels: Any) -> bool:
    """Whether ``labels`` are class probabilities (floats), not class indices."""
    dtype = getattr(labels, "dtype", None)
    if dtype is None:
        dtype = np.asarray(labels).dtype
    return bool(jnp.issubdtype(dtype, jnp.floating))


def _soft_cross_entropy(
    logits: Any, targets: Any, weight: Any, smoothing: float, reduction: Reduction, axis: int
) -> Tensor:
    """PyTorch's cross entropy against class probabilities: ``-sum_c w_c t_c logp_c`` per
    row, ``t`` smoothed to ``(1 - s) t + s / C``; the mean is over the rows (unweighted, as
    PyTorch's). Tensor ops: both inputs get their gradients."""
    shape, target_shape = tuple(np.shape(logits)), tuple(np.shape(targets))
    ax = integer(axis, "cross_entropy: axis")
    if not -len(shape) <= ax < len(shape):
        raise ShapeError(
            f"cross_entropy: the class axis {ax} is out of range for logits of shape {shape}."
        )
    if target_shape != shape:
        raise TypeError(
            f"cross_entropy: labels must be integer class indices (shape "
            f"{shape[: ax % len(shape)] + shape[ax % len(shape) + 1 :]}) or class probabilities "
            f"of the logits' shape {shape}; got floats of shape {target_shape}. Cast class "
            "indices: labels.astype(tg.int32)."
        )
    classes = shape[ax]
    logp = log_softmax(logits, axis=ax)
    if not hasattr(targets, "reshape") or isinstance(targets, np.ndarray):
        targets = jnp.asarray(targets, dtype=logp.dtype)  # a list, NumPy's float64: as logits'
    if smoothing:
        targets = targets * (1.0 - smoothing) + smoothing / classes
    terms = logp * targets
    if weight is not None:
        w = weight if hasattr(weight, "reshape") else np.asarray(weight)
        if tuple(w.shape) != (classes,):
            raise ShapeError(
                f"cross_entropy: weight of shape {tuple(w.shape)} must have one entry per "
                f"class, shape ({classes},)."
            )
        terms = terms * w.reshape(
            tuple(classes if i == ax % len(shape) else 1 for i in range(len(shape)))
        )
    per: Tensor = -terms.sum(axis=ax)
    if reduction == "mean":
        out: Tensor = per.mean()
        return out
    return per.sum() if reduction == "sum" else per


@partial(kernel, static_argnames=_LOSS_STATIC)
def _nll(
    logp: jax.Array,
    labels: jax.Array,
    weight: jax.Array,
    reduction: Reduction,
    ignore_index: int,
    axis: int,
) -> jax.Array:
    logp = jnp.moveaxis(logp, axis, -1)
    return _label_loss(logp, labels, weight, 0.0, reduction, ignore_index)


@defop(name="nll_loss")
def _nll_loss(
    logp: jax.Array,
    labels: jax.Array,
    weight: jax.Array,
    *,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    """-w[label] logp[label], reduced over the labels not equal to ``ignore_index`` (the mean
    divided by their weights); logp (..., C) log-probabilities (classes on ``axis``), labels
    (...) int, weight (C,) or a scalar."""
    _check_labels("nll_loss", logp, labels, axis)
    _check_weight("nll_loss", logp, weight, axis)
    loss = _nll(logp, labels, weight, reduction, ignore_index, axis)
    return loss, (logp, labels, weight)  # the inputs: create_graph differentiates them


@_nll_loss.defvjp
@partial(kernel, static_argnames=("needs", *_LOSS_STATIC))
def _nll_loss_vjp(
    res: tuple[jax.Array, jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array | None, None, jax.Array | None]:
    """g_logp = -r * w[label] * onehot(label); 0 on ignored rows, NaN rows for out-of-range
    labels; g_weight as ``_label_grads``."""
    logp, labels, weight = res
    gx, gw = _label_grads(
        0.0,
        jnp.moveaxis(logp, axis, -1),
        labels,
        weight,
        g,
        needs[2],
        0.0,
        reduction,
        ignore_index,
        axis,
    )
    return (gx if needs[0] else None, None, gw)


LOSS_ADVICE = {
    "size_average": "deprecated in PyTorch too: use reduction='mean' (or 'sum').",
    "reduce": "deprecated in PyTorch too: use reduction='none' for per-element losses.",
    "weight": "this loss takes no weight=; compute it with reduction='none', multiply by the "
    "weights and reduce: (loss_fn(a, b) * w).mean() with reduction='none'.",
}
"""PyTorch loss options tapegrad's losses do not take, and what to do instead."""
LOSS_ORDER = "its losses take size_average and reduce (deprecated) before reduction"


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def nll_loss(
    logp: Any,
    labels: Any,
    weight: Any = None,
    *,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> Tensor:
    """Negative log-likelihood of integer labels, PyTorch's ``F.nll_loss`` with the class axis
    last by default: ``-weight[label] * logp[..., label]``; pair it with ``log_softmax``
    (together: ``cross_entropy``). PyTorch's (N, C, d1, ...) layout needs ``axis=1``.

    Args:
        logp: log-probabilities (..., C), the classes on ``axis``.
        labels: integer class indices, of the shape of ``logp`` without the class axis.
        weight: optional per-class weights (C,); the mean divides by the sum of the weights of
            the labels not ignored (PyTorch's).
        reduction: "mean" (over the labels not ignored, weighted), "sum" or "none".
        ignore_index: labels equal to it contribute no loss and no gradient (PyTorch's -100).
        axis: the class axis of ``logp`` (default -1; 1 for PyTorch's layout).

    Raises:
        as ``cross_entropy`` (labels' dtype, shape, host range; the axis; the weight's shape;
        the reduction).
    """
    _check_reduction("nll_loss", reduction)
    ignore = integer(ignore_index, "nll_loss: ignore_index")
    labels = _host_labels(labels, _classes(logp, axis), "nll_loss", ignore)
    return _nll_loss(
        logp, labels, _weight(weight), reduction=reduction, ignore_index=ignore, axis=axis
    )


@partial(kernel, static_argnames=("reduction",))
def _bce(x: jax.Array, t: jax.Array, reduction: Reduction) -> jax.Array:
    per = jnp.maximum(x, 0) - x * t + jnp.log1p(jnp.exp(-jnp.abs(x)))
    return _reduce(per, reduction)


@defop(name="binary_cross_entropy_with_logits")
def _bce_with_logits(
    x: jax.Array, t: jax.Array, *, reduction: Reduction = "mean"
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), computed stably, reduced."""
    if tuple(x.shape) != tuple(t.shape):
        raise ShapeError(
            f"binary_cross_entropy_with_logits: targets of shape {tuple(t.shape)} must have "
            f"the logits' shape {tuple(x.shape)}."
        )
    return _bce(x, t, reduction), (x, t)


@_bce_with_logits.defvjp
@partial(kernel, static_argnames=("needs", "reduction"))
def _bce_with_logits_vjp(
    res: tuple[jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    reduction: Reduction = "mean",
) -> tuple[jax.Array | None, jax.Array | None]:
    """d/dx = sigmoid(x) - t, d/dt = -x, each times the element's cotangent."""
    x, t = res
    rows = _spread(g, x.shape, reduction)
    gx = (jax.nn.sigmoid(x) - t) * rows if needs[0] else None
    gt = -x * rows if needs[1] else None
    return gx, gt


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def binary_cross_entropy_with_logits(
    logits: Any,
    targets: Any,
    weight: Any = None,
    *,
    reduction: Reduction = "mean",
    pos_weight: Any = None,
) -> Tensor:
    """Binary cross entropy on logits, PyTorch's ``F.binary_cross_entropy_with_logits``:
    ``max(x, 0) - x t + log(1 + exp(-|x|))`` per element (stable for large |x|); one fused
    node. With ``pos_weight`` ``p`` and ``weight`` ``w``, PyTorch's weighted form
    ``w ((1 - t) x + (1 + (p - 1) t) softplus(-x))`` (``softplus(-x) = -log sigmoid(x)``,
    computed as above), recorded as elementwise ops (their VJPs).

    Args:
        logits: float scores of any shape.
        targets: probabilities in [0, 1] of the same shape (floats; they may require grad).
        weight: optional, broadcast against the per-element losses (a rescaling of each).
        reduction: "mean", "sum" or "none".
        pos_weight: optional weight of the positive term, broadcast against the targets
            (one per class on the last axis: ``(C,)``), to balance rare positives.

    Raises:
        ShapeError: the shapes of logits and targets differ, or a weight does not broadcast.
        ValueError: an unknown reduction.
        OperandTypeError: an argument is a PyTorch tensor.
    """
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    if weight is None and pos_weight is None:
        return _bce_with_logits(logits, targets, reduction=reduction)
    from tapegrad._tensor import Tensor  # tensor.py imports the ops last

    for v in (logits, targets, weight, pos_weight):
        refuse_torch(v, "binary_cross_entropy_with_logits")

    def as_tensor(v: Any) -> Tensor:  # for the methods below
        return v if isinstance(v, Tensor) else Tensor(jnp.asarray(v))

    x, t = as_tensor(logits), as_tensor(targets)
    weight = None if weight is None else as_tensor(weight)
    pos_weight = None if pos_weight is None else as_tensor(pos_weight)
    if x.shape != t.shape:
        raise ShapeError(
            f"binary_cross_entropy_with_logits: targets of shape {t.shape} must have the "
            f"logits' shape {x.shape}."
        )
    for name, w in (("weight", weight), ("pos_weight", pos_weight)):
        if w is not None and broadcast_axes(x.shape, w.shape) is None:  # as PyTorch refuses
            raise ShapeError(
                f"binary_cross_entropy_with_logits: {name} of shape {w.shape} does not "
                f"broadcast to the logits' shape {x.shape} (NumPy rules, without growing it)."
            )
    neg_log_sigmoid = (-x.abs()).exp().log1p() + (-x).relu()
    per = (1 - t) * x + (
        neg_log_sigmoid if pos_weight is None else (1 + (pos_weight - 1) * t) * neg_log_sigmoid
    )
    if weight is not None:
        per = per * weight
    return per.mean() if reduction == "mean" else per.sum() if reduction == "sum" else per


def _float_check(name: str, *arrays: jax.Array) -> None:
    """Refuse integer or boolean operands of a loss that takes probabilities (PyTorch's)."""
    for a in arrays:
        if not jnp.issubdtype(a.dtype, jnp.floating):
            raise TypeError(
                f"{name}: operands must be floating, got dtype {a.dtype}; cast with "
                ".astype(tg.float32)."
            )


_LOG_FLOOR = -100.0  # PyTorch's binary_cross_entropy clamps each log at -100


@partial(kernel, static_argnames=("reduction",))
def _bce_probs(p: jax.Array, t: jax.Array, w: jax.Array, reduction: Reduction) -> jax.Array:
    logp = jnp.maximum(jnp.log(p), _LOG_FLOOR)
    log1mp = jnp.maximum(jnp.log1p(-p), _LOG_FLOOR)
    return _reduce(-(t * logp + (1 - t) * log1mp) * w, reduction)


@defop(name="binary_cross_entropy")
def _binary_cross_entropy(
    p: jax.Array, t: jax.Array, w: jax.Array, *, reduction: Reduction = "mean"
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    """-w (t max(log p, -100) + (1 - t) max(log(1 - p), -100)), reduced; p and t of one
    shape, w broadcast to it."""
    _float_check("binary_cross_entropy", p, t)
    if tuple(p.shape) != tuple(t.shape):
        raise ShapeError(
            f"binary_cross_entropy: targets of shape {tuple(t.shape)} must have the "
            f"probabilities' shape {tuple(p.shape)} (PyTorch's check)."
        )
    if broadcast_axes(tuple(p.shape), tuple(jnp.shape(w))) is None:
        raise ShapeError(
            f"binary_cross_entropy: weight of shape {tuple(jnp.shape(w))} does not broadcast "
            f"to the probabilities' shape {tuple(p.shape)} (NumPy rules, without growing it)."
        )
    return _bce_probs(p, t, w, reduction), (p, t, w)


@_binary_cross_entropy.defvjp
@partial(kernel, static_argnames=("needs", "reduction"))
def _binary_cross_entropy_vjp(
    res: tuple[jax.Array, jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    reduction: Reduction = "mean",
) -> tuple[jax.Array | None, ...]:
    """PyTorch's rules, each times the element's cotangent r: d/dp = w (p - t) / max(p (1 -
    p), 1e-12) (finite at p = 0 and 1), d/dt = -w logit(p) (unclamped: infinite at p = 0 and
    1), d/dw = the unweighted loss (summed to w's shape; PyTorch refuses it)."""
    p, t, w = res
    rows = _spread(g, p.shape, reduction)
    logp = jnp.maximum(jnp.log(p), _LOG_FLOOR)
    log1mp = jnp.maximum(jnp.log1p(-p), _LOG_FLOOR)
    gp = rows * w * (p - t) / jnp.maximum(p * (1 - p), 1e-12) if needs[0] else None
    gt = rows * w * (jnp.log1p(-p) - jnp.log(p)) if needs[1] else None
    gw = None
    if needs[2]:
        gw = sum_to(-(t * logp + (1 - t) * log1mp) * rows, tuple(jnp.shape(w)))
    return gp, gt, gw


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def binary_cross_entropy(
    p: Any, targets: Any, weight: Any = None, *, reduction: Reduction = "mean"
) -> Tensor:
    """Binary cross entropy of probabilities, PyTorch's ``F.binary_cross_entropy``:
    ``-w (t log p + (1 - t) log(1 - p))`` per element, each log clamped at -100 (so ``p``
    of exactly 0 or 1 gives a finite loss of at most 100, as PyTorch's); one fused op. On
    logits, ``binary_cross_entropy_with_logits`` is the stable choice.

    Args:
        p: probabilities in ``[0, 1]``, floats of any shape (values outside give NaN: they
            are not read back from the device to be checked).
        targets: floats of ``p``'s shape (they may require grad).
        weight: optional, broadcast against the per-element losses (a rescaling of each;
            it gets its gradient when it requires grad).
        reduction: "mean", "sum" or "none".

    Returns:
        A 0-d tensor, or ``p``'s shape with ``reduction="none"``; ``p``'s dtype.

    Raises:
        ShapeError: the shapes of ``p`` and ``targets`` differ, or ``weight`` does not
            broadcast to them.
        TypeError: integer or boolean operands.
        ValueError: an unknown reduction.

    The VJP is PyTorch's: ``w (p - t) / max(p (1 - p), 1e-12)`` for ``p``.
    """
    _check_reduction("binary_cross_entropy", reduction)
    return _binary_cross_entropy(p, targets, _weight(weight), reduction=reduction)


_KL_REDUCTIONS = ("mean", "batchmean", "sum", "none")


def _kl_count(x_shape: tuple[int, ...], out_shape: tuple[int, ...], reduction: str) -> int:
    """What the reduced KL divides by: every element ("mean"), the input's first axis
    ("batchmean", PyTorch's ``input.size(0)``), else 1. Zero for an empty batch: the mean of
    nothing is NaN, as PyTorch's (and ``mse_loss``'s)."""
    if reduction == "mean":
        return math.prod(out_shape)
    if reduction == "batchmean":
        return x_shape[0] if x_shape else 1
    return 1


@partial(kernel, static_argnames=("reduction", "log_target"))
def _kl(x: jax.Array, t: jax.Array, reduction: str, log_target: bool) -> jax.Array:
    if log_target:
        per = jnp.exp(t) * (t - x)
    else:
        per = jax.scipy.special.xlogy(t, t) - t * x
    if reduction == "none":
        return per
    return jnp.sum(per) / _kl_count(x.shape, per.shape, reduction)


@defop(name="kl_div", check=broadcast_check)
def _kl_div(
    x: jax.Array, t: jax.Array, *, reduction: str = "mean", log_target: bool = False
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """t (log t - x) per element (0 where t = 0), or exp(t) (t - x) for log targets; x
    log-probabilities, broadcast against t; reduced."""
    _float_check("kl_div", x, t)
    return _kl(x, t, reduction, log_target), (x, t)


@_kl_div.defvjp
@partial(kernel, static_argnames=("needs", "reduction", "log_target"))
def _kl_div_vjp(
    res: tuple[jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    reduction: str = "mean",
    log_target: bool = False,
) -> tuple[jax.Array | None, ...]:
    """PyTorch's rules, times the element's cotangent r (g over the count for the means):
    d/dx = -t (-exp(t) for log targets); d/dt = log t + 1 - x, NaN where t = 0 as PyTorch's
    and JAX's xlogy (log targets: exp(t) (t + 1 - x)); each summed to its input's shape."""
    x, t = res
    shape = jnp.broadcast_shapes(x.shape, t.shape)
    rows = (
        g
        if reduction == "none"
        else jnp.broadcast_to(g / _kl_count(x.shape, shape, reduction), shape)
    )
    if log_target:
        et = jnp.exp(t)
        gx = -et * rows if needs[0] else None
        gt = et * (t + 1 - x) * rows if needs[1] else None
    else:
        gx = -t * rows if needs[0] else None
        gt = jnp.where(t > 0, jnp.log(t) + 1 - x, jnp.nan) * rows if needs[1] else None
    return (
        None if gx is None else sum_to(gx, x.shape),
        None if gt is None else sum_to(gt, t.shape),
    )


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def kl_div(input: Any, target: Any, *, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence, PyTorch's ``F.kl_div``: ``input`` holds
    log-probabilities (``tg.log_softmax``), ``target`` probabilities (or log-probabilities
    with ``log_target=True``); per element ``target * (log(target) - input)``, 0 where
    ``target == 0`` (``exp(t) (t - input)`` for log targets); one fused op.

    Args:
        input: log-probabilities, floats.
        target: floats broadcast against ``input`` (NumPy rules; they may require grad).
        reduction: "mean" (over every element, PyTorch's default, which is not the KL of a
            batch), "batchmean" (the sum over the input's first axis's length: the
            mathematical KL per sample), "sum" or "none".
        log_target: ``target`` holds log-probabilities.

    Returns:
        A 0-d tensor, or the broadcast shape with ``reduction="none"``.

    Raises:
        ShapeError: the shapes do not broadcast.
        TypeError: integer or boolean operands.
        ValueError: an unknown reduction.

    The VJP is PyTorch's: ``-target`` for the input; ``log(target) + 1 - input`` for the
    target (NaN where ``target == 0``, as PyTorch's: detach targets, as is usual).
    """
    if reduction not in _KL_REDUCTIONS:
        raise ValueError(
            f"kl_div: reduction={reduction!r}; use 'mean', 'batchmean', 'sum' or 'none'."
        )
    return _kl_div(input, target, reduction=reduction, log_target=bool(log_target))


@partial(kernel, static_argnames=("reduction",))
def _mse(a: jax.Array, b: jax.Array, reduction: Reduction) -> tuple[jax.Array, jax.Array]:
    d = a - b
    return _reduce(d * d, reduction), d


@defop(name="mse_loss", check=broadcast_check)
def _mse_loss(
    a: jax.Array, b: jax.Array, *, reduction: Reduction = "mean"
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """(a - b)**2 over all elements (broadcasting a against b), reduced."""
    y, _ = _mse(a, b, reduction)
    return y, (a, b)  # the inputs: create_graph differentiates through them


@_mse_loss.defvjp
@partial(kernel, static_argnames=("needs", "reduction"))
def _mse_loss_vjp(
    res: tuple[jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    reduction: Reduction = "mean",
) -> tuple[jax.Array | None, ...]:
    """ga = 2 (a - b) g_elem (g_elem = g / N for the mean), gb = -ga."""
    a, b = res
    d = a - b
    ga = d * (2 * _spread(g, d.shape, reduction))
    return (ga if needs[0] else None, -ga if needs[1] else None)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def mse_loss(a: Any, b: Any, *, reduction: Reduction = "mean") -> Tensor:
    """Squared error ``(a - b)**2`` with NumPy broadcasting, reduced: "mean" (over all
    elements of the broadcast shape), "sum" or "none"; one fused op.

    Warns:
        TapegradWarning: (a ``UserWarning``) ``a`` and ``b`` are arrays of different shapes,
            as PyTorch warns: ``(3, 4)`` against ``(3, 1)`` broadcasts to ``(3, 4)`` and
            averages twelve differences, which is rarely what a loss means. Reshape one
            operand (or pass arrays of equal shapes) to silence it.

    Raises:
        ShapeError: the shapes do not broadcast. ValueError: an unknown reduction.
    """
    _check_reduction("mse_loss", reduction)
    warn_broadcast_loss("mse_loss", a, b)
    return _mse_loss(a, b, reduction=reduction)


def warn_broadcast_loss(name: str, a: Any, b: Any) -> None:
    """Warn (``TapegradWarning``, as PyTorch's losses do) when the prediction ``a`` and the
    target ``b`` of an elementwise loss have different shapes that broadcast; shapes that do
    not broadcast are left to the op's ``ShapeError``. The warning names the user's line
    (the first frame outside tapegrad: a loss function's caller, or a loss module's)."""
    sa, sb = getattr(a, "shape", None), getattr(b, "shape", None)
    if sa is None or sb is None or tuple(sa) == tuple(sb):
        return
    try:
        shape = np.broadcast_shapes(tuple(sa), tuple(sb))
    except ValueError:
        return
    warnings.warn(
        f"{name}: prediction shape {tuple(sa)} and target shape {tuple(sb)} differ; they "
        f"broadcast to {shape} (PyTorch warns here too). Reshape one so the shapes match, "
        "e.g. target.reshape(pred.shape).",
        TapegradWarning,
        stacklevel=user_stacklevel(),
    )


@partial(kernel, static_argnames=("num_classes", "dtype"))
def _one_hot(labels: jax.Array, num_classes: int, dtype: Any) -> jax.Array:
    return jax.nn.one_hot(labels, num_classes, dtype=dtype)


def one_hot(labels: Any, num_classes: int, *, dtype: Any = None) -> Tensor:
    """One-hot encoding of integer class labels (a constant: never recorded, never requires
    grad).

    Args:
        labels: integer class indices of any shape (a tensor, array or list).
        num_classes: the number of classes, the length of the new last axis.
        dtype: the result's dtype; float32 by default (JAX's ``jax.nn.one_hot``; PyTorch's
            ``F.one_hot`` gives int64), ready to multiply with float tensors.

    Returns:
        A tensor of shape ``labels.shape + (num_classes,)``.

    Raises:
        TypeError: labels are not integers, or ``num_classes`` is not an integer.
        ValueError: ``num_classes`` is not positive, or host labels (a list or NumPy array)
            are outside ``[0, num_classes)``. Labels already on the device are not read back:
            an out-of-range one gives a row of zeros (JAX's convention).
    """
    from tapegrad._tensor import Tensor, wrap

    classes = integer(num_classes, "one_hot: num_classes")
    if classes <= 0:
        raise ValueError(f"one_hot: num_classes must be positive, got {classes}.")
    if isinstance(labels, Tensor):
        labels = labels.data
    labels = jnp.asarray(_host_labels(labels, classes, "one_hot"))
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(
            f"one_hot: labels must be integer class indices, got dtype {labels.dtype}; cast "
            "with .astype(tg.int32)."
        )
    out_dtype = np.dtype(jnp.float32 if dtype is None else dtype)
    return wrap(_one_hot(labels, classes, out_dtype))
