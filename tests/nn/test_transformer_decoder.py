"""``nn.TransformerDecoderLayer``, ``nn.TransformerDecoder`` and ``nn.Transformer`` against
PyTorch (state dicts loaded unchanged; outputs, parameter and input gradients) over
``batch_first``, ``norm_first``, masks of each kind and unbatched inputs; initialisation,
training, ``tg.jit`` and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch

import tapegrad as tg
from tapegrad import nn, optim

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
E, H, FF = 8, 2, 16


def _seqs(batch_first: bool, t: int = 4, s: int = 5, n: int = 3) -> list[np.ndarray]:
    shape = (lambda length: (n, length, E)) if batch_first else (lambda length: (length, n, E))
    return [RNG.standard_normal(shape(t)).astype(np.float32) for t in (t, s)]


CAUSAL = np.triu(np.full((4, 4), -np.inf, np.float32), 1)
MASKS: dict[str, dict[str, Any]] = {
    "none": {},
    "causal-float": {"tgt_mask": CAUSAL},
    "causal-bool": {"tgt_mask": np.triu(np.ones((4, 4), bool), 1)},
    "padding": {
        "tgt_key_padding_mask": np.array([[0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 1, 1]], bool),
        "memory_key_padding_mask": np.array([[0, 0, 0, 0, 1]] * 3, bool),
    },
    "memory-mask": {"memory_mask": np.tril(np.ones((4, 5), bool), -2)},
}


def _call(masks: dict[str, Any]) -> Any:
    def call(module: Any, xs: list[Any]) -> Any:
        kw = {
            k: (tg.tensor(v) if isinstance(module, nn.Module) else torch.tensor(v))
            for k, v in masks.items()
        }
        return module(*xs, **kw)

    return call


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", list(MASKS))
def test_decoder_layer_matches_torch(batch_first: bool, norm_first: bool, masks: str) -> None:
    torch.manual_seed(0)
    theirs = torch.nn.TransformerDecoderLayer(
        E, H, FF, 0.0, batch_first=batch_first, norm_first=norm_first
    ).eval()
    ours = nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=batch_first, norm_first=norm_first)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    check_against_torch(
        ours, theirs, _seqs(batch_first), call=_call(MASKS[masks]), rtol=1e-4, atol=1e-5
    )


def test_decoder_layer_is_causal_flag_and_unbatched() -> None:
    torch.manual_seed(1)
    theirs = torch.nn.TransformerDecoderLayer(E, H, FF, 0.0, activation="gelu").eval()
    ours = nn.TransformerDecoderLayer(E, H, FF, 0.0, activation="gelu")
    tgt, mem = (RNG.standard_normal((n, E)).astype(np.float32) for n in (4, 5))

    def call(module: Any, xs: list[Any]) -> Any:
        mask = tg.tensor(CAUSAL) if isinstance(module, nn.Module) else torch.tensor(CAUSAL)
        return module(*xs, tgt_mask=mask, tgt_is_causal=True)

    check_against_torch(ours, theirs, [tgt, mem], call=call, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("with_norm", [False, True])
def test_decoder_stack_matches_torch(with_norm: bool) -> None:
    torch.manual_seed(2)
    layer = torch.nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=True)
    theirs = torch.nn.TransformerDecoder(
        layer, 2, torch.nn.LayerNorm(E) if with_norm else None
    ).eval()
    ours = nn.TransformerDecoder(
        nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=True),
        2,
        nn.LayerNorm(E) if with_norm else None,
    )
    assert list(ours.state_dict()) == list(theirs.state_dict())
    check_against_torch(
        ours, theirs, _seqs(True), call=_call(MASKS["causal-float"]), rtol=1e-4, atol=1e-5
    )


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's, about itself
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(batch_first: bool) -> None:
    torch.manual_seed(3)
    theirs = torch.nn.Transformer(
        E, H, 2, 2, FF, 0.0, batch_first=batch_first, norm_first=batch_first
    ).eval()
    ours = nn.Transformer(E, H, 2, 2, FF, 0.0, batch_first=batch_first, norm_first=batch_first)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    tgt, src = _seqs(batch_first)

    def call(module: Any, xs: list[Any]) -> Any:  # each model's own causal mask
        return module(*xs, tgt_mask=type(module).generate_square_subsequent_mask(4))

    check_against_torch(ours, theirs, [src, tgt], call=call, rtol=1e-4, atol=1e-5)


def test_square_subsequent_mask_is_torchs() -> None:
    ours = nn.Transformer.generate_square_subsequent_mask(5)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(5)
    np.testing.assert_array_equal(np.asarray(ours.data), theirs.numpy())
    assert ours.dtype == np.float32 and not ours.requires_grad


def test_transformer_initialisation_is_xavier_uniform() -> None:
    model = nn.Transformer(16, 2, 1, 1, 32, key=0)
    w = np.asarray(model.encoder.layers[0].linear1.weight.data)  # (32, 16)
    bound = np.sqrt(6 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    attn = np.asarray(model.decoder.layers[0].self_attn.in_proj_weight.data)  # (48, 16)
    assert np.abs(attn).max() <= np.sqrt(6 / (16 + 48))
    again = nn.Transformer(16, 2, 1, 1, 32, key=0)
    np.testing.assert_array_equal(np.asarray(again.encoder.layers[0].linear1.weight.data), w)


def test_transformer_redraws_custom_stacks_and_keys_each_dropout() -> None:
    """PyTorch's _reset_parameters redraws every parameter of two or more dimensions, a
    custom encoder's too; with key=, the copied layers do not share one dropout key (every
    layer would drop the same positions)."""
    torch.manual_seed(0)
    encoder_t = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(16, 2, 32), 1, enable_nested_tensor=False
    )
    before_t = encoder_t.layers[0].linear1.weight.detach().clone()
    torch.nn.Transformer(16, 2, custom_encoder=encoder_t, num_decoder_layers=1)
    assert not torch.equal(before_t, encoder_t.layers[0].linear1.weight)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, key=1), 1)
    before = np.asarray(encoder.layers[0].linear1.weight)
    model = nn.Transformer(16, 2, 1, 2, 32, custom_encoder=encoder, key=0)
    assert model.encoder is encoder
    assert not np.array_equal(before, np.asarray(encoder.layers[0].linear1.weight))
    d0, d1 = model.decoder.layers[0], model.decoder.layers[1]
    keys = {np.asarray(m._key).tobytes() for m in model.modules() if isinstance(m, nn.Dropout)}
    assert len(keys) == len([m for m in model.modules() if isinstance(m, nn.Dropout)])
    model.train()
    x = tg.ones((6, 1, 16))
    assert not np.array_equal(np.asarray(d0.dropout(x)), np.asarray(d1.dropout(x)))


def test_a_small_seq2seq_trains_eagerly_and_under_jit() -> None:
    """Copy a sequence through an encoder-decoder; the loss falls, and a compiled step gives
    the eager step's loss."""
    src = tg.randn((4, 6, E), key=1)
    tgt = tg.randn((4, 5, E), key=2)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    losses = []
    for compiled in (False, True):
        model = nn.Transformer(E, H, 1, 1, FF, 0.0, batch_first=True, key=0)
        opt = optim.Adam(model.parameters(), lr=1e-2)

        def step(model: nn.Module = model, opt: optim.Optimizer = opt) -> tg.Tensor:
            opt.zero_grad()
            loss = ((model(src, tgt, tgt_mask=mask) - tgt) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = tg.jit(step) if compiled else step
        losses.append([float(run()) for _ in range(15)])
        del model, opt
    assert losses[0][-1] < 0.7 * losses[0][0]
    np.testing.assert_allclose(losses[1], losses[0], rtol=2e-3, atol=1e-5)


def test_bad_input_raises_clearly() -> None:
    model = nn.Transformer(E, H, 1, 1, FF, key=0)
    with pytest.raises(tg.ShapeError, match="batch sizes"):
        model(tg.ones((5, 2, E)), tg.ones((4, 3, E)))
    with pytest.raises(tg.ShapeError, match="d_model = 8"):
        model(tg.ones((5, 2, E)), tg.ones((4, 2, 6)))
    with pytest.raises(TypeError, match="decoder_layer must be a module"):
        nn.TransformerDecoder("layer", 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_layers must be >= 0"):
        nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H), -1)
    with pytest.raises(ValueError, match="TransformerDecoderLayer: activation"):
        nn.TransformerDecoderLayer(E, H, activation="swish")
    with pytest.raises(ValueError, match="sz must be >= 0"):
        nn.Transformer.generate_square_subsequent_mask(-1)
    with pytest.raises(RuntimeError, match="cannot be converted"):  # -inf has no int32
        torch.nn.Transformer.generate_square_subsequent_mask(3, dtype=torch.int32)
    with pytest.raises(TypeError, match="generate_square_subsequent_mask"):
        nn.Transformer.generate_square_subsequent_mask(3, dtype=tg.int32)
    with pytest.raises(TypeError, match="custom_decoder must be a module or None"):
        nn.Transformer(E, H, custom_decoder=lambda t, m: t)  # type: ignore[arg-type]
