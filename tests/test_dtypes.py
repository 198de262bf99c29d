"""One definition of "float" (issue 16, item 1): every float dtype JAX supports can require grad,
is recorded by ops, is accepted by layers, and gets gradients in its own dtype."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of

import tapegrad as tg
from tapegrad._dtypes import as_dtype, check_float, is_differentiable, is_float


def _jax_dtypes(kind: Any) -> list[np.dtype[Any]]:
    """Every dtype jax.numpy exports whose kind is ``kind`` and that this backend can hold in an
    array (found, not listed by hand; the CPU backend has no float6)."""
    out: dict[str, np.dtype[Any]] = {}
    for name in dir(jnp):
        if not name.startswith(("float", "bfloat", "complex")):
            continue
        try:
            dt = np.dtype(getattr(jnp, name))
        except TypeError:  # the abstract kinds (jnp.floating) and functions (float_power)
            continue
        if not jnp.issubdtype(dt, kind) or dt.itemsize > 4:  # x64 is off: no float64 arrays
            continue
        try:
            jnp.asarray(np.zeros(2, dt)).block_until_ready()
        except Exception:  # noqa: BLE001 - XLA's error for a type the backend lacks
            continue
        out[dt.name] = dt
    return sorted(out.values(), key=lambda d: d.name)


FLOATS = _jax_dtypes(jnp.floating)
COMPLEX = _jax_dtypes(jnp.complexfloating) + [np.dtype(np.complex64)]
NOT_FLOATS = [np.dtype(d) for d in (np.int32, np.int8, np.uint8, np.bool_)]


def test_the_float_family_is_the_one_jax_has() -> None:
    names = {d.name for d in FLOATS}
    assert {"bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2"} <= names


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_every_float_dtype_requires_grad_and_gets_its_gradient(dtype: np.dtype[Any]) -> None:
    x = np.array([0.5, 1.0, 2.0], np.float32)
    w = tg.tensor(x, dtype=dtype, requires_grad=True)
    assert w.requires_grad and w.dtype == dtype
    y = w * w
    assert y.requires_grad, "an op on a float leaf of this dtype must be recorded"
    y.sum().backward()
    assert w.grad is not None and w.grad.dtype == dtype
    # d/da sum(a * a) = 2a, in float32 on the same rounded values, rounded to the dtype (in
    # NumPy: float8_e8m0fnu has no arithmetic of its own in JAX)
    want = (2 * x.astype(dtype).astype(np.float32)).astype(dtype).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(w.grad.data, np.float32), want)


@pytest.mark.parametrize("dtype", FLOATS + COMPLEX, ids=str)
def test_the_leaf_check_and_the_op_recording_agree(dtype: np.dtype[Any]) -> None:
    assert is_differentiable(dtype)
    t = tg.zeros((2,), dtype=dtype).require_grad()
    assert (t + t).requires_grad


@pytest.mark.parametrize("dtype", NOT_FLOATS, ids=str)
def test_integer_and_bool_tensors_cannot_require_grad(dtype: np.dtype[Any]) -> None:
    assert not is_differentiable(dtype) and not is_float(dtype)
    err = error_of(TypeError, lambda: tg.zeros((2,), dtype=dtype).require_grad())
    assert str(dtype) in str(err) and "astype" in str(err)


@pytest.mark.parametrize("dtype", [tg.bfloat16, tg.float16], ids=str)
def test_linear_in_half_precision_trains(dtype: Any) -> None:
    layer = tg.nn.Linear(3, 2, key=0, dtype=dtype)
    assert {p.dtype for p in layer.parameters()} == {np.dtype(dtype)}
    x = tg.tensor(np.ones((4, 3), np.float32), dtype=dtype)
    layer(x).sum().backward()
    assert all(p.grad is not None and p.grad.dtype == dtype for p in layer.parameters())
    for p in layer.parameters():  # d sum(x W + b) / d each entry = the batch size (x = ones)
        np.testing.assert_array_equal(np.asarray(p.grad.data, np.float32), 4.0)


def test_a_bfloat16_layer_takes_an_optimizer_step() -> None:
    layer = tg.nn.Linear(3, 2, key=0, dtype=tg.bfloat16)
    x = tg.ones((4, 3), dtype=tg.bfloat16)
    layer(x).sum().backward()
    opt = tg.optim.SGD(layer.parameters(), lr=0.1)
    before = np.asarray(layer.weight.data, np.float32)
    opt.step()
    assert layer.weight.dtype == tg.bfloat16
    assert not np.array_equal(np.asarray(layer.weight.data, np.float32), before)


@pytest.mark.parametrize("dtype", [tg.int32, tg.complex64, "not a dtype"], ids=str)
def test_layers_refuse_what_is_not_a_real_float(dtype: Any) -> None:
    err = error_of(TypeError, lambda: tg.nn.Linear(3, 2, key=0, dtype=dtype))
    assert "Linear" in str(err) and "float" in str(err)
    assert error_of(TypeError, lambda: check_float(dtype, "X"))


def test_a_pytorch_dtype_is_named_with_its_tg_spelling() -> None:
    # nn.Linear(..., dtype=torch.float32) said "dtype must be a floating dtype, got
    # torch.float32", of a float dtype; tg.zeros and .astype NumPy's bare "Cannot interpret"
    class TorchLike:  # torch.bfloat16's repr, without importing torch
        def __repr__(self) -> str:
            return "torch.bfloat16"

    for make in (
        lambda: tg.nn.Linear(3, 2, key=0, dtype=TorchLike()),
        lambda: check_float(TorchLike(), "Linear"),
        lambda: tg.zeros(2, dtype=TorchLike()),
        lambda: tg.ones(2).astype(TorchLike()),
    ):
        err = error_of(TypeError, make)
        assert "PyTorch dtypes" in str(err) and "tg.bfloat16" in str(err)
    assert as_dtype("bfloat16", "x") == np.dtype(tg.bfloat16)
