"""nn.utils.rnn (padded and packed batches of sequences) and the recurrent layers on packed
batches, against PyTorch's: values, layouts, every gradient, and nothing left on the tape."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch

import diagnostics
import tapegrad as tg
from tapegrad import nn
from tapegrad.nn.utils import rnn as tgr

torch = pytest.importorskip("torch")
tr = torch.nn.utils.rnn


def _packers(module: Any) -> Any:
    return tgr if isinstance(module, nn.Module) else tr


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize(("bidirectional", "enforce_sorted"), [(False, True), (True, False)])
def test_layers_on_packed_batches_match_torch(
    kind: str, bidirectional: bool, enforce_sorted: bool
) -> None:
    """A packed batch (sorted, or sorted by the packing) through two layers: the packed
    output, the final states at each sequence's own last step in the batch's order, and the
    gradients of the input, the initial states and every parameter."""
    torch.manual_seed(0)
    kw: dict[str, Any] = {"num_layers": 2, "bidirectional": bidirectional}
    if kind == "LSTM":
        kw["proj_size"] = 2
    theirs = getattr(torch.nn, kind)(3, 4, **kw)
    ours = getattr(nn, kind)(3, 4, **kw, key=0)
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    d = 2 if bidirectional else 1
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    h0 = rng.standard_normal((2 * d, 4, 2 if kind == "LSTM" else 4)).astype(np.float32)
    c0 = rng.standard_normal((2 * d, 4, 4)).astype(np.float32)

    def call(module: Any, xs: list[Any]) -> Any:
        packers = _packers(module)
        packed = packers.pack_padded_sequence(xs[0], lengths, enforce_sorted=enforce_sorted)
        out, hn = module(packed, (xs[1], xs[2]) if kind == "LSTM" else xs[1])
        padded, got = packers.pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
        assert list(np.asarray(got)) == lengths
        h, c = hn if kind == "LSTM" else (hn, hn)
        return padded * 1.0 + (h * h).sum() + (c * c * c).sum()

    inputs = [x, h0, c0] if kind == "LSTM" else [x, h0]
    check_against_torch(ours, theirs, inputs, call=call, rtol=1e-4, atol=1e-5)


def test_pack_and_pad_layouts_match_torch() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 2)).astype(np.float32)  # batch first: 3 sequences
    for lengths, enforce in (([4, 2, 1], True), ([1, 4, 2], False)):
        ours = tgr.pack_padded_sequence(tg.tensor(x), lengths, True, enforce)
        theirs = tr.pack_padded_sequence(torch.tensor(x), lengths, True, enforce)
        np.testing.assert_array_equal(ours.data.numpy(), theirs.data.numpy())
        np.testing.assert_array_equal(ours.batch_sizes, theirs.batch_sizes.numpy())
        for mine, want in zip(ours[2:], theirs[2:], strict=True):
            assert (mine is None) == (want is None)
            if want is not None:
                np.testing.assert_array_equal(mine, want.numpy())
        for batch_first in (False, True):
            padded, got = tgr.pad_packed_sequence(ours, batch_first, 7.0, total_length=6)
            want_padded, want_lengths = tr.pad_packed_sequence(theirs, batch_first, 7.0, 6)
            np.testing.assert_array_equal(padded.numpy(), want_padded.numpy())
            np.testing.assert_array_equal(got.numpy(), want_lengths.numpy())
    seqs = [rng.standard_normal((n, 2)).astype(np.float32) for n in (2, 4, 1)]
    for side in ("right", "left"):
        for batch_first in (False, True):
            got = tgr.pad_sequence([tg.tensor(s) for s in seqs], batch_first, -2.0, side)
            want = tr.pad_sequence([torch.tensor(s) for s in seqs], batch_first, -2.0, side)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    packed = tgr.pack_sequence([tg.tensor(s) for s in seqs], enforce_sorted=False)
    want_packed = tr.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(packed.data.numpy(), want_packed.data.numpy())
    for got_seq, s in zip(tgr.unpack_sequence(packed), seqs, strict=True):
        np.testing.assert_array_equal(got_seq.numpy(), s)
    padded = tgr.pad_sequence(seqs, batch_first=True)
    for got_seq, s in zip(tgr.unpad_sequence(padded, [2, 4, 1], True), seqs, strict=True):
        np.testing.assert_array_equal(got_seq.numpy(), s)


def test_a_packed_sequence_made_from_sorted_indices_alone_unsorts_as_torchs() -> None:
    """``PackedSequence(data, batch_sizes, sorted_indices)`` (PyTorch code rebuilding one
    around new data) gets the inverse permutation as ``unsorted_indices``, as PyTorch's
    constructor: padding and a layer's final states come back in the batch's order (they
    stayed sorted)."""
    x = np.arange(10, dtype=np.float32).reshape(5, 2, 1)
    packed = tgr.pack_padded_sequence(tg.tensor(x), [2, 5], enforce_sorted=False)
    rebuilt = tgr.PackedSequence(packed.data * 2.0, packed.batch_sizes, packed.sorted_indices)
    want = tr.pack_padded_sequence(torch.tensor(x), [2, 5], enforce_sorted=False)
    want = tr.PackedSequence(want.data * 2.0, want.batch_sizes, want.sorted_indices)
    np.testing.assert_array_equal(rebuilt.unsorted_indices, want.unsorted_indices.numpy())
    padded, lengths = tgr.pad_packed_sequence(rebuilt)
    want_padded, want_lengths = tr.pad_packed_sequence(want)
    np.testing.assert_array_equal(padded.numpy(), want_padded.numpy())
    np.testing.assert_array_equal(lengths.numpy(), want_lengths.numpy())
    gru = nn.GRU(1, 2, key=0)
    np.testing.assert_array_equal(
        gru(rebuilt)[1].numpy(), gru(packed._replace(data=rebuilt.data))[1].numpy()
    )


def test_gradients_flow_through_padding_and_packing() -> None:
    """Each step's gradient reaches its own sequence; padding steps get none."""
    seqs = [tg.tensor(np.full((n, 2), float(n), np.float32)).require_grad() for n in (3, 1)]
    padded = tgr.pad_sequence(seqs, batch_first=True, padding_value=9.0)
    packed = tgr.pack_padded_sequence(padded, [3, 1], batch_first=True)
    out, _ = tgr.pad_packed_sequence(packed)
    (out * tg.tensor(np.arange(6, dtype=np.float32).reshape(3, 2, 1))).sum().backward()
    np.testing.assert_array_equal(seqs[0].grad.numpy(), [[0, 0], [2, 2], [4, 4]])
    np.testing.assert_array_equal(seqs[1].grad.numpy(), [[1, 1]])


def test_a_training_loop_on_packed_batches_leaves_only_the_parameters() -> None:
    """Packing, the layer, padding and an unused final state, step after step: each step's
    graph is freed by its backward, nothing hangs."""
    base = tg.graph_stats().nodes
    gru = nn.GRU(2, 3, bidirectional=True, key=0)
    rng = np.random.default_rng(3)
    with diagnostics.no_leaks():
        for _ in range(3):
            seqs = [tg.tensor(rng.standard_normal((n, 2)).astype(np.float32)) for n in (4, 2, 3)]
            out, _h = gru(tgr.pack_sequence(seqs, enforce_sorted=False))
            padded, _ = tgr.pad_packed_sequence(out)
            padded.sum().backward()
            del out, _h, padded
            assert tg.graph_stats().nodes == base + len(list(gru.parameters()))


def test_lengths_traced_in_a_tg_jit_step_say_to_make_them_static() -> None:
    """Lengths are read on the host (PyTorch's CPU lengths): a traced argument of a compiled
    step has no value there; the error says to make them a static argument (a tuple), which
    works, each new set compiling once."""
    gru = nn.GRU(2, 3, key=0)

    def step(x: tg.Tensor, lengths: Any) -> tg.Tensor:
        return gru(tgr.pack_padded_sequence(x, lengths, enforce_sorted=False))[1]

    with pytest.raises(tg.TracerError, match=r"pack_padded_sequence: lengths .* static_argnames="):
        tg.jit(step)(tg.ones((3, 2, 2)), tg.tensor([3, 1]))
    static = tg.jit(step, static_argnames=("lengths",))
    assert static(tg.ones((3, 2, 2)), lengths=(3, 1)).shape == (1, 2, 3)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: tgr.pack_padded_sequence(tg.ones((3, 2, 1)), [2, 3]), ValueError, "sorted"),
        (
            lambda: tgr.pack_padded_sequence(tg.ones((3, 2, 1)), [3, 4], enforce_sorted=False),
            tg.ShapeError,
            r"a length \(4\) exceeds the 3 steps",
        ),
        (lambda: tgr.pack_padded_sequence(tg.ones((3, 2, 1)), [3, 0]), ValueError, "at least 1"),
        (lambda: tgr.pack_padded_sequence(tg.ones((3, 2, 1)), [3]), tg.ShapeError, r"\(2,\)"),
        (lambda: tgr.pack_padded_sequence(tg.ones((3, 2)), [1.5, 1]), TypeError, "integers"),
        (lambda: tgr.pad_packed_sequence(tg.ones((3, 2))), TypeError, "PackedSequence"),
        (
            lambda: tgr.pad_packed_sequence(tgr.pack_sequence([tg.ones((3,))]), total_length=2),
            ValueError,
            r"total_length \(2\)",
        ),
        (
            lambda: tgr.pad_packed_sequence(tgr.pack_sequence([tg.ones((3,))]), total_length=8.5),
            TypeError,
            "total_length must be an integer",
        ),
        (lambda: tgr.pad_sequence([]), ValueError, "empty"),
        (lambda: tgr.pad_sequence([tg.ones((2, 3)), tg.ones((2, 4))]), tg.ShapeError, "trailing"),
        (lambda: tgr.pad_sequence([tg.ones((2,))], padding_side="top"), ValueError, "'left'"),
        (
            lambda: nn.GRU(3, 4)(tgr.pack_sequence([tg.ones((2, 5))])),
            tg.ShapeError,
            r"data must be \(steps, 3\)",
        ),
    ],
)
def test_bad_input_says_what_to_do(make: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make()
