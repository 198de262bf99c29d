"""Random ops on tensors: dropout, and channel dropout (``dropout1d``/``2d``/``3d``: one draw
per channel), their masks drawn from a key or from the process random state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from tapegrad._args import fraction, numpy_keywords
from tapegrad._dtypes import check_float_values
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import as_operand, defop, operand_shape
from tapegrad.ops._window import layout
from tapegrad.random import key_of

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d"]


def _odds(p: float) -> tuple[Any, Any]:
    """``1 - p`` and ``1 / (1 - p)``, computed in Python floats as before, as kernel
    arguments (cached constants): a new probability compiles nothing (issue 17 item 4)."""
    return as_operand(1.0 - p, "dropout"), as_operand(1.0 / (1.0 - p), "dropout")


@kernel
def _dropout_scale(key: jax.Array, x: jax.Array, keep: Any, scale: Any) -> jax.Array:
    """The factor each element is multiplied by: 0 with probability ``1 - keep``, else
    ``scale`` (``1 / keep``). The mask is drawn in float32 whatever ``jax_enable_x64`` says
    (``keep`` is a float64 there), so one key gives one mask in both modes, as ``tg.rand``."""
    kept = jax.random.bernoulli(key, jnp.asarray(keep, jnp.float32), x.shape)
    return jnp.where(kept, jnp.asarray(scale, x.dtype), jnp.zeros((), x.dtype))


@kernel
def _dropout_apply(x: jax.Array, key: jax.Array, keep: Any, scale: Any) -> jax.Array:
    y: jax.Array = x * _dropout_scale(key, x, keep, scale)
    return y


@defop(name="dropout")
def _dropout(x: jax.Array, key: jax.Array, *, p: float) -> tuple[jax.Array, tuple[jax.Array]]:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; the mask
    comes from ``key`` (an input that never requires grad). Only the key is kept: the VJP
    draws the same mask again (8 bytes saved instead of a mask of x's size)."""
    return _dropout_apply(x, key, *_odds(p)), (key,)


@kernel
def _dropout_grad(key: jax.Array, g: jax.Array, keep: Any, scale: Any) -> jax.Array:
    gx: jax.Array = g * _dropout_scale(key, g, keep, scale)
    return gx


@_dropout.defvjp
def _dropout_vjp(
    res: tuple[jax.Array], g: jax.Array, needs: tuple[bool, ...], *, p: float
) -> tuple[jax.Array, None]:
    """The op is x * scale with scale fixed by the key: gx = g * scale (the same mask)."""
    (key,) = res
    return (_dropout_grad(key, g, *_odds(p)), None)


@numpy_keywords
def dropout(x: Any, p: float = 0.5, *, training: bool = True, key: Any = None) -> Tensor:
    """Inverted dropout, PyTorch's ``F.dropout``: in training, each element is zeroed with
    probability ``p`` and the others are scaled by ``1 / (1 - p)``; otherwise ``x`` itself is
    returned (as when ``p == 0``).

    Args:
        x: a float tensor (any tensor when dropout is the identity, as in PyTorch).
        p: the probability of zeroing an element, in ``[0, 1]`` (``p == 1`` gives zeros).
        training: ``False`` makes dropout the identity (evaluation).
        key: an int seed or a ``jax.random`` key for the mask; ``None`` draws a fresh key from
            the process random state (``tg.manual_seed``), so a seeded program is reproducible.

    Returns:
        A tensor of ``x``'s shape and dtype (one ``dropout`` node when ``x`` requires grad).

    Raises:
        ValueError: ``p`` is outside ``[0, 1]`` (checked before any key is drawn).
        TypeError: ``p`` is not a number.
        TypeError: ``x`` holds booleans or integers while training with ``p > 0`` (the scale
            ``1 / (1 - p)`` is fractional; PyTorch refuses them for ``0 < p < 1``).
    """
    p = fraction(p, "dropout: p")
    if not training or p == 0.0:
        return x  # type: ignore[no-any-return]
    check_float_values("dropout", x)
    if p == 1.0:
        return x * 0.0  # type: ignore[no-any-return]
    return _dropout(x, key_of(key), p=float(p))


def _channel_dropout(name: str, x: Any, p: float, training: bool, key: Any, n: int) -> Tensor:
    """``x`` times a ``(N, C, 1, ...)`` (or ``(C, 1, ...)``) mask: ``dropout`` of ones, one
    element per channel, so the mask is drawn as ``tg.dropout``'s (same key, same odds) and
    the gradient, ``g * mask``, comes from the multiply."""
    p = fraction(p, f"{name}: p")
    shape = operand_shape(x, name)
    if len(shape) not in (n + 1, n + 2):
        raise ShapeError(f"{name}: input of shape {shape} must be {layout(n)}.")
    if not training or p == 0.0:
        return x  # type: ignore[no-any-return]
    check_float_values(name, x)
    if p == 1.0:
        return x * 0.0  # type: ignore[no-any-return]
    ones = jnp.ones(shape[:-n] + (1,) * n, x.dtype)
    mask = _dropout(ones, key_of(key), p=float(p))
    y: Tensor = mask * x
    return y


@numpy_keywords
def dropout1d(x: Any, p: float = 0.5, *, training: bool = True, key: Any = None) -> Tensor:
    """Channel dropout, PyTorch's ``F.dropout1d``: in training, each channel (every ``(n, c)``
    of ``(N, C, L)``, every ``c`` of ``(C, L)``) is zeroed whole with probability ``p`` and
    the others are scaled by ``1 / (1 - p)``; otherwise ``x`` itself is returned.

    Args:
        x: (N, C, L) or (C, L), floating point while training with ``p > 0``.
        p: the probability of zeroing a channel, in ``[0, 1]`` (``p == 1`` gives zeros).
        training: ``False`` makes it the identity (evaluation).
        key: an int seed or a ``jax.random`` key for the mask; ``None`` draws a fresh key from
            the process random state (``tg.manual_seed``), as ``tg.dropout``.

    Returns:
        A tensor of ``x``'s shape and dtype; its gradient is ``g`` times the same mask.

    Raises:
        ShapeError: ``x`` is not 2- or 3-D (also in evaluation, as PyTorch).
        ValueError: ``p`` is outside ``[0, 1]``.
        TypeError: ``p`` is not a number, or ``x`` holds booleans or integers while training
            with ``p > 0``.
    """
    return _channel_dropout("dropout1d", x, p, training, key, 1)


@numpy_keywords
def dropout2d(x: Any, p: float = 0.5, *, training: bool = True, key: Any = None) -> Tensor:
    """Channel dropout, PyTorch's ``F.dropout2d``: in training, each channel (every ``(n, c)``
    of ``(N, C, H, W)``, every ``c`` of ``(C, H, W)``) is zeroed whole with probability ``p``
    and the others are scaled by ``1 / (1 - p)``; otherwise ``x`` itself is returned.

    A 3-D input is one unbatched image ``(C, H, W)``, the meaning PyTorch's warning announces;
    PyTorch 2.x still draws one decision per ``(x.shape[0], x.shape[1])`` for it (as
    ``(N, C, L)``): for that, call ``tg.dropout1d``. Other inputs (PyTorch warns) raise.

    Args:
        x: (N, C, H, W) or (C, H, W), floating point while training with ``p > 0``.
        p, training, key: as ``dropout1d``.

    Returns:
        A tensor of ``x``'s shape and dtype; its gradient is ``g`` times the same mask.

    Raises:
        ShapeError: ``x`` is not 3- or 4-D (also in evaluation).
        ValueError: ``p`` is outside ``[0, 1]``.
        TypeError: ``p`` is not a number, or ``x`` holds booleans or integers while training
            with ``p > 0``.
    """
    return _channel_dropout("dropout2d", x, p, training, key, 2)


@numpy_keywords
def dropout3d(x: Any, p: float = 0.5, *, training: bool = True, key: Any = None) -> Tensor:
    """Channel dropout, PyTorch's ``F.dropout3d``: in training, each channel (every ``(n, c)``
    of ``(N, C, D, H, W)``, every ``c`` of ``(C, D, H, W)``) is zeroed whole with probability
    ``p`` and the others are scaled by ``1 / (1 - p)``; otherwise ``x`` itself is returned.

    Args:
        x: (N, C, D, H, W) or (C, D, H, W), floating point while training with ``p > 0``.
        p, training, key: as ``dropout1d``.

    Returns:
        A tensor of ``x``'s shape and dtype; its gradient is ``g`` times the same mask.

    Raises:
        ShapeError: ``x`` is not 4- or 5-D (also in evaluation; PyTorch warns and goes on).
        ValueError: ``p`` is outside ``[0, 1]``.
        TypeError: ``p`` is not a number, or ``x`` holds booleans or integers while training
            with ``p > 0``.
    """
    return _channel_dropout("dropout3d", x, p, training, key, 3)
