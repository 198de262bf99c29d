"""Scaled dot-product attention as one fused op (one node, hand-written VJP)."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import torch_keywords
from tapegrad._arrays import is_torch
from tapegrad._dtypes import summed_in
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import as_operand, defop, operand_shape

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["scaled_dot_product_attention"]

Res = tuple[jax.Array, jax.Array, jax.Array, jax.Array]


def _wide(*arrays: jax.Array) -> tuple[jax.Array, ...]:
    """Each array in the dtype its products are summed in (``summed_in``)."""
    return tuple(a.astype(summed_in(a.dtype)) for a in arrays)


def _narrow(ct: jax.Array | None, like: jax.Array) -> jax.Array | None:
    """A cotangent in ``like``'s dtype where it has its shape; one in a broadcast shape stays
    wide, so that the engine sums it down before it rounds."""
    return ct.astype(like.dtype) if ct is not None and ct.shape == like.shape else ct


@partial(kernel, static_argnames=("is_causal", "scale"))
def _attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, *, is_causal: bool, scale: float
) -> tuple[jax.Array, jax.Array]:
    """softmax(q k^T * scale, masked) v, and the attention weights, both in float32 for
    float16 and bfloat16 inputs (``summed_in``: q k^T overflows float16 at 65,504; PyTorch
    accumulates the scores and the softmax in float32 too); the output is rounded back to the
    inputs' dtype, the weights stay wide."""
    out = jnp.result_type(q, k, v, *(() if mask.dtype == jnp.bool_ else (mask,)))
    q, k, v = _wide(q, k, v)
    s = jnp.einsum("...qd,...kd->...qk", q, k) * scale
    if mask.dtype == jnp.bool_:
        s = jnp.where(mask, s, -jnp.inf)
    else:
        s = s + mask
    if is_causal:
        lq, lk = s.shape[-2], s.shape[-1]
        s = jnp.where(jnp.tril(jnp.ones((lq, lk), jnp.bool_)), s, -jnp.inf)
    # softmax, safe for a row with nothing to attend (all -inf): its weights are 0, so its
    # output and every gradient through it are 0, as PyTorch's (``_safe_softmax``), not NaN
    top = jnp.max(s, axis=-1, keepdims=True, initial=-jnp.inf)  # no keys: -inf
    e = jnp.exp(s - jnp.where(jnp.isfinite(top), top, 0.0))
    total = jnp.sum(e, axis=-1, keepdims=True)
    p = e / jnp.where(total == 0, 1.0, total)
    return jnp.einsum("...qk,...kd->...qd", p, v).astype(out), p


@defop(name="scaled_dot_product_attention")
def _sdpa(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, *, is_causal: bool, scale: float
) -> tuple[jax.Array, Res]:
    """Attention of queries (..., Lq, D) over keys (..., Lk, D) and values (..., Lk, Dv)."""
    y, _ = _attention(q, k, v, mask, is_causal=is_causal, scale=scale)
    return y, (q, k, v, mask)  # the inputs: create_graph differentiates through them


@_sdpa.defvjp
@partial(kernel, static_argnames=("needs", "is_causal", "scale"))
def _sdpa_vjp(
    res: Res, g: jax.Array, needs: tuple[bool, ...], *, is_causal: bool, scale: float
) -> tuple[jax.Array | None, ...]:
    """With P the weights and S the scaled scores: gv = P^T g, gP = g v^T,
    gS = P * (gP - sum(gP * P, -1)) (the softmax Jacobian), gq = gS k * scale,
    gk = gS^T q * scale; an additive (float) mask receives gS, a boolean one nothing. In
    float32 for float16 and bfloat16 inputs, as the forward; each cotangent is rounded to its
    input's dtype (by the engine after summing, where that input was broadcast)."""
    q0, k0, v0, mask = res
    _, p = _attention(q0, k0, v0, mask, is_causal=is_causal, scale=scale)
    q, k, v, g = _wide(q0, k0, v0, g)
    gv = jnp.einsum("...qk,...qd->...kd", p, g) if needs[2] else None
    gp = jnp.einsum("...qd,...kd->...qk", g, v)
    gs = p * (gp - jnp.sum(gp * p, axis=-1, keepdims=True))
    gq = jnp.einsum("...qk,...kd->...qd", gs, k) * scale if needs[0] else None
    gk = jnp.einsum("...qk,...qd->...kd", gs, q) * scale if needs[1] else None
    gmask = gs if needs[3] else None
    return _narrow(gq, q0), _narrow(gk, k0), _narrow(gv, v0), _narrow(gmask, mask)


_TORCH_KEYWORDS = {
    "attn_mask": "tapegrad spells it mask=, with PyTorch's meaning: a boolean mask is True "
    "where a query may attend (takes part in attention), a float mask is added to the scores "
    "(-inf blocks). (tg.nn.MultiheadAttention's attn_mask= keeps MultiheadAttention's meaning: "
    "True blocks.)",
    "dropout_p": "tapegrad does not support it: the fused attention has no dropout. Leave it "
    "out where it is 0 (evaluation); to drop attention weights in training, use "
    "tg.nn.MultiheadAttention(..., dropout=p), or write it out: "
    "tg.dropout(tg.softmax(q @ k.swapaxes(-1, -2) * scale, axis=-1), p) @ v.",
    "enable_gqa": "tapegrad does not support it: it broadcasts leading axes instead. With "
    "r = Hq // Hkv query heads per key/value head, pass q.reshape(B, Hkv, r, Lq, D), "
    "tg.expand_dims(k, 2) and tg.expand_dims(v, 2), and reshape the result to (B, Hq, Lq, Dv).",
}


@torch_keywords(_TORCH_KEYWORDS)
def scaled_dot_product_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    mask: Any = None,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    """``softmax(q k^T * scale + mask) v``, PyTorch's ``F.scaled_dot_product_attention`` (no
    dropout); one node whose VJP is written by hand, keeping q, k, v and the mask (the
    weights are recomputed in the VJP).

    Args:
        q: queries (batch, heads, Lq, D) (any leading axes that broadcast).
        k: keys (batch, heads, Lk, D).
        v: values (batch, heads, Lk, Dv).
        mask: optional, broadcastable to (..., Lq, Lk): boolean, ``True`` where a query may
            attend (PyTorch's convention), or float, added to the scores.
        is_causal: query i attends to keys ``j <= i`` only (a lower-triangular mask).
        scale: the score factor (default ``1 / sqrt(D)``).

    Returns:
        (batch, heads, Lq, Dv), in the inputs' dtype: float16 and bfloat16 inputs are
        computed in float32 (scores, softmax, products and the VJP) and rounded back, as
        PyTorch's (their scores overflow float16 at 65,504). A query row that may attend to
        nothing gives zeros, and no gradient flows through it (PyTorch's behaviour), instead
        of the NaN a plain softmax of only -inf gives.

    PyTorch's ``attn_mask=`` (here ``mask=``, same meaning), ``dropout_p=`` and
    ``enable_gqa=`` raise a ``TypeError`` that says what to write instead.

    Raises:
        ShapeError: q, k, v do not agree (D, Lk, leading axes that do not broadcast), or
            the mask does not broadcast to the scores.
        TypeError: a mask that is neither boolean nor floating point (PyTorch refuses one
            too: an integer 0/1 mask would be added to the scores); a PyTorch keyword
            tapegrad does not take (see above).
    """
    name = "scaled_dot_product_attention"
    qs, ks, vs = (operand_shape(t, name) for t in (q, k, v))
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2 or qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        raise ShapeError(
            f"scaled_dot_product_attention: q {qs}, k {ks}, v {vs} must be (..., Lq, D), "
            "(..., Lk, D), (..., Lk, Dv)."
        )
    try:
        np.broadcast_shapes(qs[:-2], ks[:-2], vs[:-2])
    except ValueError:
        raise ShapeError(
            f"scaled_dot_product_attention: the leading axes of q {qs[:-2]}, k {ks[:-2]} and "
            f"v {vs[:-2]} (batch, heads) do not broadcast; make them agree. For "
            f"grouped-query attention: {_TORCH_KEYWORDS['enable_gqa'].split(': ', 1)[1]}"
        ) from None
    if mask is not None:
        if isinstance(mask, bool | int | float):  # a 0-d mask, broadcast to every score
            mask = np.asarray(mask)
        elif not hasattr(mask, "dtype") or is_torch(mask):
            mask = as_operand(mask, name)  # the ops' TypeError for a list or a torch tensor
        kind = np.dtype(mask.dtype)
        if kind != np.bool_ and not jnp.issubdtype(kind, jnp.floating):  # bfloat16 too
            raise TypeError(
                f"scaled_dot_product_attention: mask has dtype {kind}; pass a boolean mask "
                "(True where a query may attend) or a float one added to the scores (-inf "
                "blocks), e.g. mask.astype(bool) for a 0/1 mask."
            )
        scores = (*np.broadcast_shapes(qs[:-2], ks[:-2]), qs[-2], ks[-2])
        try:
            np.broadcast_shapes(tuple(mask.shape), scores)
        except ValueError:
            raise ShapeError(
                f"scaled_dot_product_attention: mask of shape {tuple(mask.shape)} does not "
                f"broadcast to the scores {scores}."
            ) from None
    factor = 1.0 / math.sqrt(max(qs[-1], 1)) if scale is None else float(scale)  # D = 0: 1
    return _sdpa(q, k, v, True if mask is None else mask, is_causal=bool(is_causal), scale=factor)
