"""Convolution over 1, 2 or 3 spatial axes in PyTorch's layout (NCHW inputs, OIHW weights)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from tapegrad._args import integer, torch_keywords
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop, operand_shape, refuse_torch
from tapegrad.ops._window import Ints, Pairs, check_window, spatial

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["conv", "conv1d", "conv2d", "conv3d"]


_LAYOUTS = {
    1: ("NCH", "OIH", "NCH"),
    2: ("NCHW", "OIHW", "NCHW"),
    3: ("NCDHW", "OIDHW", "NCDHW"),
}


def _padding(padding: Any, kernel: Ints, dilation: Ints, stride: Ints) -> Pairs:
    """PyTorch's padding forms as (low, high) pairs per spatial axis."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise ValueError(f"conv: padding={padding!r}; use 'same', 'valid', ints or pairs.")
        if any(s != 1 for s in stride):
            raise ValueError("conv: padding='same' needs stride 1 (as in PyTorch).")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)  # the extra one goes after
    entries = padding if isinstance(padding, (tuple, list, np.ndarray)) else ()
    if not any(np.ndim(p) for p in entries):  # not (before, after) pairs
        forms = ", one (before, after) pair of such ints per axis, 'same' or 'valid'"
        return tuple((p, p) for p in spatial(padding, n, "conv", "padding", 0, forms))
    message = (
        f"conv: padding={padding!r} must give one (before, after) pair of ints >= 0 per "
        f"spatial axis ({n})"
    )
    if len(entries) != n or any(np.ndim(p) != 1 or len(p) != 2 for p in entries):
        raise ValueError(f"{message}.")
    try:
        pairs = tuple((integer(lo, "padding"), integer(hi, "padding")) for lo, hi in entries)
    except TypeError:
        raise TypeError(f"{message}; floats and booleans are not taken for ints.") from None
    if any(min(p) < 0 for p in pairs):
        raise ValueError(f"{message}.")
    return pairs


@partial(kernel, static_argnames=("stride", "pads", "dilation", "groups"))
def _conv_fn(
    x: jax.Array,
    w: jax.Array,
    b: jax.Array,
    *,
    stride: Ints,
    pads: Pairs,
    dilation: Ints,
    groups: int,
) -> jax.Array:
    """The jnp forward: ``lax.conv_general_dilated`` plus the bias per output channel."""
    n = w.ndim - 2
    y = jax.lax.conv_general_dilated(
        x,
        w,
        window_strides=stride,
        padding=pads,
        rhs_dilation=dilation,
        feature_group_count=groups,
        dimension_numbers=_LAYOUTS[n],
    )
    return y + jax.numpy.reshape(b, (-1,) + (1,) * n) if jax.numpy.ndim(b) else y + b


@defop(name="conv")
def _conv(
    x: jax.Array,
    w: jax.Array,
    b: jax.Array,
    *,
    stride: Ints,
    pads: Pairs,
    dilation: Ints,
    groups: int,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    """Cross-correlation of ``x`` (N, C, *S) with ``w`` (O, C / groups, *K), plus ``b`` (O,)."""
    y = _conv_fn(x, w, b, stride=stride, pads=pads, dilation=dilation, groups=groups)
    return y, (x, w, b)


_conv.defvjp(derived_vjp(_conv_fn))


_CONV_ORDER = "F.conv{n}d take{s} stride, padding, dilation and groups after bias"


@torch_keywords(order=_CONV_ORDER.format(n="1d/2d/3", s=""))
def conv(
    x: Any,
    w: Any,
    bias: Any = None,
    *,
    stride: int | Ints = 1,
    padding: int | Ints | Pairs | str = 0,
    dilation: int | Ints = 1,
    groups: int = 1,
) -> Tensor:
    """N-d convolution (cross-correlation, as every deep-learning library) in PyTorch's layout.

    Args:
        x: input of shape (N, C, *S) (or (C, *S), unbatched), with 1, 2 or 3 spatial axes S.
        w: weight of shape (O, C / groups, *K), PyTorch's OIHW layout.
        bias: optional (O,), added to every output position (fused into the same node).
        stride: an int or one int per spatial axis.
        padding: zeros on both sides: an int, one int per spatial axis, one (before, after)
            pair per axis, ``"valid"`` (none) or ``"same"`` (output size = input size; stride
            1; an odd total puts the extra element after, as PyTorch).
        dilation: spacing between kernel elements, an int or one per spatial axis.
        groups: split the channels into this many independent groups.

    Returns:
        (N, O, *S') with ``S' = (S + lo + hi - dilation (K - 1) - 1) // stride + 1``.

    The VJP is JAX's derivative of ``lax.conv_general_dilated`` (compiled and cached per shape,
    dtype and parameters; docs/design.md "New ops"); the node keeps x, w and b.

    Raises:
        ShapeError: shapes that do not fit: ``x`` and ``w`` ranks, input channels other than
            ``w.shape[1] * groups``, ``O`` not divisible by ``groups``, a bias that is not (O,),
            or a (dilated) kernel larger than the padded input. Checked before JAX runs.
        ValueError: malformed stride, padding, dilation or groups.
        TypeError: ``x`` and ``w`` of different dtypes (an integer image, say); a stride,
            padding or dilation that is not an int, ints, pairs of ints or a padding string
            (a float, say).
        OperandTypeError: (a ``TypeError``) a PyTorch tensor as ``x``, ``w`` or ``bias``.
    """
    for t in (x, w, bias):
        refuse_torch(t, "conv")  # before reading its shape and dtype, which are PyTorch's
    w_shape = operand_shape(w, "conv")
    x_shape = operand_shape(x, "conv")
    n = len(w_shape) - 2
    if n not in _LAYOUTS:
        raise ShapeError(
            f"conv: weight of shape {w_shape} must be (out, in / groups, *kernel) with 1, 2 or 3 "
            "kernel axes."
        )
    if len(x_shape) == n + 1:  # unbatched
        return conv(
            x[None], w, bias, stride=stride, padding=padding, dilation=dilation, groups=groups
        )[0]
    if len(x_shape) != n + 2:
        raise ShapeError(
            f"conv: input of shape {x_shape} must be (N, C, *spatial) with {n} spatial axes to "
            f"match the weight {w_shape}."
        )
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"conv: groups={groups!r} must be a positive int.")
    if x.dtype != w.dtype:
        raise TypeError(
            f"conv: the input's dtype {x.dtype} differs from the weight's {w.dtype}; cast the "
            f"input first (x.astype({str(w.dtype)!r})), as PyTorch also requires."
        )
    if x_shape[1] != w_shape[1] * groups or w_shape[0] % groups:
        raise ShapeError(
            f"conv: input {x_shape} has {x_shape[1]} channels, but the weight {w_shape} with "
            f"groups={groups} expects {w_shape[1] * groups} (and {w_shape[0]} output channels "
            "divisible by groups); check the layer's in_channels."
        )
    if bias is not None and tuple(bias.shape) != (w_shape[0],):
        raise ShapeError(
            f"conv: bias of shape {tuple(bias.shape)} must be ({w_shape[0]},), one per output "
            "channel."
        )
    strides = spatial(stride, n, "conv", "stride")
    dilations = spatial(dilation, n, "conv", "dilation")
    pads = _padding(padding, w_shape[2:], dilations, strides)
    check_window("conv", x_shape, w_shape[2:], dilations, pads, "kernel")
    return _conv(
        x,
        w,
        0.0 if bias is None else bias,
        stride=strides,
        pads=pads,
        dilation=dilations,
        groups=int(groups),
    )


def _fixed_rank(n: int) -> Any:
    def convnd(x: Any, w: Any, bias: Any = None, **params: Any) -> Tensor:
        if len(tuple(w.shape)) != n + 2:
            raise ShapeError(
                f"conv{n}d: weight of shape {tuple(w.shape)} must have {n + 2} axes "
                f"(out, in / groups, {n} kernel axes)."
            )
        return conv(x, w, bias, **params)

    convnd.__name__ = convnd.__qualname__ = f"conv{n}d"
    convnd.__doc__ = (
        f"``conv`` with {n} spatial axes (PyTorch's ``F.conv{n}d``): input (N, C, *{n} axes) "
        f"or unbatched, weight (O, C / groups, *{n} axes), optional bias (O,); keywords "
        "``stride``, ``padding``, ``dilation``, ``groups`` as ``conv``.\n\n"
        "Raises:\n    ShapeError: the weight does not have "
        f"{n + 2} axes; otherwise as ``conv``.\n"
    )
    return torch_keywords(order=_CONV_ORDER.format(n=n, s="s"))(convnd)


conv1d = _fixed_rank(1)
conv2d = _fixed_rank(2)
conv3d = _fixed_rank(3)
