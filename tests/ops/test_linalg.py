"""matmul edge cases: 1-D operands, batch broadcasting, the ``@`` operators, shape errors."""

from __future__ import annotations

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
