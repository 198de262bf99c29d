"""Binary op edge cases: ties in maximum/minimum, broadcasting, scalars, power at 0, where,
arctan2's quadrants, lerp's ends."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.testing import check_program, check_vjp

R = tg.registry()
F32 = np.float32


def _grads(fn: object, *values: object) -> list[np.ndarray]:
    """d sum(fn(*xs)) / dxs through tapegrad."""
    xs = [tg.tensor(np.asarray(v, F32), requires_grad=True) for v in values]
    out = fn(*xs)  # type: ignore[operator]
    return [np.asarray(g.data) for g in tg.grad(out.sum(), xs)]


@pytest.mark.parametrize(("op", "ref"), [(tg.maximum, jnp.maximum), (tg.minimum, jnp.minimum)])
def test_ties_split_the_gradient_equally(op: object, ref: object) -> None:
    """JAX's convention: at a == b each side receives g / 2."""
    a = np.array([1.0, 2.0, 3.0], F32)
    b = np.array([1.0, 0.0, 5.0], F32)
    ga, gb = _grads(op, a, b)
    winner_a = [0.5, 1.0, 0.0] if op is tg.maximum else [0.5, 0.0, 1.0]
    np.testing.assert_array_equal(ga, winner_a)
    np.testing.assert_array_equal(gb, 1.0 - np.array(winner_a))
    check_program(op, ref, a, b)  # type: ignore[arg-type]


def test_tie_with_a_broadcast_scalar_accumulates_halves() -> None:
    a = np.array([[2.0, 2.0], [1.0, 2.0]], F32)
    ga, gb = _grads(tg.maximum, a, np.array(2.0, F32))
    np.testing.assert_array_equal(ga, [[0.5, 0.5], [0.0, 0.5]])
    np.testing.assert_array_equal(gb, 0.5 * 3 + 1.0)
    check_vjp(R["maximum"], a, np.array(2.0, F32))


def test_broadcast_gradients_are_summed_to_each_input_shape() -> None:
    a = np.arange(6, dtype=F32).reshape(2, 3)
    b = np.array([[1.0], [2.0]], F32)
    ga, gb = _grads(lambda x, y: x * y, a, b)
    assert ga.shape == (2, 3) and gb.shape == (2, 1)
    np.testing.assert_array_equal(ga, np.broadcast_to(b, (2, 3)))
    np.testing.assert_array_equal(gb, a.sum(axis=1, keepdims=True))


def test_python_numpy_and_jax_scalars_on_either_side_are_constants() -> None:
    x = np.array([1.0, 2.0], F32)
    cases = [
        (lambda t: 3.0 / t, lambda a: 3.0 / a),
        (lambda t: 2.0 - t, lambda a: 2.0 - a),
        (lambda t: np.float32(2.0) * t, lambda a: 2.0 * a),
        (lambda t: jnp.array([2.0, 3.0]) * t, lambda a: jnp.array([2.0, 3.0]) * a),
        (lambda t: np.array([2.0, 3.0], F32) + t, lambda a: jnp.array([2.0, 3.0]) + a),
        (lambda t: 2.0**t, lambda a: 2.0**a),
        (lambda t: t**3, lambda a: a**3),
    ]
    for tg_fn, jnp_fn in cases:
        out = tg_fn(tg.tensor(x, requires_grad=True))
        assert isinstance(out, tg.Tensor) and out.requires_grad
        assert out.dtype == jnp.float32  # Python scalars never upcast (weak types)
        check_program(tg_fn, jnp_fn, x)


def test_power_with_integer_exponent_at_zero_base() -> None:
    """x ** 2 and x ** 0 at x == 0 have gradient 0, as jax.grad gives."""
    x = np.array([0.0, 1.5], F32)
    np.testing.assert_array_equal(_grads(lambda t: t**2, x)[0], [0.0, 3.0])
    np.testing.assert_array_equal(_grads(lambda t: t**0, x)[0], [0.0, 0.0])
    check_program(lambda t: t**2, lambda a: a**2, x)
    check_program(lambda t: t**0, lambda a: a**0, x)


def test_power_with_float_zero_exponent_at_zero_base_is_zero_not_nan() -> None:
    """d/da a**b at a == b == 0: tapegrad gives 0 (the limit along a; JAX's float-exponent rule
    b * a**(b-1) gives 0 * inf = NaN there), and d/db uses log(a) read as 0 at a == 0."""
    ga, gb = _grads(lambda x, y: x**y, np.zeros(2, F32), np.array([0.0, 1.0], F32))
    np.testing.assert_array_equal(ga, [0.0, 1.0])
    np.testing.assert_array_equal(gb, [0.0, 0.0])
    assert np.isnan(jax.grad(lambda a: jnp.power(a, 0.0))(0.0))  # the divergence, documented


def test_power_gradient_wrt_exponent() -> None:
    a = np.array([0.5, 2.0, 3.0], F32)
    b = np.array([1.5, -1.0, 2.0], F32)
    check_vjp(R["power"], a, b)
    np.testing.assert_allclose(_grads(lambda x, y: x**y, a, b)[1], a**b * np.log(a), rtol=1e-6)


def test_divide_gradients() -> None:
    a = np.array([1.0, -2.0], F32)
    b = np.array([4.0, 0.5], F32)
    ga, gb = _grads(lambda x, y: x / y, a, b)
    np.testing.assert_allclose(ga, 1 / b)
    np.testing.assert_allclose(gb, -a / b**2)


def test_where_routes_the_gradient_and_never_differentiates_the_condition() -> None:
    cond = np.array([[True, False, True]])
    a = np.array([1.0, 2.0, 3.0], F32)
    b = np.array([[10.0], [20.0]], F32)
    ta, tb = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    out = tg.where(cond, ta, tb)
    assert out.shape == (2, 3)
    ga, gb = tg.grad(out.sum(), [ta, tb])
    np.testing.assert_array_equal(np.asarray(ga.data), [2.0, 0.0, 2.0])
    np.testing.assert_array_equal(np.asarray(gb.data), [[1.0], [1.0]])
    check_vjp(R["where"], cond, a, b)


def test_where_with_a_comparison_tensor_as_condition() -> None:
    x = np.array([-1.0, 0.5, 2.0], F32)
    check_program(lambda t: tg.where(t > 0, t * t, -t), lambda a: jnp.where(a > 0, a * a, -a), x)


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "where", "arctan2", "lerp"])
def test_incompatible_shapes_raise_value_error(op: str) -> None:
    a = tg.ones((2, 3), requires_grad=True)
    b = tg.ones((4,))
    args = (np.array(True), a, b) if op == "where" else (a, b, 0.5) if op == "lerp" else (a, b)
    with pytest.raises(ValueError, match="broadcast"):
        R[op](*args)


def test_float_tensor_to_a_small_int_power_is_integer_pow() -> None:
    """``x ** n`` for a Python int n in [-2, 8] on a float tensor is one ``integer_pow``
    node (repeated multiplication, as ``jnp.power(x, 2)``), its gradient jax.grad's; other
    exponents, int tensors and float exponents stay the general ``power``."""
    x = np.array([-1.5, 0.5, 2.0], F32)
    for n in (-2, -1, 0, 1, 2, 3, 8):
        t = tg.tensor(x, requires_grad=True)
        out = t**n
        (record,) = [r for r in tg.snapshot().nodes if r.tensor is not None and r.tensor() is out]
        assert record.op == "integer_pow", n
        assert out.dtype == jnp.float32
        check_program(lambda a, n=n: a**n, lambda a, n=n: a**n, x)
    for exponent in (9, -3, 2.0):
        t = tg.tensor(x, requires_grad=True)
        out = t**exponent
        (record,) = [r for r in tg.snapshot().nodes if r.tensor is not None and r.tensor() is out]
        assert record.op == "power", exponent
    ints = tg.tensor(np.array([1, 2, 3], np.int32)) ** 2
    assert ints.dtype == jnp.int32
    np.testing.assert_array_equal(ints.numpy(), [1, 4, 9])


def test_astype_follows_jnp_for_every_pair() -> None:
    """``astype`` is jnp's cast compiled: complex to bool is ``x != 0`` (a bare
    ``convert_element_type`` would read the real part only), weak types become strong."""
    sources = [
        np.array([0j, 1j, 0.5j, 1 + 0j], np.complex64),
        np.array([0.0, -1.5, 2.5, 300.0], F32),
        np.array([0, 1, -3, 200], np.int32),
        np.array([True, False, True, True]),
    ]
    for data in sources:
        targets = (np.bool_, np.float32, np.int32, np.uint8, jnp.bfloat16, np.complex64)
        if data.dtype.kind == "c":  # complex to a real number: JAX deprecates it (a warning)
            targets = (np.bool_, np.complex64)
        for dtype in targets:
            got = tg.tensor(data).astype(dtype).data
            want = jnp.asarray(data).astype(dtype)
            assert got.dtype == want.dtype and got.weak_type == want.weak_type
            np.testing.assert_array_equal(
                np.asarray(got), np.asarray(want), f"{data.dtype}->{dtype}"
            )
    weak = tg.tensor(2.0).astype(tg.float32).data
    assert not weak.weak_type and weak.dtype == jnp.float32


def test_floor_division_and_remainder_match_python_and_torch() -> None:
    """``//`` rounds toward -inf and ``%`` takes the divisor's sign, on floats and ints, with
    scalars on either side; gradients: zeros for ``//``, (g, -g * floor(a / b)) for ``%``
    (PyTorch's values)."""
    torch = pytest.importorskip("torch")
    a = np.array([5.0, -7.5, 3.0, -4.0], F32)
    b = np.array([2.0, 3.0, -2.0, -3.0], F32)
    ta, tb = tg.tensor(a).require_grad(), tg.tensor(b).require_grad()
    pa = torch.tensor(a, requires_grad=True)
    pb = torch.tensor(b, requires_grad=True)
    np.testing.assert_array_equal((ta // tb).numpy(), (pa // pb).detach().numpy())
    r = ta % tb
    pr = pa % pb
    np.testing.assert_array_equal(r.numpy(), pr.detach().numpy())
    w = np.array([1.0, 2.0, 3.0, 4.0], F32)
    (r * tg.tensor(w)).sum().backward()
    (pr * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(ta.grad.numpy(), pa.grad.numpy())
    np.testing.assert_array_equal(tb.grad.numpy(), pb.grad.numpy())
    ga, gb = tg.grad((ta // tb).sum(), [ta, tb])
    assert ga.tolist() == [0.0] * 4 and gb.tolist() == [0.0] * 4
    i = tg.tensor(np.array([7, -7], np.int32))
    assert (i // 2).tolist() == [7 // 2, -7 // 2] and (i // 2).dtype == tg.int32
    assert (i % 3).tolist() == [7 % 3, -7 % 3]
    assert (7 // tg.tensor([2.0, -2.0])).tolist() == [3.0, -4.0]
    assert (7.5 % tg.tensor([2.0, -2.0])).tolist() == [1.5, -0.5]


def test_in_place_floor_division_and_remainder() -> None:
    """``//=`` and ``%=`` follow the other in-place operators: refused on a leaf that requires
    grad under grad mode, an update under no_grad, a rebinding on a non-leaf."""
    w = tg.tensor([7.0, 9.0]).require_grad()
    with pytest.raises(tg.InPlaceError, match="//="):
        w //= 2
    with tg.no_grad():
        w %= 4
    assert w.tolist() == [3.0, 1.0] and w.requires_grad
    h = w * 1.0
    h //= 2
    assert h.tolist() == [1.0, 0.0] and h.requires_grad


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign"])
def test_rounding_methods_match_numpy_and_have_zero_gradients(name: str) -> None:
    """Each is a method and a function; the output requires grad (as in PyTorch), its
    gradient is zeros; ``round`` rounds halves to even."""
    a = np.array([-2.5, -1.2, -0.0, 0.5, 1.5, 2.7], F32)
    x = tg.tensor(a).require_grad()
    y = getattr(x, name)()
    np.testing.assert_array_equal(y.numpy(), getattr(np, "rint" if name == "round" else name)(a))
    assert getattr(tg, name)(x).tolist() == y.tolist()
    assert y.requires_grad
    (g,) = tg.grad((y * 3.0).sum(), x)
    assert g.tolist() == [0.0] * 6


def test_round_with_decimals_and_the_builtin() -> None:
    x = tg.tensor(np.array([1.26, -0.35, 2.5], F32))
    np.testing.assert_allclose(x.round(1).numpy(), np.round(x.numpy(), 1))
    np.testing.assert_allclose(round(x, 1).numpy(), np.round(x.numpy(), 1))
    assert round(x).tolist() == [1.0, -0.0, 2.0]


def test_integer_floor_division_by_a_zero_raises() -> None:
    """Python's and PyTorch's ZeroDivisionError (XLA would return garbage); floats give
    inf/NaN, as in PyTorch."""
    i = tg.tensor(np.array([5, -5], np.int32))
    zero_in = tg.tensor(np.array([2, 0], np.int32))  # gave [2, -2]: XLA's garbage for 5 // 0
    for compute in (
        lambda: i // 0,
        lambda: i % np.int64(0),
        lambda: i // zero_in,
        lambda: i % zero_in,
        lambda: 7 // zero_in,
        lambda: tg.remainder(i, zero_in),
        lambda: tg.tensor([True]) // tg.tensor([False]),
    ):
        with pytest.raises(ZeroDivisionError, match="division or modulo by zero"):
            compute()
    j = tg.tensor(np.array([5, -5], np.int32))
    with pytest.raises(ZeroDivisionError):
        j //= zero_in
    assert j.tolist() == [5, -5]  # unchanged
    assert (i // tg.tensor(np.array([2, 3], np.int32))).tolist() == [2, -2]
    f = tg.tensor([5.0, -5.0])
    assert (f // 0).tolist() == [np.inf, -np.inf]
    assert np.isnan((f % 0).numpy()).all()
    empty = tg.tensor(np.zeros(0, np.int32))  # divides nothing: PyTorch returns it
    assert (empty // 0).shape == (0,) and (empty % zero_in[1:]).shape == (0,)


def test_integer_floor_division_inside_tg_jit_is_not_checked() -> None:
    """Inside a compiled step the divisor is a constant of the trace: no check, no error (a
    step computing ``pos // 2`` raised a TracerError)."""
    p = tg.tensor(np.array([7, -7, 5, -5], np.int32))

    @tg.jit
    def step(x: tg.Tensor) -> tuple[tg.Tensor, tg.Tensor, tg.Tensor]:
        return x // 2, x % 3, tg.floor_divide(x, np.int32(2))

    q, r, f = step(p)
    assert q.tolist() == f.tolist() == [3, -4, 2, -3]
    assert r.tolist() == [1, 2, 2, 1]


def test_float16_divide_gradient_does_not_overflow_as_in_torch() -> None:
    """d(a / b)/db = -g * ((a / b) / b), PyTorch's order: -(g * (a / b)) / b overflowed
    float16 (g = 1000, a = 200, b = 2 gave -inf; torch and jax.grad -49984)."""
    torch = pytest.importorskip("torch")
    a = tg.tensor(np.array([200.0, 100.0], np.float16))
    b = tg.tensor(np.array([2.0, 4.0], np.float16)).require_grad()
    (a / b).backward(tg.tensor(np.array([1000.0, 1024.0], np.float16)))
    ta = torch.tensor([200.0, 100.0], dtype=torch.float16)
    tb = torch.tensor([2.0, 4.0], dtype=torch.float16, requires_grad=True)
    (ta / tb).backward(torch.tensor([1000.0, 1024.0], dtype=torch.float16))
    assert b.grad is not None and tb.grad is not None
    assert b.grad.tolist() == tb.grad.tolist() == [-49984.0, -6400.0]


def test_round_to_negative_decimals_refuses_integers_clearly() -> None:
    with pytest.raises(TypeError, match="decimals < 0 on an integer tensor"):
        tg.tensor([15]).round(-1)
    assert tg.tensor([14.0, 26.0]).round(-1).tolist() == [10.0, 30.0]


def test_arctan2_takes_numpys_quadrants_signed_zeros_and_integers() -> None:
    y = np.array([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, 2.0], F32)
    x = np.array([1.0, -1.0, -1.0, 1.0, -1.0, -1.0, 0.0, 0.0], F32)
    got = tg.arctan2(y, x).numpy()
    # XLA's atan2 is within an ulp of libm's (exact on some CPUs, 1 ulp off at pi/4 on others)
    np.testing.assert_allclose(got, np.arctan2(y, x), rtol=2e-7, atol=0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.arctan2(y, x)))
    got = tg.arctan2(tg.tensor([1, -2]), 3)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), np.arctan2([1, -2], 3).astype(F32), rtol=1e-6)
    gy, gx = _grads(tg.arctan2, y[:4], x[:4])
    np.testing.assert_allclose(gy, x[:4] / 2, rtol=1e-6)  # x / (x**2 + y**2), r = 2 here
    np.testing.assert_allclose(gx, -y[:4] / 2, rtol=1e-6)


def test_lerp_hits_its_ends_exactly_and_takes_a_number_weight() -> None:
    start, end = np.array([0.1, -3.7, 1e6], F32), np.array([0.7, 2.9, -1e-3], F32)
    np.testing.assert_array_equal(tg.lerp(start, end, 0.0).numpy(), start)
    np.testing.assert_array_equal(tg.lerp(start, end, 1.0).numpy(), end)
    w = np.array([0.25, 0.75, 0.5], F32)
    gs, ge, gw = _grads(tg.lerp, start, end, w)
    np.testing.assert_allclose(gs, 1 - w)
    np.testing.assert_allclose(ge, w)
    np.testing.assert_allclose(gw, end - start)
    gs, ge = _grads(lambda a, b: tg.lerp(a, b, 0.3), start, end)
    np.testing.assert_allclose(gs, np.full(3, 0.7, F32), rtol=1e-6)
    np.testing.assert_allclose(ge, np.full(3, 0.3, F32), rtol=1e-6)
    assert tg.lerp(tg.ones(3, dtype=tg.bfloat16), 2.0, 0.5).dtype == tg.bfloat16


def test_arctan2_gradient_at_the_origin_is_zero_as_pytorchs() -> None:
    """JAX's rule gives 0/0 there: a parameter whose angle is read at a zero vector got NaN."""
    gy, gx = _grads(tg.arctan2, np.array([0.0, 1.0], F32), np.array([0.0, 1.0], F32))
    np.testing.assert_allclose(gy, [0.0, 0.5])
    np.testing.assert_allclose(gx, [0.0, -0.5])


def test_lerp_in_float16_computes_in_float32_as_pytorch() -> None:
    """end - start overflows float16 at 6e4 - (-6e4)."""
    start, end = np.array([6e4, 4e4], np.float16), np.array([-6e4, -4e4], np.float16)
    got = tg.lerp(start, end, 0.7)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.numpy().astype(np.float32), [-24000.0, -16000.0], rtol=1e-3)
