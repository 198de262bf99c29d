"""ops/special.py against PyTorch: values and gradients inside each domain (float32 and
float64), at the domain's boundaries, for integer inputs, and the Tensor methods and PyTorch
spellings (gradients against jax.grad are in test_grads.py, from the spec rows)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

# tapegrad name, torch name, points inside the domain
CASES: list[tuple[str, str, list[float]]] = [
    ("tan", "tan", [-1.2, -0.3, 0.0, 0.7, 1.4]),
    ("arcsin", "asin", [-0.95, -0.2, 0.0, 0.5, 0.9]),
    ("arccos", "acos", [-0.95, -0.2, 0.0, 0.5, 0.9]),
    ("arctan", "atan", [-30.0, -1.0, 0.0, 0.5, 4.0]),
    ("sinh", "sinh", [-3.0, -0.5, 0.0, 1.0, 5.0]),
    ("cosh", "cosh", [-3.0, -0.5, 0.0, 1.0, 5.0]),
    ("arcsinh", "asinh", [-30.0, -1.0, 0.0, 0.5, 4.0]),
    ("arccosh", "acosh", [1.01, 1.5, 2.0, 10.0, 300.0]),
    ("arctanh", "atanh", [-0.95, -0.2, 0.0, 0.5, 0.9]),
    ("exp2", "exp2", [-5.0, -0.5, 0.0, 1.5, 10.0]),
    ("expm1", "expm1", [-5.0, -1e-4, 0.0, 1e-6, 3.0]),
    ("log2", "log2", [1e-3, 0.5, 1.0, 2.0, 1e4]),
    ("log10", "log10", [1e-3, 0.5, 1.0, 2.0, 1e4]),
    ("reciprocal", "reciprocal", [-4.0, -0.25, 0.1, 1.0, 7.0]),
    ("erfc", "erfc", [-3.0, -0.5, 0.0, 1.0, 4.0]),
    ("erfinv", "erfinv", [-0.99, -0.3, 0.0, 0.5, 0.9]),
    ("lgamma", "lgamma", [-2.5, -0.5, 0.3, 1.0, 12.0]),
    ("digamma", "digamma", [-2.5, -0.5, 0.3, 1.0, 12.0]),
    ("sinc", "sinc", [-2.5, -0.05, 0.0, 1e-3, 0.7]),
    ("deg2rad", "deg2rad", [-180.0, 0.0, 45.0, 90.0, 720.0]),
    ("rad2deg", "rad2deg", [-3.0, 0.0, 0.5, 1.0, 6.3]),
]
IDS = [c[0] for c in CASES]


def _both(
    name: str, torch_name: str, values: Any, dtype: Any, exact: bool = True
) -> tuple[Any, ...]:
    """Ours in ``dtype``; PyTorch's in float64 when ``exact`` (its float32 sinc, say, cancels
    near 0), else in ``dtype`` too (where float32 overflows)."""
    x = tg.tensor(np.asarray(values, dtype), requires_grad=True)
    y = getattr(tg, name)(x)
    (y * tg.tensor(np.linspace(0.5, 1.5, y.size).astype(dtype))).sum().backward()
    theirs = np.float64 if exact else dtype
    t = torch.tensor(np.asarray(values, dtype).astype(theirs), requires_grad=True)
    u = getattr(torch, torch_name)(t)
    (u * torch.tensor(np.linspace(0.5, 1.5, u.numel()).astype(theirs))).sum().backward()
    return np.asarray(y.data), u.detach().numpy(), np.asarray(x.grad.data), t.grad.numpy()


@pytest.mark.parametrize(("name", "torch_name", "values"), CASES, ids=IDS)
def test_values_and_gradients_match_torch(name: str, torch_name: str, values: list[float]) -> None:
    y, u, gx, gt = _both(name, torch_name, values, np.float32)
    np.testing.assert_allclose(y, u, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx, gt, rtol=1e-5, atol=1e-6)


X64 = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_special import CASES, _both
for name, torch_name, values in CASES:
    y, u, gx, gt = _both(name, torch_name, values, np.float64)
    assert y.dtype == gx.dtype == np.float64, (name, y.dtype)
    np.testing.assert_allclose(y, u, rtol=1e-12, atol=1e-12, err_msg=name)
    # rtol 1e-9: PyTorch's trigamma is 5e-10 off at 1 (pi^2 / 6), JAX's exact
    np.testing.assert_allclose(gx, gt, rtol=1e-9, atol=1e-12, err_msg=name)
print("ok", len(CASES))
"""


def test_float64_values_and_gradients_match_torch() -> None:
    """The same points in float64 (x64 is process-wide: a subprocess turns it on)."""
    here = Path(__file__).resolve().parent
    done = subprocess.run(
        [sys.executable, "-c", X64, str(here)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-3000:]


# the boundaries: what PyTorch gives (inf, nan), value and gradient alike
BOUNDARIES = [
    ("arcsin", "asin", [1.0, -1.0, 1.5]),
    ("arccos", "acos", [1.0, -1.0, -2.0]),
    ("arccosh", "acosh", [1.0, 0.5]),
    ("arctanh", "atanh", [1.0, -1.0, 2.0]),
    ("erfinv", "erfinv", [1.0, -1.0, 1.5]),
    ("log2", "log2", [0.0, -1.0]),
    ("log10", "log10", [0.0, -1.0]),
    ("reciprocal", "reciprocal", [0.0]),
    ("lgamma", "lgamma", [0.0, -1.0, -2.0]),
    ("digamma", "digamma", [0.0, -0.0, -1.0]),
    ("sinc", "sinc", [0.0, 1.0, -2.0]),
    ("exp2", "exp2", [200.0, -200.0]),
    ("expm1", "expm1", [100.0, -100.0]),
]


@pytest.mark.parametrize(
    ("name", "torch_name", "values"), BOUNDARIES, ids=[b[0] for b in BOUNDARIES]
)
def test_boundaries_match_torch(name: str, torch_name: str, values: list[float]) -> None:
    y, u, gx, gt = _both(name, torch_name, values, np.float32, exact=False)
    np.testing.assert_allclose(y, u, rtol=1e-6, atol=1e-6)  # nan where nan, inf where inf
    if name != "digamma":  # trigamma at -1: JAX inf, PyTorch 1.29e15 (both "infinite")
        np.testing.assert_allclose(gx, gt, rtol=1e-6, atol=1e-6)


def _sinc2(x: float) -> float:
    """sinc''(x) in float64: its Taylor series near 0, else the closed form."""
    if abs(x) < 1e-3:
        return -(np.pi**2) / 3 + np.pi**4 * x * x / 10
    p = np.pi * x
    return float((-(p**2) * np.sin(p) - 2 * p * np.cos(p) + 2 * np.sin(p)) / (np.pi * x**3))


def test_sinc_second_derivative_is_continuous_at_zero() -> None:
    """The series below |x| = 0.1 gives -pi^2 / 3 at 0 and the right values near it (the
    quotient's float32 cancellation gave 0 and noise; JAX's own gives 5.96 at 1e-4)."""
    for v in (0.0, 1e-4, 0.05, 0.0999, 0.1001, 0.5):
        x = tg.tensor(v, requires_grad=True)
        (g,) = tg.grad(tg.sinc(x), [x], create_graph=True)
        (h,) = tg.grad(g, [x])
        np.testing.assert_allclose(float(h), _sinc2(v), rtol=2e-3, atol=1e-4)
        del x, g, h


@pytest.mark.parametrize("name", ["tan", "expm1", "log2", "deg2rad", "lgamma"])
def test_integer_inputs_give_floats(name: str) -> None:
    """As PyTorch: an integer tensor is promoted to the default float dtype."""
    got = getattr(tg, name)(tg.arange(1, 4))
    want = getattr(torch, name)(torch.arange(1, 4))
    assert got.dtype == np.float32 and want.dtype == torch.float32
    np.testing.assert_allclose(np.asarray(got.data), want.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", IDS)
def test_tensor_methods(name: str) -> None:
    x = tg.tensor([0.25, 0.5] if name != "arccosh" else [1.25, 1.5], requires_grad=True)
    assert np.array_equal(np.asarray(getattr(x, name)().data), getattr(tg, name)(x).data)


@pytest.mark.parametrize(
    ("torch_name", "ours"),
    [("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"), ("atanh", "arctanh")],
)
def test_pytorch_short_names_say_the_numpy_name(torch_name: str, ours: str) -> None:
    with pytest.raises(AttributeError, match=rf"tg\.{ours}\(x\)"):
        getattr(tg, torch_name)
    with pytest.raises(AttributeError, match=rf"x\.{ours}\(\)"):
        getattr(tg.ones(2), torch_name)


def test_a_string_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="tan"):
        tg.tan("1.0")
    with pytest.raises(TypeError, match="deg2rad"):
        tg.deg2rad("90")


BINARY: list[tuple[str, list[float], list[float]]] = [
    ("logaddexp", [-3.0, 0.0, 2.5, -np.inf, 40.0], [1.0, 0.0, -2.0, 0.5, -40.0]),
    ("hypot", [3.0, -1.5, 0.2, 1e-3, -4.0], [4.0, 2.0, -0.7, 2.0, 0.5]),
    ("xlogy", [0.0, 0.0, 1.5, -2.0, 3.0], [0.0, 2.0, 0.5, 3.0, 1.0]),
    ("fmod", [5.5, -5.5, 7.0, -0.3, 2.0], [2.0, 2.0, -3.0, 0.25, 0.7]),
    ("copysign", [0.0, -2.0, 3.0, 1.5, -0.5], [-1.0, 1.0, -0.0, -4.0, 2.0]),
]


@pytest.mark.parametrize(("name", "a", "b"), BINARY, ids=[c[0] for c in BINARY])
def test_two_input_functions_match_torch(name: str, a: list[float], b: list[float]) -> None:
    """Values and both gradients, also broadcast (a column against a row), at the edges the
    points include (x = 0 for xlogy, a = 0 for copysign, -inf for logaddexp)."""
    for shape_a, shape_b in (((5,), (5,)), ((5, 1), (1, 5))):
        xa = np.asarray(a, np.float32).reshape(shape_a)
        xb = np.asarray(b, np.float32).reshape(shape_b)
        ta, tb = tg.tensor(xa, requires_grad=True), tg.tensor(xb, requires_grad=True)
        y = getattr(tg, name)(ta, tb)
        (y * 1.5).sum().backward()
        ua, ub = torch.tensor(xa, requires_grad=True), torch.tensor(xb, requires_grad=True)
        z = getattr(torch, name)(ua, ub)
        (z * 1.5).sum().backward()
        np.testing.assert_allclose(np.asarray(y.data), z.detach().numpy(), rtol=1e-6, atol=1e-6)
        for t, u in ((ta, ua), (tb, ub)):
            np.testing.assert_allclose(
                np.asarray(t.grad.data), u.grad.numpy(), rtol=1e-5, atol=1e-6
            )
        assert np.array_equal(np.asarray(getattr(ta, name)(tb).data), np.asarray(y.data), True)
        del ta, tb, y


def test_cumprod_gradient_is_right_with_zeros() -> None:
    """The scan's own derivative (a quotient g y / x is NaN or wrong at zeros)."""
    x = np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 0.0, 3.0, 2.0]], np.float32)
    w = np.arange(8, dtype=np.float32).reshape(2, 4)
    for axis in (0, 1, -1, None):
        t = tg.tensor(x, requires_grad=True)
        (t.cumprod(axis) * tg.tensor(w.reshape(-1) if axis is None else w)).sum().backward()
        u = torch.tensor(x, requires_grad=True)
        z = u.reshape(-1).cumprod(0) if axis is None else u.cumprod(axis)
        (z * torch.tensor(w.reshape(-1) if axis is None else w)).sum().backward()
        np.testing.assert_allclose(np.asarray(t.grad.data), u.grad.numpy(), rtol=1e-6)
        del t
    assert float(tg.cumprod(tg.tensor(2.0), axis=0)) == 2.0
