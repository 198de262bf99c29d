"""BCELoss and KLDivLoss (and their functions) against PyTorch: values and gradients, at
PyTorch's clamps (probabilities of exactly 0 and 1, targets of 0) too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.nn.functional")

RNG = np.random.default_rng(0)


def _compare(ours: Any, theirs: Any, arrays: list[np.ndarray], wrt: tuple[int, ...]) -> None:
    """Outputs, and the gradients of ``sum(out * v)`` for the inputs ``wrt``, equal."""
    a = [tg.tensor(x, requires_grad=i in wrt) for i, x in enumerate(arrays)]
    b = [torch.tensor(x, requires_grad=i in wrt) for i, x in enumerate(arrays)]
    y, q = ours(*a), theirs(*b)
    np.testing.assert_allclose(np.asarray(y), q.detach().numpy(), rtol=1e-5, atol=1e-5)
    v = np.random.default_rng(1).standard_normal(q.shape).astype(np.float32)
    (y * tg.tensor(v)).sum().backward()
    (q * torch.tensor(v)).sum().backward()
    for i in wrt:
        np.testing.assert_allclose(
            np.asarray(a[i].grad), b[i].grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=str(i)
        )


def _probs() -> tuple[np.ndarray, np.ndarray]:
    p = RNG.uniform(0, 1, (3, 4)).astype(np.float32)
    p[0, :3] = [0.0, 1.0, 1e-30]  # log clamped at -100; gradient's 1e-12 floor
    t = RNG.uniform(0, 1, (3, 4)).astype(np.float32)
    t[1, :2] = [0.0, 1.0]
    return p, t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_loss_matches_torch(reduction: str, weighted: bool) -> None:
    p, t = _probs()
    p[0, 2] = 0.25  # the target's gradient -logit(p) is infinite at 0 and 1, as PyTorch's
    p[0, 1] = 0.75
    w = RNG.uniform(0.5, 2, (4,)).astype(np.float32) if weighted else None
    ours = nn.BCELoss(reduction, weight=w)
    theirs = torch.nn.BCELoss(None if w is None else torch.tensor(w), reduction=reduction)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _compare(ours, theirs, [p, t], (0, 1))


def test_bce_clamps_as_torch_at_zero_and_one() -> None:
    p, t = _probs()
    _compare(tg.binary_cross_entropy, F.binary_cross_entropy, [p, t], (0,))
    loss = tg.binary_cross_entropy(tg.tensor([0.0, 1.0]), tg.tensor([1.0, 0.0]), reduction="none")
    assert np.asarray(loss).tolist() == [100.0, 100.0]


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")  # PyTorch's
@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_loss_matches_torch(reduction: str, log_target: bool) -> None:
    x = np.log(RNG.dirichlet(np.ones(5), 3)).astype(np.float32)
    t = RNG.dirichlet(np.ones(5), 3).astype(np.float32)
    t = np.log(t) if log_target else t
    ours = nn.KLDivLoss(reduction, log_target=log_target)
    theirs = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    _compare(ours, theirs, [x, t], (0, 1))


def test_kl_div_of_a_zero_target_is_zero_as_torch() -> None:
    x = np.log(np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], np.float32))
    t = np.array([[0.0, 0.4, 0.6], [0.5, 0.5, 0.0]], np.float32)
    _compare(
        lambda a, b: tg.kl_div(a, b, reduction="batchmean"),
        lambda a, b: F.kl_div(a, b, reduction="batchmean"),
        [x, t],
        (0,),
    )


def test_kl_div_broadcasts_as_torch() -> None:
    x = np.log(RNG.dirichlet(np.ones(4), 3)).astype(np.float32)
    t = RNG.dirichlet(np.ones(4)).astype(np.float32)
    _compare(
        lambda a, b: tg.kl_div(a, b, reduction="sum"),
        lambda a, b: F.kl_div(a, b, reduction="sum"),
        [x, t],
        (0, 1),
    )


def test_bad_arguments_say_what_to_do() -> None:
    ones = tg.ones((3,))
    with pytest.raises(ValueError, match=r"^kl_div: reduction='avg'; use 'mean', 'batchmean'"):
        tg.kl_div(ones, ones, reduction="avg")
    with pytest.raises(ValueError, match=r"^KLDivLoss: reduction='avg'"):
        nn.KLDivLoss("avg")
    with pytest.raises(tg.ShapeError, match=r"^kl_div: operand shapes \(3,\), \(4,\)"):
        tg.kl_div(ones, tg.ones((4,)))
    with pytest.raises(tg.ShapeError, match=r"^binary_cross_entropy: targets of shape \(4,\)"):
        tg.binary_cross_entropy(ones, tg.ones((4,)))
    with pytest.raises(tg.ShapeError, match=r"weight of shape \(2,\) does not broadcast"):
        tg.binary_cross_entropy(ones, ones, tg.ones((2,)))
    with pytest.raises(TypeError, match=r"operands must be floating, got dtype int32"):
        tg.binary_cross_entropy(ones, tg.ones((3,), dtype=tg.int32))
    with pytest.raises(TypeError, match="size_average and reduce"):
        tg.kl_div(ones, ones, None, None, "sum")
    with pytest.raises(ValueError, match="pass weight= by keyword"):
        nn.BCELoss(tg.ones((3,)))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="size_average"):
        nn.BCELoss(size_average=True)  # type: ignore[call-arg]


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")  # PyTorch's
@pytest.mark.parametrize("reduction", ["mean", "batchmean"])
def test_kl_div_of_an_empty_batch_is_nan_as_torch(reduction: str) -> None:
    empty = np.zeros((0, 3), np.float32)
    want = torch.nn.functional.kl_div(torch.tensor(empty), torch.tensor(empty), reduction=reduction)
    got = tg.kl_div(empty, empty, reduction=reduction)
    assert np.isnan(float(got)) and np.isnan(want.item())
