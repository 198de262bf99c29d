"""nn.utils.clip_grad_norm_ and clip_grad_value_ against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn.utils import clip_grad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("max_norm", "norm_type"), [(0.1, 2.0), (100.0, 2.0), (0.05, float("inf"))]
)
def test_clip_grad_norm_matches_torch(max_norm: float, norm_type: float) -> None:
    torch.manual_seed(0)  # the same weights whatever ran before in this process
    ours = nn.Linear(4, 3, key=0)
    theirs = torch.nn.Linear(4, 3)
    ours.load_state_dict(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    (ours(tg.tensor(x)) ** 2).sum().backward()
    (theirs(torch.tensor(x)) ** 2).sum().backward()
    total = nn.utils.clip_grad_norm_(ours.parameters(), max_norm, norm_type)
    want = torch.nn.utils.clip_grad_norm_(theirs.parameters(), max_norm, norm_type)
    np.testing.assert_allclose(float(total), float(want), rtol=1e-5)
    for name, p in ours.named_parameters():
        assert p.grad is not None and not p.grad.requires_grad
        got = np.asarray(p.grad)
        np.testing.assert_allclose(got, getattr(theirs, name).grad.numpy(), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_mixed_dtypes_equal_the_traced_path(
    norm_type: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gradients of several dtypes and shapes (one vector per dtype in the eager kernel; one
    reduction per gradient under tg.jit and beyond the concatenation's byte limit): the
    same norm and clipped gradients as float64."""
    rng = np.random.default_rng(3)
    dtypes = [tg.float32, tg.bfloat16, tg.float32, tg.float16, tg.float32]
    shapes = [(3, 4), (5,), (), (2, 2), (0,)]
    values = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def params() -> list[tg.Tensor]:
        out = []
        for v, dt in zip(values, dtypes, strict=True):
            p = tg.tensor(v).astype(dt).require_grad()
            p.grad = tg.tensor(v).astype(dt)
            out.append(p)
        return out

    eager = params()
    total = nn.utils.clip_grad_norm_(eager, 0.5, norm_type)
    traced = params()
    tg.jit(lambda ps: nn.utils.clip_grad_norm_(ps, 0.5, norm_type))(traced)
    monkeypatch.setattr(clip_grad, "_CONCAT_MAX", 0)
    large = params()
    assert float(nn.utils.clip_grad_norm_(large, 0.5, norm_type)) == pytest.approx(float(total))
    exact = [np.asarray(p.grad, np.float64).ravel() for p in params()]
    flat = np.concatenate(exact)
    want = (
        np.max(np.abs(flat))
        if norm_type == float("inf")
        else np.sum(np.abs(flat) ** norm_type) ** (1 / norm_type)
    )
    np.testing.assert_allclose(float(total), want, rtol=1e-3)
    for e, t, big, x in zip(eager, traced, large, exact, strict=True):
        assert e.grad.dtype == t.grad.dtype == e.dtype
        np.testing.assert_array_equal(np.asarray(big.grad), np.asarray(t.grad))
        np.testing.assert_allclose(
            np.asarray(e.grad, np.float64).ravel(),
            np.asarray(t.grad, np.float64).ravel(),
            rtol=1e-2,
            atol=1e-3,
        )
        np.testing.assert_allclose(
            np.asarray(e.grad, np.float64).ravel(),
            x * min(1.0, 0.5 / (want + 1e-6)),
            rtol=1e-2,
            atol=1e-3,
        )


def test_clip_grad_norm_edge_cases() -> None:
    p = tg.ones(3).require_grad()
    assert float(nn.utils.clip_grad_norm_([p], 1.0)) == 0.0  # no gradients: nothing to clip
    p.grad = tg.tensor([np.inf, 0.0, 0.0])
    with pytest.raises(RuntimeError, match="not finite|inf"):
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(np.asarray(p.grad), [np.inf, 0.0, 0.0])
    with pytest.raises(ValueError, match="max_norm"):
        nn.utils.clip_grad_norm_(p, -1.0)


def test_error_if_nonfinite_inside_tg_jit_says_to_check_the_returned_norm() -> None:
    """Inside a compiled step the norm has no value yet: a clear TracerError, not the generic
    message about a traced value."""
    model = nn.Linear(2, 1, key=0)

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        model.zero_grad()
        model(x).sum().backward()
        return nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)

    with pytest.raises(tg.TracerError, match=r"error_if_nonfinite=True\) inside a tg.jit step"):
        step(tg.ones((3, 2)))


def test_something_other_than_a_tensor_is_refused() -> None:
    with pytest.raises(TypeError, match="parameter 0 is a ndarray, not a tapegrad Tensor"):
        nn.utils.clip_grad_norm_([np.zeros(2)], 1.0)


def test_clip_grad_value_matches_torch() -> None:
    torch.manual_seed(0)
    ours = nn.Linear(4, 3, key=0)
    theirs = torch.nn.Linear(4, 3)
    ours.load_state_dict(theirs.state_dict())
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    (ours(tg.tensor(x)) ** 2).sum().backward()
    (theirs(torch.tensor(x)) ** 2).sum().backward()
    assert nn.utils.clip_grad_value_(ours.parameters(), 0.5) is None
    torch.nn.utils.clip_grad_value_(theirs.parameters(), 0.5)
    for name, p in ours.named_parameters():
        assert p.grad is not None and not p.grad.requires_grad
        want = getattr(theirs, name).grad.numpy()
        np.testing.assert_allclose(np.asarray(p.grad), want, rtol=1e-5, atol=1e-7)
        assert float(abs(p.grad).max()) == 0.5  # clamped (the unclipped gradients exceed it)


def test_clip_grad_value_edge_cases() -> None:
    p = tg.ones(3).require_grad()
    q = tg.ones(2).require_grad()
    nn.utils.clip_grad_value_([p, q], 1.0)  # no gradients: nothing to do
    assert p.grad is None
    p.grad = tg.tensor([-3.0, 0.25, 2.0])
    nn.utils.clip_grad_value_(p, 1.0)  # one tensor; q without .grad is skipped
    assert p.grad.tolist() == [-1.0, 0.25, 1.0]
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="clip_value must be >= 0"):
            nn.utils.clip_grad_value_(p, bad)
    with pytest.raises(TypeError, match="clip_grad_value_: parameter 0 is a ndarray"):
        nn.utils.clip_grad_value_([np.ones(3)], 1.0)
    with pytest.raises(TypeError, match="foreach"):
        nn.utils.clip_grad_value_(p, 1.0, foreach=True)
