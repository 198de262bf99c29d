"""``tg.nn.init``: PyTorch's initialisers fill a tensor in place, with PyTorch's formulas."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.nn import init

torch = pytest.importorskip("torch")

FILLS: list[tuple[str, Callable[..., Any], float, float]] = [
    # name, call, expected std, expected bound (inf: unbounded)
    ("uniform_", lambda t: init.uniform_(t, -0.5, 0.5), 1 / math.sqrt(12), 0.5),
    ("normal_", lambda t: init.normal_(t, 0.0, 0.3), 0.3, math.inf),
    ("trunc_normal_", lambda t: init.trunc_normal_(t, std=1.0, a=-1.0, b=1.0), 0.54, 1.0),
    ("xavier_uniform_", init.xavier_uniform_, math.sqrt(2 / (96 + 64)), math.sqrt(6 / 160)),
    ("xavier_normal_", init.xavier_normal_, math.sqrt(2 / (96 + 64)), math.inf),
    (
        "kaiming_uniform_",
        lambda t: init.kaiming_uniform_(t, nonlinearity="relu"),
        math.sqrt(2 / 96),
        math.sqrt(6 / 96),
    ),
    (
        "kaiming_normal_",
        lambda t: init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
        math.sqrt(2 / 64),
        math.inf,
    ),
]


@pytest.mark.parametrize(("name", "fill", "std", "bound"), FILLS, ids=[f[0] for f in FILLS])
def test_fills_keep_the_parameter_and_follow_pytorchs_formulas(
    name: str, fill: Callable[..., Any], std: float, bound: float
) -> None:
    """A (64, 96) weight (fan_in 96, fan_out 64) of a layer an optimizer holds: filled in
    place (the same tensor, still a leaf that requires grad), with the formula's spread and
    bound; the process random state makes it reproducible."""
    layer = tg.nn.Linear(96, 64, key=0)
    opt = tg.optim.SGD(layer.parameters(), lr=0.1)
    weight = layer.weight
    tg.manual_seed(3)
    assert fill(weight) is weight
    assert layer.weight is weight and opt.param_groups[0]["params"][0] is weight
    assert weight.requires_grad and weight.is_leaf and weight.dtype == tg.float32
    values = weight.numpy()
    assert values.std() == pytest.approx(std, rel=0.08)
    assert np.abs(values).max() <= bound
    tg.manual_seed(3)
    np.testing.assert_array_equal(fill(tg.zeros((64, 96))).numpy(), values)


def test_constants_gains_and_errors_are_pytorchs() -> None:
    t = tg.ones(3).require_grad()
    assert init.zeros_(t) is t and not t.numpy().any()
    np.testing.assert_array_equal(init.constant_(t, 2.5).numpy(), [2.5] * 3)
    np.testing.assert_array_equal(init.ones_(t).numpy(), [1.0] * 3)
    for name in ("linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"):
        assert init.calculate_gain(name) == pytest.approx(torch.nn.init.calculate_gain(name))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(
        torch.nn.init.calculate_gain("leaky_relu", 0.2)
    )
    with pytest.raises(ValueError, match="at least 2 dimensions.*uniform_ or normal_"):
        init.xavier_uniform_(t)
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out'"):
        init.kaiming_normal_(tg.ones((2, 2)), mode="fan_avg")
    with pytest.raises(ValueError, match="unknown nonlinearity 'swish'"):
        init.calculate_gain("swish")
    with pytest.raises(TypeError, match="expected a tapegrad Tensor, got Tensor"):
        init.zeros_(torch.ones(2))
    with pytest.raises(ValueError, match="a=1.0 is above b=0.0"):
        init.uniform_(tg.ones(2), 1.0, 0.0)
    with pytest.raises(TypeError, match="nn.init.normal_: fills float tensors, got int32"):
        init.normal_(tg.zeros(2, dtype=tg.int32))
    empty = tg.zeros((3, 0))
    assert init.kaiming_normal_(empty) is empty  # nothing to fill, as PyTorch
    assert init.calculate_gain("conv_transpose3d") == 1.0
    half = init.normal_(tg.zeros((4, 4), dtype=tg.float16), key=1)
    assert half.dtype == tg.float16 and half.numpy().std() > 0
