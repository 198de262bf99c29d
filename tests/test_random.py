"""The process random state (tapegrad/random.py): seeding, key=, get/set_state, traces."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.errors import TracerError


@pytest.fixture(autouse=True)
def restore_state() -> object:
    """Each test leaves the process random state as it found it."""
    saved = tg.random.get_state()
    yield
    tg.random.set_state(saved)


def test_manual_seed_makes_draws_reproducible() -> None:
    tg.manual_seed(7)
    a = [tg.randn((3,)).tolist(), tg.rand((2,)).tolist(), tg.randn_like(tg.ones(4)).tolist()]
    tg.manual_seed(7)
    b = [tg.randn((3,)).tolist(), tg.rand((2,)).tolist(), tg.randn_like(tg.ones(4)).tolist()]
    assert a == b
    assert a[0] != tg.randn((3,)).tolist()  # the state advanced


def test_key_overrides_the_state_and_does_not_advance_it() -> None:
    tg.manual_seed(3)
    first = tg.randn((2,)).tolist()
    tg.manual_seed(3)
    assert tg.randn((2,), key=0).tolist() == tg.randn((2,), key=jax.random.PRNGKey(0)).tolist()
    assert tg.randn((2,)).tolist() == first


def test_get_state_and_set_state_replay_draws() -> None:
    tg.manual_seed(0)
    tg.randn((2,))
    saved = tg.random.get_state()
    a = tg.rand((3,)).tolist()
    tg.random.set_state(saved)
    assert tg.rand((3,)).tolist() == a
    assert tg.random.STATE.key is not None


def test_like_constructors_keep_shape_and_dtype() -> None:
    t = tg.zeros((2, 3), dtype=tg.float16)
    for out in (tg.randn_like(t, key=1), tg.rand_like(t, key=1)):
        assert out.shape == (2, 3) and out.dtype == np.float16


@pytest.mark.parametrize("bad", [1.5, "0", None])
def test_manual_seed_rejects_non_ints(bad: object) -> None:
    with pytest.raises(TypeError, match="int seed"):
        tg.manual_seed(bad)  # type: ignore[arg-type]


def test_bad_key_and_bad_state() -> None:
    with pytest.raises(TypeError, match="key must be"):
        tg.randn((2,), key=1.5)
    with pytest.raises(TypeError, match="jax.random key"):
        tg.random.set_state(3)  # type: ignore[arg-type]


def test_drawing_from_the_state_inside_jax_jit_raises() -> None:
    saved = tg.random.get_state()

    @jax.jit
    def f(x: jax.Array) -> jax.Array:
        return x + tg.randn((2,)).data

    with pytest.raises(TracerError, match="key="):
        f(np.zeros(2, np.float32))
    assert tg.random.get_state() is saved  # the state did not take a tracer

    @jax.jit
    def g(x: jax.Array) -> jax.Array:
        return x + tg.randn((2,), key=0).data

    np.testing.assert_allclose(g(np.zeros(2, np.float32)), tg.randn((2,), key=0).numpy())


def test_a_lifted_traced_state_advances_inside_the_trace() -> None:
    """What tg.jit does: set a traced key, draw, read the advanced key back."""

    @jax.jit
    def step(key: jax.Array) -> tuple[jax.Array, jax.Array]:
        tg.random.set_state(key)
        x = tg.randn((2,)).data
        return x, tg.random.get_state()

    saved = tg.random.get_state()
    x, new = step(saved)
    tg.random.set_state(saved)
    np.testing.assert_allclose(x, tg.randn((2,)).numpy())
    np.testing.assert_array_equal(new, tg.random.get_state())
