"""Indexing: ``t[...]`` (slices, integer arrays, boolean masks), take_along_axis, gather,
argsort, sort and topk (values picked by argsort), embedding, and the scatter-adds that
write where these read (index_add, scatter_add)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from tapegrad._args import integer, torch_keywords
from tapegrad._arrays import axis_check
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop, index_arguments, int_arguments, operand_shape, refuse_torch

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = [
    "getitem",
    "normalize_index",
    "take_along_axis",
    "gather",
    "argsort",
    "sort",
    "topk",
    "SortResult",
    "embedding",
    "index_add",
    "scatter_add",
]

Shape = tuple[int, ...]


def normalize_index(index: Any, shape: tuple[int, ...] | None = None) -> tuple[Any, ...]:
    """Turn a user index into what jnp indexing takes, with boolean masks made integer.

    Tensors give their arrays, lists and ``range``s become NumPy arrays, and NumPy arrays stay
    on the host (so their bounds are checked without a device round trip); a boolean mask
    becomes its integer coordinates (eagerly, as NumPy does; under a JAX trace a mask raises
    JAX's own error), a 0-d one (``x[True]``) a Python ``bool``, which adds an axis of
    length 1 (``True``) or 0 (``False``) as in NumPy and PyTorch. With ``shape``, an index
    holding a mask is checked against it as NumPy checks it: a mask whose shape does not
    match the axes it indexes raises ``IndexError`` (its coordinates alone would silently
    select wrong rows). Integers are checked by ``getitem`` itself.

    Raises:
        IndexError: (with ``shape``) a mask of the wrong length, or an integer out of range
            beside a mask.
        TypeError: an index element of an unsupported type (a float, a float array, ...).
    """
    from tapegrad._tensor import Tensor

    items = index if isinstance(index, tuple) else (index,)
    for item in items:  # the usual index, ints and slices only, needs nothing done
        if item.__class__ is not int and item.__class__ is not slice:
            break
    else:
        return items
    out: list[Any] = []
    host: list[Any] = []  # the index as NumPy sees it, masks kept whole
    masked = False
    for item in items:
        if item.__class__ is Tensor:
            item = item.data
        array = _ARRAY.get(item.__class__)
        if array is None:
            array = _ARRAY[item.__class__] = issubclass(item.__class__, (np.ndarray, jax.Array))
        if array and item.dtype.kind in "iu" and item.dtype.isnative:
            out.append(item)  # an integer array (a gather's rows): the usual case, first
            host.append(item)
            continue
        if isinstance(item, Tensor):
            item = item.data
        elif isinstance(item, (list, range)):
            item = np.asarray(item)
            if item.size == 0:
                item = item.astype(np.intp)  # NumPy reads an empty list as an integer index
        if isinstance(item, np.bool_) or (
            isinstance(item, (np.ndarray, jax.Array))
            and item.ndim == 0
            and item.dtype == np.bool_
            and not isinstance(item, jax.core.Tracer)
        ):
            item = bool(item)  # a 0-d mask: a new axis of length 1 (True) or 0 (False), as jnp
        if isinstance(item, (np.ndarray, jax.Array)):
            if item.dtype == np.bool_:
                if isinstance(item, jax.core.Tracer):
                    out.append(item)  # jnp raises its NonConcreteBooleanIndexError
                    continue
                mask = np.asarray(item)
                out.extend(np.nonzero(mask))
                host.append(mask)
                masked = True
                continue
            if item.dtype.kind not in "iu":  # np.issubdtype(.., np.integer), ~1 us cheaper
                raise TypeError(
                    f"Index arrays must be integer or boolean, got {item.dtype}; cast with "
                    ".astype(tg.int32)."
                )
            if not item.dtype.isnative:  # big-endian from a file: JAX takes native order only
                item = item.astype(item.dtype.newbyteorder("="))
            out.append(item)
            host.append(item)
        elif item is None or item is Ellipsis or isinstance(item, (int, slice, np.integer)):
            out.append(item)
            host.append(item)
        else:
            refuse_torch(item, "indexing")
            raise TypeError(
                f"Unsupported index element of type {type(item).__name__}; use ints, slices, "
                "None, Ellipsis, integer arrays, ranges or boolean masks."
            )
    if masked and shape is not None:
        _check_bounds(shape, tuple(host))
    return tuple(out)


_ARRAY: dict[type, bool] = {}  # class -> a NumPy or JAX array class (tracers included)


def _check_bounds(shape: tuple[int, ...], index: tuple[Any, ...]) -> None:
    """Raise ``IndexError`` as NumPy does for an out-of-range integer on the host.

    Indexes a zero-stride view of ``shape`` (no allocation of the indexed array). Indices on
    the device (``jax.Array``s, tracers) are not read back, which would wait for the device:
    out of range, they select fill values (NaN for floats), as ``mode="fill"`` does.
    """
    if any(isinstance(i, jax.Array) for i in index):
        return
    view = np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), shape, (0,) * len(shape))
    try:
        view[index]
    except IndexError as err:
        text = str(err)
        why = (
            "; JAX would clamp it silently"
            if "out of bounds" in text
            else "; its coordinates alone would select wrong elements"
            if text.startswith("boolean index")
            else ""
        )
        raise IndexError(f"{text} (tensor of shape {shape}){why}.") from None


Plan = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _slice_plan(shape: tuple[int, ...], index: tuple[Any, ...]) -> Plan | None:
    """``(starts, sizes, squeezed axes)`` when ``index`` holds only ints and step-1 slices.

    Such an index is one ``lax.dynamic_slice`` whose starts are arguments, so every start
    (``text[j : j + 8]`` for each ``j``) reuses one compiled kernel. ``None`` otherwise.

    Raises:
        IndexError: an integer is out of range (NumPy's rule; JAX would clamp it).
    """
    if len(index) > len(shape):
        return None
    starts: list[int] = []
    sizes: list[int] = []
    squeezed: list[int] = []
    for axis, item in enumerate(index):
        n = shape[axis]
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            if step != 1 or stop <= start:
                return None
            starts.append(start)
            sizes.append(stop - start)
        elif isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            i = int(item)
            if not -n <= i < n:
                raise IndexError(
                    f"index {i} is out of bounds for axis {axis} with size {n} (tensor of "
                    f"shape {shape}); JAX would clamp it silently."
                )
            starts.append(i % n)
            sizes.append(1)
            squeezed.append(axis)
        else:
            return None
    rest = shape[len(index) :]
    return (*starts, *(0,) * len(rest)), (*sizes, *rest), tuple(squeezed)


def _is_gather(shape: tuple[int, ...], index: tuple[Any, ...]) -> bool:
    """Whether ``index`` is integer arrays only, one per leading axis (``table[ids]``)."""
    return 0 < len(index) <= len(shape) and all(
        isinstance(i, (np.ndarray, jax.Array)) for i in index
    )


@partial(kernel, static_argnames=("sizes", "squeezed"))
def _slice(x: jax.Array, starts: tuple[int, ...], sizes: Shape, squeezed: Shape) -> jax.Array:
    return jnp.squeeze(lax.dynamic_slice(x, starts, sizes), squeezed)


@partial(kernel, static_argnames=("shape", "sizes"))
def _slice_vjp(g: jax.Array, starts: tuple[int, ...], shape: Shape, sizes: Shape) -> jax.Array:
    return lax.dynamic_update_slice(jnp.zeros(shape, g.dtype), g.reshape(sizes), starts)


@kernel
def _gather(x: jax.Array, index: tuple[jax.Array, ...]) -> jax.Array:
    return x.at[index].get(mode="fill")


@partial(kernel, static_argnames=("shape",))
def _scatter_add(g: jax.Array, index: tuple[Any, ...], shape: Shape) -> jax.Array:
    return jnp.zeros(shape, g.dtype).at[index].add(g, mode="drop")


@defop
def getitem(x: jax.Array, *, index: tuple[Any, ...]) -> tuple[jax.Array, tuple[Any, ...]]:
    """``x[index]`` with ``index`` from ``normalize_index`` (a parameter, not a tensor input).

    Ints and step-1 slices run one compiled ``dynamic_slice`` per (shape, sizes), whatever
    the starts; integer arrays on the leading axes one compiled gather per shape; other
    indices go through ``jnp`` indexing. Integer arrays on the device are not checked on the
    host: out of range, they select fill values (NaN for floats).

    Raises:
        IndexError: an integer index on the host is out of range.
    """
    shape = x.shape
    plan = _slice_plan(shape, index)
    if plan is not None:
        starts, sizes, squeezed = plan
        return _slice(x, int_arguments(starts), sizes, squeezed), (shape,)
    _check_bounds(shape, index)
    if _is_gather(shape, index):
        return _gather(x, index_arguments(index)), (shape,)
    return x.at[index].get(mode="fill"), (shape,)


getitem.traced_ints = ("index",)  # int items: traced scalars in a compiled backward


@getitem.defvjp
def _getitem_vjp(res: tuple[Any, ...], g: jax.Array, *, index: tuple[Any, ...]) -> tuple[jax.Array]:
    """Scatter-add g into zeros of the input shape (repeated indices accumulate; device
    indices out of range receive nothing); a slice's is one ``dynamic_update_slice``. In a
    compiled backward the int items of ``index`` are traced scalars (``Op.traced_ints``),
    which the scatter takes as they are."""
    (shape,) = res
    plan = _slice_plan(shape, index)
    if plan is not None:
        starts, sizes, _ = plan
        return (_slice_vjp(g, int_arguments(starts, count=False), shape, sizes),)
    if _is_gather(shape, index):
        return (_scatter_add(g, index_arguments(index, count=False), shape),)
    return (jnp.zeros(shape, g.dtype).at[index].add(g, mode="drop"),)


def _host_indices(indices: Any, name: str, low: int, high: int, what: str) -> Any:
    """Integer indices given on the host (a list or NumPy array) are checked against
    ``[low, high)`` and raise ``IndexError`` naming ``what``; indices already on the device are
    not read back (that would stall JAX's asynchronous dispatch every step)."""
    if not isinstance(indices, (list, tuple, np.ndarray)):
        return indices
    host = np.asarray(indices)
    if not np.issubdtype(host.dtype, np.integer) and host.size:
        raise TypeError(f"{name}: indices must be integers, got dtype {host.dtype}.")
    host = host.astype(np.int32) if host.size == 0 else host
    bad = (host < low) | (host >= high)
    if bad.any():
        raise IndexError(
            f"{name}: {int(bad.sum())} indices outside [{low}, {high}) (first: "
            f"{int(host[bad][0])}); {what}."
        )
    return host


def _integer_input(name: str, indices: Any) -> None:
    if not np.issubdtype(indices.dtype, np.integer):
        raise TypeError(
            f"{name}: indices must be integers, got dtype {indices.dtype}; cast with "
            ".astype(tg.int32)."
        )


@partial(kernel, static_argnames=("axis",))
def _take_along(x: jax.Array, indices: jax.Array, axis: int) -> jax.Array:
    return jnp.take_along_axis(x, indices, axis=axis, mode="fill")


@defop(name="take_along_axis")
def _take_along_axis(
    x: jax.Array, indices: jax.Array, *, axis: int
) -> tuple[jax.Array, tuple[tuple[int, ...], jax.Array]]:
    """NumPy's ``take_along_axis``: ``y[..., i, ...] = x[..., indices[..., i, ...], ...]``."""
    _integer_input("take_along_axis", indices)
    if x.ndim != indices.ndim or not -x.ndim <= axis < x.ndim:
        raise ShapeError(
            f"take_along_axis: indices of shape {tuple(indices.shape)} and axis {axis} do not fit "
            f"a tensor of shape {tuple(x.shape)}; indices need the same number of dimensions."
        )
    return _take_along(x, indices, axis), (x.shape, indices)


@partial(kernel, static_argnums=(2, 3))
def _take_along_transpose(
    indices: jax.Array, g: jax.Array, shape: tuple[int, ...], axis: int
) -> jax.Array:
    _, pullback = jax.vjp(lambda z: _take_along(z, indices, axis), jnp.zeros(shape, g.dtype))
    return pullback(g)[0]  # type: ignore[no-any-return]


@_take_along_axis.defvjp
def _take_along_axis_vjp(
    res: tuple[tuple[int, ...], jax.Array], g: jax.Array, *, axis: int
) -> tuple[jax.Array, None]:
    """Gather's transpose: scatter-add g into zeros of x's shape at the taken positions
    (repeats accumulate); the integer indices get no gradient."""
    shape, indices = res
    return (_take_along_transpose(indices, g, shape, axis), None)


def take_along_axis(x: Any, indices: Any, axis: int) -> Tensor:
    """Pick values along ``axis`` by integer ``indices`` of the same rank (NumPy's
    ``take_along_axis``; PyTorch's ``gather(x, dim, index)``).

    Raises:
        IndexError: host indices (a list or NumPy array) outside ``[-n, n)``, n the length of
            ``axis``; device indices out of range give NaN (JAX's fill convention).
        ShapeError: ``indices`` has another number of dimensions, or ``axis`` is out of range.
        TypeError: the indices are not integers.
    """
    shape = tuple(x.shape)
    n = shape[axis] if -len(shape) <= axis < len(shape) else 0
    indices = _host_indices(indices, "take_along_axis", -n, n, f"axis {axis} of {shape}")
    return _take_along_axis(x, indices, axis=axis)


@torch_keywords({"index": "tapegrad spells it indices= (NumPy's take_along_axis's name)"})
def gather(x: Any, axis: int, indices: Any) -> Tensor:
    """PyTorch's ``gather(input, dim, index)``: ``y[i][j] = x[indices[i][j]][j]`` along
    ``axis`` 0 (alike for any axis and rank). ``indices`` has the rank of ``x`` and may be
    smaller than ``x`` along the other axes, which then read ``x``'s leading part; where it
    is not smaller this is ``take_along_axis(x, indices, axis)``. The gradient is
    scatter-added back to the positions read (repeats accumulate); the indices get none.

    Raises:
        IndexError: host indices (a list or NumPy array) outside ``[-n, n)``, n the length of
            ``axis``; device indices out of range give NaN (JAX's fill convention).
        ShapeError: ``indices`` has another rank, is larger than ``x`` along another axis, or
            ``axis`` is out of range.
        TypeError: the indices are not integers, or ``axis`` is not an integer; PyTorch's
            ``dim=`` and ``index=`` (tapegrad's ``axis=`` and ``indices=``).
    """
    from tapegrad._tensor import Tensor  # tensor.py imports the ops last

    refuse_torch(indices, "gather")
    t = x if isinstance(x, Tensor) else Tensor(x)
    axis = integer(axis, "gather: axis")
    shape = t.shape
    index_shape = tuple(np.shape(indices))
    span = max(len(shape), 1)  # a 0-d tensor has the one axis 0 (or -1), as in PyTorch
    if not -span <= axis < span:
        raise ShapeError(
            f"gather: axis {axis} is out of range for a tensor of shape {shape}; use an axis "
            f"in [{-span}, {span})."
        )
    if len(index_shape) != len(shape):
        raise ShapeError(
            f"gather: indices of shape {index_shape} do not fit a tensor of shape {shape}; "
            "indices need the same number of dimensions (PyTorch's rule)."
        )
    if not shape:  # a 0-d tensor and index: PyTorch's gather of one element
        one = indices.reshape(1) if isinstance(indices, Tensor) else np.reshape(indices, 1)
        return gather(t.reshape(1), 0, one).reshape(())
    axis %= len(shape)
    indices = _host_indices(indices, "gather", -shape[axis], shape[axis], f"axis {axis} of {shape}")
    larger = [d for d in range(len(shape)) if d != axis and index_shape[d] > shape[d]]
    if larger:
        raise ShapeError(
            f"gather: indices of shape {index_shape} are larger than the tensor of shape "
            f"{shape} along axis {larger[0]}; along axes other than {axis} they may be equal "
            "or smaller (PyTorch's rule)."
        )
    if any(index_shape[d] < shape[d] for d in range(len(shape)) if d != axis):
        t = t[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(index_shape))]
    return take_along_axis(t, indices, axis)


_argsort = partial(kernel, static_argnames=("axis", "descending"))(jnp.argsort)


@defop(differentiable=False, check=axis_check)
def argsort(
    x: jax.Array, *, axis: int = -1, descending: bool = False
) -> tuple[jax.Array, tuple[()]]:
    """The indices that sort ``x`` along ``axis`` (ascending, or ``descending``); stable: equal
    values keep their order (NumPy's ``argsort(kind="stable")``, PyTorch's
    ``argsort(stable=True)``). A 0-d ``x`` gives ``0``.

    Raises:
        ShapeError: ``axis`` out of range.
    """
    if x.ndim == 0:  # one element: index 0, in argsort's integer dtype
        return _argsort(x.reshape(1), axis=0, descending=descending).reshape(()), ()
    return _argsort(x, axis=axis, descending=descending), ()


class SortResult(NamedTuple):
    """What ``sort`` and ``topk`` return, as PyTorch's ``torch.return_types``: the values
    (differentiable) and their integer indices in the input along the axis."""

    values: Tensor
    indices: Tensor


_SORT_ADVICE = {
    "stable": "remove it: tapegrad's sort is always stable (equal values keep their order)"
}


@torch_keywords(_SORT_ADVICE)
def sort(x: Any, axis: int = -1, descending: bool = False) -> SortResult:
    """Sort along ``axis``: ``(values, indices)``, as PyTorch's ``sort`` (NumPy's ``sort``
    returns the values only: take ``.values``). Stable (equal values keep their order); the
    values are ``take_along_axis(x, indices, axis)``, so their gradient goes back to the
    positions they came from.

    Raises:
        ShapeError: ``axis`` out of range.
        TypeError: ``axis`` is not an integer; PyTorch's ``dim=``.
    """
    return topk(x, None, axis, largest=descending)


@torch_keywords(
    {"sorted": "remove it: topk's values come sorted, which sorted=False allows too"},
    defaults={"sorted": True},
)
def topk(x: Any, k: int | None, axis: int = -1, largest: bool = True) -> SortResult:
    """The ``k`` largest (or with ``largest=False`` smallest) values along ``axis``, sorted,
    with their indices: PyTorch's ``topk`` (its ``sorted=True``); ``k=None``: all of them
    (``sort``). Among equal values the first ones come first. The values' gradient goes back
    to the positions they came from.

    Raises:
        ValueError: ``k`` is negative or larger than the axis.
        ShapeError: ``axis`` out of range.
        TypeError: ``k`` or ``axis`` is not an integer.
    """
    from tapegrad._tensor import Tensor  # tensor.py imports the ops last

    t = x if isinstance(x, Tensor) else Tensor(x)
    what = "topk" if k is not None else "sort"
    axis = integer(axis, f"{what}: axis")
    shape = t.shape
    span = max(len(shape), 1)
    if not -span <= axis < span:
        raise ShapeError(f"{what}: axis {axis} is out of range for a tensor of shape {shape}.")
    if not shape:  # one element: PyTorch's sort and topk of a 0-d tensor
        one = topk(t.reshape(1), k, 0, largest)
        return SortResult(one.values.reshape(()), one.indices.reshape(()))
    axis %= len(shape)
    order = argsort(t, axis=axis, descending=largest)
    if k is not None:
        k = integer(k, "topk: k")
        if not 0 <= k <= shape[axis]:
            raise ValueError(
                f"topk: k={k} is out of range for axis {axis} of length {shape[axis]}."
            )
        order = Tensor(order.data[(slice(None),) * axis + (slice(0, k),)])
    return SortResult(_take_along_axis(t, order, axis=axis), order)


@kernel
def _take_rows(weight: jax.Array, indices: jax.Array) -> jax.Array:
    """Rows of ``weight``; a NaN row for an index outside [0, n), negative ones included
    (``mode="fill"`` alone would wrap those as NumPy does, reading row n - 1 for -1)."""
    rows = jnp.where(indices < 0, weight.shape[0], indices)
    return jnp.take(weight, rows, axis=0, mode="fill")


@defop(name="embedding")
def _embedding(
    indices: jax.Array, weight: jax.Array, *, padding_idx: int | None = None
) -> tuple[jax.Array, tuple[jax.Array, tuple[int, ...]]]:
    """Rows of ``weight`` (num, dim) picked by integer ``indices`` (...): shape (..., dim)."""
    _integer_input("embedding", indices)
    if weight.ndim != 2:
        raise ShapeError(
            f"embedding: weight must be (num_embeddings, embedding_dim), got shape "
            f"{tuple(weight.shape)}."
        )
    return _take_rows(weight, indices), (indices, weight.shape)


@partial(kernel, static_argnums=(2, 3))
def _scatter_rows(
    indices: jax.Array, g: jax.Array, shape: tuple[int, ...], padding_idx: int | None
) -> jax.Array:
    rows = jnp.where(indices < 0, shape[0], indices)  # dropped, as out of range (not wrapped)
    gw = jnp.zeros(shape, g.dtype).at[rows].add(g, mode="drop")
    return gw if padding_idx is None else gw.at[padding_idx].set(0)


@_embedding.defvjp
def _embedding_vjp(
    res: tuple[jax.Array, tuple[int, ...]], g: jax.Array, *, padding_idx: int | None = None
) -> tuple[None, jax.Array]:
    """Each picked row receives its g; repeated indices accumulate (scatter-add into zeros);
    indices out of range, and the ``padding_idx`` row, receive nothing."""
    indices, shape = res
    return (None, _scatter_rows(indices, g, shape, padding_idx))


EMBEDDING_ADVICE = {  # PyTorch's embedding options tapegrad does not take -> what to do
    "max_norm": "renormalising rows in the lookup is not supported: after each optimizer "
    "step, rescale the rows yourself under tg.no_grad(): n = tg.sqrt((w * w).sum(axis=1, "
    "keepdims=True)); w.data = (w * tg.minimum(1.0, max_norm / n)).data.",
    "norm_type": "it goes with max_norm, which is not supported (see max_norm=): remove both.",
    "scale_grad_by_freq": "not supported: the gradient of a row is the sum over its uses "
    "(PyTorch's default); remove it.",
    "sparse": "sparse gradients are not supported: the gradient is a dense table (PyTorch's "
    "default sparse=False); remove it and use any optimizer.",
}
EMBEDDING_DEFAULTS = {
    "max_norm": None,
    "norm_type": 2.0,
    "scale_grad_by_freq": False,
    "sparse": False,
}


@torch_keywords(EMBEDDING_ADVICE, defaults=EMBEDDING_DEFAULTS)
def embedding(indices: Any, weight: Any, padding_idx: int | None = None) -> Tensor:
    """Look up rows of an embedding table (PyTorch's ``F.embedding(indices, weight,
    padding_idx)``).

    Args:
        indices: integer indices of any shape, in ``[0, num_embeddings)``.
        weight: a float tensor of shape (num_embeddings, embedding_dim).
        padding_idx: a row (negative counts from the end) whose gradient is always zero, as
            PyTorch's (the lookup still reads it).

    Returns:
        A tensor of shape ``indices.shape + (embedding_dim,)``.

    Raises:
        IndexError: host indices (a list or NumPy array) outside ``[0, num_embeddings)``,
            naming the table's shape; a ``padding_idx`` outside ``[-num_embeddings,
            num_embeddings)``. Indices already on the device are not read back: an
            out-of-range one, negative ones included, gives a row of NaN (JAX's fill
            convention) and no gradient.
        ShapeError: ``weight`` is not 2-D.
        TypeError: the indices are not integers; PyTorch's ``max_norm=``, ``sparse=``, ...
            (not supported: the message says what to do).
    """
    shape = tuple(weight.shape)
    n = shape[0] if shape else 0
    indices = _host_indices(indices, "embedding", 0, n, f"the table has shape {shape}")
    if padding_idx is None:
        return _embedding(indices, weight)
    pad = integer(padding_idx, "embedding: padding_idx")
    if not -n <= pad < n:
        raise IndexError(
            f"embedding: padding_idx={pad} is outside [{-n}, {n}) for a table of shape {shape}."
        )
    return _embedding(indices, weight, padding_idx=pad % n)


def _scatter_axis(name: str, x: Any, axis: Any) -> tuple[Shape, int]:
    """The shape of ``x`` and ``axis`` in ``[0, ndim)``, for a scatter-add's entry point.

    Raises:
        ShapeError: a 0-d ``x`` or ``axis`` out of range.
        TypeError: ``axis`` is not an integer.
    """
    shape = operand_shape(x, name)
    axis = integer(axis, f"{name}: axis")
    if not -len(shape) <= axis < len(shape) or not shape:
        raise ShapeError(
            f"{name}: axis {axis} is out of range for a tensor of shape {shape}"
            + ("; reshape a 0-d tensor to (1,) first." if not shape else ".")
        )
    return shape, axis % len(shape)


def _same_dtype(name: str, x: jax.Array, added: jax.Array, what: str) -> None:
    if added.dtype != x.dtype:
        raise TypeError(
            f"{name}: {what} has dtype {added.dtype} and the tensor {x.dtype}; they must be "
            f"the same (as in PyTorch): cast with {what}.astype(x.dtype)."
        )


def _dropped(index: jax.Array, n: int) -> jax.Array:
    """Negative indices made out of range (``n``), so that mode ``drop``/``fill`` drops them
    instead of counting them from the end (PyTorch refuses them)."""
    return jnp.where(index < 0, n, index)


@partial(kernel, static_argnames=("axis",))
def _jindex_add(
    x: jax.Array, index: jax.Array, source: jax.Array, alpha: Any, axis: int
) -> jax.Array:
    at = (slice(None),) * axis + (_dropped(index, x.shape[axis]),)
    return x.at[at].add(source * alpha, mode="drop")


@defop(name="index_add")
def _index_add(
    x: jax.Array, index: jax.Array, source: jax.Array, *, axis: int, alpha: Any = 1
) -> tuple[jax.Array, tuple[jax.Array]]:
    """``x`` with ``alpha * source[..., j, ...]`` added at ``x[..., index[j], ...]`` along
    ``axis`` (in ``[0, ndim)``); repeated indices accumulate."""
    _integer_input("index_add", index)
    want = (*x.shape[:axis], index.shape[0] if index.ndim == 1 else -1, *x.shape[axis + 1 :])
    if index.ndim != 1 or tuple(source.shape) != want:
        raise ShapeError(
            f"index_add: index of shape {tuple(index.shape)} and source of shape "
            f"{tuple(source.shape)} do not fit a tensor of shape {tuple(x.shape)} along axis "
            f"{axis}; index must be 1-D, and source the tensor's shape with axis {axis} of "
            "length len(index) (PyTorch's rule)."
        )
    _same_dtype("index_add", x, source, "source")
    return _jindex_add(x, index, source, alpha, axis=axis), (index,)


@partial(kernel, static_argnames=("axis",))
def _index_add_source(g: jax.Array, index: jax.Array, alpha: Any, axis: int) -> jax.Array:
    rows = _dropped(index, g.shape[axis])
    taken: jax.Array = jnp.take(g, rows, axis=axis, mode="fill", fill_value=0) * alpha
    return taken


@_index_add.defvjp
def _index_add_vjp(
    res: tuple[jax.Array], g: jax.Array, needs: tuple[bool, ...], *, axis: int, alpha: Any = 1
) -> tuple[jax.Array | None, None, jax.Array | None]:
    """gx = g (x passes through); gsource = alpha * g at the rows ``index`` names along
    ``axis`` (a gather, ``jnp.take``; PyTorch's ``index_add`` rule), 0 for an index out of
    range (its slice was dropped); the integer index gets none."""
    (index,) = res
    gsource = _index_add_source(g, index, alpha, axis=axis) if needs[2] else None
    return (g if needs[0] else None, None, gsource)


@torch_keywords()
def index_add(x: Any, axis: int, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:
    """PyTorch's ``index_add`` (out of place): a copy of ``x`` with ``alpha * source`` added
    along ``axis`` at the positions ``index`` names, ``y[..., index[j], ...] += alpha *
    source[..., j, ...]``; repeated indices accumulate. Differentiable in ``x`` (gradient
    ``g``) and ``source`` (``alpha`` times ``g`` gathered at ``index``).

    Args:
        x: the tensor added into, at least 1-D.
        axis: the axis ``index`` runs along (PyTorch's ``dim``).
        index: 1-D integer indices in ``[0, x.shape[axis])``.
        source: ``x``'s shape with ``axis`` of length ``len(index)``, and ``x``'s dtype.
        alpha: a number multiplying ``source``.

    Raises:
        IndexError: host indices (a list or NumPy array) outside ``[0, x.shape[axis])``;
            device indices out of range (negative ones too) add nothing and get no gradient.
        ShapeError: ``axis`` out of range, ``index`` not 1-D, or ``source`` of another shape.
        TypeError: the indices are not integers, ``source`` has another dtype, ``axis`` is
            not an integer, ``alpha`` not a number (or not a whole number for an integer
            ``x``); PyTorch's ``dim=`` (tapegrad's ``axis=``).
    """
    refuse_torch(index, "index_add")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.number)):
        raise TypeError(f"index_add: alpha must be a number, got {type(alpha).__name__}.")
    shape, axis = _scatter_axis("index_add", x, axis)
    kind = np.dtype(getattr(x, "dtype", np.result_type(x))).kind
    if kind in "iub" and not float(alpha).is_integer():
        raise TypeError(
            f"index_add: alpha={alpha!r} is not a whole number, for an integer tensor (PyTorch "
            "truncates it); pass an integer alpha, or cast x to a float dtype first."
        )
    if kind in "iub":
        alpha = int(alpha)  # 2.0 for an integer tensor: added as the integer (no cast warning)
    index = _host_indices(index, "index_add", 0, shape[axis], f"axis {axis} of {shape}")
    return _index_add(x, index, source, axis=axis, alpha=alpha)


def _scatter_shapes(x: Shape, index: Shape, src: Shape, axis: int) -> None:
    """Raise ``ShapeError`` unless the shapes follow PyTorch's ``scatter_add`` rule."""
    fits = len(x) == len(index) == len(src) and all(
        i <= s and (d == axis or i <= n)
        for d, (n, i, s) in enumerate(zip(x, index, src, strict=True))
    )
    if not fits:
        raise ShapeError(
            f"scatter_add: index of shape {index} and src of shape {src} do not fit a tensor of "
            f"shape {x} along axis {axis}; all three need the same number of dimensions, and "
            f"index may not be larger than src along any axis, nor than the tensor along axes "
            f"other than {axis} (PyTorch's rule)."
        )


def _scatter_grid(index: jax.Array, n: int, axis: int) -> tuple[jax.Array, ...]:
    """The full index of ``x.at[...]`` for a scatter along ``axis``: ``index`` there, each
    other axis its own position (broadcasting ranges)."""
    grid = list(jnp.indices(index.shape, sparse=True))
    grid[axis] = _dropped(index, n)
    return tuple(grid)


@partial(kernel, static_argnames=("axis",))
def _jscatter_add(x: jax.Array, index: jax.Array, src: jax.Array, axis: int) -> jax.Array:
    used = src[tuple(slice(0, k) for k in index.shape)]
    return x.at[_scatter_grid(index, x.shape[axis], axis)].add(used, mode="drop")


@defop(name="scatter_add")
def _scatter_add_op(
    x: jax.Array, index: jax.Array, src: jax.Array, *, axis: int
) -> tuple[jax.Array, tuple[jax.Array, Shape]]:
    """``x`` with ``src[i][j]`` added at ``x[index[i][j]][j]`` for axis 0 (alike for any axis
    in ``[0, ndim)`` and rank); repeated indices accumulate."""
    _integer_input("scatter_add", index)
    _scatter_shapes(tuple(x.shape), tuple(index.shape), tuple(src.shape), axis)
    _same_dtype("scatter_add", x, src, "src")
    return _jscatter_add(x, index, src, axis=axis), (index, tuple(src.shape))


@partial(kernel, static_argnames=("shape", "axis"))
def _scatter_add_src(g: jax.Array, index: jax.Array, shape: Shape, axis: int) -> jax.Array:
    taken = g.at[_scatter_grid(index, g.shape[axis], axis)].get(mode="fill", fill_value=0)
    return jnp.pad(taken, [(0, s - k) for s, k in zip(shape, index.shape, strict=True)])


@_scatter_add_op.defvjp
def _scatter_add_vjp(
    res: tuple[jax.Array, Shape], g: jax.Array, needs: tuple[bool, ...], *, axis: int
) -> tuple[jax.Array | None, None, jax.Array | None]:
    """gx = g; gsrc = g gathered where each used src entry was added (PyTorch's
    ``g.gather(axis, index)``, ``take_along_axis``), 0 for an index out of range and for the
    entries of src beyond index's shape (never added); the integer index gets none."""
    index, shape = res
    gsrc = _scatter_add_src(g, index, shape=shape, axis=axis) if needs[2] else None
    return (g if needs[0] else None, None, gsrc)


@torch_keywords()
def scatter_add(x: Any, axis: int, index: Any, src: Any) -> Tensor:
    """PyTorch's ``scatter_add`` (out of place): a copy of ``x`` with each ``src`` entry added
    where ``index`` sends it along ``axis``: ``y[index[i][j]][j] += src[i][j]`` for axis 0,
    ``y[i][index[i][j]] += src[i][j]`` for axis 1 (alike for any rank); repeated indices
    accumulate. The inverse of ``gather(x, axis, index)``, whose gradient it is.
    Differentiable in ``x`` (gradient ``g``) and ``src`` (``g`` gathered at ``index``; 0 for
    the entries of ``src`` beyond ``index``'s shape, which are not used).

    Args:
        x: the tensor added into, at least 1-D.
        axis: the axis ``index`` runs along (PyTorch's ``dim``).
        index: integer indices in ``[0, x.shape[axis])``, of ``x``'s rank; no larger than
            ``src`` along any axis nor than ``x`` along the others.
        src: the values added, of ``x``'s rank and dtype.

    Raises:
        IndexError: host indices (a list or NumPy array) outside ``[0, x.shape[axis])``;
            device indices out of range (negative ones too) add nothing and get no gradient.
        ShapeError: ``axis`` out of range, or shapes that do not fit (the rule above).
        TypeError: the indices are not integers, ``src`` has another dtype, or ``axis`` is
            not an integer; PyTorch's ``dim=`` (tapegrad's ``axis=``).
    """
    refuse_torch(index, "scatter_add")
    shape, axis = _scatter_axis("scatter_add", x, axis)
    index = _host_indices(index, "scatter_add", 0, shape[axis], f"axis {axis} of {shape}")
    return _scatter_add_op(x, index, src, axis=axis)
