"""Shared argument checks of the sliding-window ops (convolution, pooling)."""

from __future__ import annotations

from typing import Any

from tapegrad._args import integer
from tapegrad.errors import ShapeError

__all__ = ["Ints", "Pairs", "layout", "spatial", "check_window"]

Ints = tuple[int, ...]
Pairs = tuple[tuple[int, int], ...]


_LAYOUTS = {
    1: "(N, C, L) or (C, L)",
    2: "(N, C, H, W) or (C, H, W)",
    3: "(N, C, D, H, W) or (C, D, H, W)",
}


def layout(n: int) -> str:
    """The input layouts, batched or not, of an op over ``n`` (1 to 3) spatial axes."""
    return _LAYOUTS[n]


def spatial(value: Any, n: int, name: str, what: str, low: int = 1, forms: str = "") -> Ints:
    """``value`` (an int or a sequence of ``n`` ints, each ``>= low``) as ``n`` ints.

    Args:
        value: the argument.
        n: the number of spatial axes.
        name: the op, for the message.
        what: the argument's name, for the message.
        low: the smallest value allowed.
        forms: the argument's other forms, for the message (``", 'same' or 'valid'"``).

    Raises:
        TypeError: ``value`` or an entry is not an integer (a float or a bool).
        ValueError: a wrong count or a value below ``low``.
    """
    message = (
        f"{name}: {what}={value!r} must be an int >= {low} or {n} such ints (one per spatial "
        f"axis){forms}"
    )
    try:
        entries = tuple(value)
    except TypeError:  # one value for every axis
        entries = (value,) * n
    try:
        values = tuple(integer(v, what) for v in entries)
    except TypeError:
        raise TypeError(f"{message}; floats and booleans are not taken for ints.") from None
    if len(values) != n or any(v < low for v in values):
        raise ValueError(f"{message}.")
    return values


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
