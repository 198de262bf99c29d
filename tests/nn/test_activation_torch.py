"""The activation layers PyTorch ports hit most (SELU, Hardtanh, ReLU6, Mish, LogSigmoid,
Hardswish, Hardsigmoid, Softsign, PReLU, GLU) against PyTorch: values and gradients, at the
kinks too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")

KINKS = np.array([-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, 7.0, 40.0, -40.0])


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    x = 3 * np.random.default_rng(seed).standard_normal(shape)
    flat = x.reshape(-1)
    flat[: len(KINKS)] = KINKS[: flat.size]  # the kinks of every layer below, exactly
    return x.astype(np.float32)


LAYERS: list[tuple[Callable[[], Any], Callable[[], Any]]] = [
    (nn.SELU, torch.nn.SELU),
    (nn.Hardtanh, torch.nn.Hardtanh),
    (lambda: nn.Hardtanh(-0.5, 2.0), lambda: torch.nn.Hardtanh(-0.5, 2.0)),
    (lambda: nn.ReLU6(inplace=True), torch.nn.ReLU6),
    (nn.Mish, torch.nn.Mish),
    (nn.LogSigmoid, torch.nn.LogSigmoid),
    (nn.Hardswish, torch.nn.Hardswish),
    (nn.Hardsigmoid, torch.nn.Hardsigmoid),
    (nn.Softsign, torch.nn.Softsign),
    (nn.PReLU, torch.nn.PReLU),
    (lambda: nn.PReLU(6, init=0.1), lambda: torch.nn.PReLU(6, init=0.1)),
    (nn.GLU, torch.nn.GLU),
    (lambda: nn.GLU(axis=1), lambda: torch.nn.GLU(dim=1)),
    (nn.CELU, torch.nn.CELU),
    (lambda: nn.CELU(0.5, inplace=True), lambda: torch.nn.CELU(0.5)),
    (nn.Hardshrink, torch.nn.Hardshrink),
    (lambda: nn.Hardshrink(1.0), lambda: torch.nn.Hardshrink(1.0)),
    (nn.Softshrink, torch.nn.Softshrink),
    (lambda: nn.Softshrink(2.0), lambda: torch.nn.Softshrink(2.0)),
    (nn.Tanhshrink, torch.nn.Tanhshrink),
    (lambda: nn.Threshold(0.5, -2.0), lambda: torch.nn.Threshold(0.5, -2.0)),
    (lambda: nn.Softmin(1), lambda: torch.nn.Softmin(1)),
    (nn.Softmax2d, torch.nn.Softmax2d),
]


@pytest.mark.parametrize(("ours", "theirs"), LAYERS)
def test_activation_layers_match_torch(ours: Callable[[], Any], theirs: Callable[[], Any]) -> None:
    """Forward, input gradient and (PReLU) weight gradient equal PyTorch's, at the kinks
    (0, the bounds, +-3 and 6) included; the state dict keys are PyTorch's."""
    torch.manual_seed(0)
    mine, ref = ours(), theirs()
    assert list(mine.state_dict()) == list(ref.state_dict())
    check_against_torch(mine, ref, [_x(2, 6, 4)], rtol=1e-5, atol=1e-6)


def test_prelu_weight_loads_from_torch_and_reads_like_it() -> None:
    ref = torch.nn.PReLU(4)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
    check_against_torch(nn.PReLU(4), ref, [_x(3, 4, 5, seed=2)], atol=1e-6)
    check_against_torch(nn.PReLU(), torch.nn.PReLU(), [_x(5, seed=3)], atol=1e-6)
    assert repr(nn.PReLU(4)) == repr(ref)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (tg.selu, torch.nn.functional.selu),
        (
            lambda x: tg.hardtanh(x, min_val=-2.0, max_val=0.5),
            lambda x: torch.nn.functional.hardtanh(x, -2.0, 0.5),
        ),
        (tg.relu6, torch.nn.functional.relu6),
        (tg.mish, torch.nn.functional.mish),
        (tg.log_sigmoid, torch.nn.functional.logsigmoid),
        (tg.hardswish, torch.nn.functional.hardswish),
        (tg.hardsigmoid, torch.nn.functional.hardsigmoid),
        (tg.softsign, torch.nn.functional.softsign),
        (lambda x: tg.glu(x, axis=0), lambda x: torch.nn.functional.glu(x, 0)),
        (lambda x: tg.celu(x, alpha=2.0), lambda x: torch.nn.functional.celu(x, 2.0)),
        (tg.hardshrink, torch.nn.functional.hardshrink),
        (lambda x: tg.softshrink(x, 1.0), lambda x: torch.nn.functional.softshrink(x, 1.0)),
        (tg.tanhshrink, torch.nn.functional.tanhshrink),
        (
            lambda x: tg.threshold(x, 1.0, 0.25),
            lambda x: torch.nn.functional.threshold(x, 1.0, 0.25),
        ),
        (lambda x: tg.softmin(x, axis=0), lambda x: torch.nn.functional.softmin(x, 0)),
    ],
)
def test_activation_functions_match_torch(ours: Any, theirs: Any) -> None:
    x = _x(4, 5, seed=1)
    t, p = tg.tensor(x).require_grad(), torch.tensor(x, requires_grad=True)
    y, q = ours(t), theirs(p)
    np.testing.assert_allclose(np.asarray(y), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = np.random.default_rng(4).standard_normal(q.shape).astype(np.float32)
    (g,) = tg.grad((y * tg.tensor(w)).sum(), t)
    (h,) = torch.autograd.grad((q * torch.tensor(w)).sum(), p)
    np.testing.assert_allclose(np.asarray(g), h.numpy(), rtol=1e-5, atol=1e-6)


def test_log_sigmoid_is_finite_far_out() -> None:
    x = tg.tensor([-200.0, -30.0, 0.0, 30.0, 200.0], requires_grad=True)
    y = tg.log_sigmoid(x)
    y.sum().backward()
    np.testing.assert_allclose(np.asarray(y), [-200.0, -30.0, -np.log(2), 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(x.grad), [1.0, 1.0, 0.5, 0.0, 0.0], atol=1e-6)


def test_bad_arguments_say_what_to_do() -> None:
    with pytest.raises(tg.ShapeError, match=r"^glu: axis -1 .* has odd length 3"):
        tg.glu(tg.ones((2, 3)))
    with pytest.raises(tg.ShapeError, match=r"^glu: axis 2 is out of range"):
        nn.GLU(2)(tg.ones((2, 4)))
    with pytest.raises(TypeError, match="use axis="):
        nn.GLU(dim=1)
    with pytest.raises(TypeError, match="use axis="):
        tg.glu(tg.ones((2, 4)), dim=1)
    with pytest.raises(ValueError, match=r"^hardtanh: min_val=2.0 is greater than max_val"):
        tg.hardtanh(tg.ones(2), min_val=2.0)
    with pytest.raises(ValueError, match=r"^Hardtanh: min_val=1 is greater"):
        nn.Hardtanh(1, 0)
    with pytest.raises(tg.ShapeError, match=r"^PReLU: 3 slopes, one per channel"):
        nn.PReLU(3)(tg.ones((2, 4)))
    with pytest.raises(ValueError, match="num_parameters must be at least 1"):
        nn.PReLU(0)
    with pytest.raises(AttributeError, match=r"write tg\.log_sigmoid"):
        tg.logsigmoid  # noqa: B018


def test_prelu_slope_gradient_is_finite_beside_an_infinite_input() -> None:
    """PyTorch's rule: the slope gets x * g where x <= 0 only (a zero cotangent times an
    infinite x of the other branch gave it NaN)."""
    m = nn.PReLU()
    x = tg.tensor(np.array([np.inf, 1.0, 2.0, -3.0], np.float32), requires_grad=True)
    m(x).sum().backward()
    assert m.weight.grad is not None and x.grad is not None
    np.testing.assert_allclose(m.weight.grad.numpy(), [-3.0])
    np.testing.assert_allclose(x.grad.numpy(), [1.0, 1.0, 1.0, 0.25])


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (nn.CELU(0.5, inplace=True), torch.nn.CELU(0.5, inplace=True)),
        (nn.Hardshrink(0.25), torch.nn.Hardshrink(0.25)),
        (nn.Softshrink(), torch.nn.Softshrink()),
        (nn.Tanhshrink(), torch.nn.Tanhshrink()),
        (nn.Threshold(0.1, 20.0, inplace=True), torch.nn.Threshold(0.1, 20.0, inplace=True)),
        (nn.Softmax2d(), torch.nn.Softmax2d()),
    ],
)
def test_new_activation_layers_read_like_torch(ours: Any, theirs: Any) -> None:
    assert repr(ours) == repr(theirs)


def test_shrink_and_threshold_gradients_at_their_edges_are_torchs() -> None:
    """At ``|x| == lambd`` the shrinks pass no gradient; at ``x == threshold`` neither does
    threshold (PyTorch's), in float64 too."""
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 0.25])
    for ours, theirs in [
        (tg.hardshrink, torch.nn.functional.hardshrink),
        (tg.softshrink, torch.nn.functional.softshrink),
        (lambda a: tg.threshold(a, 0.5, 9.0), lambda a: torch.nn.functional.threshold(a, 0.5, 9.0)),
        (lambda a: tg.celu(a, 0.5), lambda a: torch.nn.functional.celu(a, 0.5)),
    ]:
        t = tg.tensor(x.astype(np.float32), requires_grad=True)
        p = torch.tensor(x, requires_grad=True)
        ours(t).sum().backward()
        theirs(p).sum().backward()
        assert t.grad is not None and p.grad is not None
        np.testing.assert_allclose(np.asarray(t.grad), p.grad.numpy(), rtol=1e-6)


def test_new_activation_arguments_say_what_to_do() -> None:
    with pytest.raises(ValueError, match=r"^softshrink: lambd=-1.0 is negative"):
        tg.softshrink(tg.ones(2), lambd=-1.0)
    with pytest.raises(ValueError, match=r"^Hardshrink: lambd=-1 is negative"):
        nn.Hardshrink(-1)
    with pytest.raises(ValueError, match=r"^celu: alpha=0"):
        tg.celu(tg.ones(2), alpha=0.0)
    with pytest.raises(ValueError, match=r"^CELU: alpha=0"):
        nn.CELU(0)
    with pytest.raises(tg.ShapeError, match=r"^Softmax2d: expects an \(N, C, H, W\)"):
        nn.Softmax2d()(tg.ones((2, 3)))
    with pytest.raises(TypeError, match="use axis="):
        nn.Softmin(dim=1)
    with pytest.raises(TypeError, match="must be a number"):
        tg.hardshrink(tg.ones(2), lambd=np.ones(2))
    # a 0-d tensor is its number, as PyTorch takes it
    np.testing.assert_allclose(
        np.asarray(nn.Threshold(tg.tensor(0.5), 1.0)(tg.tensor([0.0, 2.0]))), [1.0, 2.0]
    )
