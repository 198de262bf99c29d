"""``tapegrad.kernels.kernel``: ``jax.jit`` in every respect a caller sees (the store's
cross-process behaviour is tested in ``test_compilation_cache.py``, in fresh processes)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tapegrad.kernels import kernel


@partial(kernel, static_argnames=("axis", "keepdims"))
def _sum_scaled(x: jax.Array, scale: jax.Array, *, axis: int, keepdims: bool) -> jax.Array:
    return jnp.sum(x * scale, axis=axis, keepdims=keepdims)


@partial(kernel, static_argnums=1)
def _power(x: jax.Array, n: int) -> jax.Array:
    return x**n


def test_a_kernel_is_a_jit_function() -> None:
    """The same C++ dispatch object as ``jax.jit``'s (so the same cost per call), with
    ``lower`` and ``eval_shape``."""
    add = kernel(jnp.add)
    assert type(add) is type(jax.jit(jnp.add))
    x = jnp.arange(3.0)
    assert add.lower(x, x).as_text()
    assert add.eval_shape(x, x).shape == (3,)
    np.testing.assert_array_equal(add(x, x), 2 * np.arange(3.0))


@pytest.mark.parametrize("keepdims", [False, True])
def test_static_arguments_dtypes_and_weak_types_get_their_own_programs(keepdims: bool) -> None:
    x = jnp.arange(6.0).reshape(2, 3)
    for axis in (0, 1):
        want = np.sum(np.arange(6.0).reshape(2, 3) * 2.0, axis=axis, keepdims=keepdims)
        got = _sum_scaled(x, jnp.float32(2.0), axis=axis, keepdims=keepdims)
        np.testing.assert_allclose(got, want)
    weak = _sum_scaled(x.astype(jnp.bfloat16), jax.device_put(2.0), axis=0, keepdims=keepdims)
    assert weak.dtype == jnp.bfloat16  # a weakly typed scale keeps bfloat16
    strong = _sum_scaled(x.astype(jnp.bfloat16), jnp.float32(2.0), axis=0, keepdims=keepdims)
    assert strong.dtype == jnp.float32
    assert _power(jnp.arange(3), 3).tolist() == [0, 1, 8]
    assert _power(jnp.arange(3.0), 2).tolist() == [0.0, 1.0, 4.0]


def test_a_kernel_nests_in_transformations() -> None:
    """Inside ``jax.jit``, ``grad`` and ``vmap`` a kernel is traced as ``jax.jit`` is."""
    f = jax.jit(jax.grad(lambda x: _sum_scaled(x, x, axis=0, keepdims=False).sum()))
    np.testing.assert_allclose(f(jnp.arange(3.0)), 2 * np.arange(3.0))
    rows = jax.vmap(lambda r: _power(r, 2))(jnp.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(rows, np.arange(6.0).reshape(2, 3) ** 2)


def test_a_lambda_or_closure_gets_plain_jit() -> None:
    """No stable name, no store: the store could not tell two such functions apart."""
    from tapegrad.kernels import _stable_name

    assert _stable_name(lambda x: x) is None
    assert _stable_name(_power.__wrapped__) == f"{__name__}._power"
    assert _stable_name(jnp.add) == "jax.numpy.add"
    np.testing.assert_allclose(kernel(lambda x: x + 1)(jnp.zeros(2)), [1.0, 1.0])


def test_errors_are_jaxs() -> None:
    """A call JAX refuses raises what ``jax.jit`` raises (shapes that do not broadcast)."""
    with pytest.raises(TypeError) as mine:
        kernel(jnp.add)(jnp.zeros(2), jnp.zeros(3))
    with pytest.raises(TypeError) as plain:
        jax.jit(jnp.add)(jnp.zeros(2), jnp.zeros(3))
    assert str(mine.value) == str(plain.value)


def test_small_kernels_take_the_classic_emitters_with_the_same_values() -> None:
    """Kernels whose arrays all have at most ``SMALL`` elements compile with XLA's classic CPU
    emitters (faster to compile); their values equal plain ``jax.jit``'s bit for bit."""
    from tapegrad.kernels import SMALL, _small

    side = int(np.sqrt(SMALL))
    assert _small(jax.jit(jnp.tanh).trace(jnp.ones((side, SMALL // side))).lower())
    assert not _small(jax.jit(jnp.tanh).trace(jnp.ones((side, SMALL // side + 1))).lower())
    outer = jax.jit(jnp.multiply).trace(jnp.ones((SMALL, 1)), jnp.ones((1, 2))).lower()
    assert not _small(outer)  # the output counts too
    x = jnp.asarray(np.random.default_rng(0).standard_normal((40, 50)).astype(np.float32) * 4)
    for fn in (jnp.exp, jnp.tanh, jnp.sin, jax.nn.gelu):
        np.testing.assert_array_equal(kernel(fn)(x), jax.jit(fn)(x))
