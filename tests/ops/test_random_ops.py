"""dropout (tapegrad/ops/random.py): PyTorch's semantics, keys, the process state, bad p and
dtypes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _support import compiles

import tapegrad as tg
from tapegrad import nn

X = np.linspace(1.0, 2.0, 400, dtype=np.float32).reshape(20, 20)


def test_dropout_zeroes_about_p_and_scales_the_rest() -> None:
    x = tg.tensor(X, requires_grad=True)
    y = tg.dropout(x, 0.25, key=0)
    out = y.numpy()
    kept = out != 0
    assert 0.15 < 1 - kept.mean() < 0.35
    np.testing.assert_allclose(out[kept], X[kept] / 0.75, rtol=1e-6)
    (g,) = tg.grad(y.sum(), x)
    np.testing.assert_allclose(g.numpy(), kept / np.float32(0.75), rtol=1e-6)


def test_dropout_is_reproducible_with_a_key_or_a_seed() -> None:
    saved = tg.random.get_state()
    try:
        assert tg.dropout(X, 0.5, key=3).tolist() == tg.dropout(X, 0.5, key=3).tolist()
        tg.manual_seed(11)
        a = tg.dropout(tg.tensor(X), 0.5).tolist()
        b = tg.dropout(tg.tensor(X), 0.5).tolist()
        tg.manual_seed(11)
        assert tg.dropout(tg.tensor(X), 0.5).tolist() == a
        assert a != b
    finally:
        tg.random.set_state(saved)


def test_dropout_with_a_new_probability_compiles_nothing() -> None:
    """Issue 17 item 4: p is a kernel argument, so a new probability reuses the compiled
    forward and VJP; the values are x * mask / (1 - p) and g * mask / (1 - p)."""
    x = tg.ones((5, 7), requires_grad=True)
    tg.grad(tg.dropout(x, 0.5, key=1).sum(), x)  # compiles the (5, 7) kernels
    with compiles() as seen:
        y = tg.dropout(x, 0.3, key=2)
        (g,) = tg.grad(y.sum(), x)
    assert seen == []
    values = np.asarray(y.data)
    kept = values != 0.0
    np.testing.assert_allclose(values[kept], 1.0 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(g.data), values)  # x is ones: g = the factor


def test_dropout_saves_only_the_key() -> None:
    x = tg.tensor(X, requires_grad=True)
    before = tg.graph_stats().saved_bytes
    y = tg.dropout(x, 0.5, key=0)
    assert tg.graph_stats().saved_bytes - before == 8  # a uint32[2] key, not a mask
    del y


def test_identity_cases() -> None:
    x = tg.tensor(X, requires_grad=True)
    assert tg.dropout(x, 0.5, training=False) is x
    assert tg.dropout(x, 0.0) is x
    z = tg.dropout(x, 1.0)
    assert (z.numpy() == 0).all() and z.requires_grad


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan")])
def test_p_outside_the_unit_interval_is_a_value_error(p: float) -> None:
    x = tg.tensor(X, requires_grad=True)
    before = tg.graph_stats().nodes
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tg.dropout(x, p)
    assert tg.graph_stats().nodes == before


@pytest.mark.parametrize("p", [0.3, 1.0])
@pytest.mark.parametrize("values", [[3, 3, 3, 3], [True, False, True, True]], ids=["int", "bool"])
def test_dropout_of_integers_or_booleans_while_training_is_a_type_error(
    values: list[Any], p: float
) -> None:
    """Regression: the mask was applied and the scale 1 / (1 - p) cast to the integer 1
    (``[3, 3, 3, 3]`` gave ``[0, 0, 3, 3]``); PyTorch raises."""
    x = tg.tensor(values)
    with pytest.raises(TypeError, match=r"dropout computes in floats.*x\.astype\(tg\.float32\)"):
        tg.dropout(x, p, key=0)
    with pytest.raises(TypeError, match="dropout computes in floats"):
        nn.Dropout(p)(x)


def test_dropout_is_the_identity_for_any_dtype_in_evaluation_or_with_p_zero() -> None:
    """As PyTorch's ``F.dropout(x, training=False)`` and ``p=0`` return integer inputs as
    they are."""
    x = tg.tensor([3, 3, 3, 3])
    assert tg.dropout(x, 0.3, training=False) is x
    assert tg.dropout(x, 0.0) is x
    assert nn.Dropout(0.3).eval()(x) is x
