"""Shape manipulation: reshape, transpose (and its PyTorch forms permute, swapaxes), squeeze,
expand_dims, concatenate, stack, pad, flatten, split, flip, roll, and the triangles tril and
triu."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import axis as axis_arg
from tapegrad._args import integer, numpy_keywords, shape_keywords, torch_keywords
from tapegrad._arrays import axis_check, broadcast_axes, sum_to
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = [
    "reshape",
    "transpose",
    "permute",
    "swapaxes",
    "squeeze",
    "expand_dims",
    "concatenate",
    "stack",
    "pad",
    "flatten",
    "split",
    "flip",
    "roll",
    "tril",
    "triu",
    "tile",
    "broadcast_to",
]

Shape = tuple[int, ...]


def _reshape_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    (x,) = arrays
    shape = params["shape"]
    size = math.prod(np.shape(x))
    known = math.prod(s for s in shape if s != -1)
    if (
        list(shape).count(-1) > 1
        or any(s < -1 for s in shape)
        or (-1 in shape and (known == 0 or size % known))
        or (-1 not in shape and known != size)
    ):
        fix = (
            "-1 cannot be inferred beside a 0-length axis (NumPy and PyTorch refuse it too); "
            "give every size"
            if -1 in shape and known == 0
            else "the sizes must match (at most one -1)"
        )
        raise ShapeError(
            f"{name}: cannot reshape a tensor of shape {np.shape(x)} (size {size}) into "
            f"{shape}; {fix}."
        )


_jreshape = partial(kernel, static_argnames=("shape",))(jnp.reshape)
# compiled once per shape and static arguments: jnp's eager path costs several times a call
_jtranspose = partial(kernel, static_argnames=("axes",))(jnp.transpose)
_jsqueeze = partial(kernel, static_argnames=("axis",))(jnp.squeeze)
_jexpand_dims = partial(kernel, static_argnames=("axis",))(jnp.expand_dims)


@defop(check=_reshape_check)
def reshape(x: jax.Array, *, shape: Shape) -> tuple[jax.Array, tuple[Shape]]:
    """Reshape to ``shape`` (one entry may be -1).

    Raises:
        ShapeError: the sizes do not match, or -1 beside a 0 (ambiguous).
    """
    if -1 in shape and 0 in shape:  # jnp would divide by zero: name the shapes instead
        _reshape_check("reshape", [x], {"shape": shape})
    return _jreshape(x, shape=shape), (x.shape,)


@reshape.defvjp
def _reshape_vjp(res: tuple[Shape], g: jax.Array, *, shape: Shape) -> tuple[jax.Array]:
    """Reshape g back to the input shape."""
    (in_shape,) = res
    return (_jreshape(g, shape=in_shape),)


def _transpose_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    ndim = np.ndim(arrays[0])
    axes = params["axes"]
    if axes is not None and sorted(a % ndim if ndim else a for a in axes) != list(range(ndim)):
        raise ShapeError(
            f"{name}: axes {axes} are not a permutation of the {ndim} axes of the tensor."
        )


@defop(name="transpose", check=_transpose_check)
def _transpose(x: jax.Array, *, axes: Shape | None = None) -> tuple[jax.Array, tuple[()]]:
    """Permute the axes (``None``: reverse them)."""
    if axes is not None:
        _transpose_check("transpose", [x], {"axes": axes})
    return _jtranspose(x, axes=axes), ()


@_transpose.defvjp
def _transpose_vjp(res: tuple[()], g: jax.Array, *, axes: Shape | None = None) -> tuple[jax.Array]:
    """Apply the inverse permutation to g."""
    if axes is None:
        return (_jtranspose(g, axes=None),)
    inverse = tuple(int(i) for i in np.argsort([a % g.ndim for a in axes]))
    return (_jtranspose(g, axes=inverse),)


@defop
def squeeze(x: jax.Array, *, axis: int | Shape | None = None) -> tuple[jax.Array, tuple[Shape]]:
    """Remove axes of length one (``None``: all of them)."""
    if axis is not None:
        for a in (axis,) if isinstance(axis, int) else axis:
            if not -x.ndim <= a < x.ndim or x.shape[a] != 1:
                raise ShapeError(
                    f"squeeze: axis {a} of shape {x.shape} is not an axis of length one."
                )
    return _jsqueeze(x, axis=axis), (x.shape,)


@squeeze.defvjp
def _squeeze_vjp(
    res: tuple[Shape], g: jax.Array, *, axis: int | Shape | None = None
) -> tuple[jax.Array]:
    """Reshape g back to the input shape."""
    (in_shape,) = res
    return (_jreshape(g, shape=in_shape),)


@defop(name="expand_dims")
def _expand_dims(x: jax.Array, *, axis: int | Shape) -> tuple[jax.Array, tuple[Shape]]:
    """Insert length-one axes at ``axis``."""
    axes = (axis,) if isinstance(axis, int) else axis
    out_ndim = x.ndim + len(axes)
    if any(not -out_ndim <= a < out_ndim for a in axes):
        raise ShapeError(
            f"expand_dims: axis {axis} is out of range for a result with {out_ndim} dimensions."
        )
    return _jexpand_dims(x, axis=axis), (x.shape,)


@_expand_dims.defvjp
def _expand_dims_vjp(res: tuple[Shape], g: jax.Array, *, axis: int | Shape) -> tuple[jax.Array]:
    """Reshape g back to the input shape."""
    (in_shape,) = res
    return (_jreshape(g, shape=in_shape),)


_jconcatenate = partial(kernel, static_argnames=("axis",))(jnp.concatenate)
_jstack = partial(kernel, static_argnames=("axis",))(jnp.stack)

_JOINED = 64
"""The most operands one compiled ``stack`` or ``concatenate`` call joins. XLA's compile time
grows faster than a program's operands (measured on a CPU: 0.05 s for 64, 1.8 s for 1,000,
8.7 s for 3,000: an RNN's outputs over 3,000 steps); more are joined in groups of this many
(one kernel for every full group), then the groups are concatenated."""
_PARTS = 4
"""The most cotangents one compiled VJP call of ``stack`` or ``concatenate`` returns. A
program's compile time grows with its outputs (~8 ms each on a CPU: 0.16 s for 16, 12 s for
1,000, 40 s for 3,000), and so does its call (~10 us each); beyond, each input's cotangent
is one call (~14 us) of a kernel compiled once per shape, its position a traced argument."""


def _joined(join: Any, xs: Sequence[jax.Array], axis: int) -> jax.Array:
    """``join(xs, axis=axis)`` (``_jstack`` or ``_jconcatenate``), in groups of ``_JOINED``."""
    if len(xs) <= _JOINED:
        out: jax.Array = join(xs, axis=axis)
        return out
    groups = [join(xs[i : i + _JOINED], axis=axis) for i in range(0, len(xs), _JOINED)]
    return _joined(_jconcatenate, groups, axis)  # stacked groups share the new axis


@partial(kernel, static_argnums=(2, 3, 4))
def _slice_at(g: jax.Array, start: Any, size: int, axis: int, keep: bool) -> jax.Array:
    """``size`` entries of ``g`` from ``start`` (traced) along ``axis``; ``keep`` false: one
    entry without its axis (``stack``'s part)."""
    if keep:
        part: jax.Array = jax.lax.dynamic_slice_in_dim(g, start, size, axis)
    else:
        part = jax.lax.dynamic_index_in_dim(g, start, axis, keepdims=False)
    return part


def _join_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    shapes = [tuple(np.shape(a)) for a in arrays]
    raise ShapeError(
        f"{name}: cannot join tensors of shapes {shapes} along axis {params['axis']}; "
        + (
            "all shapes must match except along that axis."
            if name == "concatenate"
            else "all shapes must be equal."
        )
    )


@defop(name="concatenate", check=_join_check)
def _concatenate(*xs: jax.Array, axis: int = 0) -> tuple[jax.Array, tuple[tuple[int, ...]]]:
    """Join tensors along an existing ``axis``."""
    if not xs:
        raise ValueError("concatenate needs at least one tensor.")
    y = _joined(_jconcatenate, xs, axis)
    return y, (tuple(int(x.shape[axis]) for x in xs),)


@_concatenate.defvjp
def _concatenate_vjp(
    res: tuple[tuple[int, ...]], g: jax.Array, needs: tuple[bool, ...], *, axis: int = 0
) -> tuple[jax.Array | None, ...]:
    """Split g back into the inputs' extents along ``axis``: one compiled call for up to
    ``_PARTS`` inputs, else one per input when they have at most ``_PARTS`` distinct extents
    (a kernel per extent: equal chunks compile once); inputs of many distinct extents
    (variable-length sequences) take one compiled call again, a kernel per list of extents
    (one per extent would compile more)."""
    (sizes,) = res
    if len(sizes) > _PARTS and len(set(sizes)) <= _PARTS:
        axis %= g.ndim
        starts = np.cumsum((0, *sizes[:-1])).tolist()
        return tuple(
            _slice_at(g, start, size, axis, True) if n else None
            for start, size, n in zip(starts, sizes, needs, strict=True)
        )
    parts: tuple[jax.Array | None, ...] = _concatenate_parts(g, tuple(sizes), needs, axis)
    return parts


@partial(kernel, static_argnums=(1, 2, 3))
def _concatenate_parts(
    g: jax.Array, sizes: tuple[int, ...], needs: tuple[bool, ...], axis: int
) -> tuple[jax.Array | None, ...]:
    cuts = np.cumsum(sizes)[:-1].tolist()
    parts = jnp.split(g, cuts, axis=axis)
    return tuple(p if n else None for p, n in zip(parts, needs, strict=True))


@defop(name="stack", check=_join_check)
def _stack(*xs: jax.Array, axis: int = 0) -> tuple[jax.Array, tuple[()]]:
    """Join equal-shaped tensors along a new ``axis``."""
    if not xs:
        raise ValueError("stack needs at least one tensor.")
    return _joined(_jstack, xs, axis), ()


@_stack.defvjp
def _stack_vjp(
    res: tuple[()], g: jax.Array, needs: tuple[bool, ...], *, axis: int = 0
) -> tuple[jax.Array | None, ...]:
    """Input i receives g taken at index i along ``axis`` (one compiled call for up to
    ``_PARTS`` inputs, else one per input)."""
    if len(needs) > _PARTS:
        axis %= g.ndim
        return tuple(_slice_at(g, i, 1, axis, False) if n else None for i, n in enumerate(needs))
    parts: tuple[jax.Array | None, ...] = _stack_parts(g, needs, axis)
    return parts


@partial(kernel, static_argnums=(1, 2))
def _stack_parts(g: jax.Array, needs: tuple[bool, ...], axis: int) -> tuple[jax.Array | None, ...]:
    return tuple(jnp.take(g, i, axis=axis) if n else None for i, n in enumerate(needs))


def _axes_arg(axes: tuple[Any, ...]) -> tuple[Any, ...]:
    """``f(x, 1, 0)`` and ``f(x, (1, 0))`` both give ``(1, 0)``."""
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        return tuple(axes[0])
    return axes


@shape_keywords
def transpose(x: Any, *axes: Any) -> Tensor:
    """Transpose, read as both NumPy and PyTorch users mean it.

    - ``transpose(x)``: reverse the axes (NumPy's ``x.T``).
    - ``transpose(x, a, b)`` with two integers: swap axes ``a`` and ``b`` (PyTorch's reading,
      on any number of dimensions; NumPy would read ``(0, 1)`` on a 2-D tensor as the
      identity permutation).
    - ``transpose(x, (p0, p1, ...))``, or three or more integers: a full permutation (NumPy's).

    Raises:
        ShapeError: the axes are out of range, or are not a permutation.
        TypeError: an axis is not an integer.
    """
    if len(axes) == 2 and not isinstance(axes[0], (tuple, list)):
        return swapaxes(x, *axes)
    axes = _axes_arg(axes)
    return _transpose(x, axes=axes or None)


@shape_keywords
def permute(x: Any, *axes: Any) -> Tensor:
    """Permute the axes: ``permute(x, 2, 0, 1)`` or ``permute(x, (2, 0, 1))`` (PyTorch's
    ``permute``; always a full permutation, NumPy's ``transpose(x, axes)``).

    Raises:
        ShapeError: the axes are not a permutation of the tensor's axes.
    """
    return _transpose(x, axes=_axes_arg(axes))


@numpy_keywords
def swapaxes(x: Any, axis1: int, axis2: int) -> Tensor:
    """Swap two axes (NumPy's ``swapaxes``, PyTorch's ``transpose(a, b)``).

    Raises:
        ShapeError: an axis is out of range.
        TypeError: an axis is not an integer.
    """
    ndim = int(np.ndim(x))
    a, b = integer(axis1, "swapaxes: axis1"), integer(axis2, "swapaxes: axis2")
    for v in (a, b):
        if not -ndim <= v < max(ndim, 1):
            raise ShapeError(
                f"swapaxes: axis {v} is out of range for a tensor with {ndim} dimensions."
            )
    perm = list(range(ndim))
    if ndim:
        perm[a], perm[b] = perm[b], perm[a]
    return _transpose(x, axes=tuple(perm))


@numpy_keywords
def expand_dims(x: Any, axis: int | Shape) -> Tensor:
    """Insert length-one axes at ``axis`` (NumPy's ``expand_dims``; PyTorch's ``unsqueeze``)."""
    return _expand_dims(x, axis=axis)


@numpy_keywords
def concatenate(ts: Sequence[Any], axis: int = 0) -> Tensor:
    """Join a sequence of tensors along an existing ``axis`` (NumPy's ``concatenate``; also
    ``tg.cat``, PyTorch's name)."""
    return _concatenate(*ts, axis=axis)


@numpy_keywords
def stack(ts: Sequence[Any], axis: int = 0) -> Tensor:
    """Join a sequence of equal-shaped tensors along a new ``axis`` (NumPy's ``stack``)."""
    return _stack(*ts, axis=axis)


Pairs = tuple[tuple[int, int], ...]


@partial(kernel, static_argnums=(1, 2))
def _jpad(x: jax.Array, pad_width: Pairs, value: float) -> jax.Array:
    return jnp.pad(x, pad_width, constant_values=value)


@defop(name="pad")
def _pad(x: jax.Array, *, pad_width: Pairs, value: float = 0) -> tuple[jax.Array, tuple[()]]:
    """Constant padding: ``pad_width[i] = (before, after)`` elements of ``value`` on axis i."""
    return _jpad(x, pad_width, value), ()


@_pad.defvjp
def _pad_vjp(
    res: tuple[()], g: jax.Array, *, pad_width: Pairs, value: float = 0
) -> tuple[jax.Array]:
    """The padding is constant: gx is g with the padded border cut off."""
    return (g[tuple(slice(b, g.shape[i] - a) for i, (b, a) in enumerate(pad_width))],)


_PAD_MODES = (
    "tg.pad pads with a constant only (value=, PyTorch's mode='constant'); for "
    "'reflect', 'replicate' or 'circular', build the borders from slices with "
    "tg.concatenate (x[..., 1:2] and x[..., -2:-1] for reflect on the last axis)."
)


@torch_keywords()
def pad(x: Any, pad_width: Any, mode: Any = "constant", value: float | None = None) -> Tensor:
    """Pad with a constant, NumPy's ``pad(x, pad_width, constant_values=value)``.

    Args:
        x: a tensor.
        pad_width: NumPy's forms: ``((before, after), ...)`` per axis, or one int for both
            sides of every axis; a flat ``(before, after)`` only for a 1-d tensor (NumPy
            pads every axis with it, PyTorch's ``F.pad`` the last one only: refused where
            they differ). PyTorch's flat list starting from the last axis is not taken.
        mode: ``"constant"``, the one mode supported, in NumPy's and PyTorch's third place
            (``tg.pad(x, w, "constant", 0.5)`` as ``F.pad(x, w, "constant", 0.5)``). A
            number here is the fill value (tapegrad's earlier ``pad(x, w, value)``).
        value: the fill value; ``None`` (PyTorch's default) is 0.

    Raises:
        ShapeError: ``pad_width`` does not fit the tensor's dimensions, or is ragged.
        TypeError: a width that is not an int; a mode other than ``"constant"`` (the message
            says how to build reflect, replicate or circular padding); a value that is not a
            number; a number in ``mode``'s place together with ``value``.
        ValueError: a negative width; a flat ``(before, after)`` pair for a tensor of two
            dimensions or more (the message gives both spellings).
    """
    if isinstance(mode, str):
        if mode != "constant":
            raise TypeError(f"pad: mode={mode!r} is not supported; {_PAD_MODES}")
    elif value is not None:
        raise TypeError(
            f"pad: got {mode!r} in mode's place and value={value!r}; pass the mode as a "
            'string ("constant") and the fill value as value=.'
        )
    else:
        mode, value = "constant", mode  # tapegrad's earlier pad(x, pad_width, value)
    value = 0 if value is None else value
    if isinstance(value, (str, bool)) or not isinstance(value, (int, float, np.number)):
        if not (hasattr(value, "shape") and np.size(value) == 1):  # a 0-d array is a number
            raise TypeError(f"pad: value must be a number, got {value!r}.")
    ndim = getattr(x, "ndim", None)
    ndim = np.ndim(x) if ndim is None else ndim
    try:
        given = np.asarray(pad_width)
    except ValueError:  # ragged: ((1,), (1, 2))
        given = np.asarray(None)
    if given.dtype.kind in "fc":
        raise TypeError(f"pad: widths must be ints, got {pad_width!r} (NumPy refuses floats).")
    if given.dtype.kind not in "iu" or given.ndim > 2:
        raise ShapeError(
            f"pad: pad_width {pad_width!r} is not ints in NumPy's forms; give one (before, "
            "after) pair of ints per axis, or one int for every side of every axis."
        )
    if given.ndim == 1 and given.size > 1 and ndim >= 2:
        flat = [int(w) for w in given]
        torch_form = "((0, 0), ..., (before, after))"
        if len(flat) % 2 == 0 and len(flat) <= 2 * ndim:  # PyTorch's: the last axis first
            pairs_ = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)][::-1]
            torch_form = repr(tuple([(0, 0)] * (ndim - len(pairs_)) + pairs_))
        raise ValueError(
            f"pad: pad_width {pad_width!r} is a flat list for a {ndim}-d tensor, which NumPy "
            "applies to every axis and PyTorch's F.pad to the last axes: give one (before, "
            f"after) pair per axis, first axis first (PyTorch's F.pad(x, {tuple(flat)}) is "
            f"tg.pad(x, {torch_form}) here), or one int for every side of every axis."
        )
    try:
        widths = np.broadcast_to(given, (ndim, 2))
    except ValueError:
        raise ShapeError(
            f"pad: pad_width {pad_width!r} does not fit a tensor with {ndim} dimensions; give "
            "one (before, after) pair per axis."
        ) from None
    if (widths < 0).any():
        raise ValueError(f"pad: negative widths in {pad_width!r}; widths must be >= 0.")
    pairs = tuple((int(b), int(a)) for b, a in widths)
    return _pad(x, pad_width=pairs, value=value)


@shape_keywords
def flatten(x: Any, start: int = 0, end: int = -1) -> Tensor:
    """Merge axes ``start`` to ``end`` (inclusive, negative counts from the end) into one, as
    PyTorch's ``flatten(start_dim, end_dim)``; a reshape node.

    Raises:
        ShapeError: ``start`` or ``end`` out of range, or ``start`` after ``end``.
        TypeError: ``start`` or ``end`` is not an integer; PyTorch's ``start_dim=``.
    """
    start, end = integer(start, "flatten: start"), integer(end, "flatten: end")
    shape = tuple(x.shape)
    ndim = max(len(shape), 1)
    if not (-ndim <= start < ndim and -ndim <= end < ndim) or start % ndim > end % ndim:
        raise ShapeError(
            f"flatten: start={start}, end={end} do not select a range of axes of a tensor of "
            f"shape {shape}."
        )
    if not shape:
        return reshape(x, shape=(1,))
    lo, hi = start % ndim, end % ndim
    return reshape(x, shape=(*shape[:lo], math.prod(shape[lo : hi + 1]), *shape[hi + 1 :]))


def split(x: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """NumPy's ``split``: ``n`` equal sections, or the parts between the given cut indices,
    along ``axis``; each part is a slice of ``x`` (a ``getitem`` node). (PyTorch's ``split``
    takes chunk sizes instead.)

    Raises:
        ValueError: ``n`` does not divide the axis.
        ShapeError: ``axis`` out of range.
    """
    from tapegrad._tensor import Tensor  # tensor.py imports the ops last

    t = x if isinstance(x, Tensor) else Tensor(x)
    shape = t.shape
    if not -len(shape) <= axis < len(shape):
        raise ShapeError(f"split: axis {axis} is out of range for a tensor of shape {shape}.")
    axis %= len(shape)
    n = shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(
                f"split: {k} sections do not divide axis {axis} of length {n} equally; give "
                "cut indices for unequal parts."
            )
        cuts = [n // k * i for i in range(1, k)]
    else:
        cuts = [int(i) for i in indices_or_sections]
    bounds = zip([0, *cuts], [*cuts, n], strict=True)
    lead = (slice(None),) * axis
    return [t[(*lead, slice(a, b))] for a, b in bounds]


_jflip = partial(kernel, static_argnames=("axis",))(jnp.flip)


@defop(check=axis_check)
def flip(x: jax.Array, *, axis: int | Shape | None = None) -> tuple[jax.Array, tuple[()]]:
    """Reverse the order of the elements along ``axis`` (an int or a tuple; ``None``: every
    axis), NumPy's ``flip`` (PyTorch's ``flip(dims)``: ``x.flip(0)``, ``x.flip((0, 1))``).

    Raises:
        ShapeError: an axis out of range.
    """
    return _jflip(x, axis=None if x.ndim == 0 else axis), ()  # 0-d: PyTorch's one element


@flip.defvjp
def _flip_vjp(res: tuple[()], g: jax.Array, *, axis: int | Shape | None = None) -> tuple[jax.Array]:
    """Flip g back along the same axes."""
    return (_jflip(g, axis=None if g.ndim == 0 else axis),)


_jroll = partial(kernel, static_argnames=("shift", "axis"))(jnp.roll)


@defop(name="roll", check=axis_check)
def _roll(
    x: jax.Array, *, shift: int | Shape, axis: int | Shape | None = None
) -> tuple[jax.Array, tuple[()]]:
    """``jnp.roll``: elements shifted by ``shift`` along ``axis``, wrapping around."""
    return _jroll(x, shift=shift, axis=axis), ()


@_roll.defvjp
def _roll_vjp(
    res: tuple[()], g: jax.Array, *, shift: int | Shape, axis: int | Shape | None = None
) -> tuple[jax.Array]:
    """Roll g back: the same axes, the opposite shifts."""
    back = -shift if isinstance(shift, int) else tuple(-s for s in shift)
    return (_jroll(g, shift=back, axis=axis),)


@torch_keywords({"shifts": "pass the shift by position: x.roll(1, 0)", "dims": "use axis="})
def roll(x: Any, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Tensor:
    """Shift the elements by ``shift`` places along ``axis``, wrapping around (NumPy's
    ``roll``; PyTorch's ``roll(shifts, dims)`` by position: ``x.roll(1, 0)``). Without an
    axis the flattened tensor is rolled, in its shape. Several axes take one shift each.

    Raises:
        TypeError: a shift or axis is not an integer.
        ShapeError: an axis out of range.
        ValueError: not one shift per axis.
    """
    shifts = axis_arg(shift, "roll: shift")
    axes = axis_arg(axis, "roll: axis")
    if isinstance(shifts, tuple) != isinstance(axes, tuple) or (
        isinstance(shifts, tuple) and isinstance(axes, tuple) and len(shifts) != len(axes)
    ):
        raise ValueError(
            f"roll: give one shift per axis, got shift={shift!r} and axis={axis!r} (x.roll(1, "
            "0), or x.roll((1, 2), (0, 1)) for two axes)."
        )
    return _roll(x, shift=shifts, axis=axes)


def _triangle_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    if jnp.ndim(arrays[0]) < 2:
        raise ShapeError(
            f"{name}: needs a tensor of 2 or more dimensions (the last two are the matrix), "
            f"got shape {tuple(jnp.shape(arrays[0]))}."
        )


_jtril = partial(kernel, static_argnames=("k",))(jnp.tril)
_jtriu = partial(kernel, static_argnames=("k",))(jnp.triu)


@defop(name="tril", check=_triangle_check)
def _tril(x: jax.Array, *, k: int = 0) -> tuple[jax.Array, tuple[()]]:
    """The lower triangle of the last two axes: entries above diagonal ``k`` set to 0."""
    _triangle_check("tril", [x], {})
    return _jtril(x, k=k), ()


@_tril.defvjp
def _tril_vjp(res: tuple[()], g: jax.Array, *, k: int = 0) -> tuple[jax.Array]:
    """The gradient flows to the kept triangle: tril(g, k)."""
    return (_jtril(g, k=k),)


@defop(name="triu", check=_triangle_check)
def _triu(x: jax.Array, *, k: int = 0) -> tuple[jax.Array, tuple[()]]:
    """The upper triangle of the last two axes: entries below diagonal ``k`` set to 0."""
    _triangle_check("triu", [x], {})
    return _jtriu(x, k=k), ()


@_triu.defvjp
def _triu_vjp(res: tuple[()], g: jax.Array, *, k: int = 0) -> tuple[jax.Array]:
    """The gradient flows to the kept triangle: triu(g, k)."""
    return (_jtriu(g, k=k),)


_DIAGONAL = {"diagonal": "use k= (NumPy's name): x.tril(k=-1)"}


@torch_keywords(_DIAGONAL)
def tril(x: Any, k: int = 0) -> Tensor:
    """The lower triangle of the last two axes, entries above diagonal ``k`` (0: the main
    diagonal, > 0 above it) set to 0 (NumPy's ``tril``; PyTorch's ``diagonal=`` is ``k``).

    Raises:
        ShapeError: fewer than two dimensions.
        TypeError: ``k`` is not an integer.
    """
    return _tril(x, k=integer(k, "tril: k"))


@torch_keywords(_DIAGONAL)
def triu(x: Any, k: int = 0) -> Tensor:
    """The upper triangle of the last two axes, entries below diagonal ``k`` set to 0 (NumPy's
    ``triu``; PyTorch's ``diagonal=`` is ``k``).

    Raises:
        ShapeError: fewer than two dimensions.
        TypeError: ``k`` is not an integer.
    """
    return _triu(x, k=integer(k, "triu: k"))


@partial(kernel, static_argnums=(1,))
def _jtile(x: jax.Array, reps: Shape) -> jax.Array:
    return jnp.tile(x, reps)


@partial(kernel, static_argnums=(1, 2))
def _jtile_vjp(g: jax.Array, reps: Shape, shape: Shape) -> jax.Array:
    # (r0 s0, r1 s1, ...) -> (r0, s0, r1, s1, ...), summed over the copies r_i
    pairs = [n for r, size in zip(reps, shape, strict=True) for n in (r, size)]
    return jnp.sum(g.reshape(pairs), axis=tuple(range(0, 2 * len(shape), 2)))


@defop(name="tile")
def _tile(x: jax.Array, *, reps: Shape) -> tuple[jax.Array, tuple[Shape]]:
    """``x`` repeated ``reps[i]`` times along axis i (``len(reps) == x.ndim``)."""
    return _jtile(x, reps), (tuple(x.shape),)


@_tile.defvjp
def _tile_vjp(res: tuple[Shape], g: jax.Array, *, reps: Shape) -> tuple[jax.Array]:
    """Each input element's cotangent is the sum of its copies' (g viewed as
    ``(r0, s0, r1, s1, ...)``, summed over the ``r`` axes)."""
    (shape,) = res
    return (_jtile_vjp(g, reps, shape),)


def tile(x: Any, reps: int | Sequence[int]) -> Tensor:
    """``x`` repeated ``reps[i]`` times along each axis (NumPy's ``tile``, PyTorch's
    ``x.repeat(*reps)``): fewer ``reps`` than axes repeat the trailing ones, more add leading
    axes of length one first.

    Raises:
        ValueError: a negative count.
        TypeError: a count that is not an integer.
    """
    from tapegrad._tensor import Tensor  # tensor.py imports the ops last

    t = x if isinstance(x, Tensor) else Tensor(jnp.asarray(x))
    counts = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    counts = tuple(integer(r, "tile: reps") for r in counts)
    if any(r < 0 for r in counts):
        raise ValueError(f"tile: negative counts in {counts}; counts must be >= 0.")
    lead = len(counts) - t.ndim
    if lead > 0:
        t = reshape(t, shape=(1,) * lead + t.shape)
    counts = (1,) * (t.ndim - len(counts)) + counts
    return _tile(t, reps=counts)


@defop(name="broadcast_to")
def _broadcast_to(x: jax.Array, *, shape: Shape) -> tuple[jax.Array, tuple[Shape]]:
    """``x`` broadcast to ``shape`` (NumPy's rules)."""
    if broadcast_axes(shape, tuple(x.shape)) is None:
        raise ShapeError(
            f"broadcast_to: a tensor of shape {tuple(x.shape)} cannot be broadcast to {shape} "
            "(NumPy rules: each trailing axis must be equal or 1)."
        )
    return _jbroadcast_to(x, shape), (tuple(x.shape),)


_jbroadcast_to = partial(kernel, static_argnums=(1,))(jnp.broadcast_to)


@_broadcast_to.defvjp
def _broadcast_to_vjp(res: tuple[Shape], g: jax.Array, *, shape: Shape) -> tuple[jax.Array]:
    """The cotangent summed over the broadcast axes, back to the input's shape."""
    (in_shape,) = res
    return (_jsum_to(g, in_shape),)


_jsum_to = partial(kernel, static_argnums=(1,))(sum_to)


def broadcast_to(x: Any, shape: int | Sequence[int]) -> Tensor:
    """``x`` broadcast to ``shape`` (an int or a sequence; NumPy's ``broadcast_to``; PyTorch's
    ``x.expand(*shape)``, where ``-1`` keeps an axis's length, is ``x.expand``).

    Raises:
        ShapeError: ``x`` does not broadcast to ``shape``, or a negative size.
        TypeError: a size that is not an integer.
    """
    sizes = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    full = tuple(integer(n, "broadcast_to: shape") for n in sizes)
    if any(n < 0 for n in full):
        raise ShapeError(f"broadcast_to: negative sizes in {full}; sizes must be >= 0.")
    return _broadcast_to(x, shape=full)
