"""Neural-network composites with fused VJPs: softmax, log_softmax, cross_entropy, mse_loss."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad.errors import ShapeError
from tapegrad.op import broadcast_check, defop

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["softmax", "log_softmax", "cross_entropy", "mse_loss"]


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
    if isinstance(labels, (list, tuple, np.ndarray)):
        labels = np.asarray(labels)
        classes = np.shape(logits)[-1] if np.ndim(logits) else 0
        if np.issubdtype(labels.dtype, np.integer) and labels.size:
            bad = int(np.count_nonzero((labels < 0) | (labels >= classes)))
            if bad:
                raise ValueError(
                    f"cross_entropy: {bad} labels are outside [0, {classes}); labels index "
                    f"the last axis of logits (shape {tuple(np.shape(logits))})."
                )
    return _cross_entropy_op(logits, labels)


_mse = jax.jit(lambda a, b: jnp.mean(jnp.square(a - b)))


@defop(check=broadcast_check)
def mse_loss(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Mean of (a - b)**2 over all elements (broadcasting a against b); the residuals are the
    inputs themselves (no new array is kept)."""
    return _mse(a, b), (a, b)


@mse_loss.defvjp
@partial(jax.jit, static_argnames=("needs",))
def _mse_loss_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, ...]:
    """ga = 2 (a - b) g / N, gb = -ga (N: the elements of the broadcast difference)."""
    a, b = res
    d = a - b
    ga = d * (2 * g / d.size)
    return (ga if needs[0] else None, -ga if needs[1] else None)
