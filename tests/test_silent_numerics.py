"""Silent numerics made visible (issue 16, item 9): broadcasting in ``mse_loss`` warns as PyTorch
does, ``tg.tensor`` refuses to drop the gradient of the tensors in a list, and reading ``.grad``
of a non-leaf warns. (``tg.detect_anomaly`` is tested in ``test_anomaly.py``.)"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of

import tapegrad as tg


@pytest.mark.parametrize(
    ("pred", "target"),
    [((3, 4), (3, 1)), ((3,), (3, 1)), ((4,), ()), ((2, 1, 3), (3,)), ((1,), (5,))],
    ids=["column", "to-a-third", "0-d", "rank", "pred-broadcast"],
)
def test_mse_loss_of_different_shapes_warns_at_the_callers_line(
    pred: tuple[int, ...], target: tuple[int, ...]
) -> None:
    a = tg.ones(pred).require_grad()
    b = tg.zeros(target)
    with pytest.warns(tg.errors.TapegradWarning, match="broadcast") as seen:
        loss = tg.mse_loss(a, b)
    assert len(seen) == 1 and seen[0].filename == __file__
    assert issubclass(seen[0].category, UserWarning)
    assert str(pred) in str(seen[0].message) and str(target) in str(seen[0].message)
    assert loss.item() == 1.0


@pytest.mark.parametrize(
    "target",
    [lambda s: tg.zeros(s), lambda s: np.zeros(s, np.float32), lambda s: 0.0],
    ids=["tensor", "numpy", "python-scalar"],
)
def test_mse_loss_of_equal_shapes_or_a_scalar_constant_is_silent(
    target: Callable[[tuple[int, ...]], Any],
) -> None:
    a = tg.ones((3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tg.mse_loss(a, target((3, 4))).item() == 1.0
        assert tg.mse_loss(a, 0.0).item() == 1.0


def test_mse_loss_of_shapes_that_do_not_broadcast_raises_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        err = error_of(ValueError, tg.mse_loss, tg.ones((3, 4)), tg.ones(3))
    assert isinstance(err, tg.ShapeError)


@pytest.mark.parametrize(
    "build",
    [
        lambda a, b: [a, b],
        lambda a, b: (a, b),
        lambda a, b: [[a], [b]],
        lambda a, b: [1.0, a],
        lambda a, b: [[tg.ones(2), b]],
    ],
    ids=["list", "tuple", "nested", "mixed", "one-of-many"],
)
def test_tensor_of_a_list_holding_a_tensor_that_requires_grad_raises(
    build: Callable[[tg.Tensor, tg.Tensor], Any],
) -> None:
    a = tg.ones(2).require_grad()
    b = tg.ones(2).require_grad()
    err = error_of(TypeError, tg.tensor, build(a, b))
    assert "tg.stack" in str(err) and ".detach()" in str(err)


def test_the_advice_keeps_the_gradient() -> None:
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(tg.tensor([a.detach(), a.detach()]).numpy(), [[1, 2], [1, 2]])
    np.testing.assert_array_equal(tg.tensor([tg.ones(2), tg.zeros(2)]).numpy(), [[1, 1], [0, 0]])
    (g,) = tg.grad(tg.stack([a, a]).sum(), a)
    assert g.tolist() == [2.0, 2.0]


def test_reading_grad_of_a_non_leaf_warns_at_the_callers_line() -> None:
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    y.sum().backward(retain_graph=True)
    with pytest.warns(tg.errors.TapegradWarning, match="retain_grad") as seen:
        assert y.grad is None
    assert seen[0].filename == __file__ and "'multiply'" in str(seen[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad is not None  # a leaf
        assert tg.ones(2).grad is None  # a tensor that does not require grad
        y.retain_grad()  # asked for: no warning, and backward fills it
        y.sum().backward()
        assert y.grad is not None and y.grad.tolist() == [1.0, 1.0]
        z = x * 2.0
        z.grad = tg.ones(2)  # set by the user: returned without a warning, as in PyTorch
        assert z.grad is not None
        w = tg.tensor(1.0, requires_grad=True)
        w.data = np.float32(3.0)  # a NumPy scalar for a 0-d tensor
        assert w.item() == 3.0


def test_integers_to_negative_powers_as_pytorch() -> None:
    """A compiled ``jnp.power`` gave garbage (2111105451 for 3 ** -1): a Python exponent is
    refused as PyTorch refuses it, a tensor exponent gives PyTorch's truncated values."""
    with pytest.raises(ValueError, match="negative integer powers.*astype"):
        tg.tensor([1, 2, 3]) ** -1
    torch = pytest.importorskip("torch")
    base, exponent = [1, 2, 3, -1, -1, 0, 2], [-1, -1, -2, -1, -2, 2, 3]
    got = tg.tensor(base) ** tg.tensor(exponent)
    np.testing.assert_array_equal(
        got.numpy(), (torch.tensor(base) ** torch.tensor(exponent)).numpy()
    )
    assert (2 ** tg.tensor([-1, 3])).tolist() == [0, 8]


def test_logsumexp_gradient_with_an_infinite_entry_is_jaxs() -> None:
    x = tg.tensor([np.inf, 1.0]).require_grad()
    (g,) = tg.grad(tg.logsumexp(x), [x])
    want = jax.grad(jax.nn.logsumexp)(jnp.array([np.inf, 1.0]))
    np.testing.assert_array_equal(g.numpy(), np.asarray(want))  # [nan, 0], not [nan, nan]


# ------------------------------------------------------ half precision and degenerate counts


def _pair(values: Any, dtype: str) -> tuple[tg.Tensor, Any]:
    torch = pytest.importorskip("torch")
    ours = tg.tensor(np.asarray(values, np.float32)).astype(getattr(tg, dtype)).require_grad()
    theirs = torch.tensor(np.asarray(values, np.float32)).to(getattr(torch, dtype))
    return ours, theirs.requires_grad_()


def _close(ours: tg.Tensor, theirs: Any, rtol: float) -> None:
    np.testing.assert_allclose(
        np.asarray(ours, np.float64), theirs.detach().double().numpy(), rtol=rtol, atol=1e-6
    )


def test_float16_norms_sum_their_squares_in_float32_as_pytorch() -> None:
    """300 x 8 in float16: the sum of squares (720,000) overflows float16; the norm (848.5)
    does not. It was inf with a zero gradient, and normalize and clip_grad_norm_ zeroed."""
    torch = pytest.importorskip("torch")
    x, t = _pair([300.0] * 8, "float16")
    y, z = x.norm(), t.norm()
    y.backward()
    z.backward()
    _close(y, z, 1e-3)
    _close(x.grad, t.grad, 1e-3)
    x, t = _pair([300.0] * 8, "float16")
    w = np.arange(8.0, dtype=np.float32)
    (tg.normalize(x) * tg.tensor(w).astype(tg.float16)).sum().backward()
    (torch.nn.functional.normalize(t, dim=-1) * torch.tensor(w).half()).sum().backward()
    _close(x.grad, t.grad, 1e-2)  # needs the divide VJP's -g * ((a / b) / b): b * b overflows
    p = tg.ones(8).astype(tg.float16).require_grad()
    p.grad = tg.full((8,), 300.0).astype(tg.float16)
    total = tg.nn.utils.clip_grad_norm_([p], 1.0)
    assert float(total) == pytest.approx(848.53, rel=1e-3)
    np.testing.assert_allclose(np.asarray(p.grad, np.float32), 0.3535, rtol=1e-2)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_layer_norm_normalizes_in_float32_as_pytorch(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    x, t = _pair([[1000.0, 1001.0, 1002.0, 1003.0]], dtype)
    y, z = tg.layer_norm(x, 4), torch.nn.functional.layer_norm(t, (4,))
    assert y.dtype == x.dtype
    _close(y, z, 1e-2)  # bfloat16 statistics gave [0, 0, 0, 2]
    g = np.array([[1.0, -2.0, 0.5, 3.0]], np.float32)
    y.backward(tg.tensor(g).astype(x.dtype))
    assert x.grad.dtype == x.dtype
    v = np.asarray(x, np.float64)  # the rounded inputs; PyTorch's bfloat16 gradient is
    m, r = v.mean(), 1 / np.sqrt(v.var() + 1e-5)  # further from this float64 one than ours
    h = (v - m) * r
    exact = r * (g - g.mean() - h * (g * h).mean())
    np.testing.assert_allclose(np.asarray(x.grad, np.float64), exact, rtol=2e-2, atol=1e-2)


def test_bfloat16_batch_norm_keeps_float32_running_statistics_as_pytorch() -> None:
    """A bfloat16 batch's mean and variance blend into float32 running statistics in float32
    (the batch mean was rounded to bfloat16: 299.96 against torch's 299.56 after 50 steps),
    and evaluation returns bfloat16 as training does (float32 stats promoted it)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    mean, var = tg.zeros(4), tg.ones(4)
    t_mean, t_var = torch.zeros(4), torch.ones(4)
    for _ in range(20):
        x = torch.tensor(rng.standard_normal((64, 4)).astype(np.float32) * 3 + 301).bfloat16()
        ours = tg.tensor(x.float().numpy()).astype(tg.bfloat16)
        assert tg.batch_norm(ours, mean, var, training=True).dtype == tg.bfloat16
        torch.nn.functional.batch_norm(x, t_mean, t_var, training=True)
    np.testing.assert_allclose(mean.numpy(), t_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(var.numpy(), t_var.numpy(), rtol=1e-5)
    x = torch.tensor(rng.standard_normal((4, 4)).astype(np.float32) * 3 + 301).bfloat16()
    y = tg.batch_norm(tg.tensor(x.float().numpy()).astype(tg.bfloat16), mean, var, training=False)
    assert y.dtype == tg.bfloat16
    z = torch.nn.functional.batch_norm(x, t_mean, t_var, training=False)
    np.testing.assert_allclose(np.asarray(y, np.float32), z.float().numpy(), rtol=1e-2)


def test_clip_grad_norm_of_complex_gradients_is_a_real_norm_as_pytorch() -> None:
    """The total norm of complex gradients is real (float32), as torch's: it was complex64,
    so float(total) raised."""
    torch = pytest.importorskip("torch")
    for norm_type in (2.0, 1.0, float("inf")):
        p = tg.tensor(np.array([1 + 2j, 3 - 1j], np.complex64)).require_grad()
        p.grad = tg.tensor(np.array([1 + 2j, 3 - 4j], np.complex64))
        q = torch.tensor([1 + 2j, 3 - 1j], requires_grad=True)
        q.grad = torch.tensor([1 + 2j, 3 - 4j])
        total = tg.nn.utils.clip_grad_norm_([p], 100.0, norm_type=norm_type)
        want = torch.nn.utils.clip_grad_norm_([q], 100.0, norm_type=norm_type)
        assert total.dtype == tg.float32
        assert float(total) == pytest.approx(float(want), rel=1e-6)


@pytest.mark.parametrize("op", ["var", "std"])
def test_variance_of_n_samples_with_ddof_n_has_a_nan_gradient(op: str) -> None:
    """ddof = N divides by zero: NaN values and gradients, as PyTorch (var's backward raised a
    Python ZeroDivisionError)."""
    x = tg.ones((1, 3)).require_grad()
    y = getattr(tg, op)(x, axis=0, ddof=1)
    assert np.isnan(y.numpy()).all()
    y.sum().backward()
    assert np.isnan(x.grad.numpy()).all()
