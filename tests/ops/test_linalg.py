"""matmul edge cases: 1-D operands, batch broadcasting, the ``@`` operators, shape errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of, grad_of

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


def test_outer_refuses_what_is_not_1_d() -> None:
    for a, b in (((2, 3), (3,)), ((), (3,))):
        message = str(error_of(tg.ShapeError, tg.outer, tg.ones(a), tg.ones(b)))
        assert "outer: takes two 1-D tensors" in message and "x.reshape(-1)" in message


def test_diag_builds_and_reads_as_numpy_with_gradients() -> None:
    v = _rand(3)
    for k in (-2, 0, 1):
        np.testing.assert_array_equal(tg.diag(v, k).numpy(), np.diag(v, k))
        check_program(lambda x, k=k: tg.diag(x, k=k), lambda x, k=k: jnp.diag(x, k), v)
    m = _rand(3, 5)
    for k in (-1, 0, 3, 7):  # 7: beyond the matrix, an empty diagonal
        np.testing.assert_array_equal(tg.diag(m, k).numpy(), np.diag(m, k))
        np.testing.assert_array_equal(tg.diagonal(m, k).numpy(), np.diagonal(m, k))
    t = tg.tensor(m, requires_grad=True)
    tg.diag(t, 7).sum().backward()
    np.testing.assert_array_equal(grad_of(t), np.zeros((3, 5), np.float32))


def test_diag_refuses_other_ranks_and_names_numpys_k() -> None:
    message = str(error_of(tg.ShapeError, tg.diag, tg.ones((2, 2, 2))))
    assert "1-D tensor (to build a matrix) or a 2-D one" in message and "tg.diagonal" in message
    error_of(tg.ShapeError, tg.diag, tg.ones(()))
    assert "must be an integer" in str(error_of(TypeError, tg.diag, tg.ones(3), 1.0))
    message = str(error_of(TypeError, lambda: tg.diag(tg.ones(3), diagonal=1)))
    assert "got diagonal=, a PyTorch keyword; use k=" in message, message


@pytest.mark.parametrize(
    ("shape", "offset", "axis1", "axis2"),
    [((3, 4), 0, 0, 1), ((3, 4), 1, 1, 0), ((2, 3, 4), -1, -1, 0), ((2, 3, 3), 0, 1, 2)],
)
def test_diagonal_and_trace_match_numpy_on_any_axes(
    shape: tuple[int, ...], offset: int, axis1: int, axis2: int
) -> None:
    x = _rand(*shape)
    kw = {"offset": offset, "axis1": axis1, "axis2": axis2}
    np.testing.assert_array_equal(tg.diagonal(x, **kw).numpy(), np.diagonal(x, **kw))
    np.testing.assert_allclose(tg.trace(x, **kw).numpy(), np.trace(x, **kw), rtol=1e-6)
    t = tg.tensor(x)
    np.testing.assert_array_equal(t.diagonal(offset, axis1, axis2).numpy(), x.diagonal(**kw))
    np.testing.assert_allclose(t.trace(offset, axis1, axis2).numpy(), x.trace(**kw), rtol=1e-6)
    check_program(
        lambda a: tg.diagonal(a, **kw) * 2.0 + tg.trace(a, **kw)[..., None],
        lambda a: jnp.diagonal(a, **kw) * 2.0 + jnp.trace(a, **kw)[..., None],
        x,
    )


def test_diagonal_and_trace_refuse_bad_axes_and_name_numpys_keywords() -> None:
    x = tg.ones((2, 3))
    for fn in (tg.diagonal, tg.trace):
        message = str(error_of(tg.ShapeError, fn, x, 0, 1, 1))
        assert "must be two different axes" in message, message
        error_of(tg.ShapeError, fn, x, 0, 0, 2)
        assert "tg.diag(x, k)" in str(error_of(tg.ShapeError, fn, tg.ones(3)))
        assert "must be an integer" in str(error_of(TypeError, fn, x, 0.5))
        message = str(error_of(TypeError, lambda f=fn: f(x, dim1=1, dim2=0)))
        assert "use axis1= (NumPy's name)" in message, message


def test_trace_of_integers_is_an_integer_that_records_nothing() -> None:
    x = tg.tensor(np.arange(9, dtype=np.int32).reshape(3, 3))
    y = tg.trace(x)
    assert y.dtype == np.int32 and y.item() == 12 and not y.requires_grad


def test_linear_with_a_1d_weight_takes_a_0d_bias_and_refuses_others() -> None:
    """PyTorch documents bias () for weight (in,), and refuses any bias with a 2-D input
    there (its fused addmm path); tapegrad takes the documented form for every input."""
    x, w = tg.tensor(_rand(5, 3), requires_grad=True), tg.tensor(_rand(3), requires_grad=True)
    b = tg.tensor(np.float32(0.5), requires_grad=True)
    y = tg.linear(x, w, b)
    assert y.shape == (5,)
    np.testing.assert_allclose(y.numpy(), x.numpy() @ w.numpy() + 0.5, rtol=1e-6)
    gx, gw, gb = tg.grad(y.sum(), [x, w, b])
    np.testing.assert_allclose(gx.numpy(), np.broadcast_to(w.numpy(), (5, 3)), rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(), x.numpy().sum(0), rtol=1e-5)
    assert float(gb) == 5.0
    for bias in (np.zeros(1, np.float32), np.zeros(5, np.float32)):
        with pytest.raises(tg.ShapeError, match="the bias must be 0-d"):
            tg.linear(x, w, bias)
    with pytest.raises(tg.ShapeError, match="must be 2-D .* or 1-D"):
        tg.linear(x, np.zeros((1, 3, 3), np.float32))
    with pytest.raises(tg.ShapeError, match="must end in in_features=4"):
        tg.linear(x, np.zeros(4, np.float32))


def test_linear_with_a_2d_weight_refuses_a_number_as_bias() -> None:
    """Regression: a Python float bias raised AttributeError ('float' object has no attribute
    'shape'); it is a shape error naming the bias it takes (PyTorch refuses it too)."""
    x, w = tg.tensor(_rand(5, 3)), tg.tensor(_rand(2, 3))
    with pytest.raises(tg.ShapeError, match=r"^linear: bias of shape \(\) must be \(2,\)"):
        tg.linear(x, w, 1.0)


def test_linear_with_a_1d_weight_is_one_node_checked_against_jax() -> None:
    check_vjp(R["linear"], _rand(4, 2, 3), _rand(3), np.float32(0.3))
    check_vjp(R["linear"], _rand(3), _rand(3), np.float32(0.3))
