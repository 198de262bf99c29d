"""Gradients in float64, in a subprocess with ``jax_enable_x64`` (x64 is process-wide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax.numpy as jnp

SCRIPT = textwrap.dedent(
    """
    import jax
    jax.config.update("jax_enable_x64", True)

    import jax.numpy as jnp
    import numpy as np

    import tapegrad as tg
    from tapegrad.testing import check_program, check_vjp

    R = tg.registry()
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, (2, 3))
    y = rng.uniform(-1.0, 1.0, (3,))
    tight = dict(rtol=1e-10, atol=1e-12)

    assert tg.tensor([1.0]).dtype == jnp.float64
    for name in ("log", "tanh", "sigmoid"):
        check_vjp(R[name], x, **tight)
    for name in ("divide", "power"):
        check_vjp(R[name], x, y, **tight)
    check_vjp(R["matmul"], x, x.T, **tight)
    check_vjp(R["max"], np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.5]]), axis=1, **tight)
    check_vjp(R["sum"], x, axis=(0, -1), keepdims=True, **tight)
    check_vjp(R["log_softmax"], x, axis=-1, **tight)
    check_vjp(R["cross_entropy"], x, np.array([2, 0]), np.array([0.5, 2.0, 1.0]), **tight)
    check_vjp(R["getitem"], x, index=tg.ops.normalize_index(np.array([1, 1, 0])), **tight)
    check_program(
        lambda a, b: tg.mse_loss((a @ b).tanh(), 0.5),
        lambda a, b: jnp.mean((jnp.tanh(a @ b) - 0.5) ** 2),
        x, x.T, **tight,
    )
    t = tg.tensor(x, requires_grad=True)
    (g,) = tg.grad((t * t).sum(), t)
    assert g.dtype == jnp.float64
    # optimizers update float64 parameters with float64 hyperparameters (0.1 is not rounded
    # to float32's 0.100000001490116)
    w = tg.tensor([1.0, -2.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=0.1)
    w.grad = tg.tensor([1.0, 1.0])
    opt.step()
    assert np.asarray(w).tolist() == [1.0 - 0.1, -2.0 - 0.1]
    w = tg.tensor([1.0, -2.0], requires_grad=True)
    opt = tg.optim.Adam([w], lr=0.1)
    grad = np.array([0.3, -0.7])
    w.grad = tg.tensor(grad)
    opt.step()
    m, v = (1 - 0.9) * grad / (1 - 0.9), (1 - 0.999) * grad**2 / (1 - 0.999)
    np.testing.assert_allclose(np.asarray(w), [1.0, -2.0] - 0.1 * m / (np.sqrt(v) + 1e-8), **tight)
    print("x64 ok")
    """
)


def _python(script: str, **env: str) -> str:
    """Run ``script`` in a fresh Python (x64 is process-wide) from the repository root, with
    ``env`` added to the environment; it must exit 0. Returns its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_float64_gradients_match_jax_tightly() -> None:
    assert _python(SCRIPT).strip().endswith("x64 ok")


def test_this_process_stays_in_float32() -> None:
    assert jnp.zeros(1).dtype == jnp.float32


DRAWS = textwrap.dedent(
    """
    import json
    import jax
    import tapegrad as tg

    out = {"x64": jax.config.jax_enable_x64}
    for seed in (0, -1, 2**32, 2**40 + 5, 2**64 - 1):
        tg.manual_seed(seed)
        out[f"seed {seed}"] = [tg.rand(3).tolist(), tg.randn(2).tolist()]
        out[f"key {seed}"] = tg.rand(2, key=seed).tolist()
    x = tg.ones(32)
    out["dropout key"] = tg.dropout(x, 0.3, key=0).tolist()
    tg.manual_seed(5)
    out["dropout state"] = tg.dropout(x, 0.5).tolist()
    print(json.dumps(out))
    """
)


def test_one_seed_draws_the_same_numbers_with_x64_on_and_off() -> None:
    # with x64 on, dropout drew its mask in float64 (another mask for one key) and seeds
    # beyond 32 bits or negative gave other keys than with x64 off (where 2**32 was seed 0)
    off, on = (
        json.loads(_python(DRAWS, JAX_ENABLE_X64=flag).strip().splitlines()[-1])
        for flag in ("0", "1")
    )
    assert (off.pop("x64"), on.pop("x64")) == (False, True)
    assert off == on
    assert off["seed 0"] != off[f"seed {2**32}"] and off["key 0"] != off[f"key {2**32}"]
