"""PyTorch layer options tapegrad does not take: a TypeError naming the public class and what
to do (or ValueError for a value), PyTorch's default values accepted as no-ops; and the
bidirectional recurrent layers and LSTM projections (once refused) checked against
PyTorch's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch

import tapegrad as tg
from tapegrad import nn

CASES: list[tuple[Callable[[], Any], type[Exception], str]] = [
    (lambda: nn.GRU(3, 4, bidirectional="yes"), TypeError, r"^GRU: bidirectional must be True"),
    (lambda: nn.GRU(3, 4, proj_size=2), ValueError, r"^GRU: proj_size argument is only"),
    (lambda: nn.RNN(3, 4, proj_size=1), ValueError, r"^RNN: proj_size argument is only"),
    (lambda: nn.LSTM(3, 4, proj_size=4), ValueError, r"^LSTM: proj_size has to be smaller"),
    (lambda: nn.LSTM(3, 4, proj_size=-1), ValueError, r"^LSTM: proj_size should be a positive"),
    (lambda: nn.LSTM(3, 4, proj_size=1.0), TypeError, r"^LSTM: proj_size must be an integer"),
    (lambda: nn.MaxPool2d(2, ceil_mode=True), TypeError, r"^MaxPool2d\(\) .*floor mode"),
    (lambda: nn.AvgPool2d(2, ceil_mode=True), TypeError, r"^AvgPool2d\(\) .*tg.pad"),
    (lambda: nn.MaxPool2d(2, dilation=2), TypeError, r"^MaxPool2d\(\) .*dilated pooling"),
    (lambda: nn.MaxPool2d(2, return_indices=True), TypeError, r"^MaxPool2d\(\) .*no indices"),
    (lambda: nn.AvgPool2d(2, divisor_override=3), TypeError, r"^AvgPool2d\(\) .*divide"),
    (lambda: nn.MaxPool1d(2, ceil_mode=True), TypeError, r"^MaxPool1d\(\) .*end of its last"),
    (lambda: nn.MaxPool1d(2, dilation=2), TypeError, r"^MaxPool1d\(\) .*dilated pooling"),
    (lambda: nn.MaxPool1d(2, return_indices=True), TypeError, r"^MaxPool1d\(\) .*no indices"),
    (lambda: nn.AvgPool1d(2, ceil_mode=True), TypeError, r"^AvgPool1d\(\) .*tg.pad"),
    (lambda: nn.MaxPool3d(2, ceil_mode=True), TypeError, r"^MaxPool3d\(\) .*each pooled axis"),
    (lambda: nn.MaxPool3d(2, dilation=2), TypeError, r"^MaxPool3d\(\) .*dilated pooling"),
    (lambda: nn.MaxPool3d(2, return_indices=True), TypeError, r"^MaxPool3d\(\) .*no indices"),
    (lambda: nn.AvgPool3d(2, ceil_mode=True), TypeError, r"^AvgPool3d\(\) .*tg.pad"),
    (lambda: nn.AvgPool3d(2, divisor_override=3), TypeError, r"^AvgPool3d\(\) .*kd \* kh"),
    (lambda: nn.AdaptiveMaxPool1d(2, True), TypeError, r"^AdaptiveMaxPool1d\(\) .*no indices"),
    (
        lambda: nn.AdaptiveMaxPool2d(2, return_indices=True),
        TypeError,
        r"^AdaptiveMaxPool2d\(\) .*no indices",
    ),
    (
        lambda: nn.Conv2d(1, 2, 3, padding_mode="reflect"),
        TypeError,
        r"^Conv2d\(\) .*pad the input yourself and pass padding=0",
    ),
    (lambda: nn.Conv1d(1, 2, 3, padding_mode="circular"), TypeError, r"^Conv1d\(\) "),
    (lambda: nn.Embedding(5, 3, max_norm=1.0), TypeError, r"^Embedding\(\) .*rescale the rows"),
    (lambda: nn.Embedding(5, 3, sparse=True), TypeError, r"^Embedding\(\) .*dense"),
    (lambda: nn.Embedding(5, 3, padding_idx=5), ValueError, r"padding_idx=5 must be in \[-5, 5\)"),
    (lambda: nn.BatchNorm2d(3, momentum=None), ValueError, r"^BatchNorm2d: momentum=None .*0.1"),
    (lambda: nn.BCEWithLogitsLoss(np.ones(3)), ValueError, r"pass weight= by keyword"),
    (lambda: nn.MSELoss(weight=np.ones(3)), TypeError, r"^MSELoss\(\) .*reduction='none'"),
    (lambda: nn.MultiheadAttention(8, 2, kdim=4), TypeError, r"^MultiheadAttention: kdim=4: "),
    (lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True), TypeError, r"no bias_k/bias_v"),
]


@pytest.mark.parametrize(("make", "kind", "message"), CASES)
def test_unsupported_pytorch_options_name_the_public_class_and_what_to_do(
    make: Callable[[], Any], kind: type[Exception], message: str
) -> None:
    with pytest.raises(kind, match=message) as info:
        make()
    assert "_RNNBase" not in str(info.value) and "_Pool2d" not in str(info.value)
    assert "_AdaptiveMaxPool" not in str(info.value)


def test_pytorch_defaults_are_accepted() -> None:
    nn.LSTM(3, 4, bidirectional=False, proj_size=0, key=0)
    nn.MaxPool2d(2, ceil_mode=False, dilation=1, return_indices=False)
    nn.AvgPool2d(2, ceil_mode=False, divisor_override=None, count_include_pad=True)
    nn.MaxPool1d(2, ceil_mode=False, dilation=1, return_indices=False)
    nn.AvgPool1d(2, ceil_mode=False, count_include_pad=True)
    nn.MaxPool3d(2, ceil_mode=False, dilation=1, return_indices=False)
    nn.AvgPool3d(2, ceil_mode=False, divisor_override=None, count_include_pad=True)
    nn.AdaptiveMaxPool1d(2, return_indices=False)
    nn.AdaptiveMaxPool2d((2, None), False)
    nn.Conv2d(1, 2, 3, padding_mode="zeros", key=0)
    nn.Embedding(5, 3, max_norm=None, norm_type=2, scale_grad_by_freq=False, sparse=False, key=0)
    nn.MultiheadAttention(8, 2, kdim=None, vdim=None, add_bias_kv=False, add_zero_attn=False)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits_weight_and_pos_weight_are_pytorchs(reduction: str) -> None:
    """weight= and pos_weight= (the function's and the module's, buffers as PyTorch's): the
    loss and the gradients of logits and targets equal PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, pos_weight = rng.standard_normal((4, 3)).astype(np.float32), np.float32([1, 2, 3])
    y = (rng.random((4, 3)) > 0.5).astype(np.float32)
    weight = rng.random((4, 1)).astype(np.float32)
    for kw in (
        {"pos_weight": pos_weight},
        {"weight": weight},
        {"weight": weight, "pos_weight": pos_weight},
    ):
        tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
        theirs = torch.nn.BCEWithLogitsLoss(
            reduction=reduction, **{k: torch.tensor(v) for k, v in kw.items()}
        )
        want = theirs(tx, ty)
        want.sum().backward()
        module = nn.BCEWithLogitsLoss(reduction, **kw)
        assert sorted(module.state_dict()) == sorted(kw)
        function = tg.binary_cross_entropy_with_logits(
            tg.tensor(x), tg.tensor(y), reduction=reduction, **kw
        )
        gx, gy = tg.tensor(x).require_grad(), tg.tensor(y).require_grad()
        got = module(gx, gy)
        got.sum().backward()
        np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(function.numpy(), got.numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(gx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(gy.grad.numpy(), ty.grad.numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(tg.ShapeError, match="targets of shape"):
        tg.binary_cross_entropy_with_logits(tg.tensor(x), tg.tensor(y[:1]), pos_weight=pos_weight)
    with pytest.raises(tg.ShapeError, match=r"weight of shape \(2, 4, 3\) does not broadcast"):
        tg.binary_cross_entropy_with_logits(tg.tensor(x), tg.tensor(y), np.ones((2, 4, 3)))
    as_list = tg.binary_cross_entropy_with_logits(tg.tensor(x), tg.tensor(y), pos_weight=[1, 2, 3])
    ours = tg.binary_cross_entropy_with_logits(tg.tensor(x), tg.tensor(y), pos_weight=pos_weight)
    assert as_list.item() == pytest.approx(ours.item(), rel=1e-6)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize(("layers", "batch_first"), [(1, False), (2, True), (2, False)])
def test_bidirectional_layers_match_torch(kind: str, layers: int, batch_first: bool) -> None:
    """Outputs ``(L, N, 2H)``, final states ``(2 num_layers, N, H)`` in PyTorch's order, and
    every gradient (parameters, input, initial states), with torch's state dict loaded."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(3, 4, layers, batch_first=batch_first, bidirectional=True)
    ours = getattr(nn, kind)(3, 4, layers, batch_first=batch_first, bidirectional=True, key=0)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 3) if batch_first else (5, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((2 * layers, 2, 4)).astype(np.float32)
    c0 = rng.standard_normal((2 * layers, 2, 4)).astype(np.float32)

    def call(module: Any, xs: list[Any]) -> Any:
        out, hn = module(xs[0], (xs[1], xs[2]) if kind == "LSTM" else xs[1])
        h = hn[0] if kind == "LSTM" else hn
        assert tuple(out.shape)[-1] == 8 and tuple(h.shape) == (2 * layers, 2, 4)
        return out * 1.0 + (h * h).sum()  # the final states reach the gradient too

    inputs = [x, h0, c0] if kind == "LSTM" else [x, h0]
    check_against_torch(ours, theirs, inputs, call=call, rtol=1e-4, atol=1e-5)


def test_bidirectional_unbatched_and_repr() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.GRU(3, 4, bidirectional=True)
    ours = nn.GRU(3, 4, bidirectional=1, key=0)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    out, hn = ours(tg.tensor(x))
    want, want_h = theirs(torch.tensor(x))
    assert out.shape == (5, 8) and hn.shape == (2, 4)
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(hn.numpy(), want_h.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert "bidirectional=True" in repr(ours)
    with pytest.raises(tg.ShapeError, match=r"\(2, 1, 4\) \(num_layers \* directions"):
        nn.GRU(3, 4, bidirectional=True, key=0)(tg.ones((5, 1, 3)), tg.zeros((1, 1, 4)))


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize(
    ("layers", "bidirectional", "batch_first"), [(1, False, False), (2, True, True)]
)
def test_lstm_projections_match_torch(layers: int, bidirectional: bool, batch_first: bool) -> None:
    """``proj_size``: PyTorch's ``weight_hr_l{k}`` parameters (state-dict keys and shapes in
    its order), ``h`` of ``proj_size`` features (outputs, ``h_n``), ``c_n`` of
    ``hidden_size``, and every gradient, initial states included."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    kw = {"bidirectional": bidirectional, "batch_first": batch_first, "proj_size": 2}
    theirs = torch.nn.LSTM(3, 5, layers, **kw)
    ours = nn.LSTM(3, 5, layers, **kw, key=0)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()
    ]
    d = 2 if bidirectional else 1
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 3) if batch_first else (4, 2, 3)).astype(np.float32)
    h0 = rng.standard_normal((d * layers, 2, 2)).astype(np.float32)
    c0 = rng.standard_normal((d * layers, 2, 5)).astype(np.float32)

    def call(module: Any, xs: list[Any]) -> Any:
        out, (h, c) = module(xs[0], (xs[1], xs[2]))
        assert tuple(out.shape)[-1] == 2 * d and tuple(h.shape) == (d * layers, 2, 2)
        assert tuple(c.shape) == (d * layers, 2, 5)
        return out * 1.0 + (h * h).sum() + (c * c * c).sum()

    check_against_torch(ours, theirs, [x, h0, c0], call=call, rtol=1e-4, atol=1e-5)
    assert repr(ours).endswith("proj_size=2)")
    with pytest.raises(tg.ShapeError, match=r"h_0 must have shape \(\d, 2, 2\) .*proj_size"):
        ours(tg.tensor(x), (tg.tensor(c0), tg.tensor(c0)))
