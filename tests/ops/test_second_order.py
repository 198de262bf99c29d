"""Every differentiable op, twice: second derivatives with ``create_graph=True`` against JAX.

``gradgradcheck`` differentiates the op's own forward with JAX (``jax.vjp`` of ``jax.vjp``)
and compares the first derivative (recorded) and the second (through the recorded
``vjp(<op>)`` nodes, whose VJP JAX derives from the op's VJP rule), for every (row, case) of
the spec table whose output is floating; ``test_spec_coverage.py`` fails for a
differentiable op missing here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad._dtypes import is_differentiable
from tapegrad.testing import gradgradcheck

from .specs import SPECS, Case, OpSpec


def _float_output(case: Case) -> bool:
    dtype = case.params.get("dtype")
    return dtype is None or is_differentiable(dtype)


def _sampled(cases: tuple[Case, ...]) -> tuple[Case, ...]:
    """Every case of a short grid; every other one of a longer grid (each costs compiles)."""
    return cases if len(cases) <= 3 else cases[::2]


GRID2 = [
    pytest.param(spec, case, id=f"{spec.name}-{case.id}")
    for spec in SPECS
    if spec.differentiable
    for case in _sampled(spec.cases)
    if _float_output(case)
]
"""(row, case) pairs checked to second order: each differentiable row, at several cases."""

SECOND_ORDER = {p.values[0].name for p in GRID2}  # type: ignore[union-attr]


@pytest.mark.parametrize(("spec", "case"), GRID2)
@settings(max_examples=1)
@given(data=st.data())
def test_second_derivative_matches_jax(spec: OpSpec, case: Case, data: st.DataObject) -> None:
    arrays = data.draw(case.inputs, label="inputs")
    floats = [i for i, a in enumerate(arrays) if np.issubdtype(a.dtype, np.floating)]
    wrt = data.draw(st.lists(st.sampled_from(floats), min_size=1, unique=True), label="wrt")

    def op(*ts: tg.Tensor) -> tg.Tensor:
        return spec.op(*ts, **case.params)

    op.__name__ = spec.name
    assert gradgradcheck(
        op, *arrays, wrt=sorted(wrt), eps=None, rtol=spec.rtol2, atol=spec.atol2, seed=3
    )  # it raises, naming the op, input and error, when a derivative differs
