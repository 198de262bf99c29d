"""Casting a module's tensors in place: which dtypes ``Module.to`` takes, and the cast of one
tensor that keeps its object (PyTorch's ``Module.half()``, ``.to(dtype)``)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from tapegrad._arrays import is_torch
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor, grad_of, set_array, set_grad, tape_of
from tapegrad.current import use_tape

__all__ = ["is_dtype", "float_dtype", "cast_in_place"]


def is_dtype(value: Any) -> bool:
    """Whether ``Module.to``'s first argument names a dtype (``tg.float16``, ``np.float32``,
    a ``np.dtype``, or PyTorch's, which ``float_dtype`` refuses) rather than a device (strings
    and indices name devices)."""
    if isinstance(value, np.dtype) or _torch_dtype(value):
        return True
    return isinstance(value, type) and hasattr(value, "dtype")


def _torch_dtype(value: Any) -> bool:
    """Whether ``value`` is a ``torch.dtype`` (checked without importing torch)."""
    return is_torch(value) and type(value).__name__ == "dtype"


def float_dtype(dtype: Any) -> np.dtype[Any]:
    """``dtype`` for ``Module.to``: a real floating dtype this JAX mode can hold.

    Raises:
        TypeError: not a floating dtype, PyTorch's, or 64-bit with x64 off (JAX would make
            float32).
    """
    if _torch_dtype(dtype):
        name = str(dtype).removeprefix("torch.")
        raise TypeError(f"Module.to: {dtype} is PyTorch's dtype; pass JAX's, tg.{name}.")
    dt = check_float(dtype, "Module.to")
    stored = jax.dtypes.canonicalize_dtype(dt)
    if stored != dt:
        raise TypeError(
            f"Module.to: {dt} needs JAX's x64 mode (JAX would store {stored}); call "
            "jax.config.update('jax_enable_x64', True) at startup, before making tensors."
        )
    return dt


def cast_in_place(t: Tensor, dtype: np.dtype[Any]) -> None:
    """Cast ``t`` to ``dtype``, keeping the tensor object (as PyTorch's ``Module.to`` keeps its
    parameters). A leaf that requires grad is made a leaf again, on its tape, since its node
    holds its dtype (the old leaf is released as ``requires_grad_(False)`` releases it: off
    the tape at once, unless a graph not yet backwarded uses it); a ``.grad`` is cast with
    it."""
    tape = tape_of(t)
    if tape is not None:
        t.requires_grad_(False)
    set_array(t, t.data.astype(dtype))
    if tape is not None:
        with use_tape(tape):
            t.require_grad()
    grad = grad_of(t)
    if grad is not None:
        set_grad(t, Tensor(grad.data.astype(dtype)))
