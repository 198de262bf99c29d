"""Unary op edge cases: log near 0, sqrt at 0, relu and abs at 0, clip at its bounds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import compiles

import tapegrad as tg
from tapegrad.testing import check_program, check_vjp

R = tg.registry()


def _grad(fn: object, x: np.ndarray) -> np.ndarray:
    """d sum(fn(x)) / dx through tapegrad."""
    t = tg.tensor(x, requires_grad=True)
    (g,) = tg.grad(fn(t).sum(), t)  # type: ignore[operator]
    return np.asarray(g.data)


def test_log_near_zero_has_large_finite_gradient() -> None:
    x = np.array([1e-3, 1e-6, 1e-30], np.float32)
    check_vjp(R["log"], x)
    np.testing.assert_allclose(_grad(tg.log, x), 1.0 / x.astype(np.float64), rtol=1e-6)


def test_log_at_zero_is_minus_inf_with_infinite_gradient() -> None:
    x = np.array([0.0, 1.0], np.float32)
    t = tg.tensor(x, requires_grad=True)
    y = t.log()
    assert np.asarray(y.data)[0] == -np.inf
    (g,) = tg.grad(y, t, grad_outputs=jnp.ones(2))
    np.testing.assert_array_equal(np.asarray(g.data), [np.inf, 1.0])
    check_vjp(R["log"], x)  # JAX agrees: 1/0 = inf


def test_sqrt_at_zero_has_infinite_gradient() -> None:
    x = np.array([0.0, 4.0], np.float32)
    np.testing.assert_array_equal(_grad(tg.sqrt, x), [np.inf, 0.25])
    check_vjp(R["sqrt"], x)


def test_relu_at_zero_has_gradient_zero_as_jax_nn_relu() -> None:
    """docs/api.md: relu's subgradient at 0 follows JAX (jax.nn.relu: 0)."""
    x = np.array([-1.0, 0.0, -0.0, 2.0], np.float32)
    np.testing.assert_array_equal(_grad(tg.relu, x), [0.0, 0.0, 0.0, 1.0])
    check_program(lambda t: t.relu(), jax.nn.relu, x)


def test_abs_at_zero_follows_jax() -> None:
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    np.testing.assert_array_equal(
        np.asarray(jax.grad(lambda a: jnp.abs(a).sum())(x)), [-1.0, 1.0, 1.0]
    )
    np.testing.assert_array_equal(_grad(tg.abs, x), [-1.0, 1.0, 1.0])


def test_abs_away_from_zero_is_sign() -> None:
    x = np.array([-2.0, -1e-20, 1e-20, 3.0], np.float32)
    np.testing.assert_array_equal(_grad(tg.abs, x), [-1.0, -1.0, 1.0, 1.0])


@pytest.mark.parametrize(
    ("low", "high", "want"),
    [
        (-0.5, 0.5, [0.0, 0.5, 1.0, 0.5, 0.0]),
        (None, 0.5, [1.0, 1.0, 1.0, 0.5, 0.0]),
        (-0.5, None, [0.0, 0.5, 1.0, 1.0, 1.0]),
    ],
)
def test_clip_at_bounds_splits_like_jax(
    low: float | None, high: float | None, want: list[float]
) -> None:
    """At a bound jnp.clip's gradient is 1/2 (lax.max/lax.min tie rule); outside it is 0."""
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0], np.float32)
    np.testing.assert_array_equal(_grad(lambda t: t.clip(low, high), x), want)
    check_program(lambda t: t.clip(low, high), lambda a: jnp.clip(a, low, high), x)


def test_clip_with_equal_bounds_is_constant() -> None:
    x = np.array([-1.0, 0.0, 1.0], np.float32)
    t = tg.tensor(x, requires_grad=True)
    y = t.clip(0.0, 0.0)
    np.testing.assert_array_equal(np.asarray(y.data), [0.0, 0.0, 0.0])
    check_program(lambda t: t.clip(0.0, 0.0), lambda a: jnp.clip(a, 0.0, 0.0), x)


def test_clip_with_new_bound_values_compiles_nothing() -> None:
    """Issue 17 item 4: the bounds are kernel arguments, so new values reuse the compiled
    forward and VJP (only a bound's presence and Python type select a kernel)."""
    x = tg.tensor(np.linspace(-2.0, 2.0, 7, dtype=np.float32), requires_grad=True)
    tg.grad(x.clip(-1.0, 1.0).sum(), x)  # compiles the (7,) float bounds kernels
    with compiles() as seen:
        y = x.clip(-0.25, 1.5)
        (g,) = tg.grad(y.sum(), x)
    assert seen == []
    np.testing.assert_allclose(np.asarray(y.data), np.clip(np.asarray(x.data), -0.25, 1.5))
    want = jax.grad(lambda a: jnp.clip(a, -0.25, 1.5).sum())(x.data)
    np.testing.assert_array_equal(np.asarray(g.data), np.asarray(want))


def test_sigmoid_and_tanh_saturate_without_nan() -> None:
    x = np.array([-100.0, 0.0, 100.0], np.float32)
    for fn, ref in ((tg.sigmoid, jax.nn.sigmoid), (tg.tanh, jnp.tanh)):
        g = _grad(fn, x)
        assert np.isfinite(g).all()
        np.testing.assert_allclose(g, jax.grad(lambda a, ref=ref: ref(a).sum())(x), atol=1e-7)


def test_astype_between_floats_is_differentiable_and_to_int_is_not() -> None:
    x = tg.tensor(np.array([1.5, -2.25], np.float32), requires_grad=True)
    h = x.astype(tg.float16)
    assert h.requires_grad and h.dtype == jnp.float16
    (g,) = tg.grad(h, x, grad_outputs=jnp.array([1.0, 2.0], jnp.float16))
    assert g.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(g.data), [1.0, 2.0])
    i = x.astype(tg.int32)
    assert not i.requires_grad
    np.testing.assert_array_equal(np.asarray(i.data), [1, -2])


def test_negative_and_clone() -> None:
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(_grad(lambda t: -t, x), [-1.0, -1.0])
    t = tg.tensor(x, requires_grad=True)
    c = t.clone()
    assert c.requires_grad and c is not t
    (g,) = tg.grad(c * c, t, grad_outputs=jnp.ones(2))
    np.testing.assert_array_equal(np.asarray(g.data), 2 * x)


def test_abs_of_complex_follows_jax() -> None:
    """|z| is not holomorphic: its cotangent is g * conj(z) / |z| in JAX's convention (0 at
    z = 0; PyTorch's is the conjugate). The rule for reals, select(z >= 0, g, -g), gave 1
    and -1 (found by a review); holomorphic ops need nothing of the kind."""
    z = np.array([3 + 4j, -1 + 2j, 0j], np.complex64)
    t = tg.tensor(z).require_grad()
    tg.abs(t).sum().backward()
    want = jax.grad(lambda a: jnp.abs(a).sum())(jnp.asarray(z))
    assert t.grad.dtype == jnp.complex64
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-6, atol=1e-7)
    w = tg.tensor(z[:2]).require_grad()
    (tg.abs(w.exp() * w) * 2.0).sum().backward()  # through holomorphic ops too
    want = jax.grad(lambda a: (jnp.abs(jnp.exp(a) * a) * 2.0).sum())(jnp.asarray(z[:2]))
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5, atol=1e-6)


def test_clip_with_tensor_bounds_broadcasts_and_differentiates_both() -> None:
    """As PyTorch's clamp: tensor bounds broadcast and receive the gradient where they win
    (jnp.clip's derivative, half at a tie); the error said to pass the Tensor it refused."""
    x = np.array([[-1.0, 0.5, 2.0], [0.0, 3.0, -2.0]], np.float32)
    lo = np.array([0.0, 1.0, -3.0], np.float32)
    hi = np.array([[1.5], [2.5]], np.float32)
    check_program(lambda t, a: t.clip(a, None), lambda t, a: jnp.clip(t, a, None), x, lo)
    check_program(lambda t, b: t.clip(None, b), lambda t, b: jnp.clip(t, None, b), x, hi)
    check_program(lambda t, a, b: t.clip(a, b), lambda t, a, b: jnp.clip(t, a, b), x, lo, hi)
    check_program(lambda t, a: t.clip(a, 1.5), lambda t, a: jnp.clip(t, a, 1.5), x, lo)


def test_the_clip_op_refuses_a_tensor_bound_saying_what_to_write() -> None:
    with pytest.raises(TypeError, match=r"x\.clip\(min, max\)"):
        tg.clip(tg.ones(3), min=tg.zeros(3))
