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


def _same_bits(ours: jax.Array, theirs: jax.Array) -> None:
    """Equal shapes, dtypes and bits (NaN-safe, -0.0 apart from 0.0)."""
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8))


_KEYS = {
    "raw": jax.random.PRNGKey(11),
    "raw_high": jax.random.PRNGKey(2**32 - 3),
    "typed": jax.random.key(5),
}

_SHAPES = [
    *((n,) for n in (1, 255, 256, 257, 1023, 1025, 4095, 4096, 4097, 10000, 16384, 16385, 65536)),
    (),
    (3, 70),
    (64, 65),
]
"""Sizes around ``_chunk``'s block (1024) and chunk (16384), the largest drawn in chunks."""


@pytest.mark.parametrize("key_name", list(_KEYS))
def test_small_draws_are_jax_random_bit_for_bit(key_name: str) -> None:
    """A draw of at most 65536 elements is cut from calls of one kernel that draws 16384
    elements from a counter offset (issue 17: each shape was a kernel compile of a first
    run); its numbers are jax.random's for the shape, to the bit (threefry in partitionable
    mode: element i depends on the key and i only), with raw and typed keys."""
    key = _KEYS[key_name]
    f32 = jax.numpy.float32
    for shape in _SHAPES:
        _same_bits(tg.random.normal(key, shape, f32), jax.random.normal(key, shape, f32))
        _same_bits(tg.random.uniform(key, shape, f32), jax.random.uniform(key, shape, f32))
        _same_bits(
            tg.random.uniform(key, shape, f32, -0.5, 2.25),
            jax.random.uniform(key, shape, f32, -0.5, 2.25),
        )


@pytest.mark.parametrize(
    "dtype", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "float64"]
)
def test_small_draws_of_other_float_dtypes_are_jax_random_bit_for_bit(dtype: str) -> None:
    """8- and 16-bit floats take 8 or 16 random bits, float64 64 (with x64 on): each width
    converts as jax.random does."""
    with jax.enable_x64(dtype == "float64"):
        dt = jax.numpy.dtype(dtype)
        for key in (_KEYS["raw"], _KEYS["typed"]):
            for shape in [(), (257,), (3, 70), (16385,)]:
                _same_bits(tg.random.normal(key, shape, dt), jax.random.normal(key, shape, dt))
                _same_bits(
                    tg.random.uniform(key, shape, dt, -2.0, 3.0),
                    jax.random.uniform(key, shape, dt, -2.0, 3.0),
                )


def test_draws_of_any_small_size_share_one_program_per_kind() -> None:
    """One compiled program per kind (uniform, normal) and dtype serves every size up to
    65536: a model's parameters of five sizes compiled five (0.45 s of nanoGPT's first-ever
    run). Counted as entries of the kernel's cache (a program JAX's persistent cache or the
    kernel store serves is no backend compile, but is an entry), and as compiles."""
    key = jax.random.PRNGKey(3)
    f16 = jax.numpy.float16  # a dtype few other tests draw in
    programs = tg.random._chunk._cache_size
    for draw in (tg.random.uniform, tg.random.normal):
        before = programs()
        draw(key, (3,), f16)
        assert programs() - before <= 1  # 0: an earlier test of this process made it
    before = programs()
    with compiles() as seen:
        for shape in [(1,), (255,), (300,), (4097,), (17, 19), (16385,), (200, 300), ()]:
            tg.random.uniform(key, shape, f16, -1.0, 1.0)
            tg.random.normal(key, shape, f16)
    assert seen == [] and programs() == before


def test_draws_outside_the_chunked_path_are_jax_random() -> None:
    """Above 65536 elements, complex normals, and in JAX's non-partitionable threefry mode
    (where element i also depends on the shape), jax.random runs as it is; several keys
    get its error."""
    key = jax.random.PRNGKey(7)
    for keys in (jax.random.split(key, 3), jax.random.split(jax.random.key(7), 3)):
        with pytest.raises(ValueError, match="accepts a single key"):
            tg.random.normal(keys, (4,), jax.numpy.float32)
    big = (300, 300)
    _same_bits(tg.random.normal(key, big, jax.numpy.float32), jax.random.normal(key, big))
    c64 = jax.numpy.complex64
    _same_bits(tg.random.normal(key, (5,), c64), jax.random.normal(key, (5,), c64))
    before = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", False)
    try:
        for shape in [(5,), (2, 3)]:
            _same_bits(
                tg.random.uniform(key, shape, jax.numpy.float32, 1.0, 2.0),
                jax.random.uniform(key, shape, jax.numpy.float32, 1.0, 2.0),
            )
    finally:
        jax.config.update("jax_threefry_partitionable", before)


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


@pytest.mark.parametrize("x64", [False, True], ids=["x64 off", "x64 on"])
def test_a_seed_below_2_32_makes_jaxs_key_without_compiling(x64: bool) -> None:
    """``seed_key`` (``manual_seed``, ``key=`` an int) makes ``jax.random.PRNGKey(seed)``'s
    key, ``[0, seed]`` under threefry, on the host: the same words, dtype and placement, and
    no compile (JAX's ``_threefry_seed`` compiled one in a first run)."""
    from tapegrad.random import seed_key

    seeds = [0, 1, 12345, 2**31 - 1, 2**31, 2**32 - 1]
    with jax.enable_x64(x64):
        want = [jax.random.PRNGKey(s) for s in seeds]
        with compiles() as seen:
            got = [seed_key(s) for s in seeds]
    assert seen == []
    for g, w in zip(got, want, strict=True):
        assert g.tolist() == w.tolist() and g.dtype == w.dtype
        assert (g.weak_type, g.committed, g.sharding) == (w.weak_type, w.committed, w.sharding)
    with pytest.raises(TypeError):  # as jax.random.PRNGKey(3.7): not a seed
        seed_key(3.7)  # type: ignore[arg-type]
