"""A layer's input as a tensor: what an op takes as an operand (``op.as_operand``), so a
layer that reads its input's shape first refuses a list with the ops' message."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tapegrad._tensor import Tensor
from tapegrad.op import as_operand

__all__ = ["as_input"]


def as_input(x: Any, layer: str) -> Tensor:
    """``x`` as a tensor: a tensor as it is; a NumPy or JAX array (or a scalar) wrapped, as
    ops take them.

    Raises:
        OperandTypeError: (a ``TypeError``) a list, a PyTorch tensor or another object; the
            message names ``layer`` and says to convert it with ``tg.tensor``.
    """
    if isinstance(x, Tensor):
        return x
    return Tensor(jnp.asarray(as_operand(x, layer)))
