"""Neural-network composites with fused VJPs (softmax, log_softmax, the losses) and the label
encoding one_hot."""

from __future__ import annotations

import math
import warnings
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import integer, torch_keywords
from tapegrad.errors import ShapeError, TapegradWarning
from tapegrad.op import broadcast_check, defop

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = [
    "softmax",
    "log_softmax",
    "cross_entropy",
    "nll_loss",
    "binary_cross_entropy_with_logits",
    "mse_loss",
    "one_hot",
]


_softmax = partial(jax.jit, static_argnames=("axis",))(jax.nn.softmax)
_log_softmax = partial(jax.jit, static_argnames=("axis",))(jax.nn.log_softmax)


@defop
def softmax(x: jax.Array, *, axis: int = -1) -> tuple[jax.Array, tuple[jax.Array]]:
    """exp(x) / sum(exp(x)) along ``axis``, computed stably."""
    y = _softmax(x, axis=axis)
    return y, (y,)


@softmax.defvjp
@partial(jax.jit, static_argnames=("axis",))
def _softmax_vjp(res: tuple[jax.Array], g: jax.Array, *, axis: int = -1) -> tuple[jax.Array]:
    """gx = y * (g - sum(g * y, axis)) (the softmax Jacobian y_i (delta_ij - y_j))."""
    (y,) = res
    return (y * (g - jnp.sum(g * y, axis=axis, keepdims=True)),)


@defop
def log_softmax(x: jax.Array, *, axis: int = -1) -> tuple[jax.Array, tuple[jax.Array]]:
    """x - logsumexp(x) along ``axis``."""
    y = _log_softmax(x, axis=axis)
    return y, (y,)


@log_softmax.defvjp
@partial(jax.jit, static_argnames=("axis",))
def _log_softmax_vjp(res: tuple[jax.Array], g: jax.Array, *, axis: int = -1) -> tuple[jax.Array]:
    """gx = g - exp(y) * sum(g, axis) (d log_softmax_i / dx_j = delta_ij - softmax_j)."""
    (y,) = res
    return (g - jnp.exp(y) * jnp.sum(g, axis=axis, keepdims=True),)


Reduction = str
_REDUCTIONS = ("mean", "sum", "none")


def _reduce(per: jax.Array, reduction: Reduction, keep: jax.Array | None = None) -> jax.Array:
    """Reduce per-element losses: "mean" (over all elements, or over the ``keep`` ones: the
    labels not ignored), "sum", or "none" (unchanged)."""
    if reduction == "mean":
        return jnp.mean(per) if keep is None else jnp.sum(per) / jnp.sum(keep)
    return jnp.sum(per) if reduction == "sum" else per


def _spread(
    g: jax.Array, like: tuple[int, ...], reduction: Reduction, keep: jax.Array | None = None
) -> jax.Array:
    """The cotangent of each per-element loss, given the reduced loss's cotangent ``g``; 0 where
    ``keep`` is False (an ignored label), also when every label is ignored (PyTorch's)."""
    if reduction == "mean":
        count = max(math.prod(like), 1) if keep is None else jnp.sum(keep)
        rows = jnp.broadcast_to(g / count, like)
    else:
        rows = jnp.broadcast_to(g, like) if reduction == "sum" else g
    return rows if keep is None else jnp.where(keep, rows, 0)


def _check_reduction(name: str, reduction: Any) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction={reduction!r}; use 'mean', 'sum' or 'none'.")


def _check_labels(name: str, logits: jax.Array, labels: jax.Array, axis: int) -> None:
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


def _picked(logp: jax.Array, labels: jax.Array) -> jax.Array:
    """logp (classes last) at each label; NaN where the label is outside [0, C)."""
    classes = logp.shape[-1]
    safe = jnp.clip(labels, 0, classes - 1)[..., None]
    valid = (labels >= 0) & (labels < classes)
    return jnp.where(valid, jnp.take_along_axis(logp, safe, axis=-1)[..., 0], jnp.nan)


def _label_losses(
    logp: jax.Array, labels: jax.Array, smoothing: float, ignore_index: int
) -> tuple[jax.Array, jax.Array]:
    """Per label: -logp[label] (smoothed: ``(1 - s)`` of it plus ``s`` times minus the mean of
    logp), 0 where the label equals ``ignore_index``, NaN where it is otherwise outside [0, C);
    and the mask of the labels kept (not ignored). ``logp`` has its classes last."""
    per = -_picked(logp, labels)
    if smoothing:
        per = (1 - smoothing) * per - smoothing * jnp.mean(logp, axis=-1)
    keep = labels != ignore_index
    return jnp.where(keep, per, 0), keep


def _label_grad(
    probs: jax.Array | float,
    labels: jax.Array,
    g: jax.Array,
    classes: int,
    smoothing: float,
    reduction: Reduction,
    ignore_index: int,
    axis: int,
) -> jax.Array:
    """(probs - q) times each label's cotangent, q = (1 - s) onehot(label) + s / C the smoothed
    target, the classes moved back to ``axis``: 0 on ignored rows, NaN on rows whose label is
    out of range. ``probs`` (classes last) is softmax(logits) for cross_entropy, 0 for
    nll_loss."""
    target = jax.nn.one_hot(labels, classes, dtype=g.dtype)
    if smoothing:
        target = (1 - smoothing) * target + smoothing / classes
    keep = labels != ignore_index
    rows = _spread(g, labels.shape, reduction, keep)[..., None]
    gx = (probs - target) * rows
    valid = (labels >= 0) & (labels < classes)
    return jnp.moveaxis(jnp.where((valid | ~keep)[..., None], gx, jnp.nan), -1, axis)


_LOSS_STATIC = ("reduction", "ignore_index", "axis")


@partial(jax.jit, static_argnames=("smoothing", *_LOSS_STATIC))
def _cross_entropy(
    logits: jax.Array,
    labels: jax.Array,
    smoothing: float,
    reduction: Reduction,
    ignore_index: int,
    axis: int,
) -> jax.Array:
    """The loss in one dispatch; a label outside [0, C) (not ignored) gives NaN."""
    logp = jax.nn.log_softmax(jnp.moveaxis(logits, axis, -1), axis=-1)
    per, keep = _label_losses(logp, labels, smoothing, ignore_index)
    return _reduce(per, reduction, keep)


@defop(name="cross_entropy")
def _cross_entropy_op(
    logits: jax.Array,
    labels: jax.Array,
    *,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """-log softmax(logits)[label] (smoothed), reduced over the labels not equal to
    ``ignore_index``; logits (..., C) (classes on ``axis``), labels (...) int."""
    _check_labels("cross_entropy", logits, labels, axis)
    loss = _cross_entropy(logits, labels, label_smoothing, reduction, ignore_index, axis)
    return loss, (logits, labels)  # the inputs: create_graph differentiates through them


@_cross_entropy_op.defvjp
@partial(jax.jit, static_argnames=("needs", "label_smoothing", *_LOSS_STATIC))
def _cross_entropy_vjp(
    res: tuple[jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array | None, None]:
    """g_logits = g_row * (softmax(logits) - q), q = (1 - s) onehot(label) + s / C the smoothed
    target (one fused rule); 0 on ignored rows; NaN on rows whose label is out of range, as
    their loss."""
    logits, labels = res
    probs = jax.nn.softmax(jnp.moveaxis(logits, axis, -1), axis=-1)
    gx = _label_grad(
        probs, labels, g, probs.shape[-1], label_smoothing, reduction, ignore_index, axis
    )
    return (gx, None)


LOSS_ADVICE = {  # PyTorch loss keywords tapegrad does not take -> what to do
    "weight": "per-class weights are not supported; weight each label's loss yourself: "
    "(tg.cross_entropy(x, y, reduction='none') * w[y]).sum() / w[y].sum() (PyTorch's "
    "weighted mean; give ignored labels w 0).",
}


@torch_keywords(LOSS_ADVICE)
def cross_entropy(
    logits: Any,
    labels: Any,
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
            tensor, JAX or NumPy array or list.
        label_smoothing: in [0, 1]; the target becomes ``(1 - s) onehot + s / C`` (PyTorch's).
        reduction: "mean" (over the labels not ignored), "sum", or "none" (one loss per label,
            0 for an ignored one).
        ignore_index: labels equal to it contribute no loss and no gradient (PyTorch's default
            -100, the usual padding label); the mean is over the others (NaN when every label
            is ignored, and zero gradients, as PyTorch).
        axis: the class axis of ``logits`` (default -1, the last; 1 for PyTorch's layout).

    Raises:
        TypeError: labels are not integers; ``weight=`` (not supported: the message shows
            the weighted mean to write).
        ShapeError: labels do not have the logits' shape without the class axis, or ``axis``
            is out of range.
        ValueError: host labels (a NumPy array or a list) outside ``[0, C)`` other than
            ``ignore_index``, a smoothing outside [0, 1] or an unknown reduction. Labels already
            on the device are not read back (that would stall JAX's asynchronous dispatch every
            step): an out-of-range one (other than ``ignore_index``) gives a NaN loss and NaN
            gradients for its row, JAX's out-of-bounds convention.
    """
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing={label_smoothing} must be in [0, 1].")
    ignore = integer(ignore_index, "cross_entropy: ignore_index")
    labels = _host_labels(labels, _classes(logits, axis), "cross_entropy", ignore)
    return _cross_entropy_op(
        logits,
        labels,
        label_smoothing=float(label_smoothing),
        reduction=reduction,
        ignore_index=ignore,
        axis=axis,
    )


@partial(jax.jit, static_argnames=_LOSS_STATIC)
def _nll(
    logp: jax.Array, labels: jax.Array, reduction: Reduction, ignore_index: int, axis: int
) -> jax.Array:
    per, keep = _label_losses(jnp.moveaxis(logp, axis, -1), labels, 0.0, ignore_index)
    return _reduce(per, reduction, keep)


@defop(name="nll_loss")
def _nll_loss(
    logp: jax.Array,
    labels: jax.Array,
    *,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array, tuple[jax.Array, int, Any]]:
    """-logp[label], reduced over the labels not equal to ``ignore_index``; logp (..., C)
    log-probabilities (classes on ``axis``), labels (...) int."""
    _check_labels("nll_loss", logp, labels, axis)
    loss = _nll(logp, labels, reduction, ignore_index, axis)
    return loss, (labels, logp.shape[axis], logp.dtype)


@partial(jax.jit, static_argnames=("classes", "dtype", *_LOSS_STATIC))
def _nll_grad(
    labels: jax.Array,
    g: jax.Array,
    classes: int,
    dtype: Any,
    reduction: Reduction,
    ignore_index: int,
    axis: int,
) -> jax.Array:
    return _label_grad(0.0, labels, g.astype(dtype), classes, 0.0, reduction, ignore_index, axis)


@_nll_loss.defvjp
def _nll_loss_vjp(
    res: tuple[jax.Array, int, Any],
    g: jax.Array,
    *,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> tuple[jax.Array, None]:
    """g_logp = -g_row * onehot(label); 0 on ignored rows, NaN rows for out-of-range labels."""
    labels, classes, dtype = res
    return (_nll_grad(labels, g, classes, dtype, reduction, ignore_index, axis), None)


@torch_keywords(LOSS_ADVICE)
def nll_loss(
    logp: Any,
    labels: Any,
    *,
    reduction: Reduction = "mean",
    ignore_index: int = -100,
    axis: int = -1,
) -> Tensor:
    """Negative log-likelihood of integer labels, PyTorch's ``F.nll_loss`` with the class axis
    last by default: ``-logp[..., label]``; pair it with ``log_softmax`` (together:
    ``cross_entropy``). PyTorch's (N, C, d1, ...) layout needs ``axis=1``.

    Args:
        logp: log-probabilities (..., C), the classes on ``axis``.
        labels: integer class indices, of the shape of ``logp`` without the class axis.
        reduction: "mean" (over the labels not ignored), "sum" or "none".
        ignore_index: labels equal to it contribute no loss and no gradient (PyTorch's -100).
        axis: the class axis of ``logp`` (default -1; 1 for PyTorch's layout).

    Raises:
        as ``cross_entropy`` (labels' dtype, shape, host range; the axis; the reduction;
        ``weight=``).
    """
    _check_reduction("nll_loss", reduction)
    ignore = integer(ignore_index, "nll_loss: ignore_index")
    labels = _host_labels(labels, _classes(logp, axis), "nll_loss", ignore)
    return _nll_loss(logp, labels, reduction=reduction, ignore_index=ignore, axis=axis)


@partial(jax.jit, static_argnames=("reduction",))
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
@partial(jax.jit, static_argnames=("needs", "reduction"))
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


def binary_cross_entropy_with_logits(
    logits: Any, targets: Any, *, reduction: Reduction = "mean"
) -> Tensor:
    """Binary cross entropy on logits, PyTorch's ``F.binary_cross_entropy_with_logits``:
    ``max(x, 0) - x t + log(1 + exp(-|x|))`` per element (stable for large |x|).

    Args:
        logits: float scores of any shape.
        targets: probabilities in [0, 1] of the same shape (floats; they may require grad).
        reduction: "mean", "sum" or "none".

    Raises:
        ShapeError: the shapes differ. ValueError: an unknown reduction.
    """
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    return _bce_with_logits(logits, targets, reduction=reduction)


@partial(jax.jit, static_argnames=("reduction",))
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
@partial(jax.jit, static_argnames=("needs", "reduction"))
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
    sa, sb = getattr(a, "shape", None), getattr(b, "shape", None)
    if sa is not None and sb is not None and tuple(sa) != tuple(sb):
        try:
            shape = np.broadcast_shapes(tuple(sa), tuple(sb))
        except ValueError:
            shape = None  # the op raises its ShapeError
        if shape is not None:
            warnings.warn(
                f"mse_loss: prediction shape {tuple(sa)} and target shape {tuple(sb)} differ; "
                f"they broadcast to {shape} (PyTorch warns here too). Reshape one so the "
                "shapes match, e.g. target.reshape(pred.shape).",
                TapegradWarning,
                stacklevel=2,
            )
    return _mse_loss(a, b, reduction=reduction)


@partial(jax.jit, static_argnames=("num_classes", "dtype"))
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
