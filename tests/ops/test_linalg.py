"""matmul edge cases: 1-D operands, batch broadcasting, the ``@`` operators, shape errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.testing import check_program, check_vjp

R = tg.registry()
RNG = np.random.default_rng(0)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_vector_dot_vector_is_a_scalar_with_backward() -> None:
    a, b = _rand(3), _rand(3)
    ta, tb = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    y = ta @ tb
    assert y.shape == ()
    y.backward()
    np.testing.assert_allclose(np.asarray(ta.grad.data), b)  # type: ignore[union-attr]
    np.testing.assert_allclose(np.asarray(tb.grad.data), a)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("sa", "sb", "out"),
    [
        ((3,), (3, 2), (2,)),
        ((2, 3), (3,), (2,)),
        ((2, 2, 3), (3,), (2, 2)),
        ((3,), (2, 3, 4), (2, 4)),
        ((2, 1, 2, 3), (3, 3, 4), (2, 3, 2, 4)),
    ],
)
def test_numpy_matmul_rules_with_gradients(
    sa: tuple[int, ...], sb: tuple[int, ...], out: tuple[int, ...]
) -> None:
    a, b = _rand(*sa), _rand(*sb)
    assert (tg.tensor(a) @ tg.tensor(b)).shape == out
    check_vjp(R["matmul"], a, b)


def test_reflected_matmul_with_arrays() -> None:
    w = _rand(3, 2)
    check_program(lambda x: jnp.asarray(w).T @ x, lambda x: w.T @ x, _rand(3, 4))
    check_program(lambda x: x @ w, lambda x: x @ w, _rand(2, 3))


def test_mlp_layer_gradients() -> None:
    x, w, b = _rand(4, 3), _rand(3, 2), _rand(2)
    check_program(lambda x, w, b: (x @ w + b).tanh(), lambda x, w, b: jnp.tanh(x @ w + b), x, w, b)


@pytest.mark.parametrize(
    ("sa", "sb"), [((2, 3), (2, 3)), ((3,), (4,)), ((2, 2, 3), (3, 3, 4)), ((), (3,))]
)
def test_shape_mismatch_raises_value_error(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a = tg.tensor(np.ones(sa, np.float32), requires_grad=True)
    with pytest.raises(ValueError, match="matmul") as caught:
        a @ tg.tensor(np.ones(sb, np.float32))
    err = caught.value  # the traceback shows tapegrad's error, not JAX's under it
    assert err.__context__ is None or err.__suppress_context__


@pytest.mark.parametrize(("ord", "axis"), [(None, None), (2, 1), ("fro", None)])
def test_complex_2_norm_is_real_and_its_vjp_is_jaxs(ord: object, axis: int | None) -> None:
    """sqrt(sum(|z|**2)), not sqrt(sum(z**2)): backward used to refuse the complex cotangent."""
    z = np.array([[1 + 2j, 3 - 1j, 0.5j], [-2 + 0j, 1 - 1j, 2 + 2j]], np.complex64)
    x = tg.tensor(z, requires_grad=True)
    y = x.norm(ord=ord, axis=axis)
    want = np.linalg.norm(z, ord=ord, axis=axis)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    v = np.linspace(0.5, 1.5, want.size, dtype=np.float32).reshape(want.shape)
    (g,) = tg.grad(y, x, grad_outputs=jnp.asarray(v))
    _, vjp = jax.vjp(lambda a: jnp.linalg.norm(a, ord=ord, axis=axis), jnp.asarray(z))
    np.testing.assert_allclose(g.numpy(), vjp(jnp.asarray(v))[0], rtol=1e-5, atol=1e-6)


def test_complex_norm_of_a_zero_vector_has_gradient_0() -> None:
    x = tg.tensor(np.zeros(3, np.complex64), requires_grad=True)
    x.norm().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(3, np.complex64))
