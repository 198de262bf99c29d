"""The process random state (tapegrad/random.py): seeding, key=, get/set_state, traces."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _support import compiles

import tapegrad as tg
from tapegrad.errors import TracerError
from tapegrad.nn import _init


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


@pytest.mark.parametrize("dtype", [jax.numpy.float32, jax.numpy.bfloat16])
def test_small_draws_equal_jax_random_and_share_a_kernel_per_size_bucket(dtype: object) -> None:
    """Parameters come in many shapes and each shape was a kernel compile of a cold start
    (issue 17): a small draw is cut from a flat draw of a power-of-two size, and its numbers
    are jax.random's for the shape (threefry in partitionable mode: element i depends on the
    key and i only). A shape never met still compiles nothing once its bucket has compiled."""
    key = jax.random.PRNGKey(11)
    shapes = [(3, 5), (16,), (2, 3, 4), (1,), (300,), (17, 19)]
    for shape in shapes:
        for ours, theirs in [
            (
                tg.random.uniform(key, shape, dtype, -0.5, 0.25),
                jax.random.uniform(key, shape, dtype, -0.5, 0.25),
            ),
            (tg.random.normal(key, shape, dtype), jax.random.normal(key, shape, dtype)),
        ]:
            assert ours.shape == shape and ours.dtype == theirs.dtype
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    with compiles() as seen:
        tg.random.uniform(key, (7, 9), dtype)  # 63 elements: the 256 bucket, compiled above
        tg.random.normal(key, (4, 2, 25), dtype)  # 200 elements: the same bucket
    assert seen == []
    big = (300, 300)  # above the bucketed sizes: jax.random as it is
    np.testing.assert_array_equal(
        np.asarray(tg.random.normal(key, big, dtype)),
        np.asarray(jax.random.normal(key, big, dtype)),
    )


def test_draws_with_a_concrete_key_inside_a_trace_are_traced_draws() -> None:
    # under jax.jit, tg.jit or lax.cond a draw is traced even when its key is concrete:
    # nothing to cut on the host, so jax.random draws the shape itself
    key = jax.random.PRNGKey(1)
    want = np.asarray(jax.random.normal(key, (3,)))
    got = jax.jit(lambda: tg.randn(3, key=key).data)()
    np.testing.assert_array_equal(np.asarray(got), want)
    picked = jax.lax.cond(True, lambda: tg.rand(2, key=key).data, lambda: jax.numpy.zeros(2))
    np.testing.assert_array_equal(np.asarray(picked), np.asarray(jax.random.uniform(key, (2,))))


@pytest.mark.parametrize("partitionable", [True, False])
def test_layer_keys_are_jax_random_splits(partitionable: bool) -> None:
    """In both of JAX's threefry modes (one key is the first of two only in the
    partitionable one, JAX's default), with raw and typed keys."""
    before = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", partitionable)
    try:
        for key in (jax.random.PRNGKey(9), jax.random.key(9)):
            for n in (1, 2, 3):
                got = _init.keys(key, n)
                want = list(jax.random.split(key, n))
                assert len(got) == n
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_array_equal(
                        np.asarray(jax.random.key_data(g)), np.asarray(jax.random.key_data(w))
                    )
    finally:
        jax.config.update("jax_threefry_partitionable", before)


def test_seeds_keep_all_64_bits_as_jax_does_with_x64() -> None:
    """With x64 off JAX keeps a seed's low 32 bits: ``manual_seed(2**32)`` and ``key=2**40``
    drew seed 0's numbers, ``-1`` other numbers than with x64 on, and a seed of 2**63 or more
    (PyTorch takes up to 2**64 - 1) was "Python int too large to convert to C long"."""
    tg.manual_seed(0)
    zero = tg.rand(3).tolist()
    tg.manual_seed(2**32)
    assert tg.rand(3).tolist() != zero
    assert tg.randn(2, key=2**40).tolist() != tg.randn(2, key=0).tolist()
    for seed, data in [(2**40 + 5, [256, 5]), (-1, [2**32 - 1] * 2), (2**64 - 1, [2**32 - 1] * 2)]:
        tg.manual_seed(seed)
        assert np.asarray(tg.random.get_state()).tolist() == data
        assert tg.random.seed_key(seed).dtype == np.uint32
    tg.manual_seed(2**63)
    assert np.asarray(tg.random.get_state()).tolist() == [2**31, 0]
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(ValueError, match=r"outside \[-2\*\*63, 2\*\*64\)"):
            tg.manual_seed(bad)
        with pytest.raises(ValueError, match="seed % 2"):
            tg.rand(2, key=bad)


def test_an_int_key_argument_of_a_jit_step_is_a_seed() -> None:
    # tg.jit traces an int argument as a 0-d int32 array, which JAX refused as a key
    # ("invalid PRNG key data: expected key_data.ndim >= 1")
    @tg.jit
    def draw(x: tg.Tensor, seed: int) -> tg.Tensor:
        return x + tg.rand(x.shape, key=seed)

    x = tg.zeros(4)
    for seed in (1, 2):
        assert draw(x, seed).tolist() == tg.rand(4, key=seed).tolist()
    assert draw.trace_count == 1
    assert tg.rand(2, key=jax.numpy.int32(5)).tolist() == tg.rand(2, key=5).tolist()


def test_seeding_inside_a_jit_step_draws_as_eagerly() -> None:
    # a concrete key set inside the step (set_state, or manual_seed of a seed beyond 32 bits)
    # raised TracerError "compile the step with tg.jit" from inside tg.jit
    saved = jax.random.PRNGKey(42)

    @tg.jit
    def replay(x: tg.Tensor) -> tg.Tensor:
        tg.random.set_state(saved)
        return x + tg.rand(x.shape)

    @tg.jit
    def seeded(x: tg.Tensor) -> tg.Tensor:
        tg.manual_seed(2**40)
        return x + tg.randn(x.shape)

    x = tg.zeros(3)
    got = [replay(x).tolist(), seeded(x).tolist()]
    tg.random.set_state(saved)
    first = tg.rand(3).tolist()
    tg.manual_seed(2**40)
    assert got == [first, tg.randn(3).tolist()]
    assert replay(x).tolist() == first  # the same key every call: the step sets it
