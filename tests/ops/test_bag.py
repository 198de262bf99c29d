"""embedding_bag against PyTorch's F.embedding_bag and nn.EmbeddingBag: values and gradients
over modes, offsets with empty bags, include_last_offset, padding_idx, per_sample_weights,
2-D bags, float64 (in a subprocess with x64), and the errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(0)
W = RNG.standard_normal((6, 3)).astype(np.float32)
IDX = np.array([1, 2, 2, 4, 0, 3, 5, 1, 1], np.int64)
OFFSETS = np.array([0, 2, 2, 5, 9], np.int64)  # bags 1 and 4 are empty


def _both(
    indices: np.ndarray, offsets: np.ndarray | None, psw: np.ndarray | None, **kw: Any
) -> None:
    """Forward, and the gradients of weight and per_sample_weights, as PyTorch's."""
    tw = torch.tensor(W, requires_grad=True)
    gw = tg.tensor(W, requires_grad=True)
    tp = None if psw is None else torch.tensor(psw, requires_grad=True)
    gp = None if psw is None else tg.tensor(psw, requires_grad=True)
    to = None if offsets is None else torch.tensor(offsets)
    go = None if offsets is None else tg.tensor(offsets.astype(np.int32))
    yt = F.embedding_bag(torch.tensor(indices), tw, to, per_sample_weights=tp, **kw)
    yg = tg.embedding_bag(tg.tensor(indices.astype(np.int32)), gw, go, per_sample_weights=gp, **kw)
    g = RNG.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    yg.backward(tg.tensor(g))
    np.testing.assert_allclose(yg.numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gw.grad.numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-6)
    if psw is not None:
        np.testing.assert_allclose(gp.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 1, -1])
@pytest.mark.parametrize("last", [False, True])
def test_offsets_with_empty_bags_match_pytorch(mode: str, padding_idx: int | None, last: bool):
    _both(IDX, OFFSETS, None, mode=mode, padding_idx=padding_idx, include_last_offset=last)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_2d_bags_match_pytorch(mode: str) -> None:
    _both(IDX.reshape(3, 3), None, None, mode=mode, padding_idx=2)


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_per_sample_weights_match_pytorch(padding_idx: int | None) -> None:
    psw = RNG.standard_normal(IDX.shape).astype(np.float32)
    _both(IDX, OFFSETS, psw, mode="sum", padding_idx=padding_idx)
    _both(IDX.reshape(3, 3), None, psw.reshape(3, 3), mode="sum")


def test_max_routes_ties_and_nan_as_pytorch() -> None:
    """The first of equal maxima gets g; a NaN wins only where it comes first in its bag."""
    w = np.array([[1.0, 2.0], [1.0, 5.0], [np.nan, 0.0]], np.float32)
    for idx in ([0, 1, 2, 1, 0], [0, 1, 1, 2, 0]):
        tw, gw = torch.tensor(w, requires_grad=True), tg.tensor(w, requires_grad=True)
        yt = F.embedding_bag(torch.tensor(idx), tw, torch.tensor([0, 2]), mode="max")
        yg = tg.embedding_bag(np.array(idx), gw, np.array([0, 2]), mode="max")
        g = np.array([[1.0, 10.0], [100.0, 1000.0]], np.float32)
        yt.backward(torch.tensor(g))
        yg.backward(tg.tensor(g))
        np.testing.assert_array_equal(yg.numpy(), yt.detach().numpy())
        np.testing.assert_array_equal(gw.grad.numpy(), tw.grad.numpy())


def test_float64_matches_pytorch_in_a_subprocess_with_x64() -> None:
    code = textwrap.dedent(
        """
        import jax; jax.config.update("jax_enable_x64", True)
        import numpy as np, torch, tapegrad as tg
        w = np.random.default_rng(1).standard_normal((5, 4))
        i, o = np.array([0, 4, 4, 2, 1]), np.array([0, 0, 3])
        for mode in ("sum", "mean", "max"):
            tw, gw = torch.tensor(w, requires_grad=True), tg.tensor(w, requires_grad=True)
            yt = torch.nn.functional.embedding_bag(torch.tensor(i), tw, torch.tensor(o), mode=mode)
            yg = tg.embedding_bag(tg.tensor(i), gw, tg.tensor(o), mode=mode)
            assert yg.dtype == np.float64
            yt.sum().backward(); yg.sum().backward()
            np.testing.assert_allclose(yg.numpy(), yt.detach().numpy(), rtol=1e-14)
            np.testing.assert_allclose(gw.grad.numpy(), tw.grad.numpy(), rtol=1e-14)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_layer_matches_pytorch_and_loads_its_state_dict() -> None:
    t = torch.nn.EmbeddingBag(10, 4, mode="sum", padding_idx=3)
    m = nn.EmbeddingBag(10, 4, mode="sum", padding_idx=3)
    assert float(np.abs(m.weight.numpy()[3]).sum()) == 0.0
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    i, o = np.array([1, 3, 2, 9, 9]), np.array([0, 1, 1])
    want = t(torch.tensor(i), torch.tensor(o)).detach().numpy()
    np.testing.assert_allclose(m(i, o).numpy(), want, rtol=1e-6)
    assert repr(m) == "EmbeddingBag(10, 4, mode='sum', padding_idx=3)"


def test_layer_init_is_standard_normal() -> None:
    w = nn.EmbeddingBag(400, 50, key=0).weight.numpy()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1.0) < 0.02


@pytest.mark.parametrize(
    ("call", "error", "says"),
    [
        (lambda: tg.embedding_bag([0], W, [0], mode="median"), ValueError, "mode must be"),
        (lambda: tg.embedding_bag([0, 1], W), ValueError, "need offsets"),
        (lambda: tg.embedding_bag([[0, 1]], W, [0]), ValueError, "offsets given for 2-D"),
        (lambda: tg.embedding_bag([0, 1], W, [1]), ValueError, r"offsets\[0\] is 1"),
        (lambda: tg.embedding_bag([0, 1], W, [0, 2, 1]), ValueError, "decrease"),
        (lambda: tg.embedding_bag([0, 1], W, [0, 3]), ValueError, "beyond the 2 indices"),
        (lambda: tg.embedding_bag([0, 6], W, [0]), IndexError, "outside"),
        (lambda: tg.embedding_bag([0], W, [0], padding_idx=6), IndexError, "padding_idx=6"),
        (lambda: tg.embedding_bag([[[0]]], W), tg.ShapeError, "1-D .* or 2-D"),
        (lambda: tg.embedding_bag([0], W[0], [0]), tg.ShapeError, "weight must be"),
        (lambda: tg.embedding_bag([0], W, [[0]]), tg.ShapeError, "offsets must be 1-D"),
        (
            lambda: tg.embedding_bag([0], W, [0], mode="max", per_sample_weights=W[:1, 0]),
            ValueError,
            "mode='sum' only",
        ),
        (
            lambda: tg.embedding_bag([0], W, [0], mode="sum", per_sample_weights=W[:2, 0]),
            tg.ShapeError,
            "indices' shape",
        ),
        (
            lambda: tg.embedding_bag(
                [0], W, [0], mode="sum", per_sample_weights=np.ones(1, np.float64)
            ),
            TypeError,
            "must be the same",
        ),
        (lambda: tg.embedding_bag([0], W, [0], max_norm=1.0), TypeError, "max_norm="),
        (lambda: tg.embedding_bag([0], W, [0], None), TypeError, "fourth parameter is max_norm"),
        (lambda: nn.EmbeddingBag(4, 2, sparse=True), TypeError, "sparse gradients"),
        (lambda: nn.EmbeddingBag(4, 2, 1.0), TypeError, "third parameter is max_norm"),
        (lambda: nn.EmbeddingBag(4, 2, mode="prod"), ValueError, "mode must be"),
        (lambda: nn.EmbeddingBag(4, 2, padding_idx=4), ValueError, "padding_idx=4"),
    ],
)
def test_errors_say_what_to_do(call: Any, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=says):
        call()


def test_device_offsets_and_indices_are_not_read_back() -> None:
    """Out-of-range device indices read NaN (as tg.embedding) and give no gradient."""
    w = tg.tensor(W, requires_grad=True)
    y = tg.embedding_bag(tg.tensor(np.array([0, 7], np.int32)), w, tg.tensor(np.array([0, 1])))
    assert np.isfinite(y.numpy()[0]).all() and np.isnan(y.numpy()[1]).all()
    y[0].sum().backward()
    assert np.isfinite(w.grad.numpy()).all()
