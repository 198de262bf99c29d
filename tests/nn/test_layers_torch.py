"""Every layer against PyTorch: a torch state dict loads unchanged, then forward, parameter
and input gradients, and buffers agree."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch, first

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


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_elman_rnn(nonlinearity: str, batch_first: bool) -> None:
    torch.manual_seed(0)
    ours = nn.RNN(3, 4, 2, nonlinearity, batch_first=batch_first, key=0)
    theirs = torch.nn.RNN(3, 4, 2, nonlinearity, batch_first=batch_first)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    check_against_torch(ours, theirs, [_x(2, 5, 3) if batch_first else _x(5, 2, 3)])

    def final(m: Any, xs: list[Any]) -> Any:
        return m(xs[0], xs[1])[1]

    check_against_torch(
        nn.RNN(3, 4, nonlinearity=nonlinearity, bias=False, key=0),
        torch.nn.RNN(3, 4, nonlinearity=nonlinearity, bias=False),
        [_x(5, 3), _x(1, 4, seed=3)],  # unbatched, with an initial state
        call=final,
    )


@pytest.mark.parametrize("unbatched", [False, True])
def test_cells(unbatched: bool) -> None:
    """RNNCell, LSTMCell and GRUCell: one step, with a state or from zeros (PyTorch computes
    through zeros: weight_hh gets its zero gradient too)."""
    torch.manual_seed(0)
    n = () if unbatched else (2,)
    x, h, c = _x(*n, 3), _x(*n, 4, seed=1), _x(*n, 4, seed=2)

    def lstm(m: Any, xs: list[Any]) -> Any:
        hc = m(xs[0], (xs[1], xs[2])) if len(xs) == 3 else m(xs[0])
        return hc[0] * 2.0 + hc[1]

    def one(m: Any, xs: list[Any]) -> Any:
        return m(*xs)

    for nonlinearity in ("tanh", "relu"):
        ours = nn.RNNCell(3, 4, nonlinearity=nonlinearity, key=0)
        theirs = torch.nn.RNNCell(3, 4, nonlinearity=nonlinearity)
        check_against_torch(ours, theirs, [x, h], call=one)
    check_against_torch(
        nn.RNNCell(3, 4, False, key=0), torch.nn.RNNCell(3, 4, False), [x], call=one
    )
    check_against_torch(nn.GRUCell(3, 4, key=0), torch.nn.GRUCell(3, 4), [x, h], call=one)
    check_against_torch(
        nn.GRUCell(3, 4, bias=False, key=0), torch.nn.GRUCell(3, 4, bias=False), [x], call=one
    )
    check_against_torch(nn.LSTMCell(3, 4, key=0), torch.nn.LSTMCell(3, 4), [x, h, c], call=lstm)
    check_against_torch(nn.LSTMCell(3, 4, key=0), torch.nn.LSTMCell(3, 4), [x], call=lstm)


def test_elman_rnn_and_cells_refuse_what_torch_refuses() -> None:
    with pytest.raises(ValueError, match="unknown nonlinearity 'sigmoid'"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="unknown nonlinearity"):
        nn.RNNCell(3, 4, nonlinearity="gelu")
    cell = nn.LSTMCell(3, 4, key=0)
    with pytest.raises(tg.ShapeError, match=r"input must be \(N, 3\) or unbatched \(3,\)"):
        cell(tg.ones((2, 5)))
    with pytest.raises(tg.ShapeError, match=r"c must have shape \(2, 4\)"):
        cell(tg.ones((2, 3)), (tg.zeros((2, 4)), tg.zeros((3, 4))))
    with pytest.raises(TypeError, match=r"hx must be a pair \(h, c\)"):
        cell(tg.ones((2, 3)), tg.zeros((2, 4)))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="convert lists with tg.tensor"):
        nn.GRUCell(3, 4, key=0)([[1.0, 2.0, 3.0]])  # type: ignore[arg-type]
    assert repr(nn.RNN(3, 4, nonlinearity="relu")).endswith("nonlinearity='relu')")
    assert "bias=False" in repr(nn.GRU(3, 4, bias=False))
    with pytest.raises(TypeError, match=r"LSTMCell\(\) takes at most 3 positional"):
        nn.LSTMCell(3, 4, True, "cpu")  # type: ignore[misc]
    for m in (nn.RNN(3, 4, key=0), nn.RNNCell(3, 4, key=0)):
        m.nonlinearity = "sigmoid"  # PyTorch's RNNCell refuses it at the call too
        with pytest.raises(ValueError, match="unknown nonlinearity 'sigmoid'"):
            m(tg.ones((2, 3)))
    rnn = nn.RNN(3, 4, 2, dropout=0.5, key=0)
    assert rnn.dropout == 0.5 and [n for n, _ in rnn.named_modules()] == [""]


@pytest.mark.parametrize("layer", ["RNN", "LSTM", "GRU"])
def test_a_one_step_sequence_from_zeros_gives_weight_hh_its_zero_gradient(layer: str) -> None:
    """PyTorch computes through the zero initial state: weight_hh's gradient is zeros, not
    None, so AdamW's weight decay still moves it (it was skipped: 0.02 apart after a step)."""
    torch.manual_seed(0)
    ours, theirs = getattr(nn, layer)(3, 4, key=0), getattr(torch.nn, layer)(3, 4)
    check_against_torch(ours, theirs, [_x(1, 2, 3)])
    ours = getattr(nn, layer)(3, 4, key=0)
    first(ours(tg.ones((1, 2, 3)))).sum().backward()
    assert ours.weight_hh_l0.grad is not None and not np.any(np.asarray(ours.weight_hh_l0.grad))


@pytest.mark.parametrize("layer", ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("given", ["input", "state"])
def test_recurrent_layers_promote_half_precision_inputs_and_states_as_linear(
    layer: str, given: str
) -> None:
    """A float16 input (its zero initial state float16 too) or float16 states with float32
    parameters run in float32, as ``nn.Linear`` and the layers before ``rnn_scan`` (the
    scan's carry stayed float16: a JAX TypeError), and each gradient keeps its tensor's
    dtype."""
    m = getattr(nn, layer)(3, 4, key=0)
    lstm, cell = "LSTM" in layer, layer.endswith("Cell")
    half = tg.float16 if given == "input" else tg.float32
    x = tg.tensor(_x(2, 3) if cell else _x(5, 2, 3)).astype(half).require_grad()
    states = [tg.tensor(_x(2, 4, seed=s) if cell else _x(1, 2, 4, seed=s)) for s in (1, 2)]
    states = [s.astype(tg.float16).require_grad() for s in states[: 2 if lstm else 1]]
    hx = None if given == "input" else (tuple(states) if lstm else states[0])
    out = first(m(x, hx))
    assert out.dtype == tg.float32
    out.sum().backward()
    for t in [x] if hx is None else [x, *states]:
        assert t.grad is not None and t.grad.dtype == t.dtype
    as32 = [tg.tensor(np.asarray(t.detach().astype(tg.float32))) for t in [x, *states]]
    want = first(m(as32[0], None if hx is None else (tuple(as32[1:]) if lstm else as32[1])))
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-7)


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


def test_multihead_attention_positional_arguments_follow_pytorch() -> None:
    """PyTorch's fifth parameter is add_bias_kv: a fifth positional argument is refused
    (it set batch_first, a wrong layer without an error); kdim and vdim equal to embed_dim
    are PyTorch's default layer, with its state dict."""
    with pytest.raises(TypeError, match="fifth parameter is add_bias_kv"):
        nn.MultiheadAttention(4, 2, 0.0, True, True)  # type: ignore[misc]
    theirs = torch.nn.MultiheadAttention(8, 2, kdim=8, vdim=8)
    ours = nn.MultiheadAttention(8, 2, kdim=8, vdim=8, key=0)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    q = np.random.default_rng(0).standard_normal((3, 2, 8)).astype(np.float32)
    want = theirs(*[torch.tensor(q)] * 3)[0].detach().numpy()
    np.testing.assert_allclose(ours(q, q, q)[0].numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="kdim=4.*project them to embed_dim"):
        nn.MultiheadAttention(8, 2, kdim=4)


@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched_attention_and_encoder_layer_match_torch(batch_first: bool) -> None:
    """(L, E) inputs, a (S,) key padding mask: unbatched results, as PyTorch's."""
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first, key=0)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(0)
    q = rng.standard_normal((3, 8)).astype(np.float32)
    kv = rng.standard_normal((5, 8)).astype(np.float32)
    pad = np.array([False, False, True, False, False])
    for average in (True, False):
        want = theirs(*map(torch.tensor, (q, kv, kv)), key_padding_mask=torch.tensor(pad),
                      average_attn_weights=average)  # fmt: skip
        got = ours(q, kv, kv, key_padding_mask=pad, average_attn_weights=average)
        for a, b in zip(got, want, strict=True):
            assert a is not None
            np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    layer_t = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first)
    layer.load_state_dict({k: v.detach().numpy() for k, v in layer_t.state_dict().items()})
    x, xt = tg.tensor(q, requires_grad=True), torch.tensor(q, requires_grad=True)
    layer(x).sum().backward()
    layer_t(xt).sum().backward()
    assert x.grad is not None and xt.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


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


def test_lstm_without_hx_leaves_only_its_parameters_on_the_tape(base: tg.GraphStats) -> None:
    """Regression: with no ``hx`` the first step has no cell state, yet its forget gate (a
    getitem and a sigmoid) was computed and left hanging, two nodes per layer each forward,
    though every output reached the loss. Outputs and gradients still match PyTorch's."""
    torch.manual_seed(0)
    ours, theirs = nn.LSTM(3, 4, num_layers=2, key=0), torch.nn.LSTM(3, 4, num_layers=2)
    ours.load_state_dict(theirs.state_dict())
    n_params = len(list(ours.parameters()))
    policy = tg.get_cleanup_policy()
    tg.set_cleanup_policy("manual")  # nothing is swept: a hanging node stays to be counted
    try:
        for step in range(3):
            x = _x(5, 2, 3, seed=step)
            out, (h, c) = ours(tg.tensor(x))
            (out.sum() + h.sum() + (c * c).sum()).backward()
            t_out, (t_h, t_c) = theirs(torch.tensor(x))
            (t_out.sum() + t_h.sum() + (t_c * t_c).sum()).backward()
            got = [t.numpy() for t in (out, h, c)]
            del out, h, c
            for g, want in zip(got, (t_out, t_h, t_c), strict=True):
                np.testing.assert_allclose(g, want.detach().numpy(), rtol=1e-5, atol=1e-6)
            stats = tg.graph_stats()
            assert stats.nodes - base.nodes == n_params, f"step {step}: {stats}"
            assert stats.hanging_nodes == base.hanging_nodes, f"step {step}: {stats}"
    finally:
        tg.set_cleanup_policy(policy)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():  # accumulated over the three steps on both sides
        want = theirs_params[name].grad.numpy()
        np.testing.assert_allclose(np.asarray(p.grad), want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_gru_given_an_lstm_style_tuple_says_to_pass_a_tensor() -> None:
    """Regression: ``GRU(x, (h_0,))`` raised AttributeError ('tuple' object has no attribute
    'shape'); the state is checked as LSTM checks its ``(h_0, c_0)``."""
    gru = nn.GRU(3, 2, key=0)
    x, h0 = tg.ones((4, 2, 3)), tg.zeros((1, 2, 2))
    with pytest.raises(TypeError, match=r"^GRU: h_0 must be a tensor, got tuple; each state"):
        gru(x, (h0,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^LSTM: c_0 must be a tensor, got list"):
        nn.LSTM(3, 2, key=0)(x, (h0, [[0.0, 0.0]]))  # type: ignore[arg-type]
    assert gru(x, h0)[1].shape == (1, 2, 2)


def test_conv_of_a_pytorch_tensor_says_to_convert_it() -> None:
    """Regression: the message was "the input's dtype torch.float32 differs from the weight's
    float32"; it is now Linear's and Embedding's."""
    for layer, x in (
        (nn.Conv2d(1, 2, 3, key=0), torch.ones(1, 1, 5, 5)),
        (nn.Linear(5, 2), torch.ones(1, 5)),
    ):
        with pytest.raises(
            TypeError, match=r"a PyTorch tensor .* cannot be an operand.*tg\.tensor\(t\)"
        ):
            layer(x)


def test_multihead_attention_returns_the_weights_after_dropout() -> None:
    """Regression: while training with dropout, the weights returned were those before
    dropout; PyTorch returns those the output used (its ``multi_head_attention_forward``
    drops them out before averaging over heads)."""
    torch.manual_seed(0)
    ours = nn.MultiheadAttention(8, 2, dropout=1.0, key=0)
    theirs = torch.nn.MultiheadAttention(8, 2, dropout=1.0)
    with torch.no_grad():
        theirs.in_proj_bias.normal_()
        theirs.out_proj.bias.normal_()
    ours.load_state_dict(theirs.state_dict())
    x = _x(3, 2, 8)
    out, w = ours(tg.tensor(x), tg.tensor(x), tg.tensor(x))
    t_out, t_w = theirs(torch.tensor(x), torch.tensor(x), torch.tensor(x))
    np.testing.assert_array_equal(w.numpy(), t_w.detach().numpy())  # all dropped: zeros
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-6)
    # p = 0.5: each returned weight is 0 or twice the evaluation weight, and the output is
    # computed from them
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, key=1)
    q = tg.tensor(_x(2, 6, 8, seed=1))  # (N, L, E)
    out, w = mha(q, q, q, average_attn_weights=False)  # w: (N, H, L, S)
    _, full = mha.eval()(q, q, q, average_attn_weights=False)
    assert full is not None and w is not None
    w_np, full_np = w.numpy(), full.numpy()
    dropped = w_np == 0
    assert dropped.any() and not dropped.all()
    np.testing.assert_allclose(w_np[~dropped], 2 * full_np[~dropped], rtol=1e-5)
    wv, bv = mha.in_proj_weight[16:], mha.in_proj_bias[16:]  # type: ignore[index]
    v = (q @ wv.T + bv).reshape(2, 6, 2, 4).transpose(0, 2, 1, 3)  # (N, H, S, D)
    want = mha.out_proj((w @ v).transpose(0, 2, 1, 3).reshape(2, 6, 8))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_max_pool_gradient_goes_where_pytorchs_does_at_nan_and_minus_inf() -> None:
    """A NaN is the window's maximum (the forward reports it), and a window of -inf inputs
    gives its g to an input, never to the padding."""
    for x0, args in (
        (np.array([[[np.nan, 5.0, 3.0, 0.0]]], np.float32), (2,)),
        (np.array([[[1.0, np.nan, 3.0, 0.0, 2.0, 1.0]]], np.float32), (2, 1)),
        (np.full((1, 1, 3), -np.inf, np.float32), (2, 1, 1)),
    ):
        x, xt = tg.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
        tg.max_pool1d(x, *args).sum().backward()
        torch.nn.functional.max_pool1d(xt, *args).sum().backward()
        assert x.grad is not None and xt.grad is not None
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_avg_pool_sums_half_precision_windows_in_float32(dtype: str) -> None:
    """As PyTorch: each window summed in float32 and rounded once."""
    x0 = (100 + np.random.default_rng(0).standard_normal((2, 3, 400))).astype(np.float32)
    xt = torch.tensor(x0).to(getattr(torch, dtype))
    want = torch.nn.functional.avg_pool1d(xt, 64, 1, 32).float().numpy()
    got = tg.avg_pool1d(tg.tensor(x0).astype(dtype), 64, 1, 32).astype(tg.float32).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=0.5 if dtype == "bfloat16" else 0.07)
