"""The one definition of which dtypes are differentiable: every float and complex dtype JAX has.

JAX's floats include ``bfloat16`` and the ``float8``/``float6``/``float4`` families from
``ml_dtypes``, which NumPy's own type hierarchy does not know (``np.issubdtype(bfloat16,
np.inexact)`` is ``False``); ``jnp.issubdtype`` knows them all. Every check in tapegrad (which
tensors may require grad, which op outputs are recorded, which dtypes a layer or an op
accepts) asks this module, so they cannot disagree.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad.errors import TapegradWarning
from tapegrad.origin import user_stacklevel

__all__ = [
    "as_dtype",
    "is_differentiable",
    "is_float",
    "check_float",
    "check_float_values",
    "DIFFERENTIABLE",
]


class _DtypeTable(dict[Any, bool]):
    """``dtype -> bool``, filled on first use of each dtype (one dict lookup afterwards)."""

    __slots__ = ("_kind",)

    def __init__(self, kind: Any) -> None:
        super().__init__()
        self._kind = kind

    def __missing__(self, dtype: Any) -> bool:
        try:
            value = bool(jnp.issubdtype(dtype, self._kind))
        except TypeError:  # not a dtype at all
            return False
        self[dtype] = value
        return value


DIFFERENTIABLE = _DtypeTable(jnp.inexact)
"""``DIFFERENTIABLE[dtype]``: ``True`` for every float dtype JAX supports (``bfloat16``,
``float16``, ``float8_*``, ...) and for complex dtypes; the op hot path reads it directly."""

_FLOAT = _DtypeTable(jnp.floating)


def is_differentiable(dtype: Any) -> bool:
    """Whether a tensor of ``dtype`` can require grad (any JAX float or complex dtype)."""
    return DIFFERENTIABLE[np.dtype(dtype)]


def summed_in(dtype: Any) -> Any:
    """The dtype a sum of squares or a mean of ``dtype`` values is computed in: float32 for a
    float narrower than 32 bits (float16, bfloat16, float8: their sums overflow at 65,504 or
    lose digits, so PyTorch and ``jnp.var`` accumulate them in float32), else ``dtype``."""
    dt = np.dtype(dtype)
    return np.dtype(np.float32) if _FLOAT[dt] and dt.itemsize < 4 else dt


def is_float(dtype: Any) -> bool:
    """Whether ``dtype`` is a real floating dtype JAX supports (``bfloat16`` and ``float8_*``
    included; complex excluded)."""
    return _FLOAT[np.dtype(dtype)]


def as_dtype(dtype: Any, what: str) -> np.dtype[Any]:
    """``dtype`` as a NumPy dtype: anything ``np.dtype`` accepts (``tg.float32``,
    ``np.float16``, ``"bfloat16"``, ``float``, another array's ``.dtype``).

    Args:
        dtype: the dtype asked for.
        what: who asks, for the message (``"tg.zeros"``).

    Returns:
        The dtype; a 64-bit float one with JAX's x64 mode off as its 32-bit form (what JAX
        computes in then), with a warning.

    Raises:
        TypeError: ``dtype`` is not one; names it and the spellings that work (a PyTorch
            dtype such as ``torch.float32`` is one of these: its ``tg`` name is the same).

    Warns:
        TapegradWarning: a 64-bit float dtype with x64 off (JAX would truncate it, silently
            on some paths); says how to turn x64 on.
    """
    dt = _parsed(dtype, what)
    if dt.kind not in "fc":
        return dt
    canonical: np.dtype[Any] = np.dtype(jax.dtypes.canonicalize_dtype(dt))
    if canonical != dt:  # float64 with x64 off: JAX truncates (silently on some paths). Not
        # int64 (PyTorch's label dtype): values out of int32's range raise where they are
        # checked (``OverflowError``), the others are the same numbers
        warnings.warn(
            TapegradWarning(
                f"{what}: dtype {dt} needs JAX's 64-bit mode, which is off, so the result is "
                f"{canonical}. Turn it on at the start of the program, before any array is "
                "made: jax.config.update('jax_enable_x64', True) (or the environment variable "
                f"JAX_ENABLE_X64=1); or ask for {canonical}."
            ),
            stacklevel=user_stacklevel(),
        )
    return canonical


def _parsed(dtype: Any, what: str) -> np.dtype[Any]:
    """``dtype`` as a NumPy dtype, as given (``as_dtype``'s parsing and its ``TypeError``)."""
    try:
        dt: np.dtype[Any] = np.dtype(dtype)
    except TypeError:
        name = str(dtype)
        hint = (
            f"PyTorch dtypes are not JAX dtypes: write tg.{name[6:]}"
            if name.startswith("torch.")
            else "write a dtype such as tg.float32, np.float32, 'float32' or float"
        )
        raise TypeError(f"{what}: dtype {dtype!r} is not a dtype; {hint}.") from None
    return dt


def check_float(dtype: Any, what: str) -> np.dtype[Any]:
    """Return ``dtype`` as a NumPy dtype when it is a real float dtype (for parameters).

    Args:
        dtype: anything ``np.dtype`` accepts (``tg.bfloat16``, ``"float16"``, ...).
        what: who asks, for the message (``"Linear"``).

    Raises:
        TypeError: ``dtype`` is not a dtype (:func:`as_dtype`), or not a real floating one.
    """
    dt = _parsed(dtype, what)  # 64-bit with x64 off: the caller refuses it (no warning)
    if not _FLOAT[dt]:
        raise TypeError(
            f"{what}: dtype must be a floating dtype (float32, bfloat16, float16, ...), got {dt}."
        )
    return dt


def check_float_values(what: str, x: Any) -> None:
    """Refuse ``x`` (a tensor or array) holding booleans or integers where ``what`` computes
    in floats and JAX would compute without an error, but wrongly (dropout's ``1 / (1 - p)``
    scale cast to an integer). Where JAX itself refuses a dtype, ``op.apply`` names the op.

    Raises:
        TypeError: ``x``'s dtype is a boolean or an integer one; says to cast it.
    """
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":
        raise TypeError(
            f"{what} computes in floats, got {dtype} values; cast them first: x.astype(tg.float32)."
        )
