"""Neural-network composites with fused VJPs (softmax, log_softmax, cross_entropy, mse_loss)
and the label encoding one_hot."""

from __future__ import annotations

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
    from tapegrad.tensor import Tensor

__all__ = ["softmax", "log_softmax", "cross_entropy", "mse_loss", "one_hot"]


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


def _check_labels(logits: jax.Array, labels: jax.Array) -> None:
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(
            f"cross_entropy: labels must be integer class indices, got dtype {labels.dtype}; "
            "pass e.g. tg.tensor([3, 1, 4]) (int32), not one-hot floats."
        )
    if logits.ndim < 1 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ShapeError(
            f"cross_entropy: logits of shape {tuple(logits.shape)} need labels of shape "
            f"{tuple(logits.shape[:-1])} (one class index per row), got {tuple(labels.shape)}."
        )


@jax.jit
def _cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """The loss in one dispatch; a label outside [0, C) picks NaN."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    classes = logits.shape[-1]
    safe = jnp.clip(labels, 0, classes - 1)[..., None]
    picked = jnp.take_along_axis(logp, safe, axis=-1)[..., 0]
    valid = (labels >= 0) & (labels < classes)
    return -jnp.mean(jnp.where(valid, picked, jnp.nan))


@defop(name="cross_entropy")
def _cross_entropy_op(
    logits: jax.Array, labels: jax.Array
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Mean over the batch of -log softmax(logits)[label]; logits (..., C), labels (...) int.

    The residuals are the inputs themselves (no new array is kept), so ``create_graph``
    differentiates the fused VJP through them."""
    _check_labels(logits, labels)
    return _cross_entropy(logits, labels), (logits, labels)


@_cross_entropy_op.defvjp
@partial(jax.jit, static_argnames=("needs",))
def _cross_entropy_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, None]:
    """g_logits = g * (softmax(logits) - onehot(labels)) / N (one fused rule); NaN on the
    rows whose label is out of range, as their loss term."""
    logits, labels = res
    classes = logits.shape[-1]
    onehot = jax.nn.one_hot(labels, classes, dtype=logits.dtype)
    gx = (jax.nn.softmax(logits, axis=-1) - onehot) * (g / labels.size)
    valid = (labels >= 0) & (labels < classes)
    return (jnp.where(valid[..., None], gx, jnp.nan), None)


def cross_entropy(logits: Any, labels: Any) -> Tensor:
    """Mean over the batch of -log softmax(logits)[label] (one fused op and VJP).

    Args:
        logits: a float tensor of shape (..., C).
        labels: integer class indices of shape (...), as a tensor, JAX or NumPy array or list.

    Raises:
        TypeError: labels are not integers.
        ShapeError: labels do not have the shape ``logits.shape[:-1]``.
        ValueError: host labels (a NumPy array or a list) outside ``[0, C)``. Labels already
            on the device are not read back (that would stall JAX's asynchronous dispatch
            every step): an out-of-range one gives a NaN loss and NaN gradients for its row,
            JAX's out-of-bounds convention.
    """
    classes = np.shape(logits)[-1] if np.ndim(logits) else 0
    return _cross_entropy_op(logits, _host_labels(labels, classes, "cross_entropy"))


_mse = jax.jit(lambda a, b: jnp.mean(jnp.square(a - b)))


@defop(name="mse_loss", check=broadcast_check)
def _mse_loss(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Mean of (a - b)**2 over all elements (broadcasting a against b); the residuals are the
    inputs themselves (no new array is kept)."""
    return _mse(a, b), (a, b)


@_mse_loss.defvjp
@partial(jax.jit, static_argnames=("needs",))
def _mse_loss_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, ...]:
    """ga = 2 (a - b) g / N, gb = -ga (N: the elements of the broadcast difference)."""
    a, b = res
    d = a - b
    ga = d * (2 * g / d.size)
    return (ga if needs[0] else None, -ga if needs[1] else None)


def mse_loss(a: Any, b: Any) -> Tensor:
    """Mean of ``(a - b)**2`` over all elements of the broadcast difference.

    Args:
        a: the prediction, a float tensor (or array).
        b: the target; a Python scalar is a constant target.

    Warns:
        TapegradWarning: (a ``UserWarning``) ``a`` and ``b`` are arrays of different shapes,
            as PyTorch warns: ``(3, 4)`` against ``(3, 1)`` broadcasts to ``(3, 4)`` and
            averages twelve differences, which is rarely what a loss means. Reshape one
            operand (or pass arrays of equal shapes) to silence it.

    Raises:
        ShapeError: the shapes do not broadcast.
    """
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
    return _mse_loss(a, b)


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
    from tapegrad.tensor import Tensor

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
    return Tensor._wrap(_one_hot(labels, classes, out_dtype))
