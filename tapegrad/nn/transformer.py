"""The transformer, PyTorch's layout: ``TransformerEncoderLayer`` (self-attention and a
feed-forward block), ``TransformerDecoderLayer`` (self-attention, attention over the
encoder's output and a feed-forward block), ``TransformerEncoder`` and ``TransformerDecoder``
(stacks of copies of one), and ``Transformer`` (Vaswani et al. 2017: both stacks)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from tapegrad import creation, ops
from tapegrad._args import integer
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError
from tapegrad.nn import _init, init
from tapegrad.nn._inputs import as_input
from tapegrad.nn.attention import MultiheadAttention
from tapegrad.nn.container import ModuleList
from tapegrad.nn.dropout import Dropout
from tapegrad.nn.linear import Linear
from tapegrad.nn.module import Module
from tapegrad.nn.normalization import LayerNorm

__all__ = [
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
]


def _relu(x: Tensor) -> Tensor:
    """``activation="relu"`` (a function: ``copy.deepcopy`` of the layer shares it)."""
    return ops.relu(x)


def _gelu(x: Tensor) -> Tensor:
    """``activation="gelu"``, the exact erf form."""
    return ops.gelu(x)


def _activation(owner: str, activation: Any) -> Callable[[Tensor], Tensor]:
    """A layer's ``activation``: a name is a function, as PyTorch's ``F.relu`` (no
    sub-module: PyTorch's module names); a callable (a module too) is kept.

    Raises:
        ValueError: an unknown name.
        TypeError: neither a name nor callable, or a class (an instance is needed).
    """
    if isinstance(activation, str) and activation not in ("relu", "gelu"):
        raise ValueError(
            f"{owner}: activation must be 'relu', 'gelu' or a callable (tg.gelu, nn.SiLU(), "
            f"...), got {activation!r}."
        )
    if isinstance(activation, type):
        raise TypeError(
            f"{owner}: activation={activation.__name__} is a class; pass an instance, "
            f"{activation.__name__}() (nn.GELU() rather than nn.GELU), or a function such as "
            "tg.gelu."
        )
    if not isinstance(activation, str) and not callable(activation):
        raise TypeError(
            f"{owner}: activation must be 'relu', 'gelu' or a callable (tg.gelu, nn.SiLU(), "
            f"...), got {type(activation).__name__}."
        )
    if isinstance(activation, str):
        return _relu if activation == "relu" else _gelu
    fn: Callable[[Tensor], Tensor] = activation
    return fn


def _attend(
    attn: Any, drop: Any, x: Tensor, memory: Tensor, mask: Any, padding: Any, is_causal: bool
) -> Tensor:
    """A layer's attention block: ``attn`` (queries from ``x``, keys and values from
    ``memory``; ``x`` itself for self-attention), then the dropout ``drop``."""
    out, _ = attn(
        x,
        memory,
        memory,
        key_padding_mask=padding,
        need_weights=False,
        attn_mask=mask,
        is_causal=is_causal,
    )
    y: Tensor = drop(out)
    return y


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
        act = _activation("TransformerEncoderLayer", activation)
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
        self.activation = act
        _init.to_device(self, device, "nn.TransformerEncoderLayer")

    def _sa(self, x: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        return _attend(self.self_attn, self.dropout1, x, x, mask, padding, is_causal)

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


def _copies(owner: str, what: str, layer: Any, num_layers: Any, norm: Any) -> ModuleList:
    """``num_layers`` deep copies of ``layer`` (a stack's layers), after checking the stack's
    arguments.

    Raises:
        TypeError: ``layer`` or ``norm`` (unless ``None``) is not a module; ``num_layers`` is
            not an integer.
        ValueError: a negative ``num_layers``.
    """
    kind = "Encoder" if "encoder" in what else "Decoder"
    if not isinstance(layer, Module):
        raise TypeError(
            f"{owner}: {what} must be a module (nn.Transformer{kind}Layer(...)), got "
            f"{type(layer).__name__}."
        )
    if norm is not None and not isinstance(norm, Module):
        raise TypeError(
            f"{owner}: norm must be a module (nn.LayerNorm(d_model)) or None, got "
            f"{type(norm).__name__}."
        )
    n = integer(num_layers, f"{owner}: num_layers")
    if n < 0:
        raise ValueError(f"{owner}: num_layers must be >= 0, got {n}.")
    return ModuleList(copy.deepcopy(layer) for _ in range(n))


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
        self.layers = _copies(
            "TransformerEncoder", "encoder_layer", encoder_layer, num_layers, norm
        )
        self.num_layers = len(self.layers)
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


class TransformerDecoderLayer(Module):
    """One decoder layer (Vaswani et al. 2017) with PyTorch's sub-module names, so a
    ``torch.nn.TransformerDecoderLayer`` state dict loads unchanged.

    Post-norm (default): ``x = norm1(x + sa(x)); x = norm2(x + mha(x, memory));
    x = norm3(x + ff(x))``; with ``norm_first``: ``x = x + sa(norm1(x)); x = x +
    mha(norm2(x), memory); x = x + ff(norm3(x))``, where ``sa`` is ``self_attn`` then
    ``dropout1``, ``mha`` is ``multihead_attn`` (queries from ``x``, keys and values from
    ``memory``) then ``dropout2``, and ``ff`` is ``linear2(dropout(act(linear1(x))))`` then
    ``dropout3``.

    Args:
        d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
        norm_first, bias, key, dtype, device: as :class:`TransformerEncoderLayer`.

    Raises:
        ValueError, TypeError: as :class:`TransformerEncoderLayer`.
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
        act = _activation("TransformerDecoderLayer", activation)
        keys = _init.keys(key, 8) if key is not None else [None] * 8
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, key=keys[0], dtype=dtype
        )
        self.multihead_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, key=keys[1], dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias, key=keys[2], dtype=dtype)
        self.dropout = Dropout(dropout, key=keys[3])
        self.linear2 = Linear(dim_feedforward, d_model, bias, key=keys[4], dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout, key=keys[5])
        self.dropout2 = Dropout(dropout, key=keys[6])
        self.dropout3 = Dropout(dropout, key=keys[7])
        self.activation = act
        _init.to_device(self, device, "nn.TransformerDecoderLayer")

    def _sa(self, x: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        return _attend(self.self_attn, self.dropout1, x, x, mask, padding, is_causal)

    def _mha(self, x: Tensor, memory: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        return _attend(self.multihead_attn, self.dropout2, x, memory, mask, padding, is_causal)

    def _ff(self, x: Tensor) -> Tensor:
        y: Tensor = self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))
        return y

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Decode ``tgt`` (``(N, T, E)`` with ``batch_first``, else ``(T, N, E)``) attending
        to ``memory`` (the encoder's output, ``(N, S, E)`` or ``(S, N, E)``).

        Args:
            tgt: the target sequence.
            memory: the encoded source sequence.
            tgt_mask: ``(T, T)`` (or ``(N * nhead, T, T)``) for the self-attention: boolean,
                ``True`` where attending is not allowed, or float, added to the scores.
            memory_mask: ``(T, S)`` for the attention over ``memory``, the same kinds.
            tgt_key_padding_mask: ``(N, T)``, ``True`` at padded target positions.
            memory_key_padding_mask: ``(N, S)``, ``True`` at padded source positions.
            tgt_is_causal: each target position attends only to itself and earlier ones
                (instead of, or with, a causal ``tgt_mask``).
            memory_is_causal: the same for the attention over ``memory`` (``T == S``).
        """
        x = as_input(tgt, "TransformerDecoderLayer")
        mem = as_input(memory, "TransformerDecoderLayer")
        causal, mem_causal = bool(tgt_is_causal), bool(memory_is_causal)
        if self.norm_first:
            x = x + self._sa(self.norm1(x), tgt_mask, tgt_key_padding_mask, causal)
            x = x + self._mha(self.norm2(x), mem, memory_mask, memory_key_padding_mask, mem_causal)
            return x + self._ff(self.norm3(x))
        x = self.norm1(x + self._sa(x, tgt_mask, tgt_key_padding_mask, causal))
        x = self.norm2(x + self._mha(x, mem, memory_mask, memory_key_padding_mask, mem_causal))
        y: Tensor = self.norm3(x + self._ff(x))
        return y


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of ``decoder_layer`` (``copy.deepcopy``, as PyTorch's),
    then ``norm`` if given; a ``torch.nn.TransformerDecoder`` state dict loads unchanged.

    Args:
        decoder_layer: the layer to copy (a :class:`TransformerDecoderLayer` or any module
            called as one); it is not itself registered.
        num_layers: how many copies, at least 0.
        norm: an optional module applied to the last layer's output.

    Raises:
        TypeError: ``decoder_layer`` or ``norm`` is not a module, or ``num_layers`` is not an
            integer.
        ValueError: a negative ``num_layers``.
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _copies(
            "TransformerDecoder", "decoder_layer", decoder_layer, num_layers, norm
        )
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Decode ``tgt`` through every layer (each attending to ``memory``), then ``norm``;
        the arguments are passed to every layer (:meth:`TransformerDecoderLayer.forward`;
        ``tgt_is_causal`` ``None``, PyTorch's default, is ``False``)."""
        x = as_input(tgt, "TransformerDecoder")
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal),
                memory_is_causal=bool(memory_is_causal),
            )
        if self.norm is not None:
            x = self.norm(x)
        return x


class Transformer(Module):
    """The encoder-decoder transformer (Vaswani et al. 2017) as PyTorch's ``nn.Transformer``:
    ``encoder`` (a :class:`TransformerEncoder` of ``num_encoder_layers`` layers and a final
    ``LayerNorm``) and ``decoder`` (likewise); every parameter of two or more dimensions is
    re-drawn with Xavier's uniform initialisation, as PyTorch's. Its state dict loads
    unchanged. There is no embedding or output projection: add them around it.

    Args:
        d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
        norm_first, bias, dtype, device: as :class:`TransformerEncoderLayer`, for both stacks.
        num_encoder_layers, num_decoder_layers: the stacks' depths.
        custom_encoder, custom_decoder: modules used instead of the built stacks; their
            parameters of two or more dimensions are re-drawn too, as PyTorch's.
        key: an int seed or a key for every parameter and every dropout layer's masks (each
            layer its own); ``None`` draws from the process random state.

    Raises:
        TypeError: ``custom_encoder`` or ``custom_decoder`` is not a module.
        ValueError, TypeError: as the layers'; at call time, ``src`` and ``tgt`` of other
            batch sizes or widths other than ``d_model`` (``ShapeError``).
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
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
        for name, custom in (
            ("custom_encoder", custom_encoder),
            ("custom_decoder", custom_decoder),
        ):
            if custom is not None and not isinstance(custom, Module):
                raise TypeError(
                    f"Transformer: {name} must be a module or None (called as "
                    f"nn.Transformer{name[7:].capitalize()} is), got {type(custom).__name__}."
                )
        k_enc, k_dec, k_init = _init.keys(key, 3) if key is not None else [None] * 3
        options: dict[str, Any] = dict(
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            dtype=dtype,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            encoder_layer = TransformerEncoderLayer(d_model, nhead, key=k_enc, **options)
            norm = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(encoder_layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            decoder_layer = TransformerDecoderLayer(d_model, nhead, key=k_dec, **options)
            norm = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(decoder_layer, num_decoder_layers, norm)
        # PyTorch's _reset_parameters: every parameter of self, custom stacks' included.
        weights = [p for p in self.parameters() if p.ndim > 1]
        drops = [m for m in self.modules() if isinstance(m, Dropout) and m._key is not None]
        keys = _init.keys(k_init, len(weights) + len(drops)) if k_init is not None else []
        for i, p in enumerate(weights):
            init.xavier_uniform_(p, key=keys[i] if keys else None)
        for m, k in zip(drops, keys[len(weights) :], strict=True):
            m._key = k  # each copied layer its own dropout masks, not its template's
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        _init.to_device(self, device, "nn.Transformer")

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Any = None,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        src_key_padding_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """Encode ``src`` and decode ``tgt`` attending to it: ``(N, T, E)`` with
        ``batch_first`` (else ``(T, N, E)``), or unbatched ``(T, E)``.

        Args:
            src: ``(N, S, E)`` / ``(S, N, E)`` / ``(S, E)``.
            tgt: ``(N, T, E)`` / ``(T, N, E)`` / ``(T, E)``.
            src_mask, src_key_padding_mask, src_is_causal: the encoder's (its ``mask``,
                ``src_key_padding_mask`` and ``is_causal``).
            tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
            tgt_is_causal, memory_is_causal: the decoder's (a causal ``tgt_mask`` from
                :meth:`generate_square_subsequent_mask` for training a language model).

        Raises:
            ShapeError: ``src`` and ``tgt`` of other batch sizes, or a last axis other than
                ``d_model``.
        """
        s = as_input(src, "Transformer")
        t = as_input(tgt, "Transformer")
        batch = 0 if self.batch_first else 1
        if s.ndim == 3 and (t.ndim != 3 or s.shape[batch] != t.shape[batch]):
            raise ShapeError(
                f"Transformer: the batch sizes of src {s.shape} and tgt {t.shape} must be "
                f"equal (axis {batch}{', batch_first' if self.batch_first else ''})."
            )
        if s.shape[-1] != self.d_model or t.shape[-1] != self.d_model:
            raise ShapeError(
                f"Transformer: src {s.shape} and tgt {t.shape} must both end in d_model = "
                f"{self.d_model} features."
            )
        memory = self.encoder(
            s, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        out: Tensor = self.decoder(
            t,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )
        return out

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """The causal mask ``(sz, sz)``: ``-inf`` above the diagonal, 0 elsewhere (a float
        mask added to the scores), as PyTorch's; ``dtype`` float32 by default.

        Raises:
            TypeError: ``sz`` is not an integer, or ``dtype`` is not floating point.
            ValueError: a negative ``sz``.
        """
        n = integer(sz, "generate_square_subsequent_mask: sz")
        if n < 0:
            raise ValueError(f"generate_square_subsequent_mask: sz must be >= 0, got {n}.")
        dtype = jnp.float32 if dtype is None else dtype
        check_float(dtype, "generate_square_subsequent_mask")  # -inf: PyTorch's raises too
        full = creation.full((n, n), float("-inf"), dtype=dtype, device=device)
        return ops.triu(full, 1)
