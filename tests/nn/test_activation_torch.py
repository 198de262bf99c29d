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
