"""The 3-D and adaptive max pooling layers and functions against PyTorch: values and input
gradients (odd sizes, padding, batched and unbatched, float64), the gradient's routing at
ties, NaN and -inf, and the errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


LAYERS3D = [
    (lambda: nn.MaxPool3d(2), lambda: torch.nn.MaxPool3d(2)),
    (lambda: nn.MaxPool3d(3, 2, 1), lambda: torch.nn.MaxPool3d(3, 2, 1)),
    (
        lambda: nn.MaxPool3d((2, 3, 1), (1, 2, 1), (1, 1, 0)),
        lambda: torch.nn.MaxPool3d((2, 3, 1), (1, 2, 1), (1, 1, 0)),
    ),
    (lambda: nn.AvgPool3d(2), lambda: torch.nn.AvgPool3d(2)),
    (lambda: nn.AvgPool3d(3, 2, 1), lambda: torch.nn.AvgPool3d(3, 2, 1)),
    (
        lambda: nn.AvgPool3d((3, 2, 3), 2, (1, 0, 1), count_include_pad=False),
        lambda: torch.nn.AvgPool3d((3, 2, 3), 2, (1, 0, 1), count_include_pad=False),
    ),
    (lambda: nn.AdaptiveAvgPool3d((2, 3, 4)), lambda: torch.nn.AdaptiveAvgPool3d((2, 3, 4))),
    (lambda: nn.AdaptiveAvgPool3d((None, 1, 7)), lambda: torch.nn.AdaptiveAvgPool3d((None, 1, 7))),
    (lambda: nn.AdaptiveAvgPool3d(1), lambda: torch.nn.AdaptiveAvgPool3d(1)),
]


@pytest.mark.parametrize(("ours", "theirs"), LAYERS3D)
def test_three_dimensional_pooling_matches_torch(
    ours: Callable[[], nn.Module], theirs: Callable[[], Any]
) -> None:
    check_against_torch(ours(), theirs(), [_x(2, 3, 5, 7, 6)])


@pytest.mark.parametrize(("ours", "theirs"), [LAYERS3D[1], LAYERS3D[5], LAYERS3D[6]])
def test_three_dimensional_pooling_of_one_unbatched_volume_matches_torch(
    ours: Callable[[], nn.Module], theirs: Callable[[], Any]
) -> None:
    check_against_torch(ours(), theirs(), [_x(3, 5, 7, 6)])


ADAPTIVE_MAX = [
    (lambda: nn.AdaptiveMaxPool1d(3), lambda: torch.nn.AdaptiveMaxPool1d(3), (2, 3, 7)),
    (lambda: nn.AdaptiveMaxPool1d(9), lambda: torch.nn.AdaptiveMaxPool1d(9), (3, 7)),
    (lambda: nn.AdaptiveMaxPool1d(5), lambda: torch.nn.AdaptiveMaxPool1d(5), (2, 2, 10)),
    (
        lambda: nn.AdaptiveMaxPool2d((3, 4)),
        lambda: torch.nn.AdaptiveMaxPool2d((3, 4)),
        (2, 3, 7, 5),
    ),
    (lambda: nn.AdaptiveMaxPool2d(1), lambda: torch.nn.AdaptiveMaxPool2d(1), (3, 6, 5)),
    (
        lambda: nn.AdaptiveMaxPool2d((None, 8)),
        lambda: torch.nn.AdaptiveMaxPool2d((None, 8)),
        (1, 2, 5, 6),
    ),
]


@pytest.mark.parametrize(("ours", "theirs", "shape"), ADAPTIVE_MAX)
def test_adaptive_max_pooling_matches_torch(
    ours: Callable[[], nn.Module], theirs: Callable[[], Any], shape: tuple[int, ...]
) -> None:
    check_against_torch(ours(), theirs(), [_x(*shape)])


def _same_gradient(ours: Callable[[Any], Any], theirs: Callable[[Any], Any], x0: Any) -> None:
    """Forward (NaN where PyTorch's is) and the input gradient of a random cotangent, exactly."""
    x, xt = tg.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    y, yt = ours(x), theirs(xt)
    np.testing.assert_array_equal(y.numpy(), yt.detach().numpy())
    v = np.random.default_rng(2).integers(1, 9, yt.shape).astype(np.float32)
    (y * tg.tensor(v)).sum().backward()
    (yt * torch.tensor(v)).sum().backward()
    assert x.grad is not None and xt.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def _ties_nan_inf(shape: tuple[int, ...], nans: list[int]) -> np.ndarray:
    x = np.random.default_rng(0).integers(0, 3, shape).astype(np.float32)  # many ties
    flat = x.reshape(-1)
    flat[nans] = np.nan
    x[-1, -1] = -np.inf  # a channel of -inf only
    return x


# several NaNs per window: the gradient goes to the last in row-major order, as PyTorch's
ONE_NAN, NANS = [1, 3, 10, 11], [1, 3, 10, 11, 25]


@pytest.mark.parametrize(
    ("ours", "theirs", "shape", "nans"),
    [
        (lambda x: tg.max_pool3d(x, 2), lambda x: F.max_pool3d(x, 2), (2, 2, 4, 4, 6), ONE_NAN),
        (
            lambda x: tg.max_pool3d(x, 3, (2, 1, 2), 1),
            lambda x: F.max_pool3d(x, 3, (2, 1, 2), 1),
            (1, 2, 5, 4, 5),
            NANS,
        ),
        (
            lambda x: tg.max_pool2d(x, 3, 1, 1),
            lambda x: F.max_pool2d(x, 3, 1, 1),
            (2, 2, 5, 6),
            NANS,
        ),
        (lambda x: tg.max_pool1d(x, 3, 2), lambda x: F.max_pool1d(x, 3, 2), (2, 3, 9), NANS),
        (
            lambda x: tg.adaptive_max_pool1d(x, 3),
            lambda x: F.adaptive_max_pool1d(x, 3),
            (2, 3, 8),
            NANS,
        ),
        (
            lambda x: tg.adaptive_max_pool1d(x, 6),
            lambda x: F.adaptive_max_pool1d(x, 6),
            (2, 2, 8),
            NANS,
        ),
        (
            lambda x: tg.adaptive_max_pool2d(x, (2, 3)),
            lambda x: F.adaptive_max_pool2d(x, (2, 3)),
            (2, 2, 5, 7),
            NANS,
        ),
        (
            lambda x: tg.adaptive_max_pool2d(x, (4, 9)),
            lambda x: F.adaptive_max_pool2d(x, (4, 9)),
            (2, 2, 6, 5),
            NANS,
        ),
        (
            lambda x: tg.adaptive_max_pool2d(x, 1),
            lambda x: F.adaptive_max_pool2d(x, 1),
            (2, 2, 3, 4),
            NANS,
        ),
    ],
    ids=[
        "max3d",
        "max3d-padded",
        "max2d-padded",
        "max1d",
        "amax1d",
        "amax1d-overlap",
        "amax2d",
        "amax2d-up",
        "amax2d-1",
    ],
)
def test_max_pool_gradient_goes_where_pytorchs_does_at_ties_nan_and_minus_inf(
    ours: Callable[[Any], Any],
    theirs: Callable[[Any], Any],
    shape: tuple[int, ...],
    nans: list[int],
) -> None:
    """Ties: the first maximum in row-major window order; a NaN is the maximum (the last one
    of a window), and a window of -inf gives its g to an input, never to padding."""
    _same_gradient(ours, theirs, _ties_nan_inf(shape, nans))


def test_float64_values_and_gradients_match_torch_in_a_subprocess() -> None:
    """With x64 on (process-wide, so in a subprocess): float64 in, float64 out, and the
    gradients equal PyTorch's float64 ones to 1e-12."""
    script = textwrap.dedent(
        """
        import json
        import jax
        jax.config.update("jax_enable_x64", True)
        import numpy as np
        import torch
        import torch.nn.functional as F
        import tapegrad as tg

        x0 = np.random.default_rng(0).standard_normal((2, 3, 5, 7, 6))
        cases = [
            (lambda x: tg.max_pool3d(x, 3, 2, 1), lambda x: F.max_pool3d(x, 3, 2, 1)),
            (
                lambda x: tg.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
                lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False),
            ),
            (
                lambda x: tg.adaptive_avg_pool3d(x, (2, 3, 4)),
                lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)),
            ),
            (
                lambda x: tg.adaptive_max_pool2d(x[0], (3, 4)),
                lambda x: F.adaptive_max_pool2d(x[0], (3, 4)),
            ),
            (
                lambda x: tg.adaptive_max_pool1d(x[0, 0], 4),
                lambda x: F.adaptive_max_pool1d(x[0, 0], 4),
            ),
        ]
        errors = []
        for ours, theirs in cases:
            x, xt = tg.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
            y, yt = ours(x), theirs(xt)
            v = np.random.default_rng(1).standard_normal(yt.shape)
            (y * tg.tensor(v)).sum().backward()
            (yt * torch.tensor(v)).sum().backward()
            assert y.dtype == np.float64 and x.grad.dtype == np.float64
            errors.append(
                max(
                    float(np.abs(y.numpy() - yt.detach().numpy()).max()),
                    float(np.abs(x.grad.numpy() - xt.grad.numpy()).max()),
                )
            )
        print(json.dumps(errors))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert max(errors) < 1e-12, errors


def test_reprs() -> None:
    assert repr(nn.MaxPool3d(3)) == "MaxPool3d(kernel_size=3, stride=3, padding=0)"
    assert "count_include_pad=False" in repr(nn.AvgPool3d(2, count_include_pad=False))
    assert repr(nn.AdaptiveMaxPool2d((2, None))) == "AdaptiveMaxPool2d(output_size=(2, None))"
    assert repr(nn.AdaptiveAvgPool3d(1)) == "AdaptiveAvgPool3d(output_size=1)"


ERRORS: list[tuple[Callable[[], Any], type[Exception], str]] = [
    (
        lambda: tg.max_pool3d(tg.ones((2, 3, 4)), 2),
        tg.ShapeError,
        r"max_pool3d: .* must be \(N, C, D, H, W\) or \(C, D, H, W\)",
    ),
    (lambda: tg.avg_pool3d(tg.ones((1, 1, 3, 4, 4)), (4, 2, 2)), tg.ShapeError, "window spans"),
    (lambda: tg.max_pool3d(tg.ones((1, 1, 4, 4, 4)), 2, padding=2), ValueError, "at most half"),
    (lambda: tg.avg_pool3d(tg.ones((1, 1, 4, 4, 4)), (2, 2)), ValueError, "or 3 such ints"),
    (lambda: tg.max_pool3d(tg.ones((1, 1, 4, 4, 4)), 2.0), TypeError, "floats and booleans"),
    (
        lambda: tg.adaptive_avg_pool3d(tg.ones((2, 3, 4)), 2),
        tg.ShapeError,
        r"adaptive_avg_pool3d: .* \(N, C, D, H, W\) or \(C, D, H, W\), spatial sizes > 0",
    ),
    (lambda: tg.adaptive_avg_pool3d(tg.ones((1, 2, 0, 2)), 1), tg.ShapeError, "sizes > 0"),
    (lambda: tg.adaptive_avg_pool3d(tg.ones((1, 2, 2, 2)), (1, 1)), ValueError, "or 3 ints"),
    (lambda: tg.adaptive_max_pool1d(tg.ones((2, 3, 4, 5)), 2), tg.ShapeError, r"\(N, C, L\)"),
    (lambda: tg.adaptive_max_pool2d(tg.ones((2, 3, 4)), 0), ValueError, r"output_size=\(0, 0\)"),
    (lambda: tg.adaptive_max_pool2d(tg.ones((2, 3, 4)), 1.5), TypeError, "floats"),
    (
        lambda: tg.adaptive_max_pool1d(tg.ones((2, 3), dtype=tg.int32), 1),
        TypeError,
        "astype",
    ),
    (lambda: tg.adaptive_max_pool1d(tg.ones((2, 3)), 1, True), TypeError, "no indices"),
    (lambda: nn.AdaptiveMaxPool2d(2, return_indices=True), TypeError, "AdaptiveMaxPool2d\\(\\)"),
    (lambda: tg.dropout3d(tg.ones((2, 3, 4)), 0.5), tg.ShapeError, r"\(C, D, H, W\)"),
    (lambda: nn.Dropout3d().eval()(tg.ones((2, 3, 4))), tg.ShapeError, "dropout3d"),
    (lambda: nn.Dropout3d(1.5), ValueError, r"Dropout3d: .*\[0, 1\]"),
    (lambda: nn.BatchNorm3d(3)(tg.ones((2, 3, 4, 4))), tg.ShapeError, r"rank \(5,\)"),
]


@pytest.mark.parametrize(("call", "kind", "message"), ERRORS)
def test_bad_input_says_what_is_wrong(
    call: Callable[[], Any], kind: type[Exception], message: str
) -> None:
    with pytest.raises(kind, match=message):
        call()
