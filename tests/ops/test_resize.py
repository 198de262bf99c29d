"""``tg.interpolate``, ``tg.pixel_shuffle``/``pixel_unshuffle`` and their layers against
PyTorch: values and gradients over modes, sizes and scale factors (up, down, not integer),
``align_corners``, ``recompute_scale_factor``; errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(0)

CASES: list[tuple[tuple[int, ...], dict[str, Any]]] = []
for _mode in ("nearest", "nearest-exact"):
    CASES += [
        ((2, 3, 5, 7), {"size": (7, 3), "mode": _mode}),
        ((2, 3, 5, 7), {"scale_factor": 1.5, "mode": _mode}),
        ((2, 3, 5, 7), {"scale_factor": 0.5, "mode": _mode}),
        ((2, 3, 5), {"scale_factor": 2.7, "mode": _mode}),
        ((1, 2, 3, 4, 5), {"size": (5, 3, 7), "mode": _mode}),
    ]
for _align in (False, True):
    CASES += [
        ((2, 3, 5), {"size": 7, "mode": "linear", "align_corners": _align}),
        ((2, 3, 7), {"size": 3, "mode": "linear", "align_corners": _align}),
        ((2, 3, 5, 7), {"size": (7, 3), "mode": "bilinear", "align_corners": _align}),
        ((2, 3, 5, 7), {"scale_factor": 2, "mode": "bilinear", "align_corners": _align}),
        ((2, 3, 5, 7), {"scale_factor": (0.5, 2.3), "mode": "bilinear", "align_corners": _align}),
        (
            (2, 3, 5, 7),
            {
                "scale_factor": 1.7,
                "mode": "bilinear",
                "align_corners": _align,
                "recompute_scale_factor": True,
            },
        ),
        ((1, 2, 3, 4, 5), {"size": (5, 3, 7), "mode": "trilinear", "align_corners": _align}),
        ((2, 3, 5, 7), {"size": (1, 1), "mode": "bilinear", "align_corners": _align}),
    ]
    CASES += [  # bicubic: four taps per axis, the border pixels repeated
        ((2, 3, 5, 7), {"size": (9, 4), "mode": "bicubic", "align_corners": _align}),
        ((2, 3, 5, 7), {"scale_factor": 2, "mode": "bicubic", "align_corners": _align}),
        ((2, 3, 5, 7), {"scale_factor": (0.5, 2.3), "mode": "bicubic", "align_corners": _align}),
        ((1, 2, 1, 6), {"size": (3, 12), "mode": "bicubic", "align_corners": _align}),
        ((2, 3, 5, 7), {"size": (1, 1), "mode": "bicubic", "align_corners": _align}),
    ]
CASES += [
    ((2, 3, 5, 7), {"size": (3, 2), "mode": "area"}),
    ((2, 3, 7), {"size": 4, "mode": "area"}),
]


def _ids(case: tuple[tuple[int, ...], dict[str, Any]]) -> str:
    return f"{case[0]}-" + ",".join(f"{k}={v}" for k, v in case[1].items())


@pytest.mark.parametrize(("shape", "params"), CASES, ids=[_ids(c) for c in CASES])
def test_interpolate_matches_torch(shape: tuple[int, ...], params: dict[str, Any]) -> None:
    x = RNG.normal(size=shape).astype(np.float32)
    ours = tg.tensor(x, requires_grad=True)
    y = tg.interpolate(ours, **params)
    theirs = torch.tensor(x, requires_grad=True)
    z = F.interpolate(theirs, **params)
    assert y.shape == tuple(z.shape)
    g = RNG.normal(size=y.shape).astype(np.float32)
    (y * tg.tensor(g)).sum().backward()
    (z * torch.tensor(g)).sum().backward()
    # bicubic sums 16 products per pixel (PyTorch in another order): a few float32 roundings
    atol = 1e-5 if params["mode"] == "bicubic" else 1e-6
    np.testing.assert_allclose(np.asarray(y.data), z.detach().numpy(), rtol=1e-5, atol=atol)
    np.testing.assert_allclose(
        np.asarray(ours.grad.data), theirs.grad.numpy(), rtol=1e-5, atol=1e-5
    )
    del ours, y


def test_float64_interpolation_matches_torch() -> None:
    """The source indices are computed in the input's dtype, as PyTorch's (a subprocess: x64
    is process-wide)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import jax
        jax.config.update("jax_enable_x64", True)
        import numpy as np, torch
        import tapegrad as tg
        x = np.random.default_rng(1).normal(size=(2, 3, 5, 7))
        modes = (("bilinear", {"align_corners": False}), ("bicubic", {}), ("nearest", {}))
        for mode, kw in modes:
            y = tg.interpolate(tg.tensor(x), scale_factor=(1.3, 0.7), mode=mode, **kw)
            z = torch.nn.functional.interpolate(
                torch.tensor(x), scale_factor=(1.3, 0.7), mode=mode, **kw
            )
            assert y.dtype == np.float64
            np.testing.assert_allclose(np.asarray(y.data), z.numpy(), rtol=1e-12, atol=1e-12)
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.parametrize(("shape", "r"), [((2, 8, 3, 5), 2), ((9, 2, 2), 3), ((1, 2, 4, 3, 3), 1)])
def test_pixel_shuffle_round_trip_matches_torch(shape: tuple[int, ...], r: int) -> None:
    x = RNG.normal(size=shape).astype(np.float32)
    ours = tg.tensor(x, requires_grad=True)
    y = tg.pixel_shuffle(ours, r)
    z = F.pixel_shuffle(torch.tensor(x), r)
    np.testing.assert_array_equal(np.asarray(y.data), z.numpy())
    back = tg.pixel_unshuffle(y, r)
    np.testing.assert_array_equal(np.asarray(back.data), F.pixel_unshuffle(z, r).numpy())
    np.testing.assert_array_equal(np.asarray(back.data), x)
    (back * back).sum().backward()
    np.testing.assert_allclose(np.asarray(ours.grad.data), 2 * x, rtol=1e-6)
    del ours, y, back


def test_layers_match_torch() -> None:
    x = RNG.normal(size=(2, 4, 3, 5)).astype(np.float32)
    pairs = [
        (
            nn.Upsample(scale_factor=2, mode="bilinear"),
            torch.nn.Upsample(scale_factor=2, mode="bilinear"),
        ),
        (nn.Upsample(size=(4, 7)), torch.nn.Upsample(size=(4, 7))),
        (
            nn.UpsamplingNearest2d(scale_factor=(2, 3)),
            torch.nn.UpsamplingNearest2d(scale_factor=(2, 3)),
        ),
        (nn.UpsamplingBilinear2d(size=(6, 6)), torch.nn.UpsamplingBilinear2d(size=(6, 6))),
        (nn.PixelShuffle(2), torch.nn.PixelShuffle(2)),
        (nn.PixelUnshuffle(1), torch.nn.PixelUnshuffle(1)),
    ]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)
        assert not list(ours.parameters())
        np.testing.assert_allclose(
            np.asarray(ours(tg.tensor(x)).data),
            theirs(torch.tensor(x)).numpy(),
            rtol=1e-5,
            atol=1e-6,
        )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({}, ValueError, "exactly one of size and scale_factor"),
        ({"size": 4, "scale_factor": 2.0}, ValueError, "both were given"),
        ({"size": (4, 4, 4)}, ValueError, "2 spatial axes but size has 3"),
        ({"size": 4, "align_corners": True}, ValueError, "align_corners"),
        ({"size": 4, "mode": "linear"}, tg.ShapeError, "use mode='bilinear'"),
        ({"size": 4, "mode": "cubic"}, ValueError, "'bicubic', 'area'"),
        ({"size": 4, "mode": "bilinear", "antialias": True}, ValueError, "antialias"),
        ({"size": 4, "recompute_scale_factor": True}, ValueError, "explicit size"),
        ({"scale_factor": 0.1}, ValueError, "must be positive"),
        ({"scale_factor": -2.0}, ValueError, "must be positive"),
    ],
)
def test_bad_calls_raise_clearly(kwargs: dict[str, Any], error: type, match: str) -> None:
    x = tg.ones((1, 2, 5, 5), requires_grad=True)
    before = tg.graph_stats()
    with pytest.raises(error, match=match):
        tg.interpolate(x, **kwargs)
    assert tg.graph_stats() == before
    del x


def test_bad_shapes_raise_clearly() -> None:
    with pytest.raises(tg.ShapeError, match="x\\[None\\]"):
        tg.interpolate(tg.ones((5, 5)), size=3)
    with pytest.raises(tg.ShapeError, match="mode 'bicubic' needs a 4-D one"):
        tg.interpolate(tg.ones((1, 5, 5)), size=3, mode="bicubic")
    with pytest.raises(tg.ShapeError, match="divisible by upscale_factor"):
        tg.pixel_shuffle(tg.ones((1, 3, 2, 2)), 2)
    with pytest.raises(tg.ShapeError, match="divisible by downscale_factor"):
        tg.pixel_unshuffle(tg.ones((1, 3, 3, 2)), 2)
    with pytest.raises(ValueError, match="positive"):
        tg.pixel_shuffle(tg.ones((1, 4, 2, 2)), 0)


@pytest.mark.parametrize(
    ("n", "m", "mode", "align"),
    [
        (700, 13, "nearest", None),
        (6, 19, "nearest-exact", None),
        (700, 2101, "nearest-exact", None),
        (100, 200, "linear", True),
        (100, 37, "linear", False),
    ],
)
def test_source_pixels_are_torchs_in_half_precision(
    n: int, m: int, mode: str, align: bool | None
) -> None:
    """float16 inputs: PyTorch computes the source indices in float32 (in float16 a wrong
    pixel was picked from 700 -> 13 on, and linear weights were 0.1 off)."""
    x = np.random.default_rng(n + m).normal(size=(1, 1, n)).astype(np.float16)
    y = tg.interpolate(tg.tensor(x), size=m, mode=mode, align_corners=align)
    z = F.interpolate(torch.tensor(x), size=m, mode=mode, align_corners=align)
    assert y.dtype == np.float16
    # one float16 rounding apart at most (a wrong pixel or weight is ~0.1 off)
    np.testing.assert_allclose(
        np.asarray(y.data, np.float32), z.float().numpy(), rtol=2e-3, atol=1e-3
    )


def test_a_scale_factor_that_keeps_the_size_copies_as_torch() -> None:
    """5 -> 5 with scale_factor 1.1: PyTorch copies the axis (it interpolated with 1/1.1)."""
    x = np.arange(5, dtype=np.float32)[None, None]
    got = tg.interpolate(tg.tensor(x), scale_factor=1.1, mode="linear")
    np.testing.assert_array_equal(np.asarray(got.data), x)
    np.testing.assert_array_equal(
        np.asarray(got.data),
        F.interpolate(torch.tensor(x), scale_factor=1.1, mode="linear").numpy(),
    )
