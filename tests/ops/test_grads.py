"""Every op against JAX: check_vjp over every (spec, case) of the table, in float32.

Float64 runs in a subprocess with x64 enabled: tests/test_x64.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad.testing import check_vjp

from .specs import BITWISE, SPECS, Case, OpSpec

GRID = [
    pytest.param(spec, case, id=f"{spec.name}-{case.id}") for spec in SPECS for case in spec.cases
]
FLOAT_GRID = [p for p in GRID if p.values[0].name not in (*BITWISE, "bitwise_not")]
"""The rows with float inputs: the bitwise ops take masks only (no gradient to check; their
values are checked by ``test_value_matches_reference_under_no_grad``)."""

# Each (spec, case) is its own Hypothesis test: a few examples each keep the whole grid fast
# ("ci" profile: 5 each, "dev": 2). New shapes, not examples, are what costs (compiles).
PER_CASE = max(2, settings.default.max_examples // 12)


def _is_float(a: np.ndarray) -> bool:
    return bool(np.issubdtype(a.dtype, np.floating))


@pytest.mark.parametrize(("spec", "case"), FLOAT_GRID)
@settings(max_examples=PER_CASE)
@given(data=st.data())
def test_vjp_matches_jax(spec: OpSpec, case: Case, data: st.DataObject) -> None:
    """Output and input gradients match jax.vjp of the forward, for any nonempty subset of
    the float inputs requiring grad (so each VJP computes only what is needed, correctly)."""
    arrays = data.draw(case.inputs, label="inputs")
    floats = [i for i, a in enumerate(arrays) if _is_float(a)]
    wrt = data.draw(st.lists(st.sampled_from(floats), min_size=1, unique=True), label="wrt")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    check_vjp(
        spec.op, *arrays, rtol=spec.rtol, atol=spec.atol, seed=seed, wrt=sorted(wrt), **case.params
    )


@pytest.mark.parametrize(("spec", "case"), GRID)
@settings(max_examples=1)
@given(data=st.data())
def test_value_matches_reference_under_no_grad(
    spec: OpSpec, case: Case, data: st.DataObject
) -> None:
    """The output equals an independent twin (jnp, jax.nn or optax); under no_grad nothing is
    recorded although the float inputs require grad."""
    arrays = data.draw(case.inputs, label="inputs")
    leaves = [tg.tensor(a, requires_grad=_is_float(a)) for a in arrays]
    before = tg.graph_stats().nodes
    with tg.no_grad():
        got = spec.op(*leaves, **case.params)
    assert not got.requires_grad
    assert tg.graph_stats().nodes == before
    want = np.asarray(spec.reference(*arrays, **case.params))
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(
        np.asarray(got.data, np.float64), want.astype(np.float64), rtol=2e-6, atol=2e-6
    )


@pytest.mark.parametrize("spec", [s for s in SPECS if not s.differentiable], ids=lambda s: s.name)
def test_non_differentiable_never_requires_grad(spec: OpSpec) -> None:
    """A comparison (or argmax/argmin) on tensors that require grad gives a boolean (integer)
    tensor and records nothing; so does a bitwise op on masks made from them."""
    a = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = tg.tensor([2.0, 2.0, 2.0], requires_grad=True)
    if spec.name.startswith("bitwise_"):  # booleans and integers only
        a, b = a > 1.5, b < 2.5
    args = (a, b)[: spec.arity]
    before = tg.graph_stats().nodes
    out = spec.op(*args)
    assert not out.requires_grad
    assert out.dtype == np.bool_ or np.issubdtype(out.dtype, np.integer)
    assert tg.graph_stats().nodes == before
    want = spec.reference(*(t.data for t in args))
    np.testing.assert_array_equal(np.asarray(out.data), np.asarray(want))
