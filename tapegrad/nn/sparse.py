"""``Embedding`` and ``EmbeddingBag``: lookup tables of learned vectors, read by rows or bags
(``tg.embedding``, ``tg.embedding_bag``), drawn or pretrained."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from tapegrad import ops
from tapegrad._args import integer, torch_keywords
from tapegrad._dtypes import check_float, is_float
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError
from tapegrad.nn import _init
from tapegrad.nn.module import Module
from tapegrad.op import as_operand
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
        _weight: jax.Array | None = None,
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
        check_float(dtype if _weight is None else _weight.dtype, "Embedding")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        if _weight is not None:  # from_pretrained's table, as it is (PyTorch's _weight)
            self.weight = Tensor(_weight).require_grad()
        else:
            (k,) = _init.keys(key, 1)
            weight = _init.normal(k, (num_embeddings, embedding_dim), dtype)
            if padding_idx is not None:
                weight.data = weight.data.at[padding_idx].set(0)
            self.weight = weight
        _init.to_device(self, device, "nn.Embedding")

    @classmethod
    @torch_keywords(EMBEDDING_ADVICE, defaults=EMBEDDING_DEFAULTS)
    def from_pretrained(
        cls, embeddings: Any, freeze: bool = True, padding_idx: int | None = None
    ) -> Embedding:
        """An ``Embedding`` whose table is ``embeddings`` (PyTorch's classmethod).

        The table is used as given: the ``padding_idx`` row is not zeroed (its gradient is
        always zero, as in the constructor), as PyTorch's. ``weight`` is a new leaf holding
        the same array (a tensor given is left as it is when this one trains).

        Args:
            embeddings: a 2-D floating ``(num_embeddings, embedding_dim)`` tapegrad tensor,
                JAX array or NumPy array (a PyTorch tensor: convert it first,
                ``tg.tensor(t)``).
            freeze: ``weight`` does not require grad (the default, PyTorch's): it stays a
                parameter (in ``parameters()`` and ``state_dict()``), which optimizers leave
                as it is. ``False``: it trains.
            padding_idx: a row (negative counts from the end) whose gradient is always zero.

        Raises:
            OperandTypeError: (a ``TypeError``) a PyTorch tensor, a list or another object.
            TypeError: a table that is not floating; PyTorch's ``max_norm=``,
                ``scale_grad_by_freq=``, ``sparse=`` (not supported: the message says what to
                do; their PyTorch defaults are accepted).
            ShapeError: a table that is not 2-D.
            ValueError: an empty table, or ``padding_idx`` outside ``[-rows, rows)``.
        """
        data = embeddings.data if isinstance(embeddings, Tensor) else None
        if data is None:
            data = jnp.asarray(as_operand(embeddings, "Embedding.from_pretrained"))
        if data.ndim != 2:
            raise ShapeError(
                f"Embedding.from_pretrained: embeddings of shape {tuple(data.shape)} must be "
                "2-D (num_embeddings, embedding_dim)."
            )
        if not is_float(data.dtype):
            raise TypeError(
                f"Embedding.from_pretrained: embeddings of dtype {data.dtype} must be floating; "
                "cast them first: embeddings.astype(tg.float32)."
            )
        rows, cols = data.shape
        module = cls(rows, cols, padding_idx, _weight=data)
        if freeze:
            module.weight.requires_grad_(False)
        return module

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
