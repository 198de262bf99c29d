"""Multi-head attention (``MultiheadAttention``), PyTorch's parameters, masks and layouts."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from tapegrad import ops
from tapegrad._args import integer, torch_keywords
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor, optional_output
from tapegrad.errors import ShapeError
from tapegrad.nn import _init
from tapegrad.nn._inputs import as_input
from tapegrad.nn.dropout import check_p
from tapegrad.nn.linear import Linear
from tapegrad.nn.module import Module

__all__ = ["MultiheadAttention"]


_TORCH_ADVICE = {
    "kdim": "tapegrad's MultiheadAttention takes keys and values of embed_dim features only; "
    "project them to embed_dim first (an nn.Linear).",
    "vdim": "tapegrad's MultiheadAttention takes keys and values of embed_dim features only; "
    "project them to embed_dim first (an nn.Linear).",
    "add_bias_kv": "tapegrad's MultiheadAttention has no bias_k/bias_v; append a learned "
    "position to key and value yourself (tg.concatenate) if the model needs it.",
    "add_zero_attn": "tapegrad's MultiheadAttention does not append a zero key and value; "
    "append them with tg.concatenate if the model needs it.",
}
"""PyTorch options ``MultiheadAttention`` does not take, and what to do instead."""


def _attend_mask(mask: Any, name: str) -> Tensor | None:
    """PyTorch's masks as ``tg.scaled_dot_product_attention``'s: a boolean one ("True means
    masked out") as the boolean "True means attend" mask; a float one, added to the scores
    (``-inf`` blocks), as it is (a tensor that requires grad keeps its graph: a learned
    position bias gets its gradient, as in PyTorch)."""
    if mask is None:
        return None
    m = mask if isinstance(mask, Tensor) else Tensor(jnp.asarray(mask))
    if m.dtype == jnp.bool_:
        return Tensor(~m.data)
    if not jnp.issubdtype(m.dtype, jnp.floating):
        raise TypeError(
            f"MultiheadAttention: {name} has dtype {m.dtype}; pass a boolean mask (True = "
            "masked out) or a float one added to the scores (-inf blocks), e.g. "
            "mask.astype(bool) for a 0/1 mask."
        )
    return m


class MultiheadAttention(Module):
    """Attention with ``num_heads`` heads: ``softmax(q k^T / sqrt(d)) v`` per head, then an
    output projection (Vaswani et al. 2017), with PyTorch's parameters and masks.

    Parameters as ``torch.nn.MultiheadAttention`` (its state dict loads unchanged):
    ``in_proj_weight`` ``(3E, E)`` (Xavier-uniform), ``in_proj_bias`` ``(3E,)`` (zeros),
    ``out_proj.weight`` ``(E, E)`` and ``out_proj.bias`` (zeros).

    Args:
        embed_dim: the model width ``E``; divisible by ``num_heads``.
        num_heads: the number of heads.
        dropout: dropout on the attention weights while training.
        bias: learn ``in_proj_bias`` and ``out_proj.bias``.
        kdim, vdim: the features of keys and values: ``None`` or ``embed_dim`` (PyTorch's
            default; other sizes raise a ``TypeError``).
        batch_first: inputs and outputs are ``(N, L, E)``; else ``(L, N, E)``. Keyword-only:
            PyTorch's fifth parameter is ``add_bias_kv``.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: ``embed_dim`` or ``num_heads`` not an integer (NumPy's are).
        ValueError: ``embed_dim`` not divisible by ``num_heads``; dropout outside ``[0, 1]``.
    """

    in_proj_weight: Tensor
    in_proj_bias: Tensor | None

    @torch_keywords(
        _TORCH_ADVICE,
        defaults={"add_bias_kv": False, "add_zero_attn": False},
        order="its fifth parameter is add_bias_kv: pass batch_first and the others by keyword",
    )
    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        embed_dim = integer(embed_dim, "MultiheadAttention: embed_dim")
        num_heads = integer(num_heads, "MultiheadAttention: num_heads")
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(
                f"MultiheadAttention: embed_dim ({embed_dim}) must be a positive multiple of "
                f"num_heads ({num_heads})."
            )
        for name, dim in (("kdim", kdim), ("vdim", vdim)):
            if dim is not None and dim != embed_dim:  # PyTorch's default: embed_dim
                raise TypeError(f"MultiheadAttention: {name}={dim!r}: {_TORCH_ADVICE[name]}")
        check_float(dtype, "MultiheadAttention")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = check_p("MultiheadAttention", dropout)
        self.batch_first = batch_first
        k_in, k_out = _init.keys(key, 2)
        xavier = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))
        self.in_proj_weight = _init.uniform(k_in, (3 * embed_dim, embed_dim), xavier, dtype)
        self.in_proj_bias = _init.constant((3 * embed_dim,), 0.0, dtype) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, key=k_out, dtype=dtype)
        out_bias = self.out_proj.bias
        if out_bias is not None:
            # Zeroed in place, as PyTorch's ``constant_``: a new tensor would leave the bias
            # leaf Linear made hanging on the tape.
            out_bias.data = jnp.zeros_like(out_bias.data)
        _init.to_device(self, device, "nn.MultiheadAttention")

    def _heads(self, x: Tensor, i: int) -> Tensor:
        """Project ``x`` (N, L, E) with the ``i``-th third of the input projection and split
        the heads: (N, H, L, D)."""
        e = self.embed_dim
        y = x @ self.in_proj_weight[i * e : (i + 1) * e].T
        if self.in_proj_bias is not None:
            y = y + self.in_proj_bias[i * e : (i + 1) * e]
        n, length = x.shape[0], x.shape[1]
        return y.reshape(n, length, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)

    def _qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The three projections of ``x`` (N, L, E) in one matmul, heads split: each
        (N, H, L, D)."""
        y = x @ self.in_proj_weight.T
        if self.in_proj_bias is not None:
            y = y + self.in_proj_bias
        n, length = x.shape[0], x.shape[1]
        y = y.reshape(n, length, 3, self.num_heads, self.head_dim).transpose(2, 0, 3, 1, 4)
        return y[0], y[1], y[2]

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(N, L, E)`` (``batch_first``) or ``(L, N, E)``; or unbatched ``(L, E)``
                (with ``key`` and ``value`` unbatched too; the results are then unbatched).
            key: ``(N, S, E)`` or ``(S, N, E)``; unbatched ``(S, E)``.
            value: same shape as ``key``.
            key_padding_mask: ``(N, S)`` (unbatched ``(S,)``), ``True`` where a key is
                padding; or a float mask added to the scores (``-inf`` blocks), as
                PyTorch's.
            need_weights: also return the attention weights (computed without the fused
                kernel); ``False`` uses ``tg.scaled_dot_product_attention`` (one node).
            attn_mask: ``(L, S)``, or ``(N * num_heads, L, S)`` for a mask per batch element
                and head (PyTorch's layout): boolean, ``True`` where attending is not
                allowed, or float, added to the scores (``-inf`` blocks; a relative position
                bias, say: one that requires grad gets its gradient). Float and boolean
                masks given together are summed, booleans as 0 and ``-inf`` (PyTorch's).
            average_attn_weights: average the returned weights over heads.
            is_causal: mask out keys after each query (``L == S``).

        Returns:
            ``(output, weights)``: output shaped like ``query``; weights ``(N, L, S)``
            (averaged) or ``(N, H, L, S)``, or ``None`` without ``need_weights``. While
            training with dropout, the weights are those the output used, after dropout (as
            PyTorch returns them): zeros where dropped, the rest scaled by ``1 / (1 - p)``.
            With no keys (``S == 0``) each query attends to nothing: the output is
            ``out_proj`` of zeros, as PyTorch's.

        Raises:
            ShapeError: inputs that are not 3-D (or all 2-D) or whose last axis is not
                ``embed_dim``;
                ``key`` and ``value`` of different shapes, or a batch size other than
                ``query``'s; a mask of another shape than given above.
            TypeError: a mask that is neither boolean nor floating point.
        """
        given = (query, key, value)
        query = as_input(query, "MultiheadAttention")  # one tensor for one input given thrice
        key = query if given[1] is given[0] else as_input(key, "MultiheadAttention")
        value = key if given[2] is given[1] else as_input(value, "MultiheadAttention")
        if query.ndim == key.ndim == value.ndim == 2:  # unbatched: a batch of one, as PyTorch
            axis = 0 if self.batch_first else 1
            q1 = query.unsqueeze(axis)
            k1 = q1 if key is query else key.unsqueeze(axis)
            v1 = k1 if value is key else value.unsqueeze(axis)
            if key_padding_mask is not None:
                key_padding_mask = as_input(key_padding_mask, "MultiheadAttention")[None]
            out1, weights1 = self.forward(
                q1,
                k1,
                v1,
                key_padding_mask,
                need_weights,
                attn_mask,
                average_attn_weights,
                is_causal,
            )
            return out1.squeeze(axis), None if weights1 is None else weights1.squeeze(0)
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.ndim != 3 or t.shape[-1] != self.embed_dim:
                raise ShapeError(
                    f"MultiheadAttention: {name} must be 3-D with last axis {self.embed_dim} "
                    f"(embed_dim), got shape {t.shape}."
                )
        attend = self._masks(query, key, value, attn_mask, key_padding_mask)
        if query is key and key is value:  # self-attention: one projection for q, k and v
            x = query if self.batch_first else query.transpose(1, 0, 2)
            q, k, v = self._qkv(x)
        else:
            if not self.batch_first:
                query, key, value = (t.transpose(1, 0, 2) for t in (query, key, value))
            q, k, v = self._heads(query, 0), self._heads(key, 1), self._heads(value, 2)
        mask = _combine(*attend, is_causal, q.shape[2], k.shape[2])
        drop = self.dropout if self.training else 0.0
        weights: Tensor | None = None
        if need_weights or drop > 0.0 or k.shape[2] == 0:  # no keys: zeros, as PyTorch's
            scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(self.head_dim))
            if mask is not None and mask.dtype == jnp.bool_:
                scores = ops.where(mask, scores, float("-inf"))
            elif mask is not None:
                scores = scores + mask.astype(scores.dtype)
            weights = ops.softmax(scores, axis=-1)
            if drop > 0.0:  # the weights returned are those used: after dropout (PyTorch's)
                weights = ops.dropout(weights, drop, training=True)
            out = weights @ v
        else:
            if mask is not None and mask.dtype != jnp.bool_:
                mask = mask.astype(q.dtype)
            out = ops.scaled_dot_product_attention(q, k, v, mask=mask)
        n, length = out.shape[0], out.shape[2]
        out = self.out_proj(out.transpose(0, 2, 1, 3).reshape(n, length, self.embed_dim))
        if not self.batch_first:
            out = out.transpose(1, 0, 2)
        if not need_weights or weights is None:
            return out, None
        if average_attn_weights:  # an optional output: ignored, it leaves nothing on the tape
            weights = optional_output(weights.mean(axis=1))
        return out, weights

    def _masks(
        self, query: Tensor, key: Tensor, value: Tensor, attn_mask: Any, key_padding_mask: Any
    ) -> tuple[Tensor | None, Tensor | None]:
        """The two masks as ``_attend_mask`` gives them (boolean "attend" masks, or float ones
        added to the scores), ``attn_mask`` (L, S) or (N, H, L, S), after checking them and
        the inputs' lengths against each other (``ShapeError``)."""
        b, t = (0, 1) if self.batch_first else (1, 0)  # the batch and sequence axes
        n, length, source = query.shape[b], query.shape[t], key.shape[t]
        if value.shape != key.shape or key.shape[b] != n:
            raise ShapeError(
                f"MultiheadAttention: key {key.shape} and value {value.shape} must have one "
                f"shape, with query's batch size {n} (batch_first={self.batch_first})."
            )
        attn = _attend_mask(attn_mask, "attn_mask")
        if attn is not None:
            per_head = (n * self.num_heads, length, source)
            if attn.shape == per_head:
                attn = attn.reshape(n, self.num_heads, length, source)
            elif attn.shape != (length, source):
                raise ShapeError(
                    f"MultiheadAttention: attn_mask has shape {attn.shape}; it must be (L, S) = "
                    f"{(length, source)} or (N * num_heads, L, S) = {per_head}."
                )
        padding = _attend_mask(key_padding_mask, "key_padding_mask")
        if padding is not None and padding.shape != (n, source):
            raise ShapeError(
                f"MultiheadAttention: key_padding_mask has shape {padding.shape}; it must be "
                f"(N, S) = {(n, source)}."
            )
        return attn, padding

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"


def _combine(
    attn: Tensor | None, padding: Tensor | None, is_causal: bool, length: int, source: int
) -> Tensor | None:
    """One mask broadcastable to (N, H, L, S), or ``None``: boolean ("True means attend")
    when every mask given is, else a float one added to the scores (the boolean masks as 0
    and ``-inf``; the float ones summed, as PyTorch merges them)."""
    masks: list[Tensor] = []
    if attn is not None:
        masks.append(attn)
    if padding is not None:
        masks.append(padding.reshape(padding.shape[0], 1, 1, padding.shape[1]))
    if is_causal:
        masks.append(Tensor(jnp.tril(jnp.ones((length, source), dtype=bool))))
    if not masks:
        return None
    if all(m.dtype == jnp.bool_ for m in masks):
        out = masks[0].data
        for m in masks[1:]:
            out = out & m.data
        return Tensor(out)
    dtype = next(m.dtype for m in masks if m.dtype != jnp.bool_)
    total: Tensor | None = None
    for m in masks:
        if m.dtype == jnp.bool_:
            m = Tensor(jnp.where(m.data, 0.0, -jnp.inf).astype(dtype))
        total = m if total is None else total + m
    return total
