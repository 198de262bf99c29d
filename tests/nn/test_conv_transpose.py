"""Transposed convolution (``tg.conv_transpose1d/2d/3d``, ``nn.ConvTranspose1d/2d/3d``)
against PyTorch: values and gradients of input, weight and bias over strides, padding,
output padding, dilation and groups; ``output_size``; initialisation; errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(0)

GRID: list[tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    ((2, 4, 7), (4, 3, 3), {}),
    ((2, 4, 7), (4, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((2, 4, 6, 5), (4, 2, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}),
    ((2, 4, 6, 5), (4, 2, 3, 3), {"stride": 2, "groups": 2, "output_padding": (1, 0)}),
    ((2, 4, 6, 5), (4, 3, 3, 3), {"stride": 3, "padding": 2, "output_padding": (2, 1)}),
    ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), {"stride": 2, "padding": 1}),
    ((4, 7), (4, 3, 3), {"stride": 2}),  # unbatched
    ((0, 4, 5), (4, 3, 3), {"stride": 2}),  # an empty batch
]


@pytest.mark.parametrize(("x_shape", "w_shape", "params"), GRID)
@pytest.mark.parametrize("bias", [True, False])
def test_functional_matches_torch(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], params: dict[str, Any], bias: bool
) -> None:
    n = len(w_shape) - 2
    groups = params.get("groups", 1)
    arrays = [
        RNG.normal(size=x_shape).astype(np.float32),
        RNG.normal(size=w_shape).astype(np.float32),
        RNG.normal(size=(w_shape[1] * groups,)).astype(np.float32),
    ]
    ours = [tg.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    y = getattr(tg, f"conv_transpose{n}d")(ours[0], ours[1], ours[2] if bias else None, **params)
    z = getattr(F, f"conv_transpose{n}d")(
        theirs[0], theirs[1], theirs[2] if bias else None, **params
    )
    assert y.shape == tuple(z.shape)
    (y * y).sum().backward()
    (z * z).sum().backward()
    np.testing.assert_allclose(np.asarray(y.data), z.detach().numpy(), rtol=1e-5, atol=1e-5)
    for t, u in zip(ours if bias else ours[:2], theirs, strict=False):
        np.testing.assert_allclose(np.asarray(t.grad.data), u.grad.numpy(), rtol=1e-4, atol=1e-4)
    del ours, y


@pytest.mark.parametrize("n", [1, 2, 3])
def test_layers_load_torch_state_and_match(n: int) -> None:
    theirs = getattr(torch.nn, f"ConvTranspose{n}d")(
        4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1
    ).double()
    ours = getattr(nn, f"ConvTranspose{n}d")(
        4, 6, 3, stride=2, padding=1, output_padding=1, groups=2
    )
    ours.load_state_dict({k: v.float().detach().numpy() for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs)
    x = RNG.normal(size=(2, 4, *(5,) * n))
    y = ours(tg.tensor(x.astype(np.float32)))
    z = theirs(torch.tensor(x))
    y.sum().backward()
    z.sum().backward()
    np.testing.assert_allclose(np.asarray(y.data), z.detach().numpy(), rtol=1e-5, atol=1e-5)
    for name, p in ours.named_parameters():
        want = dict(theirs.named_parameters())[name].grad.numpy()
        np.testing.assert_allclose(np.asarray(p.grad.data), want, rtol=1e-4, atol=1e-4)
    del y


def test_output_size_picks_the_output_padding() -> None:
    ours = nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1, key=0)
    theirs = torch.nn.ConvTranspose2d(3, 5, 3, stride=2, padding=1)
    x = tg.ones((1, 3, 4, 4))
    for size in ([7, 7], [8, 7], (1, 5, 8, 8)):
        assert ours(x, output_size=size).shape == tuple(
            theirs(torch.ones(1, 3, 4, 4), output_size=size).shape
        )
    with pytest.raises(ValueError, match=r"valid sizes range from \(7, 7\) to \(8, 8\)"):
        ours(x, output_size=[10, 10])
    with pytest.raises(ValueError, match="2 or 4 elements"):
        ours(x, output_size=[8])


def test_initialisation_follows_torch() -> None:
    """PyTorch's fan_in for this weight is dim 1 (out / groups) times the kernel."""
    layer = nn.ConvTranspose2d(64, 32, 3, groups=2, key=0)
    bound = 1 / np.sqrt(16 * 9)
    w, b = np.asarray(layer.weight.data), np.asarray(layer.bias.data)
    assert layer.weight.shape == (64, 16, 3, 3) and layer.bias.shape == (32,)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.abs(b).max() <= bound
    assert nn.ConvTranspose1d(2, 3, 2, bias=False).bias is None


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda: nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"),
            TypeError,
            "transposed convolutions",
        ),
        (lambda: nn.ConvTranspose2d(4, 6, 3, padding="same"), ValueError, "takes ints"),
        (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=2), ValueError, "smaller"),
        (lambda: nn.ConvTranspose2d(4, 6, 3, groups=4), ValueError, "divisible by groups"),
        (lambda: nn.ConvTranspose1d(4, 6, 0), ValueError, "kernel_size must be >= 1"),
    ],
)
def test_bad_layers_raise_clearly(make: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        make()


def test_bad_calls_raise_clearly() -> None:
    x, w = tg.ones((1, 4, 5)), tg.ones((4, 3, 3))
    before = tg.graph_stats()
    with pytest.raises(tg.ShapeError, match="expects 4"):
        tg.conv_transpose1d(tg.ones((1, 3, 5)), w)
    with pytest.raises(tg.ShapeError, match=r"must be \(3,\)"):
        tg.conv_transpose1d(x, w, tg.ones(4))
    with pytest.raises(ValueError, match="output_padding"):
        tg.conv_transpose1d(x, w, stride=2, output_padding=3)
    with pytest.raises(TypeError, match="stride, padding, output_padding, groups and dilation"):
        tg.conv_transpose1d(x, w, None, 2, 1)  # PyTorch's positional style
    with pytest.raises(tg.ShapeError, match="output size"):
        tg.conv_transpose1d(tg.ones((1, 4, 1)), w, padding=3)
    assert tg.graph_stats() == before
