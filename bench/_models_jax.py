"""Hand-written JAX twins of ``bench.models``' steps: the same convnet, transformer block and
LSTM (its recurrence a ``jax.lax.scan``) as pure functions of a parameter dict (PyTorch's
state-dict names), trained by one ``jax.jit(value_and_grad)`` + ``optax.adam`` step with the
parameters, the optimizer state and the running statistics donated. The floor ``tg.jit`` is
measured against (issue 13 item 6).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = ["convnet_step", "block_step", "lstm_step"]

Params = dict[str, jax.Array]
_EPS = 1e-5


def _conv(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    """3x3 convolution, padding 1, NCHW / OIHW, plus the bias per channel."""
    dn = ("NCHW", "OIHW", "NCHW")
    y = jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=dn)
    return y + b[None, :, None, None]


def _max_pool2(x: jax.Array) -> jax.Array:
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def _batch_norm(
    x: jax.Array, p: Params, stats: Params, momentum: float = 0.1
) -> tuple[jax.Array, Params]:
    """Training-mode batch norm over (N, H, W); running statistics updated as PyTorch does
    (unbiased variance)."""
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    n = x.size // x.shape[1]
    y = (x - mean[None, :, None, None]) * jax.lax.rsqrt(var + _EPS)[None, :, None, None]
    y = y * p["features.1.weight"][None, :, None, None] + p["features.1.bias"][None, :, None, None]
    new = {
        "mean": (1 - momentum) * stats["mean"] + momentum * mean,
        "var": (1 - momentum) * stats["var"] + momentum * var * (n / (n - 1)),
    }
    return y, new


def _convnet_loss(p: Params, stats: Params, x: jax.Array, y: jax.Array) -> tuple[jax.Array, Params]:
    h = _conv(x, p["features.0.weight"], p["features.0.bias"])
    h, stats = _batch_norm(h, p, stats)
    h = _max_pool2(jax.nn.relu(h))
    h = _max_pool2(jax.nn.relu(_conv(h, p["features.4.weight"], p["features.4.bias"])))
    logits = h.reshape(h.shape[0], -1) @ p["head.2.weight"].T + p["head.2.bias"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), stats


def _layer_norm(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + _EPS) * w + b


def _block(p: Params, x: jax.Array, heads: int) -> jax.Array:
    """PyTorch's ``TransformerEncoderLayer`` (post-norm, ReLU, no dropout, batch first)."""
    b, length, d = x.shape
    qkv = x @ p["self_attn.in_proj_weight"].T + p["self_attn.in_proj_bias"]
    q, k, v = (
        t.reshape(b, length, heads, d // heads).transpose(0, 2, 1, 3)
        for t in jnp.split(qkv, 3, axis=-1)
    )
    weights = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(d // heads), axis=-1)
    attended = (weights @ v).transpose(0, 2, 1, 3).reshape(b, length, d)
    sa = attended @ p["self_attn.out_proj.weight"].T + p["self_attn.out_proj.bias"]
    x = _layer_norm(x + sa, p["norm1.weight"], p["norm1.bias"])
    ff = jax.nn.relu(x @ p["linear1.weight"].T + p["linear1.bias"])
    ff = ff @ p["linear2.weight"].T + p["linear2.bias"]
    return _layer_norm(x + ff, p["norm2.weight"], p["norm2.bias"])


def _arrays(state: Mapping[str, Any]) -> Params:
    return {k: jnp.asarray(np.asarray(v)) for k, v in state.items()}


def convnet_step(
    state: Mapping[str, Any], x: np.ndarray, y: np.ndarray, lr: float
) -> Callable[[], jax.Array]:
    """The convnet's Adam step on ``(x, y)`` from the weights ``state`` (a PyTorch state dict
    as NumPy arrays); each call trains one step and returns the loss."""
    params = _arrays({k: v for k, v in state.items() if "running" not in k and "num_" not in k})
    stats = _arrays(
        {"mean": state["features.1.running_mean"], "var": state["features.1.running_var"]}
    )
    tx = optax.adam(lr)
    carry = [params, tx.init(params), stats]
    xs, ys = jnp.asarray(x), jnp.asarray(y)

    def step(p: Params, opt_state: Any, s: Params, x: jax.Array, y: jax.Array) -> Any:
        (loss, s), grads = jax.value_and_grad(_convnet_loss, has_aux=True)(p, s, x, y)
        updates, opt_state = tx.update(grads, opt_state, p)
        return loss, optax.apply_updates(p, updates), opt_state, s

    jitted = jax.jit(step, donate_argnums=(0, 1, 2))

    def run() -> jax.Array:
        loss, *carry[:] = jitted(*carry, xs, ys)
        return loss

    return run


def block_step(
    state: Mapping[str, Any], h: np.ndarray, heads: int, lr: float
) -> Callable[[], jax.Array]:
    """The transformer block's Adam step on ``h`` (loss: mean square of the output)."""
    params = _arrays(state)
    tx = optax.adam(lr)
    carry = [params, tx.init(params)]
    hs = jnp.asarray(h)

    def loss_fn(p: Params, x: jax.Array) -> jax.Array:
        return (_block(p, x, heads) ** 2).mean()

    def step(p: Params, opt_state: Any, x: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(p, x)
        updates, opt_state = tx.update(grads, opt_state, p)
        return loss, optax.apply_updates(p, updates), opt_state

    jitted = jax.jit(step, donate_argnums=(0, 1))

    def run() -> jax.Array:
        loss, *carry[:] = jitted(*carry, hs)
        return loss

    return run


def _lstm_loss(p: Params, x: jax.Array, y: jax.Array) -> jax.Array:
    """PyTorch's one-layer ``LSTM`` (batch first, gates ``i, f, g, o``) over ``x`` ``(N, L, in)``
    as a ``lax.scan`` over time, a linear head on the last step, cross entropy."""
    w_hh = p["rnn.weight_hh_l0"].T
    hidden = w_hh.shape[0]
    xw = x.transpose(1, 0, 2) @ p["rnn.weight_ih_l0"].T + p["rnn.bias_ih_l0"] + p["rnn.bias_hh_l0"]

    def cell(carry: tuple[jax.Array, jax.Array], xw_t: jax.Array) -> Any:
        h, c = carry
        i, f, g, o = jnp.split(xw_t + h @ w_hh, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return (jax.nn.sigmoid(o) * jnp.tanh(c), c), None

    zeros = jnp.zeros((x.shape[0], hidden), x.dtype)
    (h, _), _ = jax.lax.scan(cell, (zeros, zeros), xw)
    logits = h @ p["head.weight"].T + p["head.bias"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


def lstm_step(
    state: Mapping[str, Any], x: np.ndarray, y: np.ndarray, lr: float
) -> Callable[[], jax.Array]:
    """The LSTM classifier's Adam step on ``(x, y)`` (``rnn.*``: PyTorch's ``LSTM`` names,
    ``head.*``: the linear head)."""
    params = _arrays(state)
    tx = optax.adam(lr)
    carry = [params, tx.init(params)]
    xs, ys = jnp.asarray(x), jnp.asarray(y)

    def step(p: Params, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        loss, grads = jax.value_and_grad(_lstm_loss)(p, x, y)
        updates, opt_state = tx.update(grads, opt_state, p)
        return loss, optax.apply_updates(p, updates), opt_state

    jitted = jax.jit(step, donate_argnums=(0, 1))

    def run() -> jax.Array:
        loss, *carry[:] = jitted(*carry, xs, ys)
        return loss

    return run
