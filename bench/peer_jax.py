"""JAX's own transformations as a peer: ``jax.value_and_grad`` eagerly and under ``jax.jit``.

The same math as every system; JAX has no tape, so the seed loop and graph memory do not apply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bench import _data
from bench._peer import Case, curve, first_call, mlp_case

__all__ = ["SYSTEM", "VARIANTS", "version", "case", "probe"]

SYSTEM = "jax"
EAGER = "jax.value_and_grad, no jit"
JIT = "jax.jit(value_and_grad)"
OPTAX = "jax.jit(value_and_grad) + optax, donated"
OPTAX_GRADS = f"{OPTAX}, returning the gradients"

VARIANTS: dict[str, tuple[str, ...]] = {
    "perop": (EAGER, JIT),
    "mlp": (EAGER, JIT),
    "chain": (EAGER, JIT),
    "curve": (EAGER, JIT),
    "jit": (OPTAX, OPTAX_GRADS),
    "jit_first": (OPTAX,),
}


def version() -> str:
    """JAX's version."""
    return f"jax {jax.__version__}"


def _loss(params: list[jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    w1, b1, w2, b2, w3, b3 = params
    h = jax.nn.relu(x @ w1 + b1)
    h = jax.nn.relu(h @ w2 + b2)
    logits = h @ w3 + b3
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def _sgd_step(
    params: list[jax.Array], x: jax.Array, y: jax.Array
) -> tuple[jax.Array, list[jax.Array]]:
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    return loss, [p - _data.LR * g for p, g in zip(params, grads, strict=True)]


class _Trainer:
    """The MLP with ``jax.value_and_grad`` (eager) or the whole step under ``jax.jit``."""

    def __init__(self, jit: bool) -> None:
        self.params = [jnp.asarray(p) for p in _data.mlp_init()]
        self.fn: Callable[..., Any] = jax.jit(_sgd_step) if jit else _sgd_step

    def convert(self, x: np.ndarray, y: np.ndarray) -> tuple[jax.Array, jax.Array]:
        return jnp.asarray(x), jnp.asarray(y, jnp.int32)

    def step(self, batch: tuple[jax.Array, jax.Array]) -> Any:
        loss, self.params = self.fn(self.params, *batch)
        return loss, self.params

    def loss(self, out: Any) -> float:
        return float(out[0])

    def evaluate(self, batch: tuple[jax.Array, jax.Array]) -> tuple[float, float]:
        x, y = batch
        w1, b1, w2, b2, w3, b3 = self.params
        logits = jax.nn.relu(jax.nn.relu(x @ w1 + b1) @ w2 + b2) @ w3 + b3
        acc = float(jnp.mean(jnp.argmax(logits, axis=1) == y))
        return float(_loss(self.params, x, y)), acc


class _OptaxTrainer(_Trainer):
    """The hand-written compiled step issue 12 compares ``tg.jit`` with: value_and_grad, an
    ``optax.sgd`` update and ``optax.apply_updates`` under one ``jax.jit``, the parameters
    and the optimizer state donated. With ``grads`` it also returns the gradients (kept, as
    ``tg.jit`` keeps them in ``.grad``): the same outputs as tg.jit's step."""

    def __init__(self, grads: bool = False) -> None:
        super().__init__(jit=False)
        tx = optax.sgd(_data.LR)
        self.state = tx.init(self.params)
        self.grads: Any = None

        def step(params: Any, state: Any, x: jax.Array, y: jax.Array) -> Any:
            loss, g = jax.value_and_grad(_loss)(params, x, y)
            updates, state = tx.update(g, state, params)
            return loss, optax.apply_updates(params, updates), state, (g if grads else None)

        self.optax_step = jax.jit(step, donate_argnums=(0, 1))

    def step(self, batch: tuple[jax.Array, jax.Array]) -> Any:
        loss, self.params, self.state, self.grads = self.optax_step(self.params, self.state, *batch)
        return loss, self.params


def _perop(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a * b + a)


def _chain(a: jax.Array, n: int) -> jax.Array:
    y = a
    for _ in range(n):
        y = y * _data.FACTOR
    return jnp.sum(y)


def case(workload: str, variant: str, **kw: Any) -> Case:
    """The timed ``workload`` (see ``bench.peers``) for ``variant``."""
    jit = variant == JIT
    if workload == "perop":
        a0, b0 = _data.operands(tuple(kw["shape"]))
        a, b = jnp.asarray(a0), jnp.asarray(b0)
        f = jax.value_and_grad(_perop, argnums=(0, 1))
        g = jax.jit(f) if jit else f
        return Case(lambda: g(a, b))
    if workload == "mlp":
        return mlp_case(_Trainer(jit), kw["batch"])
    if workload == "jit":
        return mlp_case(_OptaxTrainer(grads=variant == OPTAX_GRADS), kw["batch"])
    if workload == "chain":
        a = jnp.asarray(_data.operands((2, 2))[0])
        n = kw["n"]
        h = jax.value_and_grad(lambda x: _chain(x, n))
        k = jax.jit(h) if jit else h
        return Case(lambda: k(a))
    raise ValueError(f"jax has no case {workload!r} / {variant!r}")


def probe(workload: str, variant: str, **kw: Any) -> dict[str, Any]:
    """The one-shot measurement ``workload`` for ``variant``."""
    if workload == "curve":
        trainer = _Trainer(variant == JIT)
        return curve(trainer, kw.get("steps", _data.CURVE_STEPS), kw.get("rows", 0))
    if workload == "jit_first":
        return first_call(_OptaxTrainer, kw["batch"])
    raise ValueError(f"jax has no probe {workload!r} / {variant!r}")
