"""Neural-network composites with fused VJPs: softmax, log_softmax, cross_entropy, mse_loss."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad.errors import ShapeError
from tapegrad.op import broadcast_check, defop

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
def _cross_entropy(logits: jax.Array, labels: jax.Array) -> tuple[jax.Array, ...]:
    """Loss, log-probabilities and the count of out-of-range labels, in one dispatch."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, labels[..., None], axis=-1, mode="clip")
    bad = jnp.sum((labels < 0) | (labels >= logits.shape[-1]))
    return -jnp.mean(picked), logp, bad


@defop
def cross_entropy(logits: jax.Array, labels: jax.Array) -> tuple[jax.Array, tuple[Any, ...]]:
    """Mean over the batch of -log softmax(logits)[label]; logits (..., C), labels (...) int.

    Raises:
        TypeError: labels are not integers.
        ShapeError: labels do not have the shape ``logits.shape[:-1]``.
        ValueError: a label is outside ``[0, C)`` (checked on concrete arrays).
    """
    _check_labels(logits, labels)
    loss, logp, bad = _cross_entropy(logits, labels)
    if not isinstance(bad, jax.core.Tracer) and int(bad):
        raise ValueError(
            f"cross_entropy: {int(bad)} labels are outside [0, {logits.shape[-1]}); labels "
            f"index the last axis of logits (shape {tuple(logits.shape)})."
        )
    return loss, (logp, labels)


@cross_entropy.defvjp
@partial(jax.jit, static_argnames=("needs",))
def _cross_entropy_vjp(
    res: tuple[Any, ...], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, None]:
    """g_logits = g * (softmax(logits) - onehot(labels)) / N (one fused rule)."""
    logp, labels = res
    n = labels.size
    onehot = jax.nn.one_hot(labels, logp.shape[-1], dtype=logp.dtype)
    return ((jnp.exp(logp) - onehot) * (g / n), None)


@defop(check=broadcast_check)
def mse_loss(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, int]]:
    """Mean of (a - b)**2 over all elements (broadcasting a against b)."""
    d = a - b
    return jnp.mean(d * d), (d, d.size)


@mse_loss.defvjp
def _mse_loss_vjp(
    res: tuple[jax.Array, int], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, ...]:
    """ga = 2 (a - b) g / N, gb = -ga."""
    d, n = res
    ga = d * (2 * g / n)
    return (ga if needs[0] else None, -ga if needs[1] else None)
