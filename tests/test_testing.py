"""The gradient checkers reject wrong VJPs and leaks (autograd's tests/test_tests.py precedent).

Throwaway ops are built with ``tapegrad.op.Op`` directly (or ``tg.jax_op``), never ``defop``,
so they stay out of the built-in registry.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import X

import tapegrad as tg
from tapegrad.op import Op
from tapegrad.testing import check_program, check_vjp, default_tolerances

Y = np.array([[1.5], [-0.5]], np.float32)


def _square_forward(x: jax.Array) -> tuple[jax.Array, tuple[jax.Array]]:
    return x * x, (x,)


def _op(forward: Any, vjp: Any, name: str) -> Op:
    op = Op(forward, name=name)
    op.defvjp(vjp)
    return op


def test_a_correct_throwaway_op_passes_and_stays_out_of_the_registry() -> None:
    square = _op(_square_forward, lambda res, g: (2 * res[0] * g,), "square_ok")
    check_vjp(square, X)
    assert "square_ok" not in tg.registry()


def test_a_wrong_vjp_is_rejected_with_op_input_shape_dtype_and_errors() -> None:
    wrong = _op(_square_forward, lambda res, g: (res[0] * g,), "square_wrong")  # forgot the 2
    with pytest.raises(AssertionError) as info:
        check_vjp(wrong, X)
    message = str(info.value)
    for part in ("square_wrong", "input 0", "(3,)", "float32", "max abs error", "max rel error"):
        assert part in message, part


def test_a_vjp_wrong_for_the_second_input_only_names_that_input() -> None:
    def forward(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        return a * b, (a, b)

    def vjp(res: Any, g: jax.Array, needs: tuple[bool, ...]) -> tuple[Any, Any]:
        a, b = res
        return (g * b if needs[0] else None, g * b if needs[1] else None)  # gb should be g * a

    wrong = _op(forward, vjp, "mul_wrong_b")
    check_vjp(wrong, X, Y, wrt=[0])  # input 0 alone is right
    with pytest.raises(AssertionError, match=r"input 1 \(shape \(2, 1\), dtype float32\)"):
        check_vjp(wrong, X, Y)


def test_a_vjp_wrong_only_away_from_the_drawn_point_is_found_by_another_seed() -> None:
    """The random cotangent projects every output element: a rule that drops one is caught."""

    def vjp(res: Any, g: jax.Array) -> tuple[jax.Array]:
        return ((2 * res[0] * g).at[-1].set(0.0),)

    wrong = _op(_square_forward, vjp, "square_drops_last")
    for seed in (0, 1, 2):
        with pytest.raises(AssertionError, match="1 of 3 elements"):
            check_vjp(wrong, X, seed=seed)


def test_a_wrong_forward_is_caught_by_check_program() -> None:
    with pytest.raises(AssertionError, match="the output differs"):
        check_program(lambda x: x * 2.0, lambda x: x * 2.001, X)


def test_a_wrong_gradient_is_caught_by_check_program() -> None:
    leaky_relu = tg.jax_op(lambda x: jnp.where(x > 0, x, 0.1 * x))
    check_program(leaky_relu, lambda x: jnp.where(x > 0, x, 0.1 * x), X)
    stop = tg.jax_op(lambda x: jax.lax.stop_gradient(x) * x)
    with pytest.raises(AssertionError, match="gradient of input 0"):
        check_program(stop, lambda x: x * x, X)


def test_a_program_whose_output_is_not_recorded_is_rejected() -> None:
    with pytest.raises(AssertionError, match="does not require grad"):
        check_program(lambda x: (x * 2.0).detach(), lambda x: x * 2.0, X)


LEAKED: list[tg.Tensor] = []


def test_a_leak_is_caught() -> None:
    """A program that keeps an intermediate alive leaves nodes no cleanup can remove."""

    def leaky(x: tg.Tensor) -> tg.Tensor:
        y = x.exp()
        LEAKED.append(y)
        return y * 2.0

    try:
        with pytest.raises(AssertionError, match="leak"):
            check_program(leaky, lambda x: jnp.exp(x) * 2.0, X)
    finally:
        LEAKED.clear()


def test_hanging_nodes_are_not_leaks_and_earlier_ones_do_not_confuse_the_checker() -> None:
    junk = tg.tensor(X, requires_grad=True) * 3.0  # a hanging graph made before the check
    del junk

    def sloppy(x: tg.Tensor) -> tg.Tensor:
        (x * 5.0).sum()  # never backwarded, dropped: hanging, removed by the cleanup
        return x.tanh()

    check_program(sloppy, jnp.tanh, X)
    assert tg.graph_stats().hanging_nodes == 0


def test_the_checker_records_even_under_no_grad() -> None:
    with tg.no_grad():
        check_vjp(tg.registry()["tanh"], X)
        assert not tg.is_grad_enabled()  # and the mode is restored


def test_non_differentiable_ops_and_integer_outputs_are_checked_for_values() -> None:
    check_vjp(tg.registry()["less"], X, np.float32(0.0))
    check_vjp(tg.registry()["astype"], X, dtype=np.dtype(np.int32))


def test_wrt_must_name_floating_inputs() -> None:
    with pytest.raises(ValueError, match="not floating"):
        check_vjp(
            tg.registry()["cross_entropy"], Y.T, np.array([0], np.int32), np.float32(1), wrt=[1]
        )
    with pytest.raises(ValueError, match="no floating input"):
        check_program(lambda i: i * 2, lambda i: i * 2, np.arange(3))


def test_tolerances_follow_the_least_precise_float_dtype() -> None:
    assert default_tolerances(X) == (1e-5, 1e-5)
    assert default_tolerances(X.astype(np.float64)) == (1e-10, 1e-10)
    assert default_tolerances(X, X.astype(np.float16)) == (1e-2, 1e-2)
    assert default_tolerances(np.arange(3)) == (1e-5, 1e-5)
