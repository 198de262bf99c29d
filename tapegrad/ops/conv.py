"""Convolution over 1, 2 or 3 spatial axes in PyTorch's layout (NCHW inputs, OIHW weights), and
its transpose (IOHW weights)."""

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

__all__ = [
    "conv",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
]


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


def _operands(
    name: str, x: Any, w: Any, bias: Any, layout: str
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``x``'s and ``w``'s shapes and the number of spatial axes (from ``w``), PyTorch tensors
    refused first; ``layout`` names ``w``'s leading axes for the message."""
    for t in (x, w, bias):
        refuse_torch(t, name)  # before reading its shape and dtype, which are PyTorch's
    w_shape = operand_shape(w, name)
    x_shape = operand_shape(x, name)
    n = len(w_shape) - 2
    if n not in _LAYOUTS:
        raise ShapeError(
            f"{name}: weight of shape {w_shape} must be ({layout}, *kernel) with 1, 2 or 3 "
            "kernel axes."
        )
    return x_shape, w_shape, n


def _check_operands(
    name: str,
    x: Any,
    w: Any,
    bias: Any,
    groups: Any,
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    *,
    transposed: bool,
) -> None:
    """The checks shared by ``conv`` and ``conv_transpose`` of a batched ``x``: its rank,
    ``groups``, the dtypes, the channels (``w`` is (out, in / groups, *K), or (in, out / groups,
    *K) when ``transposed``) and the bias (one per output channel)."""
    n = len(w_shape) - 2
    if len(x_shape) != n + 2:
        raise ShapeError(
            f"{name}: input of shape {x_shape} must be (N, C, *spatial) with {n} spatial axes "
            f"to match the weight {w_shape}."
        )
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{name}: groups={groups!r} must be a positive int.")
    if x.dtype != w.dtype:
        raise TypeError(
            f"{name}: the input's dtype {x.dtype} differs from the weight's {w.dtype}; cast the "
            f"input first (x.astype({str(w.dtype)!r})), as PyTorch also requires."
        )
    if transposed:
        c_in, out = w_shape[0], w_shape[1] * groups
        if x_shape[1] != c_in or c_in % groups:
            raise ShapeError(
                f"{name}: input {x_shape} has {x_shape[1]} channels, but the weight {w_shape} "
                f"(in, out / groups, *kernel) expects {c_in} (divisible by groups={groups}); "
                "check the layer's in_channels."
            )
    else:
        out = w_shape[0]
        if x_shape[1] != w_shape[1] * groups or w_shape[0] % groups:
            raise ShapeError(
                f"{name}: input {x_shape} has {x_shape[1]} channels, but the weight {w_shape} "
                f"with groups={groups} expects {w_shape[1] * groups} (and {w_shape[0]} output "
                "channels divisible by groups); check the layer's in_channels."
            )
    if bias is not None and tuple(bias.shape) != (out,):
        raise ShapeError(
            f"{name}: bias of shape {tuple(bias.shape)} must be ({out},), one per output channel."
        )


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
    x_shape, w_shape, n = _operands("conv", x, w, bias, "out, in / groups")
    if len(x_shape) == n + 1:  # unbatched
        return conv(
            x[None], w, bias, stride=stride, padding=padding, dilation=dilation, groups=groups
        )[0]
    _check_operands("conv", x, w, bias, groups, x_shape, w_shape, transposed=False)
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


@partial(kernel, static_argnames=("stride", "pads", "dilation", "groups"))
def _conv_transpose_fn(
    x: jax.Array,
    w: jax.Array,
    b: jax.Array,
    *,
    stride: Ints,
    pads: Pairs,
    dilation: Ints,
    groups: int,
) -> jax.Array:
    """The jnp forward: the input dilated by ``stride`` (``lhs_dilation``), correlated with the
    flipped kernel whose in/out axes are swapped within each group, plus the bias."""
    n = w.ndim - 2
    c_in, c_out_g, *k = w.shape
    w = jax.numpy.reshape(w, (groups, c_in // groups, c_out_g, *k))
    w = jax.numpy.reshape(jax.numpy.swapaxes(w, 1, 2), (groups * c_out_g, c_in // groups, *k))
    y = jax.lax.conv_general_dilated(
        x,
        jax.numpy.flip(w, axis=tuple(range(2, n + 2))),
        window_strides=(1,) * n,
        padding=pads,
        lhs_dilation=stride,
        rhs_dilation=dilation,
        feature_group_count=groups,
        dimension_numbers=_LAYOUTS[n],
    )
    return y + jax.numpy.reshape(b, (-1,) + (1,) * n) if jax.numpy.ndim(b) else y + b


@defop(name="conv_transpose")
def _conv_transpose(
    x: jax.Array,
    w: jax.Array,
    b: jax.Array,
    *,
    stride: Ints,
    pads: Pairs,
    dilation: Ints,
    groups: int,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    """Transposed convolution of ``x`` (N, C, *S) with ``w`` (C, O / groups, *K), plus ``b``
    (O,); ``pads`` are those of the equivalent convolution of the stride-dilated input
    (``dilation (K - 1) - padding`` before, that plus ``output_padding`` after)."""
    y = _conv_transpose_fn(x, w, b, stride=stride, pads=pads, dilation=dilation, groups=groups)
    return y, (x, w, b)


_conv_transpose.defvjp(derived_vjp(_conv_transpose_fn))


_CONV_TRANSPOSE_ORDER = (
    "F.conv_transpose{n}d take{s} stride, padding, output_padding, groups and dilation (in this "
    "order) after bias"
)


@torch_keywords(order=_CONV_TRANSPOSE_ORDER.format(n="1d/2d/3", s=""))
def conv_transpose(
    x: Any,
    w: Any,
    bias: Any = None,
    *,
    stride: int | Ints = 1,
    padding: int | Ints = 0,
    output_padding: int | Ints = 0,
    groups: int = 1,
    dilation: int | Ints = 1,
) -> Tensor:
    """N-d transposed convolution (the gradient of ``conv`` with respect to its input, as
    PyTorch's ``F.conv_transpose1d/2d/3d``), in PyTorch's layout.

    Args:
        x: input of shape (N, C, *S) (or (C, *S), unbatched), with 1, 2 or 3 spatial axes S.
        w: weight of shape (C, O / groups, *K), PyTorch's layout for transposed convolutions
            (input channels first).
        bias: optional (O,), added to every output position (fused into the same node).
        stride: an int or one int per spatial axis.
        padding: ``dilation (K - 1) - padding`` zeros around the stride-dilated input: an int
            or one int per spatial axis, each ``>= 0`` (PyTorch takes no strings or pairs here).
        output_padding: extra size added to one side (the end) of each output axis: an int or
            one per axis, each smaller than that axis' stride or its dilation (PyTorch's rule).
        groups: split the channels into this many independent groups.
        dilation: spacing between kernel elements, an int or one per spatial axis.

    Returns:
        (N, O, *S') with ``S' = (S - 1) stride - 2 padding + dilation (K - 1) + output_padding
        + 1``.

    The VJP is JAX's derivative of the ``lax.conv_general_dilated`` forward (compiled and cached
    per shape, dtype and parameters; docs/design.md "New ops"); the node keeps x, w and b.

    Raises:
        ShapeError: shapes that do not fit: ``x`` and ``w`` ranks, input channels other than
            ``w.shape[0]`` or not divisible by ``groups``, a bias that is not (O,), an empty
            spatial axis, or a negative output size (an empty output axis, size 0, is
            returned as PyTorch does for stride 1). Checked before JAX runs.
        ValueError: malformed stride, padding, output_padding, dilation or groups; an
            ``output_padding`` not smaller than the stride or the dilation.
        TypeError: ``x`` and ``w`` of different dtypes; a stride, padding, output_padding or
            dilation that is not an int or ints (a float or a string, say).
        OperandTypeError: (a ``TypeError``) a PyTorch tensor as ``x``, ``w`` or ``bias``.
    """
    name = "conv_transpose"
    x_shape, w_shape, n = _operands(name, x, w, bias, "in, out / groups")
    if len(x_shape) == n + 1:  # unbatched
        return conv_transpose(
            x[None],
            w,
            bias,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
            groups=groups,
            dilation=dilation,
        )[0]
    _check_operands(name, x, w, bias, groups, x_shape, w_shape, transposed=True)
    if isinstance(padding, str):
        raise TypeError(
            f"{name}: padding={padding!r}: a transposed convolution takes its padding as ints "
            "(as PyTorch's); give the zeros cut from each side of the output."
        )
    strides = spatial(stride, n, name, "stride")
    paddings = spatial(padding, n, name, "padding", 0)
    extras = spatial(output_padding, n, name, "output_padding", 0)
    dilations = spatial(dilation, n, name, "dilation")
    if any(e >= s and e >= d for e, s, d in zip(extras, strides, dilations, strict=True)):
        raise ValueError(
            f"{name}: output_padding={extras} must be smaller than either the stride {strides} "
            f"or the dilation {dilations} on each axis (as in PyTorch); to reach a given output "
            "size, pick output_padding = size - (the size with output_padding 0)."
        )
    kernel_size = w_shape[2:]
    sizes = tuple(
        (s - 1) * st - 2 * p + d * (k - 1) + e + 1
        for s, st, p, d, k, e in zip(
            x_shape[2:], strides, paddings, dilations, kernel_size, extras, strict=True
        )
    )
    if 0 in x_shape[2:] or min(sizes) < 0:
        raise ShapeError(
            f"{name}: input {x_shape} with kernel {kernel_size}, stride {strides}, padding "
            f"{paddings}, output_padding {extras} and dilation {dilations} gives output size "
            f"{sizes}; an input size must be at least 1 and an output size at least 0 (use "
            "less padding or a larger input)."
        )
    pads = tuple(
        (d * (k - 1) - p, d * (k - 1) - p + e)
        for p, d, k, e in zip(paddings, dilations, kernel_size, extras, strict=True)
    )
    return _conv_transpose(
        x,
        w,
        0.0 if bias is None else bias,
        stride=strides,
        pads=pads,
        dilation=dilations,
        groups=int(groups),
    )


def _fixed_rank(n: int, transposed: bool) -> Any:
    name, base, weight = (
        ("conv_transpose", conv_transpose, "in, out / groups")
        if transposed
        else ("conv", conv, "out, in / groups")
    )

    def convnd(x: Any, w: Any, bias: Any = None, **params: Any) -> Tensor:
        if len(tuple(w.shape)) != n + 2:
            raise ShapeError(
                f"{name}{n}d: weight of shape {tuple(w.shape)} must have {n + 2} axes "
                f"({weight}, {n} kernel axes)."
            )
        return base(x, w, bias, **params)

    convnd.__name__ = convnd.__qualname__ = f"{name}{n}d"
    keywords = (
        "``stride``, ``padding``, ``output_padding``, ``groups``, ``dilation``"
        if transposed
        else "``stride``, ``padding``, ``dilation``, ``groups``"
    )
    shape = "(C, O / groups" if transposed else "(O, C / groups"
    convnd.__doc__ = (
        f"``{name}`` with {n} spatial axes (PyTorch's ``F.{name}{n}d``): input (N, C, *{n} "
        f"axes) or unbatched, weight {shape}, *{n} axes), optional bias (O,); keywords "
        f"{keywords} as ``{name}``.\n\n"
        "Raises:\n    ShapeError: the weight does not have "
        f"{n + 2} axes; otherwise as ``{name}``.\n"
    )
    order = _CONV_TRANSPOSE_ORDER if transposed else _CONV_ORDER
    return torch_keywords(order=order.format(n=n, s="s"))(convnd)


conv1d = _fixed_rank(1, transposed=False)
conv2d = _fixed_rank(2, transposed=False)
conv3d = _fixed_rank(3, transposed=False)
conv_transpose1d = _fixed_rank(1, transposed=True)
conv_transpose2d = _fixed_rank(2, transposed=True)
conv_transpose3d = _fixed_rank(3, transposed=True)
