"""``Embedding``: a lookup table of learned vectors (``tg.embedding``)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tapegrad import ops
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.nn import _init
from tapegrad.nn.module import Module

__all__ = ["Embedding"]


class Embedding(Module):
    """Row ``i`` of ``weight`` for each integer index ``i``: ``(...)`` -> ``(..., dim)``.

    ``weight`` has shape ``(num_embeddings, embedding_dim)`` and is drawn from the standard
    normal, as PyTorch's; a ``torch.nn.Embedding`` state dict loads unchanged.

    Args:
        num_embeddings: the number of rows (the vocabulary size).
        embedding_dim: the size of each vector.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the table.

    Raises:
        ValueError: a non-positive size.
        IndexError: at call time (from ``tg.embedding``), an index outside
            ``[0, num_embeddings)`` in indices held on the host.
    """

    weight: Tensor

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
    ) -> None:
        super().__init__()
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(
                f"Embedding({num_embeddings}, {embedding_dim}): sizes must be positive."
            )
        check_float(dtype, "Embedding")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        (k,) = _init.keys(key, 1)
        self.weight = _init.normal(k, (num_embeddings, embedding_dim), dtype)

    def forward(self, indices: Any) -> Tensor:
        """Look up ``indices`` (an integer tensor or array of any shape)."""
        return ops.embedding(indices, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
