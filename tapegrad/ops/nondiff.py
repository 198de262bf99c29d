"""Non-differentiable ops: comparisons, bitwise (logical on booleans), the float tests
(isnan, isfinite, isinf) and argmax/argmin (never recorded, never require grad), and allclose,
a Python bool; argsort lives with sort in ``indexing``."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import as_operand, broadcast_check, defop

__all__ = [
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "equal",
    "not_equal",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "isnan",
    "isfinite",
    "isinf",
    "argmax",
    "argmin",
    "allclose",
]


_less = kernel(jnp.less)


@defop(differentiable=False, check=broadcast_check)
def less(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a < b."""
    return _less(a, b), ()


_less_equal = kernel(jnp.less_equal)


@defop(differentiable=False, check=broadcast_check)
def less_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a <= b."""
    return _less_equal(a, b), ()


_greater = kernel(jnp.greater)


@defop(differentiable=False, check=broadcast_check)
def greater(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a > b."""
    return _greater(a, b), ()


_greater_equal = kernel(jnp.greater_equal)


@defop(differentiable=False, check=broadcast_check)
def greater_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a >= b."""
    return _greater_equal(a, b), ()


_equal = kernel(jnp.equal)


@defop(differentiable=False, check=broadcast_check)
def equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a == b."""
    return _equal(a, b), ()


_not_equal = kernel(jnp.not_equal)


@defop(differentiable=False, check=broadcast_check)
def not_equal(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise a != b."""
    return _not_equal(a, b), ()


_MASKS = "it takes booleans and integers: compare first, (x > 0) & (y < 1)"
"""What a bitwise op (``& | ^ ~``) on floats says to write."""

_bitwise_and = kernel(jnp.bitwise_and)


@defop(differentiable=False, check=broadcast_check, dtype_advice=_MASKS)
def bitwise_and(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise ``a & b``: logical and of booleans (masks), bitwise and of integers."""
    return _bitwise_and(a, b), ()


_bitwise_or = kernel(jnp.bitwise_or)


@defop(differentiable=False, check=broadcast_check, dtype_advice=_MASKS)
def bitwise_or(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise ``a | b``: logical or of booleans, bitwise or of integers."""
    return _bitwise_or(a, b), ()


_bitwise_xor = kernel(jnp.bitwise_xor)


@defop(differentiable=False, check=broadcast_check, dtype_advice=_MASKS)
def bitwise_xor(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise ``a ^ b``: logical exclusive or of booleans, bitwise of integers."""
    return _bitwise_xor(a, b), ()


_bitwise_not = kernel(jnp.bitwise_not)


@defop(differentiable=False, dtype_advice=_MASKS)
def bitwise_not(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise ``~x``: logical not of booleans, bitwise not of integers."""
    return _bitwise_not(x), ()


_isnan = kernel(jnp.isnan)


@defop(differentiable=False)
def isnan(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise: whether ``x`` is NaN (a boolean mask)."""
    return _isnan(x), ()


_isfinite = kernel(jnp.isfinite)


@defop(differentiable=False)
def isfinite(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise: whether ``x`` is neither NaN nor infinite (a boolean mask)."""
    return _isfinite(x), ()


_isinf = kernel(jnp.isinf)


@defop(differentiable=False)
def isinf(x: jax.Array) -> tuple[jax.Array, tuple[()]]:
    """Elementwise: whether ``x`` is +inf or -inf (a boolean mask)."""
    return _isinf(x), ()


def _arg_axis(name: str, x: jax.Array, axis: int | None) -> int | None:
    """``axis`` checked against ``x`` and spelled as jnp takes it: a 0-d input's axis 0 or -1
    (PyTorch's) is its one element, ``None`` (jnp refuses both).

    Raises:
        ValueError: no axis and an empty ``x``.
        ShapeError: an axis out of range.
    """
    if axis is None:
        if x.size == 0:
            raise ValueError(f"{name} of an empty tensor; it has no element to pick.")
        return None
    span = max(x.ndim, 1)  # a 0-d input counts as one axis, as in PyTorch
    if not -span <= axis < span:
        raise ShapeError(
            f"{name}: axis {axis} is out of range for a tensor of shape {tuple(x.shape)}."
        )
    return axis if x.ndim else None


_argstatic = partial(kernel, static_argnames=("axis", "keepdims"))
_argmax = _argstatic(jnp.argmax)
_argmin = _argstatic(jnp.argmin)


@defop(differentiable=False)
def argmax(
    x: jax.Array, *, axis: int | None = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[()]]:
    """Index of the largest element along ``axis`` (``None``: of the flattened input); the
    first one on ties; int32 (int64 with x64). Not differentiable: never recorded."""
    axis = _arg_axis("argmax", x, axis)
    return _argmax(x, axis=axis, keepdims=keepdims), ()


@defop(differentiable=False)
def argmin(
    x: jax.Array, *, axis: int | None = None, keepdims: bool = False
) -> tuple[jax.Array, tuple[()]]:
    """Index of the smallest element along ``axis``, as ``argmax``."""
    axis = _arg_axis("argmin", x, axis)
    return _argmin(x, axis=axis, keepdims=keepdims), ()


_allclose = partial(kernel, static_argnames=("equal_nan",))(jnp.allclose)


def _tolerance(value: Any, what: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"allclose: {what} must be a number, got {type(value).__name__}.")
    return value


def allclose(
    a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> bool:
    """Whether every element of ``a`` is close to its counterpart in ``b``: ``|a - b| <= atol
    + rtol * |b|`` after broadcasting (NumPy's ``allclose``, PyTorch's ``torch.allclose``, same
    defaults). NaN is close to NaN only with ``equal_nan``; infinities must match. Operands are
    tensors, arrays or numbers of any dtypes (NumPy's promotion; PyTorch refuses mixed
    dtypes). A Python ``bool``: it waits for both values and records nothing.

    Raises:
        ShapeError: the shapes do not broadcast.
        TypeError: ``rtol`` or ``atol`` is not a number; called inside ``tg.jit`` (a bool is
            not known while tracing: compare with ``tg.all(tg.abs(a - b) <= atol + rtol *
            tg.abs(b))``, a boolean tensor, instead).
        OperandTypeError: an operand is a list or a PyTorch tensor (convert it with
            ``tg.tensor``).
    """
    from tapegrad._tensor import Tensor  # tensor.py imports the ops last

    x, y = (t.data if isinstance(t, Tensor) else as_operand(t, "allclose") for t in (a, b))
    broadcast_check("allclose", [x, y], {})
    close = _allclose(x, y, _tolerance(rtol, "rtol"), _tolerance(atol, "atol"), bool(equal_nan))
    if isinstance(close, jax.core.Tracer):
        raise TypeError(
            "allclose returns a Python bool, which is not known while a function is traced "
            "(tg.jit, jax.jit); compare with tg.all(tg.abs(a - b) <= atol + rtol * tg.abs(b)), "
            "a boolean tensor, instead."
        )
    return bool(close)
