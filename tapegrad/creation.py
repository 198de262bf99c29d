"""Tensor constructors: from data, filled, ranges, random; dtypes by JAX's rules.

Every constructor takes ``device=`` (a ``jax.Device``, an index into ``jax.devices()`` or a
string such as ``"cpu:3"``) or ``sharding=`` (a ``jax.sharding.Sharding``, e.g. a
``NamedSharding`` over a ``Mesh``) and places its result there; without either, JAX's default
device (``*_like`` constructors keep the placement of a tensor the user placed). A device that
does not exist or a sharding that does not divide the shape raises ``tg.DeviceError`` (a
``ValueError``); both together, ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad import _args, random
from tapegrad._arrays import Meetings, filled, from_torch, is_torch
from tapegrad._placement import committed, place
from tapegrad._tensor import Tensor, wrap
from tapegrad.random import key_of

__all__ = [
    "tensor",
    "zeros",
    "ones",
    "full",
    "arange",
    "zeros_like",
    "ones_like",
    "randn",
    "rand",
    "randn_like",
    "rand_like",
]

ShapeLike = int | Sequence[int]


def _shape(shape: ShapeLike, sizes: tuple[Any, ...] = ()) -> tuple[int, ...]:
    """``shape`` as a tuple of ints; with ``sizes``, ``shape`` is the first of several int
    arguments, as in ``torch.zeros(2, 3)``."""
    if sizes:
        if isinstance(shape, (tuple, list)):
            raise TypeError(
                f"shape given twice: {shape!r} and then {sizes!r}; pass one tuple, e.g. "
                f"({', '.join(map(str, (*shape, *sizes)))}), or the sizes one by one."
            )
        shape = (cast(int, shape), *sizes)
    dims = _args.dims(shape, "shape")
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {dims} has a negative dimension.")
    return dims


def _finish(
    data: jax.Array, requires_grad: bool, device: Any = None, sharding: Any = None, what: str = ""
) -> Tensor:
    """Wrap ``data``, placed on ``device`` or ``sharding`` when given, as a leaf if asked.

    Raises:
        TypeError: both ``device`` and ``sharding`` given.
        DeviceError: the device does not exist, or the sharding does not fit the shape.
    """
    if device is not None or sharding is not None:
        if device is not None and sharding is not None:
            raise TypeError(
                f"tg.{what}: pass device= or sharding=, not both (a sharding already names "
                "its devices)."
            )
        data = place(data, sharding if device is None else device, f"tg.{what}")
    t = wrap(data)
    if requires_grad:
        t._make_leaf()
    return t


def tensor(
    data: Any,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Make a tensor from a Python scalar or list, a NumPy array, a ``jax.Array`` or a Tensor.

    A ``jax.Array`` of the requested dtype is wrapped without a copy (unless ``device`` or
    ``sharding`` moves it). Without ``dtype``, JAX's rules apply (x64 off: Python floats give
    float32, ints int32). ``device``/``sharding``: where to place it (module docstring).

    Raises:
        DeviceError: no such device, or a sharding that does not divide the shape.
        TypeError: ``requires_grad=True`` for a non-float dtype, data JAX cannot convert, or
            a list holding a tensor that requires grad (its value would be copied without
            its graph: ``tg.stack`` keeps the gradient).
    """
    if isinstance(data, Tensor):
        data = data.data
    elif isinstance(data, (list, tuple)):
        _no_tracked_elements(data)
    elif is_torch(data) and hasattr(data, "detach"):
        data = from_torch(data)  # a torch.Tensor: bfloat16 too, which its .numpy() refuses
    if isinstance(data, jax.Array) and (dtype is None or data.dtype == np.dtype(dtype)):
        array = data
    else:
        try:
            moved = _from_numpy(data, dtype)
            if moved is not None:
                array = moved
            else:
                # NumPy data is copied: on CPU, JAX may share an aligned buffer, and the tensor
                # must keep the values it was made from (a torch tensor's .numpy() shares too)
                copy = isinstance(data, (np.ndarray, np.generic))
                array = (
                    jnp.array(data, dtype=dtype, copy=True)
                    if copy
                    else jnp.asarray(data, dtype=dtype)
                )
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"tg.tensor cannot convert {type(data).__name__} to an array ({err})."
            ) from None
    return _finish(array, requires_grad, device, sharding, "tensor")


_CONVERTED = Meetings(4)
"""The (shape, dtype, target dtype) of NumPy data converted so far: the first four of each
are copied with ``device_put`` (a model's repeated blocks load several weights of one
shape), later ones (a batch converted every step) take the compiled path."""


def _from_numpy(data: Any, dtype: Any) -> jax.Array | None:
    """A NumPy array or scalar ``data`` met for one of the first times (``_CONVERTED``) with
    its shape and dtype, copied to JAX's default device with ``jax.device_put``, its dtype as JAX's
    rules make it (x64 off: float64 becomes float32). ``jnp.asarray`` compiles a copy or
    cast kernel per shape (~50 ms on a first run) and then converts ~30 us faster than
    ``device_put``: data built once or a few times (weights, a data set) compiles nothing,
    data met again and again (a batch per step) takes the compiled path after that. NumPy's
    cast equals XLA's convert for these kinds. ``None`` (left to ``jnp.asarray``) for other
    ``data``, for other dtypes (objects, strings, ``ml_dtypes``' types), for complex data
    cast to a real ``dtype`` and for data met as often before.
    """
    if not isinstance(data, (np.ndarray, np.generic)):
        return None
    kind = data.dtype.kind
    if kind not in "biufc":
        return None
    want = jax.dtypes.canonicalize_dtype(data.dtype if dtype is None else dtype)
    if want.kind not in "biufc" or (kind == "c" and want.kind != "c"):
        return None
    if not _CONVERTED.early((data.shape, data.dtype, want)):
        return None
    # a private copy: on CPU ``device_put`` may share an aligned NumPy buffer, and the
    # tensor must keep the values it was made from when the user writes to ``data``
    array: jax.Array = jax.device_put(np.array(data, dtype=want, copy=True))
    return array


def _no_tracked_elements(data: list[Any] | tuple[Any, ...]) -> None:
    """Raise when a (nested) list holds a tensor that requires grad (an iterative walk)."""
    stack: list[Any] = [data]
    while stack:
        for item in stack.pop():
            if isinstance(item, (list, tuple)):
                stack.append(item)
            elif isinstance(item, Tensor) and item.requires_grad:
                raise TypeError(
                    "tg.tensor: the list holds a tensor that requires grad; tg.tensor copies "
                    "values and would silently drop its gradient. Use tg.stack([a, b]) (or "
                    "tg.concatenate) to build a tensor that keeps the graph, or .detach() the "
                    "elements to copy only their values."
                )


def _like(t: Tensor, dtype: Any, requires_grad: bool, device: Any, sharding: Any) -> dict[str, Any]:
    """The keyword arguments of a ``*_like`` result: ``t``'s dtype unless ``dtype`` says;
    the placement given, else ``t``'s own when the user placed ``t`` (a committed array), as
    PyTorch's ``zeros_like`` keeps the device."""
    if device is None and sharding is None and committed(t.data):
        sharding = t.sharding
    return {
        "dtype": dtype or t.dtype,
        "requires_grad": requires_grad,
        "device": device,
        "sharding": sharding,
    }


def full(
    shape: ShapeLike,
    value: Any,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """A tensor of ``shape`` filled with ``value`` (dtype from ``value`` by JAX's rules)."""
    if dtype is None:
        dtype = jnp.result_type(value)
    return _finish(
        filled(_shape(shape), value, np.dtype(dtype)), requires_grad, device, sharding, "full"
    )


def zeros(
    shape: ShapeLike,
    *sizes: int,
    dtype: Any = jnp.float32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """A tensor of zeros (float32 unless ``dtype`` says otherwise). ``shape``: an int or a
    sequence of ints; more ints may follow (``tg.zeros(2, 3)``, as in PyTorch).

    Raises:
        TypeError: a size is not an int, or a tuple shape is followed by more sizes.
        ValueError: a negative size.
    """
    data = filled(_shape(shape, sizes), 0, np.dtype(dtype))
    return _finish(data, requires_grad, device, sharding, "zeros")


def ones(
    shape: ShapeLike,
    *sizes: int,
    dtype: Any = jnp.float32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """A tensor of ones (float32 unless ``dtype`` says otherwise); ``shape`` as for
    :func:`zeros` (``tg.ones(2, 3)`` works too)."""
    data = filled(_shape(shape, sizes), 1, np.dtype(dtype))
    return _finish(data, requires_grad, device, sharding, "ones")


def zeros_like(
    t: Tensor,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Zeros of ``t``'s shape and dtype (or ``dtype``)."""
    return zeros(t.shape, **_like(t, dtype, requires_grad, device, sharding))


def ones_like(
    t: Tensor,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Ones of ``t``'s shape and dtype (or ``dtype``)."""
    return ones(t.shape, **_like(t, dtype, requires_grad, device, sharding))


def arange(
    start: float,
    stop: float | None = None,
    step: float = 1,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Evenly spaced values in ``[start, stop)``, as ``jnp.arange``."""
    data = jnp.arange(start, stop, step, dtype=dtype)
    return _finish(data, requires_grad, device, sharding, "arange")


def randn(
    shape: ShapeLike,
    *sizes: int,
    key: Any = None,
    dtype: Any = jnp.float32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Standard normal samples.

    Args:
        shape: an int or a sequence of ints; more ints may follow (``tg.randn(2, 3)``, as in
            PyTorch).
        key: an int seed or a ``jax.random`` key; ``None`` draws from the process random
            state (``tg.manual_seed``), which advances.
        dtype: a floating dtype (float32 by default).
        requires_grad: make the result a leaf that requires grad.

    Raises:
        TypeError: ``key`` is not ``None``, an int or a JAX array; a size is not an int, or a
            tuple shape is followed by more sizes.
    """
    data = random.normal(key_of(key), _shape(shape, sizes), dtype)
    return _finish(data, requires_grad, device, sharding, "randn")


def rand(
    shape: ShapeLike,
    *sizes: int,
    key: Any = None,
    dtype: Any = jnp.float32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Uniform samples in [0, 1); ``shape`` and ``key`` as for ``randn``."""
    data = random.uniform(key_of(key), _shape(shape, sizes), dtype)
    return _finish(data, requires_grad, device, sharding, "rand")


def randn_like(
    t: Tensor,
    *,
    key: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Standard normal samples of ``t``'s shape and dtype (or ``dtype``); ``key`` as for
    ``randn``."""
    return randn(t.shape, key=key, **_like(t, dtype, requires_grad, device, sharding))


def rand_like(
    t: Tensor,
    *,
    key: Any = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Uniform samples in [0, 1) of ``t``'s shape and dtype (or ``dtype``); ``key`` as for
    ``randn``."""
    return rand(t.shape, key=key, **_like(t, dtype, requires_grad, device, sharding))
