"""Reduction edge cases: ties in max/min, keepdims, negative and tuple axes, bad axes."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.testing import check_program, check_vjp

R = tg.registry()
F32 = np.float32
X = np.arange(24, dtype=F32).reshape(2, 3, 4) / 10


def _grad(fn: object, x: np.ndarray) -> np.ndarray:
    t = tg.tensor(x, requires_grad=True)
    out = fn(t)  # type: ignore[operator]
    (g,) = tg.grad(out.sum() if out.ndim else out, t)
    return np.asarray(g.data)


@pytest.mark.parametrize("name", ["max", "min"])
def test_ties_share_the_gradient_equally(name: str) -> None:
    """JAX's reduce_max/reduce_min rule: g is split evenly among the tied extrema."""
    x = np.array([3.0, 1.0, 3.0, 3.0] if name == "max" else [1.0, 3.0, 1.0, 2.0], F32)
    want = [1 / 3, 0, 1 / 3, 1 / 3] if name == "max" else [0.5, 0, 0.5, 0]
    np.testing.assert_allclose(_grad(lambda t: getattr(t, name)(), x), want, rtol=1e-6)
    check_vjp(R[name], x)


def test_ties_per_row_with_an_axis_and_keepdims() -> None:
    x = np.array([[2.0, 2.0, 1.0], [0.0, 5.0, 5.0]], F32)
    np.testing.assert_array_equal(
        _grad(lambda t: t.max(axis=1, keepdims=True), x), [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]
    )
    check_vjp(R["max"], x, axis=1, keepdims=True)
    check_vjp(R["min"], x, axis=0)


def test_all_equal_spreads_over_every_element() -> None:
    x = np.full((2, 3), 7.0, F32)
    np.testing.assert_allclose(_grad(lambda t: t.max(), x), np.full((2, 3), 1 / 6), rtol=1e-6)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize(("axis", "keepdims"), [(-3, False), ((-2,), True), ((2, 0), False)])
def test_negative_and_tuple_axes_match_jnp(name: str, axis: object, keepdims: bool) -> None:
    t = tg.tensor(X)
    out = getattr(t, name)(axis=axis, keepdims=keepdims)
    want = getattr(jnp, name)(X, axis=axis, keepdims=keepdims)
    assert out.shape == want.shape
    np.testing.assert_allclose(np.asarray(out.data), want, rtol=1e-6)


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_keepdims_gradients_match_jax(name: str) -> None:
    check_program(
        lambda t: getattr(t, name)(axis=(0, -1), keepdims=True) * t,
        lambda a: getattr(jnp, name)(a, axis=(0, -1), keepdims=True) * a,
        X,
    )


def test_mean_gradient_is_one_over_count() -> None:
    np.testing.assert_allclose(_grad(lambda t: t.mean(axis=(0, 2)), X), np.full(X.shape, 1 / 8))


def test_sum_of_a_scalar_and_empty_axis_tuple() -> None:
    s = tg.tensor(np.float32(2.0), requires_grad=True)
    (g,) = tg.grad(s.sum(), s)
    assert g.shape == () and float(g) == 1.0
    x = tg.tensor(X, requires_grad=True)
    y = x.sum(axis=())
    assert y.shape == X.shape
    (g,) = tg.grad(y, x, grad_outputs=jnp.ones(X.shape))
    np.testing.assert_array_equal(np.asarray(g.data), np.ones(X.shape))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis", [3, -4, (0, 0), (1, -2)])
def test_bad_axes_raise_value_error(name: str, axis: object) -> None:
    t = tg.tensor(X, requires_grad=True)
    with pytest.raises(ValueError, match="axis"):
        getattr(t, name)(axis=axis)


def test_var_std_ddof_and_tensor_methods() -> None:
    a = np.array([[1.0, 2.0, 4.0], [0.0, -1.0, 3.0]], np.float32)
    x = tg.tensor(a)
    np.testing.assert_allclose(x.var().item(), a.var(), rtol=1e-6)
    np.testing.assert_allclose(x.std(axis=1, ddof=1).numpy(), a.std(axis=1, ddof=1), rtol=1e-6)
    np.testing.assert_allclose(x.cumsum(axis=0).numpy(), a.cumsum(axis=0))
    np.testing.assert_allclose(tg.cumsum(x).numpy(), a.cumsum())
    np.testing.assert_allclose(tg.logsumexp(x, axis=0).numpy(), np.log(np.exp(a).sum(0)), 1e-6)
    assert x.argmax(axis=1).tolist() == [2, 2] and x.argmin().item() == 4


def test_logsumexp_is_stable_for_large_inputs() -> None:
    x = tg.tensor([1000.0, 1000.0], requires_grad=True)
    y = tg.logsumexp(x)
    np.testing.assert_allclose(y.item(), 1000.0 + np.log(2.0), rtol=1e-6)
    (g,) = tg.grad(y, x)
    np.testing.assert_allclose(g.numpy(), [0.5, 0.5])


def test_argmax_errors() -> None:
    with pytest.raises(ValueError, match="out of range"):
        tg.argmax(tg.ones((2, 3)), axis=2)
    with pytest.raises(ValueError, match="empty"):
        tg.argmin(tg.ones((0,)))


@pytest.mark.parametrize(("name", "axis"), [("var", None), ("std", None), ("var", 1), ("std", 0)])
def test_complex_var_std_are_real_and_their_vjp_is_jaxs(name: str, axis: int | None) -> None:
    """|x - mean|**2, not (x - mean)**2: real values as NumPy's; the gradient is jax.vjp's."""
    z = (X[0] + 1j * X[1][::-1] ** 2).astype(np.complex64)
    y = getattr(tg.tensor(z), name)(axis=axis)
    want = getattr(np, name)(z, axis=axis)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)
    v = np.linspace(0.5, 1.5, want.size, dtype=F32).reshape(want.shape)
    x = tg.tensor(z, requires_grad=True)
    (g,) = tg.grad(getattr(x, name)(axis=axis), x, grad_outputs=jnp.asarray(v))
    _, vjp = jax.vjp(lambda a: getattr(jnp, name)(a, axis=axis), jnp.asarray(z))
    np.testing.assert_allclose(g.numpy(), vjp(jnp.asarray(v))[0], rtol=1e-5, atol=1e-6)


REDUCTIONS = ["sum", "mean", "max", "min", "logsumexp", "var", "std", "all", "any"]


@pytest.mark.parametrize("axis", [0, -1, (0,), (-1,)])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_a_0d_input_takes_axis_0_or_minus_1_as_pytorch(name: str, axis: object) -> None:
    """torch.tensor(2.).sum(0) is 2: a 0-d tensor's dimension 0 (or -1) is itself."""
    torch = pytest.importorskip("torch")
    x = tg.tensor(2.0, requires_grad=name not in ("all", "any"))
    y = getattr(tg, name)(x, axis=axis)
    xt = torch.tensor(2.0, requires_grad=name not in ("all", "any"))
    kw = {"correction": 0} if name in ("var", "std") else {}
    yt = getattr(torch, name if name not in ("max", "min") else "a" + name)(xt, axis, **kw)
    assert y.shape == () and y.item() == yt.item()
    if name in ("sum", "mean", "max", "min", "logsumexp", "var"):
        (g,) = tg.grad(y, x)
        (gt,) = torch.autograd.grad(yt, xt)
        assert g.item() == gt.item()


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("name", ["cumsum", "argmax", "argmin"])
def test_scans_and_arg_reductions_of_a_0d_input_take_axis_0_or_minus_1(
    name: str, axis: int
) -> None:
    torch = pytest.importorskip("torch")
    x = tg.tensor(2.0, requires_grad=name == "cumsum")
    y = getattr(x, name)(axis=axis)
    yt = getattr(torch.tensor(2.0), name)(axis)
    assert y.shape == () and y.item() == yt.item()
    if name == "cumsum":
        (g,) = tg.grad(y, x)
        assert g.item() == 1.0


def test_a_0d_input_refuses_other_axes() -> None:
    with pytest.raises(ValueError, match=r"use an axis in \[-1, 0\]"):
        tg.tensor(2.0).sum(axis=1)
    with pytest.raises(ValueError, match="out of range"):
        tg.tensor(2.0).argmax(axis=-2)


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4)])
def test_whole_array_reduction_matches_jnp(name: str, shape: tuple[int, ...]) -> None:
    """``x.sum()`` / ``x.mean()`` (no axis: the kernel without parameters) equal jnp's, with
    the gradient of the general path (``axis=None`` given, ``keepdims`` both ways)."""
    x = (np.arange(int(np.prod(shape)), dtype=F32).reshape(shape) - 3) / 7
    t = tg.tensor(x)
    np.testing.assert_allclose(getattr(t, name)().numpy(), getattr(jnp, name)(x), rtol=1e-6)
    assert getattr(t, name)(keepdims=True).shape == getattr(jnp, name)(x, keepdims=True).shape
    grads = [
        _grad(lambda u: getattr(u, name)(), x),
        _grad(lambda u: getattr(u, name)(axis=None), x),
        _grad(lambda u: getattr(tg, name)(u), x),
    ]
    for g in grads:
        np.testing.assert_allclose(g, jax.grad(lambda a: getattr(jnp, name)(a))(x), rtol=1e-6)
    check_vjp(R[name], x)


@pytest.mark.parametrize("axis", [0, 2, -1, -3])
def test_one_int_axis_matches_jnp_and_a_bad_one_raises(axis: int) -> None:
    np.testing.assert_allclose(tg.tensor(X).mean(axis).numpy(), jnp.mean(X, axis), rtol=1e-6)
    np.testing.assert_allclose(tg.tensor(X).sum(axis=axis).numpy(), jnp.sum(X, axis), rtol=1e-6)
    with pytest.raises(tg.ShapeError, match="out of range"):
        tg.tensor(X).sum(axis=axis + 3 if axis >= 0 else axis - 3)


def test_std_of_a_constant_has_gradient_zero_as_pytorch() -> None:
    x = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0]], np.float32)  # column 1 constant
    a = tg.tensor(x).require_grad()
    z = (a - a.mean(axis=0)) / (tg.std(a, axis=0) + 1e-5)  # z-scoring a constant feature
    (z * tg.tensor([1.0, 2.0])).sum().backward()
    assert a.grad is not None and np.isfinite(a.grad.numpy()).all()
    np.testing.assert_array_equal(a.grad.numpy()[:, 1], 0.0)
    b = tg.tensor(x).require_grad()
    tg.std(b, axis=0).sum().backward()
    want = jax.grad(lambda v: jnp.std(v[:, 0]))(jnp.asarray(x))  # the varying column: JAX's
    assert b.grad is not None
    np.testing.assert_allclose(b.grad.numpy()[:, 0], np.asarray(want)[:, 0], rtol=1e-6)
    np.testing.assert_array_equal(b.grad.numpy()[:, 1], 0.0)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_var_and_std_of_half_precision_sum_in_float32(dtype: Any) -> None:
    h = jnp.asarray(np.linspace(-200, 200, 1000), dtype)  # its sum of squares overflows float16
    for ours, theirs in ((tg.var, jnp.var), (tg.std, jnp.std)):
        got = ours(tg.tensor(h))
        assert got.dtype == dtype
        np.testing.assert_allclose(float(got), float(theirs(h)), rtol=1e-2)


def test_logsumexp_over_an_empty_axis_has_an_empty_gradient() -> None:
    """-inf, as PyTorch; its backward raised NumPy's zero-size reduction error."""
    x = tg.zeros((2, 0)).require_grad()
    y = tg.logsumexp(x, axis=-1)
    assert y.tolist() == [-np.inf, -np.inf]
    y.sum().backward()
    assert x.grad.shape == (2, 0)


@pytest.mark.parametrize(("op", "shape", "axis"), [("max", (0,), None), ("min", (2, 0), 1)])
def test_max_and_min_of_no_elements_raise_a_shape_error(
    op: str, shape: tuple[int, ...], axis: int | None
) -> None:
    """PyTorch raises too; the message was NumPy's "zero-size array to reduction operation"."""
    x = tg.zeros(shape).require_grad()
    with pytest.raises(tg.ShapeError, match=f"no elements along the reduced axes.*no {op}"):
        getattr(x, op)(axis=axis)
    assert getattr(tg.zeros((2, 0)), op)(axis=0).shape == (0,)  # an empty result is fine


@pytest.mark.parametrize(
    ("name", "ddof", "upstream"), [("var", 0, 1000.0), ("var", 1, 1000.0), ("std", 0, 30000.0)]
)
def test_var_and_std_gradients_of_float16_are_computed_in_float32_as_torch(
    name: str, ddof: int, upstream: float
) -> None:
    """g (x - mean) of a float16 x ~ N(5, 30) overflowed float16 for g ~ 1000 (var) and
    g / std (x - mean) for g ~ 30,000 (std): 9 of 256 gradients were inf; PyTorch's finite."""
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(0).normal(size=(4, 64)) * 30 + 5).astype(np.float16)
    up = np.full(4, upstream, np.float16)
    ours = tg.tensor(x).require_grad()
    getattr(tg, name)(ours, axis=1, ddof=ddof).backward(tg.tensor(up))
    theirs = torch.tensor(x, requires_grad=True)
    getattr(theirs, name)(1, correction=ddof).backward(torch.tensor(up))
    assert ours.grad is not None and ours.grad.dtype == jnp.float16
    got, want = np.asarray(ours.grad.numpy(), np.float32), theirs.grad.float().numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())
