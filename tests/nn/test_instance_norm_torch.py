"""InstanceNorm1d/2d/3d, tg.instance_norm and tg.group_norm against PyTorch: values,
gradients of the input, weight and bias, running statistics, state dicts, reprs, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(0)


def f32(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (scale * RNG.standard_normal(shape) + 0.5).astype(np.float32)


def _grads(fn: Any, arrays: list[np.ndarray], lib: Any) -> tuple[np.ndarray, list[np.ndarray]]:
    """The output of ``fn`` and the gradients of ``sum(out * v)`` for every input."""
    v = np.random.default_rng(1)
    if lib is tg:
        ts = [tg.tensor(a, requires_grad=True) for a in arrays]
        out = fn(*ts)
        cot = v.standard_normal(out.shape).astype(np.float32)
        gs = tg.grad((out * tg.tensor(cot)).sum(), ts)
        return out.numpy(), [g.numpy() for g in gs]
    ps = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ps)
    cot = v.standard_normal(tuple(out.shape)).astype(np.float32)
    gs = torch.autograd.grad((out * torch.tensor(cot)).sum(), ps)
    return out.detach().numpy(), [g.numpy() for g in gs]


def _same(ours: Any, theirs: Any, arrays: list[np.ndarray], rtol: float = 1e-4) -> None:
    out, grads = _grads(ours, arrays, tg)
    want, wgrads = _grads(theirs, arrays, torch)
    np.testing.assert_allclose(out, want, rtol=rtol, atol=1e-5)
    for i, (g, w) in enumerate(zip(grads, wgrads, strict=True)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5, err_msg=f"input {i}")


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 3), (3, 2, 0)])
def test_instance_norm_matches_torch_with_weight_and_bias(shape: tuple[int, ...]) -> None:
    x, w, b = f32(*shape, scale=3), f32(shape[1]), f32(shape[1])
    _same(
        lambda x, w, b: tg.instance_norm(x, weight=w, bias=b, eps=1e-3),
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-3),
        [x, w, b],
    )
    _same(tg.instance_norm, F.instance_norm, [x])


def test_instance_norm_updates_running_statistics_as_torch() -> None:
    """Each instance's mean and unbiased variance blended, then averaged over the batch; a
    second call with the statistics normalizes with them (use_input_stats=False)."""
    rm, rv = tg.zeros(3), tg.ones(3)
    trm, trv = torch.zeros(3), torch.ones(3)
    for _ in range(3):
        x = f32(4, 3, 5, scale=2)
        y = tg.instance_norm(x, rm, rv, momentum=0.3)
        want = F.instance_norm(torch.tensor(x), trm, trv, momentum=0.3)
        np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)
    mean, var = rm.numpy(), rv.numpy()
    _same(
        lambda x, w, b: tg.instance_norm(
            x, tg.tensor(mean), tg.tensor(var), w, b, use_input_stats=False
        ),
        lambda x, w, b: F.instance_norm(
            x, torch.tensor(mean), torch.tensor(var), w, b, use_input_stats=False
        ),
        [f32(2, 3, 4), f32(3), f32(3)],
    )


def test_instance_norm_errors() -> None:
    x = f32(2, 3, 4)
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        tg.instance_norm(f32(2, 3, 1))
    with pytest.raises(ValueError, match="use_input_stats=False normalizes with running_mean"):
        tg.instance_norm(x, use_input_stats=False)
    with pytest.raises(ValueError, match="both running_mean and running_var"):
        tg.instance_norm(x, tg.zeros(3))
    with pytest.raises(tg.ShapeError, match=r"weight of shape \(2,\) must be \(3,\)"):
        tg.instance_norm(x, weight=tg.ones(2))
    with pytest.raises(TypeError, match="updated in place"):
        tg.instance_norm(x, np.zeros(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match="sixth parameter is use_input_stats"):
        tg.instance_norm(x, None, None, None, None, True)  # type: ignore[misc]


def test_instance_norm_of_an_empty_batch_keeps_the_running_statistics() -> None:
    """PyTorch writes NaN (an average over no instances); tapegrad leaves them."""
    rm, rv = tg.zeros(3), tg.ones(3)
    assert tg.instance_norm(np.zeros((0, 3, 4), np.float32), rm, rv).shape == (0, 3, 4)
    assert not rm.numpy().any() and (rv.numpy() == 1).all()


@pytest.mark.parametrize(("groups", "shape"), [(2, (2, 4, 3)), (1, (3, 2, 2, 2)), (3, (2, 3, 4))])
def test_group_norm_matches_torch(groups: int, shape: tuple[int, ...]) -> None:
    x, w, b = f32(*shape, scale=2), f32(shape[1]), f32(shape[1])
    _same(
        lambda x, w, b: tg.group_norm(x, groups, w, b, 1e-4),
        lambda x, w, b: F.group_norm(x, groups, w, b, 1e-4),
        [x, w, b],
    )
    with pytest.raises(tg.ShapeError, match="multiple of num_groups"):
        tg.group_norm(np.zeros((2, 5, 3), np.float32), 2)


CASES = [
    (nn.InstanceNorm1d, 1, False, False),
    (nn.InstanceNorm1d, 1, True, False),
    (nn.InstanceNorm1d, 1, False, True),
    (nn.InstanceNorm2d, 2, True, True),
    (nn.InstanceNorm3d, 3, True, True),
]


@pytest.mark.parametrize(("layer", "spatial", "affine", "track"), CASES)
def test_instance_norm_layers_match_torch(
    layer: type[nn.Module], spatial: int, affine: bool, track: bool
) -> None:
    """Training (twice: the running statistics move), evaluation, and an unbatched input;
    the state dict loads both ways with PyTorch's keys."""
    theirs = getattr(torch.nn, layer.__name__)(
        3, momentum=0.2, affine=affine, track_running_stats=track
    )
    if affine:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            theirs.bias.uniform_(-0.5, 0.5)
    ours = layer(3, momentum=0.2, affine=affine, track_running_stats=track)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    sizes = (4, 3, 2)[:spatial]
    for _ in range(2):
        check_against_torch(ours, theirs, [f32(2, 3, *sizes, scale=2)], rtol=1e-4)
    ours.eval()
    theirs.eval()
    check_against_torch(ours, theirs, [f32(2, 3, *sizes, scale=2)], rtol=1e-4)
    check_against_torch(ours, theirs, [f32(3, *sizes, scale=2)], rtol=1e-4)
    if track:
        assert int(ours.num_batches_tracked.numpy()) == 0  # PyTorch does not count them


def test_instance_norm_layer_channel_mismatch_warns_or_raises_as_torch() -> None:
    x = f32(2, 4, 5)
    with pytest.warns(tg.TapegradWarning, match="num_features is not used"):
        y = nn.InstanceNorm1d(3)(x)
    np.testing.assert_allclose(
        y.numpy(), F.instance_norm(torch.tensor(x)).numpy(), rtol=1e-4, atol=1e-5
    )
    for kw in ({"affine": True}, {"track_running_stats": True}):
        with pytest.raises(tg.ShapeError, match=r"InstanceNorm1d\(3\) expects 3 channels"):
            nn.InstanceNorm1d(3, **kw)(x)
    with pytest.raises(tg.ShapeError, match=r"expects input of rank \(3, 4\)"):
        nn.InstanceNorm2d(4)(f32(4, 5))


def test_instance_norm_layer_momentum_none_keeps_the_statistics_as_torch() -> None:
    ours = nn.InstanceNorm1d(3, momentum=None, track_running_stats=True)
    theirs = torch.nn.InstanceNorm1d(3, momentum=None, track_running_stats=True)
    assert repr(ours) == repr(theirs)
    check_against_torch(ours, theirs, [f32(2, 3, 4)], rtol=1e-4)
    assert not ours.running_mean.numpy().any()
    with pytest.raises(ValueError, match=r"momentum must be in \[0, 1\]"):
        nn.InstanceNorm1d(3, momentum=2.0)


def test_batch_norm_takes_bias_and_prints_as_torch() -> None:
    """BatchNorm shares InstanceNorm's base: PyTorch's bias= keyword and its repr."""
    for kw in ({}, {"bias": False}, {"affine": False}):
        ours, theirs = nn.BatchNorm1d(3, **kw), torch.nn.BatchNorm1d(3, **kw)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
