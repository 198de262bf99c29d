"""The margin, embedding and likelihood losses, pairwise_distance and their layers against
PyTorch: values and gradients of every input, each reduction, the edge points (a hinge at
its margin, zero distance, a clamped variance), float64 in a subprocess, and the errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.nn.functional")

R = np.random.default_rng(0)
X1, X2, X3 = (R.standard_normal((5, 4)).astype(np.float32) for _ in range(3))
SIGN = np.array([1, -1, 1, -1, 1], np.float32)
LABELS = (R.random((5, 4)) > 0.5).astype(np.float32)
W = R.random(4).astype(np.float32)
VAR = (np.abs(X3) + 0.1).astype(np.float32)
VAR[0, 0] = 0.0  # clamped to eps
COUNTS = np.array([0, 1, 2, 3, 7.0] * 4, np.float32).reshape(5, 4)


def _check(
    ours: Callable[..., Any], theirs: Callable[..., Any], arrays: list[np.ndarray], wrt: list[int]
) -> None:
    """Values and the gradients of the inputs in ``wrt`` (a random cotangent) equal torch's
    (float32 against float64 torch: rtol 1e-5)."""
    ts = [tg.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    ps = [torch.tensor(a.astype(np.float64), requires_grad=i in wrt) for i, a in enumerate(arrays)]
    y, q = ours(*ts), theirs(*ps)
    np.testing.assert_allclose(np.asarray(y), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = np.random.default_rng(1).standard_normal(q.shape)
    (y * tg.tensor(w.astype(np.float32))).sum().backward()
    (q * torch.tensor(w)).sum().backward()
    for i in wrt:
        got, want = ts[i].grad, ps[i].grad
        assert got is not None and want is not None
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5, atol=1e-6)


CASES: list[tuple[str, Callable[..., Any], Callable[..., Any], list[np.ndarray], list[int]]] = [
    (
        "margin_ranking",
        lambda a, b, t, r: tg.margin_ranking_loss(a, b, t, margin=0.3, reduction=r),
        lambda a, b, t, r: F.margin_ranking_loss(a, b, t, margin=0.3, reduction=r),
        [X1[:, 0], X2[:, 0], SIGN],
        [0, 1],
    ),
    (
        "cosine_embedding",
        lambda a, b, t, r: tg.cosine_embedding_loss(a, b, t, margin=0.1, reduction=r),
        lambda a, b, t, r: F.cosine_embedding_loss(a, b, t, margin=0.1, reduction=r),
        [X1, X2, SIGN],
        [0, 1],
    ),
    (
        "hinge_embedding",
        lambda a, t, r: tg.hinge_embedding_loss(a, t, margin=0.5, reduction=r),
        lambda a, t, r: F.hinge_embedding_loss(a, t, margin=0.5, reduction=r),
        [X1[:, 0], SIGN],
        [0],
    ),
    (
        "triplet_swap_p1.5",
        lambda a, b, c, r: tg.triplet_margin_loss(a, b, c, p=1.5, swap=True, reduction=r),
        lambda a, b, c, r: F.triplet_margin_loss(a, b, c, p=1.5, swap=True, reduction=r),
        [X1, X2, X3],
        [0, 1, 2],
    ),
    (
        "triplet",
        lambda a, b, c, r: tg.triplet_margin_loss(a, b, c, margin=2.0, eps=1e-3, reduction=r),
        lambda a, b, c, r: F.triplet_margin_loss(a, b, c, margin=2.0, eps=1e-3, reduction=r),
        [X1, X2, X3],
        [0, 1, 2],
    ),
    (
        "soft_margin",
        lambda a, t, r: tg.soft_margin_loss(a, t, reduction=r),
        lambda a, t, r: F.soft_margin_loss(a, t, reduction=r),
        [X1[:, 0], SIGN],
        [0],
    ),
    (
        "multilabel_soft_margin",
        lambda a, t, w, r: tg.multilabel_soft_margin_loss(a, t, w, reduction=r),
        lambda a, t, w, r: F.multilabel_soft_margin_loss(a, t, w, reduction=r),
        [X1, LABELS, W],
        [0],
    ),
    (
        "gaussian_full",
        lambda a, t, v, r: tg.gaussian_nll_loss(a, t, v, full=True, eps=0.05, reduction=r),
        lambda a, t, v, r: F.gaussian_nll_loss(a, t, v, full=True, eps=0.05, reduction=r),
        [X1, X2, VAR],
        [0, 1, 2],
    ),
    (
        "gaussian_per_row",
        lambda a, t, v, r: tg.gaussian_nll_loss(a, t, v, eps=0.05, reduction=r),
        lambda a, t, v, r: F.gaussian_nll_loss(a, t, v, eps=0.05, reduction=r),
        [X1, X2, VAR[:, 0]],
        [0, 1, 2],
    ),
    (
        "gaussian_one_axis",
        lambda a, t, v, r: tg.gaussian_nll_loss(a, t, v, reduction=r),
        lambda a, t, v, r: F.gaussian_nll_loss(a, t, v, reduction=r),
        [X1, X2, VAR[:1] + 0.5],
        [0, 2],
    ),
    (
        "poisson_full",
        lambda a, t, r: tg.poisson_nll_loss(a, t, full=True, reduction=r),
        lambda a, t, r: F.poisson_nll_loss(a, t, full=True, reduction=r),
        [X1, COUNTS],
        [0],
    ),
    (
        "poisson_rate",
        lambda a, t, r: tg.poisson_nll_loss(a, t, log_input=False, eps=1e-3, reduction=r),
        lambda a, t, r: F.poisson_nll_loss(a, t, log_input=False, eps=1e-3, reduction=r),
        [np.abs(X1), COUNTS],
        [0, 1],
    ),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    ("ours", "theirs", "arrays", "wrt"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_losses_match_torch(
    ours: Any, theirs: Any, arrays: list[np.ndarray], wrt: list[int], reduction: str
) -> None:
    _check(
        lambda *xs: ours(*xs, reduction),
        lambda *xs: theirs(*xs, reduction),
        arrays,
        wrt,
    )


def test_edge_points_match_torch() -> None:
    """A ranking or hinge exactly at its margin still passes gradient 1 (PyTorch's
    clamp_min); a zero distance has a finite gradient (eps); a 1-d triplet; keepdims."""
    _check(
        lambda a, b, t: tg.margin_ranking_loss(a, b, t, margin=1.0, reduction="sum"),
        lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=1.0, reduction="sum"),
        [
            np.array([2.0, 0.0, 1.0], np.float32),
            np.array([1.0, 1.0, 1.0], np.float32),
            np.array([1.0, -1.0, 1.0], np.float32),
        ],
        [0, 1],
    )
    _check(
        lambda a, t: tg.hinge_embedding_loss(a, t, margin=1.0, reduction="sum"),
        lambda a, t: F.hinge_embedding_loss(a, t, margin=1.0, reduction="sum"),
        [np.array([1.0, 1.0, 0.5, 2.0], np.float32), np.array([-1.0, 1.0, -1.0, 0.0], np.float32)],
        [0],
    )
    _check(
        lambda a, b: tg.pairwise_distance(a, b, keepdims=True),
        lambda a, b: F.pairwise_distance(a, b, keepdim=True),
        [X1, X1.copy()],
        [0, 1],
    )
    for p in (1.0, 3.0, float("inf")):
        _check(
            lambda a, b, p=p: tg.pairwise_distance(a, b, p),
            lambda a, b, p=p: F.pairwise_distance(a, b, p),
            [X1, X2[:1]],
            [0, 1],
        )
    _check(
        lambda a, b, c: tg.triplet_margin_loss(a, b, c, swap=True),
        lambda a, b, c: F.triplet_margin_loss(a, b, c, swap=True),
        [X1[0], X2[0], X3[0]],
        [0, 1, 2],
    )
    _check(
        lambda a, b, t: tg.cosine_embedding_loss(a, b, t),
        lambda a, b, t: F.cosine_embedding_loss(a, b, t),
        [X1[0], np.zeros(4, np.float32), np.array(-1.0, np.float32)],
        [0, 1],
    )


def test_nan_and_masked_edges() -> None:
    """A NaN score gives a NaN hinge (PyTorch's); a zero count's gradient through the masked
    Stirling term is 0 (PyTorch's is NaN there: documented)."""
    y = tg.margin_ranking_loss(
        tg.tensor([np.nan, 1.0]), tg.zeros(2), tg.tensor([1.0, -1.0]), reduction="none"
    )
    np.testing.assert_allclose(np.asarray(y), [np.nan, 1.0])
    t = tg.tensor([0.0, 1.0, 3.0], requires_grad=True)
    tg.poisson_nll_loss(tg.zeros(3), t, full=True, reduction="sum").backward()
    assert t.grad is not None
    np.testing.assert_allclose(np.asarray(t.grad), [0.0, 0.0, np.log(3.0) + 1 / 6], rtol=1e-6)


LAYERS: list[tuple[Callable[[], Any], Callable[[], Any], list[np.ndarray]]] = [
    (
        lambda: nn.MarginRankingLoss(0.2),
        lambda: torch.nn.MarginRankingLoss(0.2),
        [X1[:, 0], X2[:, 0], SIGN],
    ),
    (nn.HingeEmbeddingLoss, torch.nn.HingeEmbeddingLoss, [X1[:, 0], SIGN]),
    (
        lambda: nn.SoftMarginLoss("sum"),
        lambda: torch.nn.SoftMarginLoss(reduction="sum"),
        [X1, np.sign(X2)],
    ),
    (
        lambda: nn.MultiLabelSoftMarginLoss(weight=W),
        lambda: torch.nn.MultiLabelSoftMarginLoss(weight=torch.tensor(W, dtype=torch.float64)),
        [X1, LABELS],
    ),
    (
        lambda: nn.CosineEmbeddingLoss(0.3, reduction="none"),
        lambda: torch.nn.CosineEmbeddingLoss(0.3, reduction="none"),
        [X1, X2, SIGN],
    ),
    (
        lambda: nn.TripletMarginLoss(0.5, 1.0, swap=True),
        lambda: torch.nn.TripletMarginLoss(0.5, 1.0, swap=True),
        [X1, X2, X3],
    ),
    (
        lambda: nn.GaussianNLLLoss(full=True),
        lambda: torch.nn.GaussianNLLLoss(full=True),
        [X1, X2, VAR + 0.1],
    ),
    (
        lambda: nn.PoissonNLLLoss(False, True),
        lambda: torch.nn.PoissonNLLLoss(False, True),
        [np.abs(X1) + 0.1, COUNTS],
    ),
    (lambda: nn.PairwiseDistance(1.0), lambda: torch.nn.PairwiseDistance(1.0), [X1, X2]),
    (lambda: nn.CosineSimilarity(0), lambda: torch.nn.CosineSimilarity(0), [X1, X2]),
]


@pytest.mark.parametrize(("ours", "theirs", "arrays"), LAYERS)
def test_layers_match_torch(ours: Any, theirs: Any, arrays: list[np.ndarray]) -> None:
    mine, ref = ours(), theirs()
    assert list(mine.state_dict()) == list(ref.state_dict())
    _check(mine, ref, arrays, [0])


def test_layers_read_as_their_arguments() -> None:
    assert repr(nn.MarginRankingLoss()) == "MarginRankingLoss(margin=0.0, reduction='mean')"
    assert repr(nn.HingeEmbeddingLoss()) == "HingeEmbeddingLoss(margin=1.0, reduction='mean')"
    assert repr(nn.TripletMarginLoss(swap=True)) == (
        "TripletMarginLoss(margin=1.0, p=2.0, eps=1e-06, swap=True, reduction='mean')"
    )
    assert (
        repr(nn.PairwiseDistance(keepdims=True))
        == "PairwiseDistance(p=2.0, eps=1e-06, keepdims=True)"
    )
    assert repr(nn.CosineSimilarity()) == "CosineSimilarity(axis=-1, eps=1e-08)"


def test_bad_arguments_say_what_to_do() -> None:
    a, b = tg.ones((2, 3)), tg.zeros((2, 3))
    with pytest.raises(ValueError, match=r"^gaussian_nll_loss: var has negative entries"):
        tg.gaussian_nll_loss(a, b, tg.tensor([[1.0, -1.0, 1.0], [1.0, 1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"^gaussian_nll_loss: var=-1.0 is negative"):
        tg.gaussian_nll_loss(a, b, -1.0)
    with pytest.raises(ValueError, match=r"^gaussian_nll_loss: var of shape \(3,\)"):
        tg.gaussian_nll_loss(a, b, tg.ones(3))
    with pytest.raises(ValueError, match=r"^triplet_margin_loss: margin must be > 0"):
        tg.triplet_margin_loss(a, b, b, margin=0.0)
    with pytest.raises(ValueError, match=r"^TripletMarginLoss: margin must be > 0"):
        nn.TripletMarginLoss(-1.0)
    with pytest.raises(tg.ShapeError, match=r"^triplet_margin_loss: the inputs need one shape"):
        tg.triplet_margin_loss(a, b, tg.ones((2, 4)))
    with pytest.raises(tg.ShapeError, match=r"^cosine_embedding_loss: target of shape \(3,\)"):
        tg.cosine_embedding_loss(a, b, tg.ones(3))
    with pytest.raises(ValueError, match=r"^soft_margin_loss: reduction='avg'"):
        tg.soft_margin_loss(a, b, reduction="avg")
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.PoissonNLLLoss(reduction="avg")
    # PyTorch's positional styles and deprecated keywords get the advice the other losses give
    with pytest.raises(TypeError, match=r"takes at most 3 positional .*margin=, reduction="):
        tg.margin_ranking_loss(a, b, b, 0.5)
    with pytest.raises(TypeError, match=r"takes at most 1 positional .* size_average and reduce"):
        nn.HingeEmbeddingLoss(1.0, None, None, "sum")
    with pytest.raises(TypeError, match="size_average=, a PyTorch keyword; deprecated"):
        tg.poisson_nll_loss(a, b, size_average=False)
    with pytest.raises(TypeError, match="reduce=, a PyTorch keyword; deprecated"):
        nn.SoftMarginLoss(reduce=False)
    with pytest.raises(TypeError, match="keepdims"):
        tg.pairwise_distance(a, b, keepdim=True)
    with pytest.raises(TypeError, match="use axis="):
        nn.CosineSimilarity(dim=1)


SCRIPT = textwrap.dedent(
    """
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import torch
    import torch.nn.functional as F
    import tapegrad as tg

    r = np.random.default_rng(0)
    a, b, c = (r.standard_normal((4, 3)) for _ in range(3))
    s = np.array([1.0, -1.0, 1.0, -1.0])
    v = np.abs(c) + 0.1
    cases = [
        (lambda x, y, z: tg.triplet_margin_loss(x, y, z, swap=True),
         lambda x, y, z: F.triplet_margin_loss(x, y, z, swap=True), [a, b, c]),
        (lambda x, y, t: tg.cosine_embedding_loss(x, y, t, margin=0.2),
         lambda x, y, t: F.cosine_embedding_loss(x, y, t, margin=0.2), [a, b, s]),
        (lambda x, y, w: tg.gaussian_nll_loss(x, y, w, full=True),
         lambda x, y, w: F.gaussian_nll_loss(x, y, w, full=True), [a, b, v]),
        (lambda x, t: tg.poisson_nll_loss(x, t, full=True),
         lambda x, t: F.poisson_nll_loss(x, t, full=True), [a, np.abs(b) * 3]),
        (lambda x, y, t: tg.margin_ranking_loss(x, y, t, margin=0.1),
         lambda x, y, t: F.margin_ranking_loss(x, y, t, margin=0.1), [a[:, 0], b[:, 0], s]),
        (lambda x, t: tg.multilabel_soft_margin_loss(x, t),
         lambda x, t: F.multilabel_soft_margin_loss(x, t), [a, (b > 0) * 1.0]),
        (lambda x, t: tg.soft_margin_loss(x, t),
         lambda x, t: F.soft_margin_loss(x, t), [a, np.sign(b)]),
        (lambda x, t: tg.hinge_embedding_loss(x, t),
         lambda x, t: F.hinge_embedding_loss(x, t), [a[:, 0], s]),
        (lambda x, y: tg.pairwise_distance(x, y).sum(),
         lambda x, y: F.pairwise_distance(x, y).sum(), [a, b]),
        (lambda x: tg.celu(x, alpha=0.5).sum(), lambda x: F.celu(x, 0.5).sum(), [a]),
        (lambda x: tg.softshrink(x).sum(), lambda x: F.softshrink(x).sum(), [a]),
        (lambda x: tg.tanhshrink(x).sum(), lambda x: F.tanhshrink(x).sum(), [a]),
        (lambda x: (tg.softmin(x) * x).sum(), lambda x: (F.softmin(x, -1) * x).sum(), [a]),
    ]
    # the inputs differentiated: the targets of these losses are data (PyTorch refuses a
    # gradient for soft_margin_loss's), those of ranking and the likelihoods too
    wrt = [3, 2, 3, 1, 2, 1, 1, 1, 2, 1, 1, 1, 1]
    for (ours, theirs, arrays), n in zip(cases, wrt):
        ts = [tg.tensor(x, requires_grad=i < n) for i, x in enumerate(arrays)]
        ps = [torch.tensor(x, requires_grad=i < n) for i, x in enumerate(arrays)]
        y, q = ours(*ts), theirs(*ps)
        assert y.dtype == np.float64
        np.testing.assert_allclose(np.asarray(y), q.detach().numpy(), rtol=1e-12)
        y.backward()
        q.backward()
        for t, p in zip(ts[:n], ps[:n]):
            np.testing.assert_allclose(np.asarray(t.grad), p.grad.numpy(), rtol=1e-10, atol=1e-14)
    print("x64 ok")
    """
)


def test_float64_values_and_gradients_match_torch_tightly() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("x64 ok")
