"""The PyTorch creation functions a port reaches for: ``tg.linspace``, ``eye``, ``full_like``,
``empty``/``empty_like``, ``randint``, ``randperm``, ``multinomial``, and ``tg.load``'s
``map_location=``/``weights_only=``; values against NumPy and PyTorch (CPU), draws for their
ranges, shapes, reproducibility and (multinomial) distribution, and the messages of bad
calls."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from _support import error_of

import tapegrad as tg

ROOT = Path(__file__).resolve().parents[1]
ACCELERATOR = any(d.platform != "cpu" for d in jax.devices())


@pytest.fixture(autouse=True)
def keep_random_state() -> Iterator[None]:
    """Tests that seed or draw from the process state leave it as they found it."""
    saved = tg.random.get_state()
    yield
    tg.random.set_state(saved)


def _np(t: tg.Tensor) -> np.ndarray:
    return np.asarray(t.data)


# ---------------------------------------------------------------- linspace


@pytest.mark.parametrize(
    ("start", "stop", "num", "endpoint"),
    [
        (0, 1, 5, True),
        (0.0, 1.0, 7, True),
        (-3.3, 7.1, 13, True),
        (1e-3, 1e3, 50, True),
        (2, -5.5, 33, True),
        (0, 1, 4, False),
        (5, 5, 3, True),
        (0, 1, 1, True),
        (0, 1, 0, True),
    ],
)
def test_linspace_is_numpys_in_float32(start: float, stop: float, num: int, endpoint: bool) -> None:
    got = tg.linspace(start, stop, num, endpoint=endpoint)
    want = np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == (num,)
    np.testing.assert_array_equal(_np(got), want)  # exact: bit for bit
    if endpoint:  # torch computes in float32 itself: within a rounding of these
        theirs = torch.linspace(start, stop, num).numpy()
        scale = max(abs(start), abs(stop))
        np.testing.assert_allclose(_np(got), theirs, rtol=0, atol=4e-7 * scale)


@pytest.mark.parametrize(("start", "stop", "num"), [(0, 10, 11), (-2, 2, 9), (2, -5.5, 33)])
def test_linspace_on_a_grid_is_torchs_exactly(start: float, stop: float, num: int) -> None:
    np.testing.assert_array_equal(
        _np(tg.linspace(start, stop, num)), torch.linspace(start, stop, num).numpy()
    )


def test_linspace_num_steps_and_default() -> None:
    np.testing.assert_array_equal(_np(tg.linspace(0, 1, steps=3)), [0.0, 0.5, 1.0])
    assert tg.linspace(0, 1).shape == (50,)  # NumPy's default
    np.testing.assert_array_equal(_np(tg.linspace(0, 1)), np.linspace(0, 1, dtype=np.float32))
    err = error_of(TypeError, lambda: tg.linspace(0, 1, 5, steps=5))
    assert "steps is PyTorch's name of num" in str(err)
    assert "num must be >= 0" in str(error_of(ValueError, lambda: tg.linspace(0, 1, -1)))
    assert "must be an integer" in str(error_of(TypeError, lambda: tg.linspace(0, 1, 2.5)))  # type: ignore[arg-type]


def test_linspace_dtypes() -> None:
    ints = tg.linspace(-10, 0, 4, dtype=tg.int32)
    assert ints.dtype == np.int32
    np.testing.assert_array_equal(_np(ints), np.linspace(-10, 0, 4, dtype=np.int32))  # floors
    np.testing.assert_array_equal(_np(ints), np.asarray(jnp.linspace(-10, 0, 4, dtype=jnp.int32)))
    bf = tg.linspace(0, 1, 4, dtype=tg.bfloat16)
    assert bf.dtype == jnp.bfloat16
    np.testing.assert_array_equal(_np(bf), np.linspace(0, 1, 4).astype(jnp.bfloat16))
    c = tg.linspace(0, 1j, 3)
    assert c.dtype == np.complex64
    np.testing.assert_array_equal(_np(c), np.linspace(0, 1j, 3).astype(np.complex64))
    assert tg.linspace(0, 1, 3, requires_grad=True).requires_grad
    err = error_of(ValueError, lambda: tg.linspace(0, 1000, 3, dtype=tg.int8))
    assert "outside the range of int8" in str(err)


def test_linspace_takes_tensor_bounds_without_a_gradient() -> None:
    np.testing.assert_array_equal(
        _np(tg.linspace(tg.tensor(0.0), tg.tensor(2.0), 3)), [0.0, 1.0, 2.0]
    )
    err = error_of(TypeError, lambda: tg.linspace(tg.tensor(0.0).require_grad(), 1.0, 3))
    assert "start requires grad" in str(err) and "tg.linspace(0.0, 1.0, num)" in str(err)


def test_linspace_under_jax_jit_with_traced_bounds() -> None:
    f = jax.jit(lambda a, b: tg.linspace(a, b, 5).data)
    np.testing.assert_allclose(np.asarray(f(0.0, 1.0)), np.linspace(0, 1, 5), rtol=1e-6)


# ---------------------------------------------------------------- eye, full_like, empty


@pytest.mark.parametrize(("n", "m"), [(3, None), (2, 4), (4, 2), (0, None), (1, 1)])
def test_eye_is_torchs_and_numpys(n: int, m: int | None) -> None:
    got = tg.eye(n, m)
    assert got.dtype == np.float32
    want = torch.eye(n, n if m is None else m).numpy()
    np.testing.assert_array_equal(_np(got), want)
    np.testing.assert_array_equal(_np(got), np.eye(n, m, dtype=np.float32))


def test_eye_diagonal_dtype_and_large() -> None:
    np.testing.assert_array_equal(_np(tg.eye(3, 4, k=1)), np.eye(3, 4, 1, dtype=np.float32))
    np.testing.assert_array_equal(_np(tg.eye(3, k=-2)), np.eye(3, k=-2, dtype=np.float32))
    ints = tg.eye(2, dtype=tg.int32)
    assert ints.dtype == np.int32
    np.testing.assert_array_equal(_np(ints), np.eye(2, dtype=np.int32))
    big = tg.eye(600)  # past the host size: made by jnp.eye, the same values
    np.testing.assert_array_equal(_np(big), np.eye(600, dtype=np.float32))
    assert tg.eye(2, requires_grad=True).requires_grad
    assert "negative dimension" in str(error_of(ValueError, lambda: tg.eye(-1)))
    assert "tg.eye: n must be an integer" in str(error_of(TypeError, lambda: tg.eye(2.0)))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tdtype", "value"),
    [(torch.float32, 3.5), (torch.int32, 2.7), (torch.int32, -2.7), (torch.float32, -1)],
)
def test_full_like_is_torchs(tdtype: torch.dtype, value: float) -> None:
    theirs = torch.full_like(torch.ones((2, 3), dtype=tdtype), value)
    ours = tg.full_like(tg.tensor(torch.ones((2, 3), dtype=tdtype)), value)
    assert ours.shape == (2, 3) and str(ours.dtype) == str(tdtype).removeprefix("torch.")
    np.testing.assert_array_equal(_np(ours), theirs.numpy())


def test_full_like_dtype_and_arrays() -> None:
    t = tg.full_like(tg.ones(3, dtype=tg.int32), 1.5, dtype=tg.float32)
    assert t.dtype == np.float32
    np.testing.assert_array_equal(_np(t), np.full(3, 1.5, np.float32))
    np.testing.assert_array_equal(_np(tg.full_like(np.zeros((2,), np.float32), 4.0)), [4.0, 4.0])  # type: ignore[arg-type]
    assert tg.full_like(tg.ones(2), 1.0, requires_grad=True).requires_grad


def test_empty_is_zeros() -> None:
    for t in (tg.empty(2, 3), tg.empty((2, 3))):
        assert t.shape == (2, 3) and t.dtype == np.float32
        np.testing.assert_array_equal(_np(t), np.zeros((2, 3), np.float32))
    like = tg.empty_like(tg.ones((4,), dtype=tg.int32))
    assert like.shape == (4,) and like.dtype == np.int32 and not _np(like).any()
    assert tg.empty_like(tg.ones(2), dtype=tg.float16).dtype == np.float16
    assert "negative dimension" in str(error_of(ValueError, lambda: tg.empty(-1)))


# ---------------------------------------------------------------- randint


def test_randint_reads_arguments_as_torch() -> None:
    a = tg.randint(10, (300,), key=0)  # torch.randint(high, size)
    assert a.shape == (300,) and a.dtype == np.int32 and not a.requires_grad
    values = _np(a)
    assert values.min() >= 0 and values.max() < 10 and len(set(values.tolist())) == 10
    b = _np(tg.randint(2, 10, (4, 50), key=1))
    assert b.shape == (4, 50) and b.min() >= 2 and b.max() < 10
    np.testing.assert_array_equal(_np(tg.randint(10, size=(300,), key=0)), values)
    np.testing.assert_array_equal(_np(tg.randint(high=10, size=(300,), key=0)), values)
    np.testing.assert_array_equal(_np(tg.randint(0, 10, [300], key=0)), values)
    assert tg.randint(5, key=0).shape == ()  # no size: one value, as NumPy
    assert _np(tg.randint(-3, -1, (20,), key=2)).tolist() != [-3] * 20
    assert set(_np(tg.randint(-3, -1, (50,), key=2)).tolist()) == {-3, -2}


def test_randint_is_reproducible_with_key_and_manual_seed() -> None:
    np.testing.assert_array_equal(
        _np(tg.randint(100, (8,), key=7)), _np(tg.randint(100, (8,), key=7))
    )
    key = jax.random.PRNGKey(3)
    np.testing.assert_array_equal(
        _np(tg.randint(100, (8,), key=key)),
        np.asarray(jax.random.randint(key, (8,), 0, 100, jnp.int32)),
    )
    tg.manual_seed(11)
    first, second = tg.randint(100, (8,)), tg.randint(100, (8,))
    assert not np.array_equal(_np(first), _np(second))  # the state advanced
    tg.manual_seed(11)
    np.testing.assert_array_equal(_np(tg.randint(100, (8,))), _np(first))
    np.testing.assert_array_equal(_np(tg.randint(100, (8,))), _np(second))


def test_randint_reaches_the_ends_of_its_dtype() -> None:
    u8 = _np(tg.randint(0, 256, (2000,), dtype=tg.uint8, key=0))
    assert u8.dtype == np.uint8 and u8.max() == 255 and u8.min() == 0
    top = _np(tg.randint(2**31 - 3, 2**31, (200,), key=0))  # high: one past int32's max
    assert set(top.tolist()) == {2**31 - 3, 2**31 - 2, 2**31 - 1}
    every = _np(tg.randint(-(2**31), 2**31, (1000,), key=0))  # the whole int32 range
    assert every.dtype == np.int32 and every.min() < -(2**29) and every.max() > 2**29


def test_randint_errors_say_what_to_do() -> None:
    err = error_of(ValueError, lambda: tg.randint(5, 5, (2,)))
    assert "low (5) must be less than high (5)" in str(err)
    err = error_of(ValueError, lambda: tg.randint(10, 3))  # torch's size as an int
    assert "tg.randint(10, (3,)) draws 3 values from [0, 10)" in str(err)
    err = error_of(ValueError, lambda: tg.randint(0, 300, (2,), dtype=tg.uint8))
    assert "values from 0 to 299 do not fit uint8" in str(err)
    typed = error_of(TypeError, lambda: tg.randint(0, 10, (2,), dtype=tg.float32))
    assert "not an integer dtype" in str(typed) and ".astype(tg.float32)" in str(typed)
    assert "low must be an integer" in str(error_of(TypeError, lambda: tg.randint(0.5, 3, (2,))))  # type: ignore[arg-type]
    grad = error_of(TypeError, lambda: tg.randint(0, 10, (2,), requires_grad=True))
    assert "floating-point" in str(grad)
    if not jax.config.jax_enable_x64:  # type: ignore[attr-defined]
        err = error_of(ValueError, lambda: tg.randint(0, 2**40, (2,), dtype=tg.int64))
        assert "jax_enable_x64" in str(err)


# ---------------------------------------------------------------- randperm


def test_randperm_is_a_reproducible_permutation() -> None:
    p = tg.randperm(20, key=0)
    assert p.shape == (20,) and p.dtype == np.int32
    assert sorted(_np(p).tolist()) == list(range(20))
    assert _np(p).tolist() != list(range(20))
    np.testing.assert_array_equal(_np(tg.randperm(20, key=0)), _np(p))
    assert not np.array_equal(_np(tg.randperm(20, key=1)), _np(p))
    tg.manual_seed(5)
    a = tg.randperm(20)
    tg.manual_seed(5)
    np.testing.assert_array_equal(_np(tg.randperm(20)), _np(a))
    assert tg.randperm(0, key=0).shape == (0,)
    small = tg.randperm(5, key=0, dtype=tg.int8)
    assert small.dtype == np.int8 and sorted(_np(small).tolist()) == [0, 1, 2, 3, 4]


def test_randperm_errors() -> None:
    assert "n must be >= 0" in str(error_of(ValueError, lambda: tg.randperm(-1)))
    err = error_of(ValueError, lambda: tg.randperm(300, dtype=tg.int8))
    assert "values from 0 to 299 do not fit int8" in str(err)
    assert "not an integer dtype" in str(
        error_of(TypeError, lambda: tg.randperm(3, dtype=tg.float32))
    )


# ---------------------------------------------------------------- multinomial

WEIGHTS = [1.0, 2.0, 3.0, 4.0, 0.0]  # not normalised; the last is never drawn


def _chi_square(samples: np.ndarray, weights: list[float]) -> float:
    p = np.asarray(weights) / np.sum(weights)
    counts = np.bincount(samples.ravel(), minlength=len(p))
    assert counts[p == 0].sum() == 0
    expected = p[p > 0] * samples.size
    return float(np.sum((counts[p > 0] - expected) ** 2 / expected))


def test_multinomial_with_replacement_follows_the_weights() -> None:
    s = tg.multinomial(tg.tensor(WEIGHTS), 10_000, replacement=True, key=0)
    assert s.shape == (10_000,) and s.dtype == np.int32 and not s.requires_grad
    assert _chi_square(_np(s), WEIGHTS) < 30  # 3 degrees of freedom: 99.99% below ~21


def test_multinomial_without_replacement_draws_distinct_indices_in_order() -> None:
    rows = np.tile(np.asarray(WEIGHTS, np.float32), (2000, 1))
    s = _np(tg.multinomial(rows, 3, key=0))
    assert s.shape == (2000, 3) and s.dtype == np.int32
    assert all(len(set(r)) == 3 for r in s.tolist())
    assert (s != 4).all()  # zero weight
    assert _chi_square(s[:, 0], WEIGHTS) < 30  # the first of each row: a draw from all
    every = _np(tg.multinomial(tg.tensor(WEIGHTS), 4, key=1))
    assert sorted(every.tolist()) == [0, 1, 2, 3]


def test_multinomial_rows_and_inputs() -> None:
    probs = tg.tensor([[0.0, 0.0, 1.0], [5.0, 0.0, 0.0]]).require_grad()
    s = tg.multinomial(probs, 4, replacement=True, key=0)
    assert s.shape == (2, 4) and not s.requires_grad
    np.testing.assert_array_equal(_np(s), [[2, 2, 2, 2], [0, 0, 0, 0]])
    np.testing.assert_array_equal(_np(tg.multinomial(np.array([0, 3, 0]), 1, key=0)), [1])
    half = tg.multinomial(tg.tensor(WEIGHTS, dtype=tg.bfloat16), 2, key=0)
    assert half.dtype == np.int32 and half.shape == (2,)
    assert tg.multinomial(np.zeros((0, 3), np.float32), 2, True, key=0).shape == (0, 2)


def test_multinomial_is_reproducible_with_key_and_manual_seed() -> None:
    w = tg.tensor(WEIGHTS)
    for replacement in (False, True):
        a = tg.multinomial(w, 4, replacement, key=3)
        np.testing.assert_array_equal(_np(tg.multinomial(w, 4, replacement, key=3)), _np(a))
    tg.manual_seed(9)
    first = _np(tg.multinomial(w, 50, True))
    tg.manual_seed(9)
    np.testing.assert_array_equal(_np(tg.multinomial(w, 50, True)), first)


def test_multinomial_under_jax_jit_with_a_key() -> None:
    f = jax.jit(lambda w: tg.multinomial(w, 3, key=4).data)
    w = np.asarray(WEIGHTS, np.float32)
    np.testing.assert_array_equal(np.asarray(f(w)), _np(tg.multinomial(w, 3, key=4)))


@pytest.mark.parametrize(
    ("call", "error", "says"),
    [
        (lambda: tg.multinomial(tg.tensor(WEIGHTS), 5), ValueError, "only 4 positive weight"),
        (lambda: tg.multinomial(tg.tensor(WEIGHTS), 6), ValueError, "from 5 categories"),
        (lambda: tg.multinomial(tg.tensor([1.0, -1.0]), 1), ValueError, "negative, NaN or inf"),
        (
            lambda: tg.multinomial(tg.tensor([1.0, float("nan")]), 1, True),
            ValueError,
            "negative, NaN or inf",
        ),
        (
            lambda: tg.multinomial(tg.tensor([1.0, float("inf")]), 1),
            ValueError,
            "negative, NaN or inf",
        ),
        (
            lambda: tg.multinomial(tg.tensor([[1.0, 0.0], [0.0, 0.0]]), 1, True),
            ValueError,
            "no positive weight",
        ),
        (lambda: tg.multinomial(tg.ones((2, 2, 2)), 1), ValueError, "1-D"),
        (lambda: tg.multinomial(tg.ones((2, 0)), 1), ValueError, "at least one category"),
        (lambda: tg.multinomial(tg.ones(3), 0), ValueError, "at least 1"),
        (lambda: tg.multinomial(tg.ones(3), 1.0), TypeError, "must be an integer"),  # type: ignore[arg-type]
        (lambda: tg.multinomial(np.ones(3, np.complex64), 1), TypeError, "must be real"),
    ],
)
def test_multinomial_errors(call: Any, error: type[Exception], says: str) -> None:
    assert says in str(error_of(error, call))


# ---------------------------------------------------------------- tg.load(map_location=...)


def test_load_takes_torchs_keywords(tmp_path: Path) -> None:
    path = tmp_path / "ck.safetensors"
    tg.save({"w": tg.linspace(0, 1, 4), "step": 3}, path)
    for where in (None, "cpu", torch.device("cpu"), jax.devices("cpu")[0]):
        if ACCELERATOR and where is not None:
            continue  # "cpu" then places on the host: the subprocess test covers placing
        for weights_only in (None, True, False):
            ck = tg.load(path, map_location=where, weights_only=weights_only)
            assert ck["step"] == 3 and not ck["w"].requires_grad
            np.testing.assert_array_equal(_np(ck["w"]), np.linspace(0, 1, 4, dtype=np.float32))
            assert not ck["w"].data.committed  # unplaced, as without map_location
    ck = tg.load(str(path), "cpu", True)  # by position, as torch.load's
    assert ck["step"] == 3


def test_load_map_location_errors(tmp_path: Path) -> None:
    path = tmp_path / "ck.safetensors"
    tg.save({"w": tg.ones(2)}, path)
    for remap in (lambda storage, loc: storage, {"cuda:0": "cpu"}):
        err = error_of(TypeError, lambda remap=remap: tg.load(path, map_location=remap))
        assert "records no devices" in str(err) and "tg.device_put" in str(err)
    missing = error_of(tg.DeviceError, lambda: tg.load(path, map_location="nowhere:7"))
    assert "tg.load at" in str(missing)
    assert "map_location='cpu'" in str(missing) and "Sharding" not in str(missing)
    if not ACCELERATOR:
        gpu = error_of(tg.DeviceError, lambda: tg.load(path, map_location="cuda:0"))
        assert "no GPU" in str(gpu)
        # checked before the file is read: no FileNotFoundError first
        error_of(tg.DeviceError, lambda: tg.load(tmp_path / "missing", "cuda"))


_TWO_DEVICES = """
import jax, numpy as np, torch
import tapegrad as tg
cpu1 = jax.devices("cpu")[1]
tg.save({"w": tg.ones(3)}, PATH)
ck = tg.load(PATH, map_location="cpu:1")
assert ck["w"].device == cpu1 and ck["w"].data.committed, ck["w"].device
assert tg.load(PATH, map_location=cpu1)["w"].device == cpu1
assert tg.load(PATH, map_location=torch.device("cpu", 1))["w"].device == cpu1
assert not tg.load(PATH, map_location="cpu")["w"].data.committed
for t in (tg.randint(5, (3,), key=0, device=1), tg.randperm(3, key=0, device="cpu:1"),
          tg.eye(2, device=cpu1), tg.linspace(0, 1, 3, device=1), tg.empty(2, device=1),
          tg.full_like(tg.ones(2, device=1), 2.0)):
    assert t.device == cpu1, t
s = tg.multinomial(tg.ones(4, device=1), 2, key=0)
assert s.device == cpu1, s.device
print("ok")
"""


def test_placement_on_a_second_device(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu",
    }
    script = _TWO_DEVICES.replace("PATH", repr(str(tmp_path / "ck.safetensors")))
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_full_like_with_an_int_beyond_what_jax_reads_says_what_to_do() -> None:
    """An int past int32 (x64 off) for an integer tensor raised JAX's "overflow ... parsing
    an argument to a jitted computation"; it gets tapegrad's OverflowError (tg.full's rule).
    Float targets take it as before."""
    if jax.config.jax_enable_x64:
        pytest.skip("x64 is on: 2**40 is an int64")
    with pytest.raises(OverflowError, match=r"out of range for int32.*jax_enable_x64"):
        tg.full_like(tg.tensor([1, 2]), 2**40)
    assert tg.full((2,), 2**40, dtype=tg.float32).tolist() == [2.0**40] * 2
