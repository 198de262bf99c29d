"""The layers over the building-model ops against PyTorch: convolution, pooling, activations,
embedding, layer and batch norm, dropout, the transformer encoder layer."""

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


@pytest.mark.parametrize(
    ("ours", "theirs", "shape"),
    [
        (
            lambda: nn.Conv2d(3, 4, 3, padding=1, key=0),
            lambda: torch.nn.Conv2d(3, 4, 3, padding=1),
            (2, 3, 6, 6),
        ),
        (
            lambda: nn.Conv2d(4, 6, (3, 2), stride=2, dilation=(1, 2), groups=2, key=0),
            lambda: torch.nn.Conv2d(4, 6, (3, 2), stride=2, dilation=(1, 2), groups=2),
            (2, 4, 7, 8),
        ),
        (
            lambda: nn.Conv2d(2, 3, 3, padding="same", bias=False, key=0),
            lambda: torch.nn.Conv2d(2, 3, 3, padding="same", bias=False),
            (1, 2, 5, 5),
        ),
        (
            lambda: nn.Conv1d(3, 5, 3, padding=2, key=0),
            lambda: torch.nn.Conv1d(3, 5, 3, padding=2),
            (2, 3, 9),
        ),
    ],
    ids=["conv2d", "conv2d-strided-grouped", "conv2d-same", "conv1d"],
)
def test_convolutions(ours: Any, theirs: Any, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    check_against_torch(ours(), theirs(), [_x(*shape)])


def test_pooling_flatten_and_activations() -> None:
    layers = [
        (nn.MaxPool2d(2), torch.nn.MaxPool2d(2)),
        (nn.MaxPool2d(3, stride=2, padding=1), torch.nn.MaxPool2d(3, stride=2, padding=1)),
        (nn.AvgPool2d(2), torch.nn.AvgPool2d(2)),
        (
            nn.AvgPool2d(3, 2, 1, count_include_pad=False),
            torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False),
        ),
        (
            nn.MaxPool2d(2, ceil_mode=False, dilation=1, return_indices=False),  # the defaults
            torch.nn.MaxPool2d(2),
        ),
        (nn.AdaptiveAvgPool2d((4, None)), torch.nn.AdaptiveAvgPool2d((4, None))),
        (nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveAvgPool2d(1)),
        (nn.Flatten(), torch.nn.Flatten()),
        (nn.GELU(), torch.nn.GELU()),
        (nn.GELU("tanh"), torch.nn.GELU("tanh")),
        (nn.SiLU(), torch.nn.SiLU()),
        (nn.Sigmoid(), torch.nn.Sigmoid()),
        (nn.Tanh(), torch.nn.Tanh()),
        (nn.ReLU(), torch.nn.ReLU()),
    ]
    for ours, theirs in layers:
        check_against_torch(ours, theirs, [_x(2, 3, 6, 6)])
    check_against_torch(nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4), [_x(2, 3, 7)])
    for dim, size in ((1, (3, 2)), (-1, (2, -1))):
        ours, theirs = nn.Unflatten(dim, size), torch.nn.Unflatten(dim, size)
        check_against_torch(ours, theirs, [_x(2, 6, 4)])
        assert repr(ours) == repr(theirs)
    with pytest.raises(tg.ShapeError, match="Unflatten: dim 3 is out of range"):
        nn.Unflatten(3, (2, 2))(tg.ones((2, 4)))


@pytest.mark.parametrize("shape", [(2, 3, 9), (3, 9)], ids=["batched", "unbatched"])
def test_one_dimensional_pooling_matches_torch(shape: tuple[int, ...]) -> None:
    """``MaxPool1d``/``AvgPool1d`` (and so ``tg.max_pool1d``/``avg_pool1d``): forward and input
    gradient as PyTorch's, batched and unbatched, with stride, padding and both counts."""
    layers = [
        (nn.MaxPool1d(2), torch.nn.MaxPool1d(2)),
        (nn.MaxPool1d(3, stride=2, padding=1), torch.nn.MaxPool1d(3, stride=2, padding=1)),
        (nn.MaxPool1d((4,), 1, 2), torch.nn.MaxPool1d((4,), 1, 2)),
        (nn.AvgPool1d(3), torch.nn.AvgPool1d(3)),
        (nn.AvgPool1d(3, 2, 1), torch.nn.AvgPool1d(3, 2, 1)),
        (
            nn.AvgPool1d(3, 2, 1, count_include_pad=False),
            torch.nn.AvgPool1d(3, 2, 1, count_include_pad=False),
        ),
        (
            nn.MaxPool1d(2, ceil_mode=False, dilation=1, return_indices=False),  # the defaults
            torch.nn.MaxPool1d(2),
        ),
        (nn.AvgPool1d(2, ceil_mode=False), torch.nn.AvgPool1d(2)),
    ]
    for ours, theirs in layers:
        check_against_torch(ours, theirs, [_x(*shape)])
    assert repr(nn.MaxPool1d(3)) == "MaxPool1d(kernel_size=3, stride=3, padding=0)"
    assert "stride=2" in repr(nn.AvgPool1d(2)) and "count_include_pad=False" in repr(
        nn.AvgPool1d(2, count_include_pad=False)
    )


def test_one_dimensional_pooling_functions_and_bad_input() -> None:
    x = _x(2, 3, 8)
    tx = torch.tensor(x)
    F = torch.nn.functional
    np.testing.assert_array_equal(np.asarray(tg.max_pool1d(x, 3, 2, 1)), F.max_pool1d(tx, 3, 2, 1))
    np.testing.assert_allclose(
        np.asarray(tg.avg_pool1d(x, 2, count_include_pad=False)), F.avg_pool1d(tx, 2), rtol=1e-6
    )
    with pytest.raises(tg.ShapeError, match=r"max_pool1d: .* must be \(N, C, L\) or \(C, L\)"):
        tg.max_pool1d(x[None], 2)
    with pytest.raises(tg.ShapeError, match=r"avg_pool1d: the window spans \(9,\)"):
        tg.avg_pool1d(x, 9)
    with pytest.raises(ValueError, match="at most half the kernel"):
        tg.max_pool1d(x, 2, padding=2)
    with pytest.raises(ValueError, match=r"kernel=\(2, 2\) must be an int >= 1"):
        nn.MaxPool1d((2, 2))(tg.tensor(x))
    with pytest.raises(TypeError, match="floats and booleans"):
        tg.avg_pool1d(x, 2.0)  # type: ignore[arg-type]


def test_embedding_and_layer_norm() -> None:
    torch.manual_seed(0)
    ids = np.array([[1, 4, 4], [0, 9, 2]], dtype=np.int32)
    check_against_torch(nn.Embedding(10, 6, key=0), torch.nn.Embedding(10, 6), [ids])
    check_against_torch(nn.LayerNorm(6), torch.nn.LayerNorm(6), [_x(2, 3, 6)])
    check_against_torch(
        nn.LayerNorm((3, 6), elementwise_affine=False),
        torch.nn.LayerNorm((3, 6), elementwise_affine=False),
        [_x(2, 3, 6)],
    )
    with pytest.raises(IndexError):
        nn.Embedding(10, 6, key=0)(np.array([3, 10]))


@pytest.mark.parametrize("padding_idx", [0, -2])
def test_embedding_padding_idx_is_zero_and_gets_no_gradient(padding_idx: int) -> None:
    """PyTorch's padding_idx: that row starts at zeros and its gradient is always zero, also
    after the table was loaded with a nonzero row there (the lookup still reads it)."""
    torch.manual_seed(0)
    ours = nn.Embedding(10, 6, padding_idx=padding_idx, key=0)
    assert not ours.weight.numpy()[padding_idx].any()
    theirs = torch.nn.Embedding(10, 6, padding_idx=padding_idx)
    with torch.no_grad():
        theirs.weight[padding_idx] = 1.0
    ids = np.array([[0, 8, 8], [8, 9, 0]], dtype=np.int32)
    check_against_torch(ours, theirs, [ids])
    assert not ours.weight.grad.numpy()[padding_idx].any()  # type: ignore[union-attr]


def test_embedding_negative_device_index_reads_nan_as_out_of_range() -> None:
    """A device index below 0 is out of range like one past the end: a NaN row and no
    gradient (not the last row, NumPy's wrap-around), as the docs say; host ones raise."""
    emb = nn.Embedding(10, 4, key=0)
    out = emb(tg.tensor([[-1, 3, 10]]))
    assert np.isnan(out.numpy()[0, [0, 2]]).all()
    np.testing.assert_array_equal(out.numpy()[0, 1], emb.weight.numpy()[3])
    out.sum().backward()
    grad = emb.weight.grad.numpy()  # type: ignore[union-attr]
    assert grad[3].tolist() == [1.0] * 4 and grad.sum() == 4.0
    with pytest.raises(IndexError):
        emb(np.array([[-1]]))


@pytest.mark.parametrize(
    ("ours", "theirs", "shape"),
    [
        (lambda: nn.BatchNorm1d(4), lambda: torch.nn.BatchNorm1d(4), (5, 4)),
        (lambda: nn.BatchNorm1d(4), lambda: torch.nn.BatchNorm1d(4), (5, 4, 3)),
        (
            lambda: nn.BatchNorm2d(3, momentum=0.3),
            lambda: torch.nn.BatchNorm2d(3, momentum=0.3),
            (4, 3, 2, 2),
        ),
        (
            lambda: nn.BatchNorm3d(2, momentum=0.2),
            lambda: torch.nn.BatchNorm3d(2, momentum=0.2),
            (3, 2, 3, 2, 3),
        ),
        (
            lambda: nn.BatchNorm3d(2, affine=False),
            lambda: torch.nn.BatchNorm3d(2, affine=False),
            (2, 2, 1, 3, 2),
        ),
    ],
    ids=["bn1d", "bn1d-seq", "bn2d", "bn3d", "bn3d-no-affine"],
)
def test_batch_norm_train_and_eval(ours: Any, theirs: Any, shape: tuple[int, ...]) -> None:
    mine, ref = ours(), theirs()
    check_against_torch(mine, ref, [_x(*shape)])  # training: batch stats, running stats move
    check_against_torch(mine, ref, [_x(*shape, seed=5)])  # a second step from the loaded state
    assert int(mine.num_batches_tracked.item()) == 2  # torch's 1 loaded, then one more step
    mine.eval(), ref.eval()
    check_against_torch(mine, ref, [_x(*shape, seed=6)])  # eval: running statistics
    with pytest.raises(ValueError, match="channels on axis 1"):
        mine(tg.ones((2, 7)))


def test_dropout_is_reproducible_scaled_and_off_in_eval() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        nn.Dropout(1.5)
    x = tg.ones((200, 50))
    drop = nn.Dropout(0.25, key=3)
    a, b = np.asarray(drop(x)), np.asarray(drop(x))
    assert set(np.unique(a).tolist()) <= {0.0, float(np.float32(1.0) / np.float32(0.75))}
    assert abs((a == 0).mean() - 0.25) < 0.02
    assert not np.array_equal(a, b)  # a fresh mask per call
    np.testing.assert_array_equal(np.asarray(nn.Dropout(0.25, key=3)(x)), a)  # same key: same
    tg.manual_seed(11)
    c = np.asarray(nn.Dropout(0.5)(x))
    tg.manual_seed(11)
    np.testing.assert_array_equal(np.asarray(nn.Dropout(0.5)(x)), c)
    drop.eval()
    assert drop(x) is x


@pytest.mark.filterwarnings("ignore:dropout2d. Received a 3D input:UserWarning")  # PyTorch's
@pytest.mark.parametrize(
    ("ours", "theirs", "shape"),
    [
        (nn.Dropout1d, "Dropout1d", (40, 30, 5)),
        (nn.Dropout1d, "Dropout1d", (300, 5)),
        (nn.Dropout2d, "Dropout2d", (40, 30, 2, 3)),
        (nn.Dropout2d, "Dropout2d", (300, 2, 3)),
        (nn.Dropout3d, "Dropout3d", (40, 30, 2, 1, 3)),
        (nn.Dropout3d, "Dropout3d", (300, 2, 2, 1)),
    ],
    ids=["1d", "1d-unbatched", "2d", "2d-unbatched", "3d", "3d-unbatched"],
)
def test_channel_dropout_drops_whole_channels_scaled(
    ours: Any, theirs: str, shape: tuple[int, ...]
) -> None:
    """One keep/zero decision per channel (every position of a channel equal), kept ones
    scaled by 1 / (1 - p), the gradient the same mask; eval and p=0 the identity, as torch."""
    x = np.abs(_x(*shape)) + 1.0
    n = int(theirs[-2])  # the spatial axes
    drop = ours(0.25, key=5)
    t = tg.tensor(x, requires_grad=True)
    y = drop(t)
    ratio = np.asarray(y) / x
    flat = ratio.reshape(*shape[:-n], -1)
    np.testing.assert_allclose(flat, np.broadcast_to(flat[..., :1], flat.shape), rtol=1e-6)
    assert ((flat == 0).all(-1) | np.isclose(flat, 1 / 0.75, rtol=1e-6).all(-1)).all()
    assert abs((flat[..., 0] == 0).mean() - 0.25) < 0.06
    (y * tg.tensor(x)).sum().backward()
    np.testing.assert_allclose(np.asarray(t.grad), ratio * x, rtol=1e-6)
    assert not np.array_equal(np.asarray(drop(t)), np.asarray(y))  # a fresh mask per call
    np.testing.assert_array_equal(np.asarray(ours(0.25, key=5)(t)), np.asarray(y))
    tg.manual_seed(3)
    a = np.asarray(ours(0.5)(t))
    tg.manual_seed(3)
    np.testing.assert_array_equal(np.asarray(ours(0.5)(t)), a)
    # eval and p=0: the identity, as PyTorch's (whose 3-D Dropout2d also is in eval)
    check_against_torch(ours(0.3).eval(), getattr(torch.nn, theirs)(0.3).eval(), [_x(*shape)])
    check_against_torch(ours(0.0), getattr(torch.nn, theirs)(0.0), [_x(*shape)])
    assert drop.eval()(t) is t


def test_channel_dropout_functions_and_bad_input() -> None:
    x = tg.tensor(np.abs(_x(8, 6, 4)) + 1.0)
    y = np.asarray(tg.dropout1d(x, 0.5, key=2))
    np.testing.assert_array_equal(np.asarray(tg.dropout1d(x, 0.5, key=2)), y)
    assert ((y == 0).all(-1) | np.isclose(y, 2 * np.asarray(x)).all(-1)).all()
    assert tg.dropout2d(x, 0.5, training=False) is x
    assert not np.asarray(tg.dropout2d(x, 1.0)).any()
    th = torch.nn.functional
    with pytest.raises(RuntimeError, match="2D or 3D"):
        th.dropout1d(torch.ones(5), 0.5)
    with pytest.raises(tg.ShapeError, match=r"dropout1d: .* must be \(N, C, L\) or \(C, L\)"):
        tg.dropout1d(tg.ones(5), 0.5)
    with pytest.raises(tg.ShapeError, match=r"dropout2d: .* \(N, C, H, W\) or \(C, H, W\)"):
        nn.Dropout2d().eval()(tg.ones((2, 3)))
    with pytest.raises(ValueError, match=r"Dropout2d: .*\[0, 1\]"):
        nn.Dropout2d(1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tg.dropout1d(x, -0.1)
    with pytest.raises(TypeError, match="computes in floats"):
        tg.dropout2d(tg.ones((2, 3, 4), dtype=tg.int32), 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer(norm_first: bool) -> None:
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first, activation="gelu"
    )
    ours = nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first, activation="gelu", key=0
    )
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.eval()  # torch's fast path is off in training mode; the math is the same
    ours.eval()
    check_against_torch(ours, theirs, [_x(2, 5, 8)])
    mask = np.triu(np.ones((5, 5), dtype=bool), k=1)

    def causal(m: Any, xs: list[Any]) -> Any:
        return m(xs[0], src_mask=xs[1])

    check_against_torch(ours, theirs, [_x(2, 5, 8, seed=2), mask], call=causal)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_stacks_copies_as_torch(norm_first: bool) -> None:
    """PyTorch's TransformerEncoder: deep copies under ``layers.i``, a final ``norm``; its
    state dict loads unchanged and the masks reach every layer."""
    torch.manual_seed(0)
    kw: dict[str, Any] = {"dropout": 0.0, "batch_first": True, "norm_first": norm_first}
    theirs = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(8, 2, 16, **kw),
        2,
        norm=torch.nn.LayerNorm(8),
        enable_nested_tensor=False,
    )
    ours = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, key=0, **kw), 2, norm=nn.LayerNorm(8)
    )
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    theirs.eval()
    ours.eval()
    check_against_torch(ours, theirs, [_x(2, 5, 8)])
    mask = np.triu(np.ones((5, 5), dtype=bool), k=1)
    padding = np.zeros((2, 5), dtype=bool)
    padding[1, 3:] = True

    def masked(m: Any, xs: list[Any]) -> Any:
        return m(xs[0], mask=xs[1], src_key_padding_mask=xs[2])

    check_against_torch(ours, theirs, [_x(2, 5, 8, seed=2), mask, padding], call=masked)

    def causal(m: Any, xs: list[Any]) -> Any:
        return m(xs[0], mask=xs[1], is_causal=True)

    check_against_torch(ours, theirs, [_x(2, 5, 8, seed=3), mask], call=causal)
    plain = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, key=0), 1)
    assert list(plain.state_dict())[0] == "layers.0.self_attn.in_proj_weight"
    assert plain.norm is None
    with pytest.raises(TypeError, match="encoder_layer must be a module"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_layers must be >= 0"):
        nn.TransformerEncoder(plain, -1)


def test_multihead_attention_fused_path_matches_the_weights_path() -> None:
    mha = nn.MultiheadAttention(8, 2, batch_first=True, key=0)
    x = tg.tensor(_x(2, 5, 8))
    fused, none = mha(x, x, x, need_weights=False, is_causal=True)
    explicit, weights = mha(x, x, x, need_weights=True, is_causal=True)
    assert none is None and weights is not None and weights.shape == (2, 5, 5)
    np.testing.assert_allclose(np.asarray(fused), np.asarray(explicit), rtol=1e-5, atol=1e-6)
    assert np.allclose(np.triu(np.asarray(weights)[0], k=1), 0.0)
