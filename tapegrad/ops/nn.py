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

from tapegrad._args import integer
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


def _reduce(per: jax.Array, reduction: Reduction) -> jax.Array:
    """Reduce per-element losses: "mean" (over all elements), "sum", or "none" (unchanged)."""
    if reduction == "mean":
        return jnp.mean(per)
    return jnp.sum(per) if reduction == "sum" else per


def _spread(g: jax.Array, like: tuple[int, ...], reduction: Reduction) -> jax.Array:
    """The cotangent of each per-element loss, given the reduced loss's cotangent ``g``."""
    if reduction == "mean":
        return jnp.broadcast_to(g / max(math.prod(like), 1), like)
    return jnp.broadcast_to(g, like) if reduction == "sum" else g


def _check_reduction(name: str, reduction: Any) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction={reduction!r}; use 'mean', 'sum' or 'none'.")


def _check_labels(name: str, logits: jax.Array, labels: jax.Array) -> None:
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(
            f"{name}: labels must be integer class indices, got dtype {labels.dtype}; "
            "pass e.g. tg.tensor([3, 1, 4]) (int32), not one-hot floats."
        )
    if logits.ndim < 1 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ShapeError(
            f"{name}: scores of shape {tuple(logits.shape)} need labels of shape "
            f"{tuple(logits.shape[:-1])} (one class index per row), got {tuple(labels.shape)}."
        )


def _host_labels(labels: Any, classes: int, name: str) -> Any:
    """Host labels (a list or NumPy array) outside ``[0, classes)`` raise ``ValueError``;
    labels already on the device are not read back (that would stall JAX's dispatch)."""
    if isinstance(labels, (list, tuple, np.ndarray)):
        labels = np.asarray(labels)
        if np.issubdtype(labels.dtype, np.integer) and labels.size:
            bad = int(np.count_nonzero((labels < 0) | (labels >= classes)))
            if bad:
                raise ValueError(
                    f"{name}: {bad} labels are outside [0, {classes}); each label is a class "
                    f"index below {classes}."
                )
    return labels


def _picked(logp: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """logp at each label (NaN where the label is outside [0, C)), and the validity mask."""
    classes = logp.shape[-1]
    safe = jnp.clip(labels, 0, classes - 1)[..., None]
    valid = (labels >= 0) & (labels < classes)
    return jnp.where(valid, jnp.take_along_axis(logp, safe, axis=-1)[..., 0], jnp.nan), valid


@partial(jax.jit, static_argnames=("smoothing", "reduction"))
def _cross_entropy(
    logits: jax.Array, labels: jax.Array, smoothing: float, reduction: Reduction
) -> tuple[jax.Array, jax.Array]:
    """The loss and the log-probabilities, in one dispatch; a label outside [0, C) gives NaN."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked, _ = _picked(logp, labels)
    per = -picked
    if smoothing:
        per = (1 - smoothing) * per - smoothing * jnp.mean(logp, axis=-1)
    return _reduce(per, reduction), logp


@defop(name="cross_entropy")
def _cross_entropy_op(
    logits: jax.Array,
    labels: jax.Array,
    *,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """-log softmax(logits)[label] (smoothed), reduced; logits (..., C), labels (...) int."""
    _check_labels("cross_entropy", logits, labels)
    loss, _ = _cross_entropy(logits, labels, label_smoothing, reduction)
    return loss, (logits, labels)  # the inputs: create_graph differentiates through them


@_cross_entropy_op.defvjp
@partial(jax.jit, static_argnames=("needs", "label_smoothing", "reduction"))
def _cross_entropy_vjp(
    res: tuple[jax.Array, jax.Array],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
) -> tuple[jax.Array | None, None]:
    """g_logits = g_row * (softmax(logits) - q), q = (1 - s) onehot(label) + s / C the smoothed
    target (one fused rule); NaN on the rows whose label is out of range, as their loss."""
    logits, labels = res
    logp = jax.nn.log_softmax(logits, axis=-1)
    classes = logp.shape[-1]
    target = jax.nn.one_hot(labels, classes, dtype=logp.dtype)
    if label_smoothing:
        target = (1 - label_smoothing) * target + label_smoothing / classes
    rows = _spread(g, labels.shape, reduction)[..., None]
    gx = (jnp.exp(logp) - target) * rows
    valid = (labels >= 0) & (labels < classes)
    return (jnp.where(valid[..., None], gx, jnp.nan), None)


def cross_entropy(
    logits: Any, labels: Any, *, label_smoothing: float = 0.0, reduction: Reduction = "mean"
) -> Tensor:
    """-log softmax(logits)[label], one fused op and VJP (PyTorch's ``F.cross_entropy`` with
    the class axis last, as ``optax``: logits (..., C) against labels (...)).

    Args:
        logits: a float tensor of shape (..., C).
        labels: integer class indices of shape (...), as a tensor, JAX or NumPy array or list.
        label_smoothing: in [0, 1]; the target becomes ``(1 - s) onehot + s / C`` (PyTorch's).
        reduction: "mean" (over the labels), "sum", or "none" (one loss per label).

    Raises:
        TypeError: labels are not integers.
        ShapeError: labels do not have the shape ``logits.shape[:-1]``.
        ValueError: host labels (a NumPy array or a list) outside ``[0, C)``, a smoothing
            outside [0, 1] or an unknown reduction. Labels already on the device are not read
            back (that would stall JAX's asynchronous dispatch every step): an out-of-range one
            gives a NaN loss and NaN gradients for its row, JAX's out-of-bounds convention.
    """
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing={label_smoothing} must be in [0, 1].")
    labels = _host_labels(labels, np.shape(logits)[-1] if np.ndim(logits) else 0, "cross_entropy")
    return _cross_entropy_op(
        logits, labels, label_smoothing=float(label_smoothing), reduction=reduction
    )


@partial(jax.jit, static_argnames=("reduction",))
def _nll(logp: jax.Array, labels: jax.Array, reduction: Reduction) -> jax.Array:
    return _reduce(-_picked(logp, labels)[0], reduction)


@defop(name="nll_loss")
def _nll_loss(
    logp: jax.Array, labels: jax.Array, *, reduction: Reduction = "mean"
) -> tuple[jax.Array, tuple[jax.Array, tuple[int, ...], Any]]:
    """-logp[label], reduced; logp (..., C) log-probabilities, labels (...) int."""
    _check_labels("nll_loss", logp, labels)
    return _nll(logp, labels, reduction), (labels, logp.shape, logp.dtype)


@partial(jax.jit, static_argnames=("shape", "dtype", "reduction"))
def _nll_grad(
    labels: jax.Array, g: jax.Array, shape: tuple[int, ...], dtype: Any, reduction: Reduction
) -> jax.Array:
    classes = shape[-1]
    rows = _spread(g, labels.shape, reduction)[..., None]
    gx = -jax.nn.one_hot(labels, classes, dtype=dtype) * rows
    valid = (labels >= 0) & (labels < classes)
    return jnp.where(valid[..., None], gx, jnp.nan)


@_nll_loss.defvjp
def _nll_loss_vjp(
    res: tuple[jax.Array, tuple[int, ...], Any], g: jax.Array, *, reduction: Reduction = "mean"
) -> tuple[jax.Array, None]:
    """g_logp = -g_row * onehot(label); NaN rows for out-of-range labels."""
    labels, shape, dtype = res
    return (_nll_grad(labels, g, shape, dtype, reduction), None)


def nll_loss(logp: Any, labels: Any, *, reduction: Reduction = "mean") -> Tensor:
    """Negative log-likelihood of integer labels, PyTorch's ``F.nll_loss`` with the class axis
    last: ``-logp[..., label]``; pair it with ``log_softmax`` (together: ``cross_entropy``).

    Args:
        logp: log-probabilities (..., C).
        labels: integer class indices (...).
        reduction: "mean", "sum" or "none".

    Raises:
        as ``cross_entropy`` (labels' dtype, shape, host range; the reduction).
    """
    _check_reduction("nll_loss", reduction)
    labels = _host_labels(labels, np.shape(logp)[-1] if np.ndim(logp) else 0, "nll_loss")
    return _nll_loss(logp, labels, reduction=reduction)


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
