"""tg.ctc_loss and nn.CTCLoss against PyTorch's: values and gradients for every reduction,
padded and concatenated targets, repeated labels, impossible alignments with and without
zero_infinity, unbatched inputs; errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = torch.nn.functional

T, N, C, S = 12, 3, 5, 4
RNG = np.random.default_rng(0)
LOG_PROBS = torch.randn(T, N, C, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
TARGETS = RNG.integers(1, C, (N, S)).astype(np.int64)
TARGETS[1, :2] = [3, 3]  # a repeated label: needs a blank between, one step more


def _both(
    il: list[int], tl: list[int], concat: bool, **kw: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ours, theirs) losses and (ours, theirs) gradients of a weighted sum of the loss."""
    targets = np.concatenate([TARGETS[b, : tl[b]] for b in range(N)]) if concat else TARGETS
    lp = LOG_PROBS.detach().numpy()
    theirs_lp = torch.tensor(lp, requires_grad=True)
    want = F.ctc_loss(theirs_lp, torch.tensor(targets), torch.tensor(il), torch.tensor(tl), **kw)
    w = np.arange(1, want.numel() + 1, dtype=np.float32).reshape(want.shape)
    (want * torch.tensor(w)).sum().backward()
    ours_lp = tg.tensor(lp, requires_grad=True)
    got = tg.ctc_loss(ours_lp, targets, il, np.array(tl), **kw)
    (got * tg.tensor(w)).sum().backward()
    return got.numpy(), want.detach().numpy(), ours_lp.grad.numpy(), theirs_lp.grad.numpy()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("concat", [False, True])
def test_matches_torch(reduction: str, concat: bool) -> None:
    got, want, g, g_want = _both([12, 10, 7], [4, 2, 3], concat, reduction=reduction)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g, g_want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_impossible_alignments_are_inf_or_zero_as_torch(reduction: str) -> None:
    """Inputs of 3 and 2 steps for targets of 2 labels (a repeated pair) and 3: inf, as
    PyTorch's; with zero_infinity, 0 and no gradient from them, as PyTorch's."""
    got, want, g, _ = _both([12, 3, 2], [4, 2, 3], False, reduction=reduction)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert np.isfinite(g).all()  # PyTorch's gradient of an inf loss is NaN; none flows here
    got, want, g, g_want = _both(
        [12, 3, 2], [4, 2, 3], True, reduction=reduction, zero_infinity=True
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g, g_want, rtol=1e-5, atol=1e-5)


def test_unbatched_layer_and_blank_match_torch() -> None:
    lp = LOG_PROBS[:, 0].detach().numpy()
    loss = nn.CTCLoss(blank=4, reduction="none")
    got = loss(tg.tensor(lp), np.array([1, 2, 2]), 12, 3)
    want = torch.nn.CTCLoss(blank=4, reduction="none")(
        torch.tensor(lp), torch.tensor([1, 2, 2]), torch.tensor(12), torch.tensor(3)
    )
    assert got.shape == tuple(want.shape) == ()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    assert repr(nn.CTCLoss(zero_infinity=True)) == (
        "CTCLoss(blank=0, reduction='mean', zero_infinity=True)"
    )


def test_one_node_that_trains_a_recurrent_tagger() -> None:
    """A GRU with a linear head learns to emit a label sequence under CTC; the loss is one
    node on the tape, freed by backward."""
    gru, head = nn.GRU(4, 16, key=0), nn.Linear(16, 4, key=1)
    opt = tg.optim.Adam([*gru.parameters(), *head.parameters()], lr=0.05)
    x = tg.tensor(np.random.default_rng(1).standard_normal((10, 2, 4)).astype(np.float32))
    targets = np.array([[1, 2, 3], [3, 1, 1]])
    losses = []
    for _ in range(40):
        loss = tg.ctc_loss(tg.log_softmax(head(gru(x)[0]), axis=-1), targets, [10, 10], [3, 3])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"reduction": "avg"}, ValueError, "reduction must be one of"),
        ({"blank": 5}, ValueError, r"blank=5 must be a class index in \[0, 5\)"),
        ({"input_lengths": [12, 13, 1]}, tg.ShapeError, r"must lie in \[1, T=12\]"),
        ({"input_lengths": [12, 0, 1]}, ValueError, r"must lie in \[1, T=12\]"),
        ({"input_lengths": [12.0, 1.0, 1.0]}, TypeError, "input_lengths must be integers"),
        ({"target_lengths": [4, 2]}, tg.ShapeError, r"one length per sequence, shape \(3,\)"),
        ({"targets": TARGETS[:2]}, tg.ShapeError, r"must be \(N=3, S\)"),
        ({"targets": TARGETS.reshape(-1)[:5]}, tg.ShapeError, "sum\\(target_lengths\\) = 9"),
        ({"targets": TARGETS.astype(np.float32)}, TypeError, "targets must be integers"),
        ({"target_lengths": [4, -1, 3]}, ValueError, r"target_lengths \[4, -1, 3\] must be"),
        ({"targets": np.where(TARGETS == TARGETS[0, 0], 5, TARGETS)}, ValueError, r"\[0, 5\)"),
        ({"targets": np.where(TARGETS == TARGETS[0, 0], -1, TARGETS)}, ValueError, "outside"),
    ],
)
def test_bad_input_says_what_to_do(kwargs: dict[str, Any], error: type, match: str) -> None:
    args: dict[str, Any] = {
        "log_probs": tg.tensor(LOG_PROBS.detach().numpy()),
        "targets": TARGETS,
        "input_lengths": [12, 10, 7],
        "target_lengths": [4, 2, 3],
    }
    with pytest.raises(error, match=match):
        tg.ctc_loss(**{**args, **kwargs})


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_all_targets_empty_concatenated_match_torch(reduction: str) -> None:
    """Every target of length 0, concatenated: an empty 1-D targets, as PyTorch allows."""
    lp = LOG_PROBS.detach().numpy()
    theirs_lp = torch.tensor(lp, requires_grad=True)
    empty = np.zeros(0, np.int64)
    want = F.ctc_loss(
        theirs_lp,
        torch.tensor(empty),
        torch.tensor([12, 10, 7]),
        torch.zeros(3, dtype=int),
        reduction=reduction,
    )
    want.sum().backward()
    ours_lp = tg.tensor(lp, requires_grad=True)
    got = tg.ctc_loss(ours_lp, empty, [12, 10, 7], [0, 0, 0], reduction=reduction)
    got.sum().backward()
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours_lp.grad.numpy(), theirs_lp.grad.numpy(), atol=1e-5)


def test_labels_on_the_device_outside_the_classes_give_nan() -> None:
    """Labels already on the device are not read back: one outside [0, C) within its
    target makes that sequence's loss NaN (not a finite wrong value); padding past a target
    length may hold anything."""
    targets = TARGETS.copy()
    targets[0, 1], targets[1, 3] = 7, -1  # row 1's is padding (its length is 2)
    got = tg.ctc_loss(
        tg.tensor(LOG_PROBS.detach().numpy()),
        tg.tensor(targets),
        [12, 10, 7],
        [4, 2, 3],
        reduction="none",
    ).numpy()
    assert np.isnan(got[0]) and np.isfinite(got[1:]).all()


def test_unbatched_targets_must_be_one_sequence() -> None:
    lp = tg.tensor(LOG_PROBS[:, 0].detach().numpy())
    with pytest.raises(tg.ShapeError, match=r"unbatched targets must be \(S,\)"):
        tg.ctc_loss(lp, TARGETS, 12, 4)
