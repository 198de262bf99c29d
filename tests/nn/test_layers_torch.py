"""Every layer against PyTorch: a torch state dict loads unchanged, then forward, parameter
and input gradients, and buffers agree."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_linear() -> None:
    torch.manual_seed(0)
    check_against_torch(nn.Linear(5, 3, key=0), torch.nn.Linear(5, 3), [_x(4, 5)])
    check_against_torch(
        nn.Linear(5, 3, bias=False, key=0), torch.nn.Linear(5, 3, bias=False), [_x(2, 4, 5)]
    )


@pytest.mark.slow
@pytest.mark.parametrize("batch_first", [False, True])
def test_lstm(batch_first: bool) -> None:
    torch.manual_seed(0)
    ours = nn.LSTM(3, 4, num_layers=2, batch_first=batch_first, key=0)
    theirs = torch.nn.LSTM(3, 4, num_layers=2, batch_first=batch_first)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    check_against_torch(ours, theirs, [_x(2, 5, 3) if batch_first else _x(5, 2, 3)])


def test_lstm_with_initial_state_and_final_states() -> None:
    torch.manual_seed(0)
    ours, theirs = nn.LSTM(3, 4, key=0), torch.nn.LSTM(3, 4)
    h0, c0 = _x(1, 2, 4, seed=1), _x(1, 2, 4, seed=2)

    def final_c(m: Any, xs: list[Any]) -> Any:
        out, (h, c) = m(xs[0], (xs[1], xs[2]))
        return c * 2.0 + h

    check_against_torch(ours, theirs, [_x(6, 2, 3), h0, c0], call=final_c)


@pytest.mark.slow
@pytest.mark.parametrize("batch_first", [False, True])
def test_gru(batch_first: bool) -> None:
    torch.manual_seed(0)
    ours = nn.GRU(3, 5, num_layers=2, batch_first=batch_first, key=0)
    theirs = torch.nn.GRU(3, 5, num_layers=2, batch_first=batch_first)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    check_against_torch(ours, theirs, [_x(2, 4, 3) if batch_first else _x(4, 2, 3)])

    def final(m: Any, xs: list[Any]) -> Any:
        return m(xs[0], xs[1])[1]

    check_against_torch(
        nn.GRU(3, 5, key=0), torch.nn.GRU(3, 5), [_x(4, 3), _x(1, 5, seed=3)], call=final
    )


def test_rnn_init_bounds_and_bad_input() -> None:
    lstm = nn.LSTM(3, 16, key=0)
    bound = 1.0 / 4.0
    for p in lstm.parameters():
        assert np.abs(np.asarray(p)).max() <= bound
    with pytest.raises(ValueError, match=r"input must be .*\(2, 3\)|got shape \(2, 7\)"):
        lstm(tg.ones((2, 7)))
    with pytest.raises(ValueError, match="h_0 must have shape"):
        lstm(tg.ones((4, 2, 3)), (tg.zeros((1, 3, 16)), tg.zeros((1, 3, 16))))
    with pytest.raises(TypeError, match=r"hx must be a pair \(h_0, c_0\), got Tensor"):
        lstm(tg.ones((4, 2, 3)), tg.zeros((1, 2, 16)))  # type: ignore[arg-type]


def test_conv_of_an_integer_image_says_to_cast_it() -> None:
    conv = nn.Conv2d(3, 4, 3, key=0)
    with pytest.raises(TypeError, match=r"dtype int32 differs .*x.astype\('float32'\)"):
        conv(tg.tensor(np.ones((1, 3, 8, 8), np.int32)))


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_with_weights(batch_first: bool) -> None:
    torch.manual_seed(0)
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first, key=0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    q, k = (_x(2, 3, 8), _x(2, 5, 8, seed=1)) if batch_first else (_x(3, 2, 8), _x(5, 2, 8, seed=1))
    mask = np.zeros((3, 5), dtype=bool)
    mask[0, 3:] = True  # torch: True = not allowed

    def both(m: Any, xs: list[Any]) -> Any:
        out, w = m(xs[0], xs[1], xs[1], attn_mask=xs[2], need_weights=True)
        return out + w.sum() if batch_first else out * 1.0 + w.mean()

    check_against_torch(ours, theirs, [q, k, mask], call=both)


def test_multihead_attention_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="multiple of num_heads"):
        nn.MultiheadAttention(6, 4)
    mha = nn.MultiheadAttention(4, 2, key=0)
    with pytest.raises(ValueError, match=r"query must be 3-D with last axis 4"):
        mha(tg.ones((2, 3, 5)), tg.ones((2, 3, 4)), tg.ones((2, 3, 4)))
    q, kv = tg.ones((3, 2, 4)), tg.ones((5, 2, 4))  # (L, N, E), (S, N, E)
    with pytest.raises(ValueError, match=r"key_padding_mask has shape \(2, 4\); it must be"):
        mha(q, kv, kv, key_padding_mask=np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(5, 5\); it must be \(L, S\)"):
        mha(q, kv, kv, attn_mask=np.zeros((5, 5), bool))
    with pytest.raises(ValueError, match=r"key \(5, 2, 4\) and value \(4, 2, 4\) must have"):
        mha(q, kv, tg.ones((4, 2, 4)))
    with pytest.raises(ValueError, match="with query's batch size 2"):
        mha(q, tg.ones((5, 3, 4)), tg.ones((5, 3, 4)))


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_takes_a_mask_per_batch_element_and_head(need_weights: bool) -> None:
    """PyTorch's 3-D ``attn_mask`` ``(N * num_heads, L, S)``."""
    torch.manual_seed(0)
    mask = np.random.default_rng(1).random((6, 3, 5)) < 0.4
    mask[:, :, 0] = False  # every query keeps one key

    def call(m: Any, xs: list[Any]) -> Any:
        out, w = m(xs[0], xs[1], xs[1], attn_mask=xs[2], need_weights=need_weights)
        return out if w is None else out + w.sum()

    ours = nn.MultiheadAttention(8, 2, batch_first=True, key=0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    check_against_torch(ours, theirs, [_x(3, 3, 8), _x(3, 5, 8, seed=1), mask], call=call)


def test_multihead_self_attention_projects_once_and_matches_torch() -> None:
    torch.manual_seed(0)

    def selfatt(m: Any, xs: list[Any]) -> Any:
        out, w = m(xs[0], xs[0], xs[0], need_weights=True, average_attn_weights=False)
        return out + w.sum()

    ours = nn.MultiheadAttention(8, 2, key=0)
    check_against_torch(ours, torch.nn.MultiheadAttention(8, 2), [_x(5, 2, 8)], call=selfatt)
