"""Tensor constructors: from data, filled, ranges, random; dtypes by JAX's rules.

Every constructor takes ``device=`` (a ``jax.Device``, an index into ``jax.devices()`` or a
string such as ``"cpu:3"``) or ``sharding=`` (a ``jax.sharding.Sharding``, e.g. a
``NamedSharding`` over a ``Mesh``) and places its result there; without either, JAX's default
device (``*_like`` constructors keep the placement of a tensor the user placed). A device that
does not exist or a sharding that does not divide the shape raises ``tg.DeviceError`` (a
``ValueError``); both together, ``TypeError``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad import _args, random
from tapegrad._arrays import filled, from_torch, is_torch
from tapegrad._dtypes import as_dtype
from tapegrad._placement import committed, place
from tapegrad._tensor import Tensor, wrap
from tapegrad.errors import TapegradWarning
from tapegrad.kernels import host_to_device
from tapegrad.origin import user_stacklevel
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
        TypeError: ``requires_grad=True`` for a non-float dtype, data JAX cannot convert (a
            NumPy masked array too), not a ``dtype``, or a list holding a tensor that requires
            grad (its value would be copied without its graph: ``tg.stack`` keeps the gradient).
        OverflowError: an integer the dtype cannot hold (x64 off: beyond int32; NumPy int64
            data too when no ``dtype`` is given).

    Warns:
        TapegradWarning: (a ``UserWarning``, as ``torch.tensor`` warns) ``data`` is a tensor
            that requires grad: its value is copied without its graph; ``t.detach()`` says so
            without the warning.
    """
    if dtype is not None:
        dtype = as_dtype(dtype, "tg.tensor")
    if isinstance(data, Tensor):
        if data.requires_grad:
            warnings.warn(
                "tg.tensor(t) copies the value of a tensor that requires grad without its graph "
                "(no gradient will reach t through the copy); write t.detach() for a constant, "
                "or t.detach().require_grad() for a new leaf, as torch.tensor(t) advises.",
                TapegradWarning,
                stacklevel=user_stacklevel(),
            )
        data = data.data
    elif isinstance(data, (list, tuple)):
        data = _untracked_elements(data)
    elif is_torch(data) and hasattr(data, "detach"):
        data = from_torch(data)  # a torch.Tensor: bfloat16 too, which its .numpy() refuses
    if isinstance(data, np.ndarray):
        _refuse_masked(data)
        if not data.dtype.isnative:  # JAX refuses a non-native byte order: make it native
            data = data.astype(data.dtype.newbyteorder("="))
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
        except OverflowError as err:
            raise _too_large("tg.tensor", err) from None
    return _finish(array, requires_grad, device, sharding, "tensor")


_REAL = (int, float, np.integer, np.floating)


def _check_fits(what: str, numbers: Sequence[Any], dtype: np.dtype[Any]) -> None:
    """Refuse a number beyond the integer ``dtype`` JAX's rules gave it (JAX would wrap it
    around silently, or fail naming its internals), as ``tg.tensor`` does.

    Raises:
        OverflowError: says what to do (:func:`_too_large`).
    """
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        for v in numbers:
            if isinstance(v, _REAL) and not info.min <= v <= info.max:
                raise _too_large(what, f"{v} is out of range for {dtype}")


def _too_large(what: str, err: OverflowError | str) -> OverflowError:
    """The error for an integer its dtype cannot hold, saying what to do."""
    if jax.config.jax_enable_x64:  # type: ignore[attr-defined]
        return OverflowError(
            f"{what}: {err}; pass dtype=tg.float64 for a larger value (approximate: float64 "
            "holds integers exactly up to 2**53)."
        )
    return OverflowError(
        f"{what}: {err}. Without x64 (JAX's default) integers are 32-bit: enable 64-bit "
        "types with jax.config.update('jax_enable_x64', True) at the start of the program to "
        "keep the values exact, or pass dtype=tg.float32 if approximate values will do "
        "(float32 holds integers exactly only up to 2**24)."
    )


def _from_numpy(data: Any, dtype: Any) -> jax.Array | None:
    """A NumPy array or scalar ``data`` (in native byte order) copied to JAX's default device,
    its dtype as JAX's rules make it (x64 off: float64 becomes float32), cast on the host
    (NumPy's cast equals XLA's convert for these kinds) and moved with
    ``kernels.host_to_device``: nothing is compiled (``jnp.asarray`` compiles a copy or cast
    kernel per shape, ~10-50 ms on a first run), and a small array converts in ~14 us
    against ``jnp.asarray``'s ~16 us. ``None`` (left to ``jnp.asarray``) for other ``data``,
    for other dtypes (objects, strings, ``ml_dtypes``' types), for complex data cast to a
    real ``dtype``, and where ``host_to_device`` leaves the conversion to JAX (a trace, a
    mesh, NaN checks).

    Raises:
        OverflowError: integer data beyond the integer dtype JAX's rules make of its own
            dtype or of ``dtype`` (x64 off: int64 values beyond int32), which a cast would
            wrap around; a ``dtype`` of that width or less asks for that cast.
    """
    if not isinstance(data, (np.ndarray, np.generic)):
        return None
    source = data.dtype
    if source.kind not in "biufc":
        return None
    asked = source if dtype is None else np.dtype(dtype)
    want = jax.dtypes.canonicalize_dtype(asked)
    if want.kind not in "biufc" or (source.kind == "c" and want.kind != "c"):
        return None
    if source.kind in "iu" and want.kind in "iu" and want.itemsize < asked.itemsize and data.size:
        info = np.iinfo(want)
        for v in (data.min(), data.max()):
            if not info.min <= v <= info.max:
                raise OverflowError(f"{v} is out of range for {want}")  # tensor() words it
    # a private copy: on CPU the transfer may share an aligned NumPy buffer, and the tensor
    # must keep the values it was made from when the user writes to ``data``
    return host_to_device(np.array(data, dtype=want, copy=True))


def _untracked_elements(data: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
    """``data`` with each tensor in it (at any depth) replaced by its array, for JAX to
    convert without a copy to the host (a traced tensor under ``tg.jit`` has no host value,
    and NumPy cannot tell a list of bfloat16 tensors from a list of numbers); ``data``
    itself when it holds no tensor.

    Raises:
        TypeError: a tensor in it requires grad, or a NumPy masked array (``_refuse_masked``).
    """
    out: list[Any] | None = None
    for i, item in enumerate(data):
        if isinstance(item, (list, tuple)):
            new: Any = _untracked_elements(item)
        elif isinstance(item, np.ndarray):
            _refuse_masked(item)
            continue
        elif isinstance(item, Tensor):
            if item.requires_grad:
                raise TypeError(
                    "tg.tensor: the list holds a tensor that requires grad; tg.tensor copies "
                    "values and would silently drop its gradient. Use tg.stack([a, b]) (or "
                    "tg.concatenate) to build a tensor that keeps the graph, or .detach() the "
                    "elements to copy only their values."
                )
            new = item.data
        else:
            continue
        if new is not item:
            if out is None:
                out = list(data)
            out[i] = new
    return data if out is None else out


def _refuse_masked(data: np.ndarray) -> None:
    """Refuse a NumPy masked array (``jnp.array`` would use the values under its mask).

    Raises:
        TypeError: says to fill the masked entries first.
    """
    if isinstance(data, np.ma.MaskedArray):
        raise TypeError(
            "tg.tensor cannot convert a NumPy masked array (its mask would be lost, and the "
            "values under it used); fill the masked entries first: tg.tensor(m.filled(0.0))."
        )


def _like(t: Tensor, dtype: Any, requires_grad: bool, device: Any, sharding: Any) -> dict[str, Any]:
    """The keyword arguments of a ``*_like`` result: ``t``'s dtype unless ``dtype`` says;
    the placement given, else ``t``'s own when the user placed ``t`` (a committed array), as
    PyTorch's ``zeros_like`` keeps the device. ``t``: a tensor, or a JAX or NumPy array."""
    data = t.data if isinstance(t, Tensor) else t
    if device is None and sharding is None and committed(data):
        sharding = data.sharding
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
    """A tensor of ``shape`` filled with ``value`` (dtype from ``value`` by JAX's rules).

    ``value``: a number, or a tensor that does not require grad (PyTorch takes a 0-d one;
    ``value * tg.ones(shape)`` keeps a gradient).

    Raises:
        TypeError: ``value`` requires grad, or ``dtype`` is not a dtype.
        OverflowError: without ``dtype``, an int ``value`` beyond int32 (x64 off) or int64.
    """
    if isinstance(value, Tensor):
        if value.requires_grad:
            raise TypeError(
                "tg.full: the fill value requires grad; tg.full copies the value and would "
                "drop its gradient. Write value * tg.ones(shape) to keep it, or pass "
                "value.detach()."
            )
        value = value.data
    if dtype is None:
        dt = np.dtype(jnp.result_type(value))
        _check_fits("tg.full", [value], dt)
    else:  # converted as XLA converts (``jnp.full``: out-of-range values wrap or saturate)
        dt = as_dtype(dtype, "tg.full")
    return _finish(filled(_shape(shape), value, dt), requires_grad, device, sharding, "full")


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
    data = filled(_shape(shape, sizes), 0, as_dtype(dtype, "tg.zeros"))
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
    data = filled(_shape(shape, sizes), 1, as_dtype(dtype, "tg.ones"))
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
    """Evenly spaced values in ``[start, stop)``, as ``jnp.arange``. Python int bounds and
    step without ``dtype`` (``tg.arange(T)``, positions) are counted on the host and moved
    to the device (``kernels.host_to_device``): the same values, and no compile (JAX's
    arange compiles three kernels per length, ~0.1 s of a first run).

    Raises:
        ValueError: ``step`` is 0, or a bound or the step is not finite.
        OverflowError: without ``dtype``, an int bound or step beyond int32 (x64 off) or
            int64, which JAX would wrap around silently (with ``dtype``, it converts as XLA).
    """
    numbers = [v for v in (start, stop, step) if isinstance(v, _REAL)]
    if not all(math.isfinite(v) for v in numbers) or (isinstance(step, _REAL) and step == 0):
        raise ValueError(
            f"tg.arange: step must be nonzero and the bounds and step finite, got start={start},"
            f" stop={stop}, step={step}."
        )
    data = None
    if dtype is None:
        if numbers:
            kind = np.dtype(jnp.result_type(*numbers))
            _check_fits("tg.arange", numbers, kind)
            bounds = (start, step) if stop is None else (start, stop, step)
            if all(b.__class__ is int for b in bounds):  # exact on the host: no compile
                data = host_to_device(np.arange(start, stop, step, dtype=kind))
    else:
        dtype = as_dtype(dtype, "tg.arange")
    if data is None:  # as the caller gave it: ``jnp.arange(n)`` is an iota, nothing moved
        data = (
            jnp.arange(start, dtype=dtype)
            if stop is None and step.__class__ is int and step == 1  # (a typed step: its dtype)
            else jnp.arange(start, stop, step, dtype=dtype)
        )
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
    data = random.normal(key_of(key), _shape(shape, sizes), as_dtype(dtype, "tg.randn"))
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
    data = random.uniform(key_of(key), _shape(shape, sizes), as_dtype(dtype, "tg.rand"))
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
