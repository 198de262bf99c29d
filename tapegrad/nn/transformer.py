"""The transformer encoder, PyTorch's layout: ``TransformerEncoderLayer`` (self-attention and a
feed-forward block) and ``TransformerEncoder`` (a stack of copies of one)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from tapegrad import ops
from tapegrad._args import integer
from tapegrad._tensor import Tensor
from tapegrad.nn import _init
from tapegrad.nn._inputs import as_input
from tapegrad.nn.attention import MultiheadAttention
from tapegrad.nn.container import ModuleList
from tapegrad.nn.dropout import Dropout
from tapegrad.nn.linear import Linear
from tapegrad.nn.module import Module
from tapegrad.nn.normalization import LayerNorm

__all__ = ["TransformerEncoderLayer", "TransformerEncoder"]


def _relu(x: Tensor) -> Tensor:
    """``activation="relu"`` (a function: ``copy.deepcopy`` of the layer shares it)."""
    return ops.relu(x)


def _gelu(x: Tensor) -> Tensor:
    """``activation="gelu"``, the exact erf form."""
    return ops.gelu(x)


class TransformerEncoderLayer(Module):
    """One encoder layer (Vaswani et al. 2017) with PyTorch's sub-module names, so a
    ``torch.nn.TransformerEncoderLayer`` state dict loads unchanged.

    Post-norm (default): ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``; with
    ``norm_first``: ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``, where ``sa`` is
    ``self_attn`` then ``dropout1`` and ``ff`` is ``linear2(dropout(act(linear1(x))))``
    then ``dropout2``.

    Args:
        d_model: the model width ``E``.
        nhead: attention heads (``d_model`` divisible by it).
        dim_feedforward: the hidden width of the feed-forward block.
        dropout: dropout probability (attention output, feed-forward, residuals).
        activation: ``"relu"``, ``"gelu"`` (exact erf form), or a callable applied to the
            hidden features (``tg.gelu``, ``tg.silu``, a module such as ``nn.SiLU()``: a
            module is registered as the sub-module ``activation``), as PyTorch's.
        layer_norm_eps: ``eps`` of both layer norms.
        batch_first: ``(N, L, E)`` inputs; else ``(L, N, E)``.
        norm_first: pre-norm instead of post-norm.
        bias: learn biases in the linear layers, the attention and the layer norms.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        ValueError: an unknown activation name, ``d_model`` not divisible by ``nhead``,
            dropout outside ``[0, 1]``.
        TypeError: an activation that is neither a name nor callable, or a class (pass an
            instance: ``nn.GELU()``).
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        if isinstance(activation, str) and activation not in ("relu", "gelu"):
            raise ValueError(
                "TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable "
                f"(tg.gelu, nn.SiLU(), ...), got {activation!r}."
            )
        if isinstance(activation, type):
            raise TypeError(
                f"TransformerEncoderLayer: activation={activation.__name__} is a class; pass an "
                f"instance, {activation.__name__}() (nn.GELU() rather than nn.GELU), or a "
                "function such as tg.gelu."
            )
        if not isinstance(activation, str) and not callable(activation):
            raise TypeError(
                "TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable "
                f"(tg.gelu, nn.SiLU(), ...), got {type(activation).__name__}."
            )
        k_attn, k1, k2, k_d, k_d1, k_d2 = _init.keys(key, 6) if key is not None else [None] * 6
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, key=k_attn, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias, key=k1, dtype=dtype)
        self.dropout = Dropout(dropout, key=k_d)
        self.linear2 = Linear(dim_feedforward, d_model, bias, key=k2, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout, key=k_d1)
        self.dropout2 = Dropout(dropout, key=k_d2)
        # A name is a function, as PyTorch's ``F.relu``: no sub-module (PyTorch's module names).
        act: Callable[[Tensor], Tensor]
        if isinstance(activation, str):
            act = _relu if activation == "relu" else _gelu
        else:
            act = activation
        self.activation = act
        _init.to_device(self, device, "nn.TransformerEncoderLayer")

    def _sa(self, x: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        out, _ = self.self_attn(
            x,
            x,
            x,
            key_padding_mask=padding,
            need_weights=False,
            attn_mask=mask,
            is_causal=is_causal,
        )
        y: Tensor = self.dropout1(out)
        return y

    def _ff(self, x: Tensor) -> Tensor:
        y: Tensor = self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
        return y

    def forward(
        self,
        src: Tensor,
        src_mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src`` (``(N, L, E)`` with ``batch_first``, else ``(L, N, E)``).

        Args:
            src: the sequence.
            src_mask: ``(L, L)`` (or ``(N * nhead, L, L)``): boolean, ``True`` where
                attending is not allowed, or float, added to the scores (``-inf`` blocks).
            src_key_padding_mask: ``(N, L)``, ``True`` where a position is padding (or a
                float mask added to the scores).
            is_causal: each position attends only to itself and earlier positions.
        """
        x = as_input(src, "TransformerEncoderLayer")
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self._sa(x, src_mask, src_key_padding_mask, is_causal))
        y: Tensor = self.norm2(x + self._ff(x))
        return y


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of ``encoder_layer`` (``copy.deepcopy``, as PyTorch's:
    each copy has its own parameters, all starting equal), then ``norm`` if given; a
    ``torch.nn.TransformerEncoder`` state dict loads unchanged (``layers.0.self_attn...``,
    ``norm.weight``).

    Args:
        encoder_layer: the layer to copy (a :class:`TransformerEncoderLayer` or any module
            called as one: ``layer(x, src_mask=, src_key_padding_mask=, is_causal=)``); it
            is not itself registered.
        num_layers: how many copies, at least 0.
        norm: an optional module applied to the last layer's output (``nn.LayerNorm(d)``,
            PyTorch's usual choice with ``norm_first=True``).
        enable_nested_tensor: accepted for PyTorch's signature (tapegrad has no nested
            tensors). PyTorch's fast path it enables (in eval mode, without grad, with a
            ``src_key_padding_mask``) returns zeros at padded positions; tapegrad computes
            them there as PyTorch does with ``enable_nested_tensor=False`` (the other
            positions are equal): mask padded positions out of any pooling.
        mask_check: accepted for PyTorch's signature, as ``enable_nested_tensor``.

    Raises:
        TypeError: ``encoder_layer`` or ``norm`` is not a module, or ``num_layers`` is not an
            integer.
        ValueError: a negative ``num_layers``.

    A layer made with an explicit ``key`` is copied with it, so its dropout masks repeat in
    every copy; give layers no key (the process random state draws each mask) to avoid that.
    """

    def __init__(
        self,
        encoder_layer: Module,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(
                "TransformerEncoder: encoder_layer must be a module (nn.TransformerEncoderLayer"
                f"(...)), got {type(encoder_layer).__name__}."
            )
        if norm is not None and not isinstance(norm, Module):
            raise TypeError(
                f"TransformerEncoder: norm must be a module (nn.LayerNorm(d_model)) or None, "
                f"got {type(norm).__name__}."
            )
        n = integer(num_layers, "TransformerEncoder: num_layers")
        if n < 0:
            raise ValueError(f"TransformerEncoder: num_layers must be >= 0, got {n}.")
        self.layers = ModuleList(copy.deepcopy(encoder_layer) for _ in range(n))
        self.num_layers = n
        self.norm = norm
        self.enable_nested_tensor = bool(enable_nested_tensor)
        self.mask_check = bool(mask_check)

    def forward(
        self,
        src: Tensor,
        mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        """Encode ``src`` through every layer, then ``norm``; the shape of ``src``.

        Args:
            src: the sequence, as the layer takes it (``(N, L, E)`` with ``batch_first``).
            mask: the attention mask passed to every layer as its ``src_mask``.
            src_key_padding_mask: ``(N, L)``, passed to every layer.
            is_causal: passed to every layer (``None``, PyTorch's default: ``False``; a
                causal ``mask`` gives the same result either way).
        """
        x = as_input(src, "TransformerEncoder")
        causal = bool(is_causal)
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=causal)
        if self.norm is not None:
            x = self.norm(x)
        return x
