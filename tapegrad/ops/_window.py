"""Shared argument checks of the sliding-window ops (convolution, pooling)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad.errors import ShapeError

__all__ = ["Ints", "Pairs", "spatial", "check_window"]

Ints = tuple[int, ...]
Pairs = tuple[tuple[int, int], ...]


def spatial(value: Any, n: int, name: str, what: str, low: int = 1) -> Ints:
    """``value`` (an int or a sequence of ``n`` ints, each ``>= low``) as ``n`` ints.

    Raises:
        ValueError: a wrong count or a value below ``low``.
    """
    values = (value,) * n if isinstance(value, (int, np.integer)) else tuple(value)
    if len(values) != n or any(int(v) < low for v in values):
        raise ValueError(
            f"{name}: {what}={value!r} must be an int >= {low} or {n} such ints (one per "
            "spatial axis)."
        )
    return tuple(int(v) for v in values)


def check_window(
    name: str, x_shape: Ints, kernel: Ints, dilation: Ints, pads: Pairs, what: str
) -> None:
    """Raise ``ShapeError`` when the (dilated) window is larger than the padded input."""
    sizes = x_shape[-len(kernel) :]
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(sizes, pads, strict=True))
    span = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    if any(s > p for s, p in zip(span, padded, strict=True)):
        raise ShapeError(
            f"{name}: the {what} spans {span} (kernel {kernel}, dilation {dilation}), larger than "
            f"the padded input {padded} (input {tuple(x_shape)}, padding {pads}); use a smaller "
            "kernel, more padding or a larger input."
        )
