"""allclose: a Python bool with NumPy's and PyTorch's rule and defaults, recording nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _support import error_of

import tapegrad as tg

NAN = np.nan
CASES: list[tuple[Any, Any, dict[str, Any]]] = [
    ([1.0, 2.0], [1.0, 2.0 + 1e-5], {}),
    ([1.0, 2.0], [1.0, 2.0 + 1e-4], {}),
    ([1.0, 2.0], [1.0, 2.1], {"rtol": 0.1}),
    ([0.0, 1e-9], [0.0, 0.0], {}),
    ([0.0, 1e-7], [0.0, 0.0], {}),
    ([0.0, 1e-7], [0.0, 0.0], {"atol": 1e-6}),
    ([1.0, NAN], [1.0, NAN], {}),
    ([1.0, NAN], [1.0, NAN], {"equal_nan": True}),
    ([np.inf, -np.inf], [np.inf, -np.inf], {}),
    ([np.inf, 1.0], [-np.inf, 1.0], {}),
    ([[1.0, 2.0], [1.0, 2.0]], [1.0, 2.0], {}),  # broadcast
]


@pytest.mark.parametrize(("a", "b", "kw"), CASES)
def test_allclose_is_numpys_and_torchs(a: Any, b: Any, kw: dict[str, Any]) -> None:
    a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)
    want = bool(np.allclose(a32, b32, **kw))
    got = tg.allclose(tg.tensor(a32, requires_grad=True), tg.tensor(b32), **kw)
    assert type(got) is bool and got == want
    assert tg.allclose(a32, b32, **kw) == want  # arrays are taken as they are
    torch = pytest.importorskip("torch")
    assert torch.allclose(torch.tensor(a32), torch.tensor(b32).expand(a32.shape), **kw) == want


def test_allclose_records_nothing_and_takes_numbers_and_mixed_dtypes() -> None:
    x = tg.ones(3, requires_grad=True)
    before = tg.graph_stats().nodes
    assert tg.allclose(x * 2.0, 2) and not tg.allclose(x, 1.1)
    assert tg.graph_stats().nodes == before + 1  # x * 2.0 only
    assert tg.allclose(tg.tensor([1, 2]), np.array([1.0, 2.0], np.float32))


def test_allclose_refuses_what_it_cannot_compare() -> None:
    message = str(error_of(tg.ShapeError, tg.allclose, tg.ones(3), tg.ones(2)))
    assert "cannot be broadcast" in message
    assert "tg.tensor" in str(error_of(TypeError, tg.allclose, tg.ones(2), [1.0, 1.0]))
    assert "rtol must be a number" in str(error_of(TypeError, tg.allclose, 1.0, 1.0, "a"))


def test_allclose_inside_jit_says_to_compare_with_a_tensor() -> None:
    step = tg.jit(lambda a: tg.tensor(1.0) if tg.allclose(a, a) else tg.tensor(0.0))
    message = str(error_of(TypeError, step, tg.ones(2)))
    assert "tg.all(tg.abs(a - b) <= atol + rtol * tg.abs(b))" in message, message
