"""``Embedding`` and ``EmbeddingBag``: lookup tables of learned vectors, read by rows or bags."""

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

__all__ = ["Embedding", "EmbeddingBag"]


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


_BAG_ORDER = "nn.EmbeddingBag's third parameter is max_norm, its mode the sixth"
_BAG_ADVICE = {
    **EMBEDDING_ADVICE,
    "_weight": "assign the table after construction instead: m.weight = tg.tensor(w, "
    "requires_grad=True), of shape (num_embeddings, embedding_dim).",
}


class EmbeddingBag(Module):
    """Sums, means or maxima of bags of embedding rows (``tg.embedding_bag``), as PyTorch's
    ``nn.EmbeddingBag``: ``(B, L)`` indices, or ``(N,)`` indices with ``offsets``, ->
    ``(B, embedding_dim)``.

    ``weight`` has shape ``(num_embeddings, embedding_dim)`` and is drawn from the standard
    normal, as PyTorch's (the ``padding_idx`` row zeroed); a ``torch.nn.EmbeddingBag`` state
    dict loads unchanged.

    Args:
        num_embeddings: the number of rows (the vocabulary size).
        embedding_dim: the size of each vector.
        mode: ``"sum"``, ``"mean"`` (PyTorch's default) or ``"max"``.
        include_last_offset: ``offsets`` holds one more entry, where the last bag ends.
        padding_idx: a row (negative counts from the end) initialised to zeros and left out
            of every bag (not summed, not counted in a mean).
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the table.
        device: where the parameters are made, as ``tg.zeros(..., device=)``; ``None``: JAX's
            default device.

    Raises:
        ValueError: a non-positive size, an unknown ``mode``, or ``padding_idx`` outside
            ``[-num_embeddings, num_embeddings)``.
        TypeError: a size that is not an integer; PyTorch's ``max_norm=``,
            ``scale_grad_by_freq=``, ``sparse=`` (not supported: the message says what to do;
            their PyTorch defaults are accepted); more than two positional arguments
            (PyTorch's third is ``max_norm``); ``_weight=`` (assign ``weight`` instead). At
            call time, as ``tg.embedding_bag``.
    """

    weight: Tensor

    @torch_keywords(_BAG_ADVICE, defaults={**EMBEDDING_DEFAULTS, "_weight": None}, order=_BAG_ORDER)
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        mode: str = "mean",
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        num_embeddings = integer(num_embeddings, "EmbeddingBag: num_embeddings")
        embedding_dim = integer(embedding_dim, "EmbeddingBag: embedding_dim")
        if num_embeddings <= 0 or embedding_dim <= 0:
            raise ValueError(
                f"EmbeddingBag({num_embeddings}, {embedding_dim}): sizes must be positive."
            )
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}.")
        if padding_idx is not None:
            padding_idx = integer(padding_idx, "EmbeddingBag: padding_idx")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"EmbeddingBag({num_embeddings}, {embedding_dim}): padding_idx="
                    f"{padding_idx} must be in [{-num_embeddings}, {num_embeddings})."
                )
            padding_idx %= num_embeddings
        check_float(dtype, "EmbeddingBag")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.mode, self.include_last_offset = mode, bool(include_last_offset)
        self.padding_idx = padding_idx
        (k,) = _init.keys(key, 1)
        weight = _init.normal(k, (num_embeddings, embedding_dim), dtype)
        if padding_idx is not None:
            weight.data = weight.data.at[padding_idx].set(0)
        self.weight = weight
        _init.to_device(self, device, "nn.EmbeddingBag")

    def forward(self, indices: Any, offsets: Any = None, per_sample_weights: Any = None) -> Tensor:
        """Reduce the bags of ``indices`` (2-D, or 1-D with ``offsets``); ``per_sample_weights``
        with mode ``sum`` only (``tg.embedding_bag``)."""
        return ops.embedding_bag(
            indices,
            self.weight,
            offsets,
            mode=self.mode,
            per_sample_weights=per_sample_weights,
            include_last_offset=self.include_last_offset,
            padding_idx=self.padding_idx,
        )

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        last = ", include_last_offset=True" if self.include_last_offset else ""
        return f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}{last}{pad}"
