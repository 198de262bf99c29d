"""Composite programs checked end to end with check_program against jnp twins."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

import tapegrad as tg
from tapegrad.testing import check_program

RNG = np.random.default_rng(42)


def _rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


X = _rand(4, 3)
LABELS = np.array([0, 1, 1, 0], np.int32)
W1, B1 = _rand(3, 5, scale=0.5), _rand(5, scale=0.1)
W2, B2 = _rand(5, 2, scale=0.5), _rand(2, scale=0.1)


def test_mlp_with_cross_entropy() -> None:
    def tg_mlp(
        x: tg.Tensor, labels: tg.Tensor, w1: tg.Tensor, b1: tg.Tensor, w2: tg.Tensor, b2: tg.Tensor
    ) -> tg.Tensor:
        h = (x @ w1 + b1).relu()
        return tg.cross_entropy(h @ w2 + b2, labels)

    def jnp_mlp(
        x: jax.Array, labels: jax.Array, w1: jax.Array, b1: jax.Array, w2: jax.Array, b2: jax.Array
    ) -> jax.Array:
        h = jax.nn.relu(x @ w1 + b1)
        return optax.softmax_cross_entropy_with_integer_labels(h @ w2 + b2, labels).mean()

    check_program(tg_mlp, jnp_mlp, X, LABELS, W1, B1, W2, B2)
    check_program(tg_mlp, jnp_mlp, X, LABELS, W1, B1, W2, B2, wrt=[2, 4])  # parameters only


def test_tanh_mlp_with_mse_loss_and_weight_decay() -> None:
    target = _rand(4, 2)

    def tg_fn(x: tg.Tensor, w1: tg.Tensor, w2: tg.Tensor) -> tg.Tensor:
        pred = (x @ w1).tanh() @ w2
        return tg.mse_loss(pred, target) + 1e-2 * ((w1 * w1).sum() + (w2 * w2).sum())

    def jnp_fn(x: jax.Array, w1: jax.Array, w2: jax.Array) -> jax.Array:
        pred = jnp.tanh(x @ w1) @ w2
        return jnp.mean((pred - target) ** 2) + 1e-2 * ((w1 * w1).sum() + (w2 * w2).sum())

    check_program(tg_fn, jnp_fn, X, W1, W2)


def test_softmax_and_log_softmax_chains() -> None:
    def tg_fn(x: tg.Tensor) -> tg.Tensor:
        p = tg.softmax(x, axis=-1)
        lp = tg.log_softmax(x * 2.0, axis=0)
        return (p * lp).sum(axis=1) + p.log().mean(axis=-1)

    def jnp_fn(x: jax.Array) -> jax.Array:
        p = jax.nn.softmax(x, axis=-1)
        lp = jax.nn.log_softmax(x * 2.0, axis=0)
        return (p * lp).sum(axis=1) + jnp.log(p).mean(axis=-1)

    check_program(tg_fn, jnp_fn, X)


def test_hand_written_logsumexp_and_stable_softmax() -> None:
    def tg_fn(x: tg.Tensor) -> tg.Tensor:
        m = x.max(axis=-1, keepdims=True)
        lse = ((x - m).exp().sum(axis=-1, keepdims=True)).log() + m
        return (x - lse).exp() / (x - lse).exp().sum(axis=-1, keepdims=True)

    def jnp_fn(x: jax.Array) -> jax.Array:
        m = x.max(axis=-1, keepdims=True)
        lse = jnp.log(jnp.exp(x - m).sum(axis=-1, keepdims=True)) + m
        return jnp.exp(x - lse) / jnp.exp(x - lse).sum(axis=-1, keepdims=True)

    check_program(tg_fn, jnp_fn, X)


def test_indexing_reductions_and_fan_out() -> None:
    def tg_fn(x: tg.Tensor, w: tg.Tensor) -> tg.Tensor:
        y = x @ w  # (4, 5), used three times below
        picked = y[[0, 2, 2], 1:4]
        rows = y[1:]
        return picked.max(axis=0) + rows.min(axis=0)[:3] * y.mean() - y[-1, ::2].sum()

    def jnp_fn(x: jax.Array, w: jax.Array) -> jax.Array:
        y = x @ w
        picked = y[jnp.array([0, 2, 2]), 1:4]
        rows = y[1:]
        return picked.max(axis=0) + rows.min(axis=0)[:3] * y.mean() - y[-1, ::2].sum()

    check_program(tg_fn, jnp_fn, X, W1)


def test_shape_ops_in_a_program() -> None:
    def tg_fn(x: tg.Tensor) -> tg.Tensor:
        y = tg.stack([x, x.clip(-0.5, 0.5)], axis=0).transpose(1, 0, 2)  # (4, 2, 3)
        z = tg.concatenate([y.reshape(4, 6), tg.expand_dims(x.sum(axis=1), 1)], axis=1)
        return tg.maximum(z, 0.1 * z).squeeze() ** 2

    def jnp_fn(x: jax.Array) -> jax.Array:
        y = jnp.stack([x, jnp.clip(x, -0.5, 0.5)], axis=0).transpose(1, 0, 2)
        z = jnp.concatenate([y.reshape(4, 6), jnp.expand_dims(x.sum(axis=1), 1)], axis=1)
        return jnp.maximum(z, 0.1 * z).squeeze() ** 2

    check_program(tg_fn, jnp_fn, X)


def test_elementwise_zoo() -> None:
    def tg_fn(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        s = (x * x + 1.0).sqrt()
        return (s.log() * x.sin() + y.cos() / s - x.sigmoid() * y.abs()) ** 2 - tg.minimum(x, y)

    def jnp_fn(x: jax.Array, y: jax.Array) -> jax.Array:
        s = jnp.sqrt(x * x + 1.0)
        return (
            jnp.log(s) * jnp.sin(x) + jnp.cos(y) / s - jax.nn.sigmoid(x) * jnp.abs(y)
        ) ** 2 - jnp.minimum(x, y)

    check_program(tg_fn, jnp_fn, X, X[::-1] + 0.25)


def test_gradient_flows_through_a_leaf_used_in_many_places() -> None:
    def tg_fn(w: tg.Tensor) -> tg.Tensor:
        total = w
        for _ in range(5):
            total = total * w + w.tanh()
        return total.sum()

    def jnp_fn(w: jax.Array) -> jax.Array:
        total = w
        for _ in range(5):
            total = total * w + jnp.tanh(w)
        return total.sum()

    check_program(tg_fn, jnp_fn, _rand(3, scale=0.5), rtol=1e-4, atol=1e-5)
