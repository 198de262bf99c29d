"""Hypothesis strategies: fixed pools of small shapes, broadcastable pairs, arrays in a domain.

Every new shape costs a compile in eager JAX (~40 ms per primitive), so strategies draw
shapes from the small fixed pools below instead of generating arbitrary shapes; Hypothesis
explores the values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

Shape = tuple[int, ...]
Arrays = tuple[np.ndarray, ...]

SHAPES: tuple[Shape, ...] = ((), (2, 3))
"""Shapes for elementwise ops: a scalar and a matrix."""

ND_SHAPES: tuple[Shape, ...] = ((2, 3), (2, 3, 4))
"""Shapes with at least two axes, for axis parameters (0, 1, -1, (0, -1))."""

SAME_PAIRS: tuple[tuple[Shape, Shape], ...] = (((2, 3), (2, 3)),)
"""Pairs of equal shapes."""

BROADCAST_PAIRS: tuple[tuple[Shape, Shape], ...] = (
    ((2, 3), (3,)),
    ((2, 1), (1, 3)),
    ((), (2, 3)),
)
"""Pairs of different, mutually broadcastable shapes: a missing axis, unit axes on both
sides, a scalar."""

BROADCAST_TRIPLES: tuple[tuple[Shape, Shape, Shape], ...] = (
    ((2, 3), (2, 3), (2, 3)),
    ((2, 3), (3,), ()),
    ((3,), (2, 1), (1, 3)),
)
"""Triples of mutually broadcastable shapes (for ``where``)."""


@dataclass(frozen=True)
class Domain:
    """Where an op's float inputs are drawn from: ``[low, high]``, optionally mirrored.

    Attributes:
        low: the smallest magnitude (or value when not ``symmetric``).
        high: the largest.
        symmetric: also draw from ``[-high, -low]`` (a domain that avoids zero).
    """

    low: float
    high: float
    symmetric: bool = False

    def elements(self) -> st.SearchStrategy[float]:
        """The element strategy (float32, finite, no subnormals)."""
        side = st.floats(
            self.low,
            self.high,
            width=32,
            allow_nan=False,
            allow_infinity=False,
            allow_subnormal=False,
        )
        return st.one_of(side, side.map(lambda x: -x)) if self.symmetric else side


REALS = Domain(-3.0, 3.0)
"""Any moderate real: the default domain."""

POSITIVE = Domain(0.125, 4.0)
"""Positive, away from zero (log, sqrt, the base of power)."""

NONZERO = Domain(0.5, 3.0, symmetric=True)
"""Away from zero on both sides (divisors)."""

EXPONENTS = Domain(-2.0, 2.0)
"""Exponents for power."""


def arrays(shape: Shape, domain: Domain = REALS, dtype: type = np.float32) -> st.SearchStrategy:
    """Float arrays of ``shape`` with elements in ``domain`` (ties and repeats included)."""
    return hnp.arrays(np.dtype(dtype), shape, elements=domain.elements())


def arrays_in(shapes: Sequence[Shape], domain: Domain = REALS) -> st.SearchStrategy:
    """A float32 array whose shape is drawn from ``shapes``."""
    return st.sampled_from(tuple(shapes)).flatmap(lambda s: arrays(s, domain))


def inputs(shapes: Sequence[Shape], domains: Sequence[Domain]) -> st.SearchStrategy[Arrays]:
    """A tuple of float32 arrays, one per shape, each in its domain."""
    return st.tuples(*(arrays(s, d) for s, d in zip(shapes, domains, strict=True)))


def pairs(
    shape_pairs: Sequence[tuple[Shape, Shape]], a: Domain = REALS, b: Domain = REALS
) -> st.SearchStrategy[Arrays]:
    """Two float32 arrays whose shapes are a pair drawn from ``shape_pairs``."""
    return st.sampled_from(tuple(shape_pairs)).flatmap(lambda p: inputs(p, (a, b)))


def masks(shape: Shape) -> st.SearchStrategy[np.ndarray]:
    """Boolean arrays of ``shape``."""
    return hnp.arrays(np.bool_, shape, elements=st.booleans())


def labels(shape: Shape, classes: int) -> st.SearchStrategy[np.ndarray]:
    """int32 class labels in ``[0, classes)`` of ``shape``."""
    return hnp.arrays(np.int32, shape, elements=st.integers(0, classes - 1))


def seeds() -> st.SearchStrategy[int]:
    """Seeds for NumPy generators (cheap values without per-element Hypothesis draws)."""
    return st.integers(0, 2**32 - 1)
