"""``Embedding``: a lookup table of learned vectors (``tg.embedding``)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tapegrad import ops
from tapegrad._args import integer, torch_keywords
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.nn import _init
from tapegrad.nn.module import Module
from tapegrad.ops.indexing import EMBEDDING_ADVICE, EMBEDDING_DEFAULTS

__all__ = ["Embedding"]


class Embedding(Module):
    """Row ``i`` of ``weight`` for each integer index ``i``: ``(...)`` -> ``(..., dim)``.

    ``weight`` has shape ``(num_embeddings, embedding_dim)`` and is drawn from the standard
    normal, as PyTorch's; a ``torch.nn.Embedding`` state dict loads unchanged.

    Args:
        num_embeddings: the number of rows (the vocabulary size).
        embedding_dim: the size of each vector.
        padding_idx: a row (negative counts from the end) initialised to zeros whose
            gradient is always zero, so it stays as it is while training (PyTorch's).
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the table.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        ValueError: a non-positive size, or ``padding_idx`` outside ``[-num_embeddings,
            num_embeddings)``.
        TypeError: a size that is not an integer (NumPy's are); PyTorch's ``max_norm=``,
            ``scale_grad_by_freq=``, ``sparse=`` (not supported: the message says what to do;
            their PyTorch defaults are accepted).
        IndexError: at call time (from ``tg.embedding``), an index outside
            ``[0, num_embeddings)`` in indices held on the host. Indices on the device are not
            read back: one out of range (negative ones included) reads a row of NaN.
    """

    weight: Tensor

    @torch_keywords(EMBEDDING_ADVICE, defaults=EMBEDDING_DEFAULTS)
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        num_embeddings = integer(num_embeddings, "Embedding: num_embeddings")
        embedding_dim = integer(embedding_dim, "Embedding: embedding_dim")
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(
                f"Embedding({num_embeddings}, {embedding_dim}): sizes must be positive."
            )
        if padding_idx is not None:
            padding_idx = integer(padding_idx, "Embedding: padding_idx")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding({num_embeddings}, {embedding_dim}): padding_idx={padding_idx} "
                    f"must be in [{-num_embeddings}, {num_embeddings})."
                )
            padding_idx %= num_embeddings
        check_float(dtype, "Embedding")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        (k,) = _init.keys(key, 1)
        weight = _init.normal(k, (num_embeddings, embedding_dim), dtype)
        if padding_idx is not None:
            weight.data = weight.data.at[padding_idx].set(0)
        self.weight = weight
        _init.to_device(self, device, "nn.Embedding")

    def forward(self, indices: Any) -> Tensor:
        """Look up ``indices`` (an integer tensor or array of any shape)."""
        return ops.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
