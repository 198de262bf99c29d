"""Tensor constructors: from data, filled, ranges, random; dtypes by JAX's rules.

Every constructor (but ``multinomial``, which draws from a tensor) takes ``device=`` (a
``jax.Device``, an index into ``jax.devices()`` or a string such as ``"cpu:3"``) or
``sharding=`` (a ``jax.sharding.Sharding``, e.g. a ``NamedSharding`` over a ``Mesh``) and
places its result there; without either, JAX's default device (``*_like`` constructors keep
the placement of a tensor the user placed). A device that does not exist or a sharding that
does not divide the shape raises ``tg.DeviceError`` (a ``ValueError``); both together,
``TypeError``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from functools import partial
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
from tapegrad.kernels import host_to_device, kernel
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
    "linspace",
    "eye",
    "full_like",
    "empty",
    "empty_like",
    "randint",
    "randperm",
    "multinomial",
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
        if value.__class__ is int and dt.kind in "iu":  # beyond what JAX reads a Python int
            _check_fits("tg.full", [value], np.dtype(jnp.result_type(int)))  # as: int32/64
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


def empty(
    shape: ShapeLike,
    *sizes: int,
    dtype: Any = jnp.float32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """PyTorch's ``torch.empty``: a tensor of ``shape``, here filled with zeros (JAX has no
    uninitialised memory: every array is written when it is made), so it is
    :func:`zeros` under PyTorch's name; ``shape`` and ``dtype`` as for :func:`zeros`.

    Raises:
        TypeError: a size is not an int, a tuple shape is followed by more sizes, or
            ``dtype`` is not a dtype.
        ValueError: a negative size.
    """
    data = filled(_shape(shape, sizes), 0, as_dtype(dtype, "tg.empty"))
    return _finish(data, requires_grad, device, sharding, "empty")


def empty_like(
    t: Tensor,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """PyTorch's ``torch.empty_like``: zeros of ``t``'s shape and dtype (or ``dtype``), as
    :func:`zeros_like` (JAX has no uninitialised memory; see :func:`empty`)."""
    return empty(t.shape, **_like(t, dtype, requires_grad, device, sharding))


def full_like(
    t: Tensor,
    value: Any,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """``value`` in every element of a tensor of ``t``'s shape and dtype (or ``dtype``), as
    ``torch.full_like`` and ``np.full_like``: the value is converted to that dtype (2.7
    becomes 2 in an int32 tensor). ``t``: a tensor, or a JAX or NumPy array; its placement is
    kept as for :func:`zeros_like`.

    Raises:
        TypeError: ``value`` is a tensor that requires grad (see :func:`full`), or ``dtype``
            is not a dtype.
    """
    return full(t.shape, value, **_like(t, dtype, requires_grad, device, sharding))


def _on_device(host: np.ndarray) -> jax.Array:
    """``host`` (a private array nothing else writes, in a dtype JAX keeps) on JAX's default
    device without a compile (``kernels.host_to_device``); ``jnp.asarray`` where that
    leaves it to JAX (under a trace it becomes a constant of the computation)."""
    if host.dtype.kind in "biufc":
        moved = host_to_device(host)
        if moved is not None:
            return moved
    return jnp.asarray(host)


def _scalar_bound(value: Any, name: str, what: str) -> Any:
    """A bound of a range (``tg.linspace``'s ``start``/``stop``): a number, or a tensor's
    array when it does not require grad.

    Raises:
        TypeError: a tensor that requires grad (the copy would drop its gradient).
    """
    if isinstance(value, Tensor):
        if value.requires_grad:
            raise TypeError(
                f"{what}: {name} requires grad; {what} copies the value and would drop its "
                "gradient. Write start + (stop - start) * tg.linspace(0.0, 1.0, num) to keep "
                f"it, or pass {name}.detach()."
            )
        return value.data
    return value


def linspace(
    start: Any,
    stop: Any,
    num: int | None = None,
    *,
    endpoint: bool = True,
    steps: int | None = None,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop``, as ``np.linspace`` (NumPy's
    signature; ``torch.linspace(start, end, steps)`` reads the same by position).

    The values are NumPy's: ``np.linspace`` of the bounds in float64 (complex128 for complex
    bounds), rounded once to ``dtype``, computed on the host and moved to the device without
    a compile (a traced bound, under ``tg.jit``: ``jnp.linspace``, within a rounding of
    these). ``torch.linspace`` computes in the dtype itself, so its float32 values may differ
    from these in the last bit.

    Args:
        start, stop: the first and the last value (numbers, or 0-d tensors that do not
            require grad).
        num: how many values (50 when neither ``num`` nor ``steps`` is given, as in NumPy;
            PyTorch requires it).
        endpoint: include ``stop`` (the default); ``False`` leaves it out, spacing ``num``
            values by ``(stop - start) / num``.
        steps: PyTorch's name of ``num``, as a keyword.
        dtype: the result's dtype; by default JAX's float type of the bounds (x64 off:
            float32; complex bounds: complex64). An integer dtype floors the values, as
            NumPy and ``jnp.linspace`` do (``torch.linspace`` truncates toward zero: they
            differ for negative non-integral values).
        requires_grad: make the result a leaf that requires grad (a float dtype).

    Returns:
        A tensor of shape ``(num,)``.

    Raises:
        TypeError: both ``num`` and ``steps`` given; ``num`` not an int; a bound is a tensor
            that requires grad (the message shows how to keep its gradient); ``dtype`` is not
            a dtype.
        ValueError: ``num`` is negative; with an integer ``dtype``, a bound outside its range.
    """
    if steps is not None:
        if num is not None:
            raise TypeError(
                f"tg.linspace: num={num} and steps={steps} both given; steps is PyTorch's name "
                "of num: pass one of them."
            )
        num = steps
    count = 50 if num is None else _args.integer(num, "tg.linspace: num")
    if count < 0:
        raise ValueError(f"tg.linspace: num must be >= 0, got {count}.")
    start = _scalar_bound(start, "start", "tg.linspace")
    stop = _scalar_bound(stop, "stop", "tg.linspace")
    if dtype is None:  # as jnp.linspace: the inexact type of the bounds, by JAX's rules
        dt = np.dtype(jnp.result_type(start, stop, float))
    else:
        dt = np.dtype(jax.dtypes.canonicalize_dtype(as_dtype(dtype, "tg.linspace")))
    if dt.kind in "iu":
        info = np.iinfo(dt)
        for v in (start, stop):
            if np.ndim(v) == 0 and not isinstance(v, jax.core.Tracer):
                if not info.min <= np.real(v) <= info.max:
                    raise ValueError(
                        f"tg.linspace: {v} is outside the range of {dt} ({info.min} to "
                        f"{info.max}); pass a wider dtype, or a float one."
                    )
    if isinstance(start, jax.core.Tracer) or isinstance(stop, jax.core.Tracer):
        data = jnp.linspace(start, stop, count, endpoint=endpoint, dtype=dt)
    else:
        a, b = np.asarray(start), np.asarray(stop)
        wide = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(b) else np.float64
        host = np.linspace(a.astype(wide), b.astype(wide), count, endpoint=endpoint)
        if dt.kind in "iu":
            host = np.floor(host)
        data = _on_device(host.astype(dt))
    return _finish(data, requires_grad, device, sharding, "linspace")


_HOST_EYE_BYTES = 1 << 20
"""An identity matrix of at most this many bytes is made on the host (no compile); a larger
one by ``jnp.eye`` (a compiled kernel per shape: no large transfer)."""


def eye(
    n: int,
    m: int | None = None,
    *,
    k: int = 0,
    dtype: Any = jnp.float32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """An ``n`` by ``m`` matrix (``m`` defaults to ``n``) with ones on its diagonal and zeros
    elsewhere, float32 unless ``dtype`` says otherwise (``torch.eye(n, m)``, ``np.eye``).

    Args:
        n, m: the numbers of rows and of columns.
        k: which diagonal holds the ones, as in NumPy: 0 the main one, above it > 0, below
            it < 0.

    Raises:
        TypeError: ``n``, ``m`` or ``k`` is not an int, or ``dtype`` is not a dtype.
        ValueError: ``n`` or ``m`` is negative.
    """
    rows = _args.integer(n, "tg.eye: n")
    cols = rows if m is None else _args.integer(m, "tg.eye: m")
    diag = _args.integer(k, "tg.eye: k")
    if rows < 0 or cols < 0:
        raise ValueError(f"tg.eye: the shape ({rows}, {cols}) has a negative dimension.")
    dt = np.dtype(jax.dtypes.canonicalize_dtype(as_dtype(dtype, "tg.eye")))
    if rows * cols * dt.itemsize <= _HOST_EYE_BYTES:
        data = _on_device(np.eye(rows, cols, diag, dtype=dt))
    else:
        data = jnp.eye(rows, cols, diag, dtype=dt)
    return _finish(data, requires_grad, device, sharding, "eye")


def _integer_dtype(dtype: Any, what: str) -> np.dtype[Any]:
    """``dtype`` as the integer dtype JAX keeps (x64 off: int64 is int32).

    Raises:
        TypeError: ``dtype`` is not a dtype, or not an integer one.
    """
    asked = as_dtype(dtype, what)
    if asked.kind not in "iu":
        raise TypeError(
            f"{what}: dtype {asked} is not an integer dtype; draw integers and convert them: "
            f"{what}(...).astype(tg.float32)."
        )
    return np.dtype(jax.dtypes.canonicalize_dtype(asked))


def _range_error(what: str, first: int, last: int, asked: Any, kept: np.dtype[Any]) -> ValueError:
    """The error for values ``first`` to ``last`` that dtype ``kept`` cannot hold."""
    info = np.iinfo(kept)
    fix = (
        f"with 64-bit types off (JAX's default) {np.dtype(asked)} is {kept}: turn them on "
        "with jax.config.update('jax_enable_x64', True) at the start of the program"
        if np.dtype(asked) != kept
        else "pass a dtype that holds them"
    )
    return ValueError(
        f"{what}: values from {first} to {last} do not fit {kept} ({info.min} to "
        f"{info.max}); {fix}."
    )


def randint(
    low: int = 0,
    high: Any = None,
    size: ShapeLike | None = None,
    *,
    key: Any = None,
    dtype: Any = jnp.int32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """Integers drawn uniformly from ``[low, high)`` (``jax.random.randint``), read as
    ``torch.randint`` reads its arguments: ``tg.randint(10, (3,))`` draws 3 values from
    ``[0, 10)``, ``tg.randint(2, 10, (3,))`` from ``[2, 10)``; the arguments may be keywords
    (``tg.randint(10, size=(3,))``, ``tg.randint(high=10, size=(3,))``). Without ``size``,
    one value of shape ``()``, as NumPy.

    Args:
        low: the smallest value (0 by default); the exclusive upper bound when ``high`` is
            not given, or when the size follows it directly (as in PyTorch).
        high: the exclusive upper bound.
        size: the shape: an int or a sequence of ints.
        key: an int seed or a ``jax.random`` key; ``None`` draws from the process random
            state (``tg.manual_seed``), which advances.
        dtype: an integer dtype (int32 by default; PyTorch's default, int64, needs x64 on in
            JAX). Every value of ``[low, high)`` must fit it.

    Raises:
        TypeError: a bound is not an int (floats are not truncated), a size is not an int,
            ``dtype`` is not an integer dtype (draw integers and ``.astype`` them), or
            ``key`` is not a key (``randn``).
        ValueError: ``low >= high`` (an empty range), or values of ``[low, high)`` that
            ``dtype`` cannot hold.
    """
    if size is None and isinstance(high, (tuple, list)):  # torch.randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=...)
        low, high = 0, low
    lo = _args.integer(low, "tg.randint: low")
    hi = _args.integer(high, "tg.randint: high")
    shape = () if size is None else _shape(size)
    kept = _integer_dtype(dtype, "tg.randint")
    if lo >= hi:
        hint = (
            f" The size goes third, or as a tuple: tg.randint({lo}, ({hi},)) draws {hi} "
            f"values from [0, {lo})."
            if size is None
            else ""
        )
        raise ValueError(
            f"tg.randint: low ({lo}) must be less than high ({hi}): values are drawn from "
            f"[low, high).{hint}"
        )
    info = np.iinfo(kept)
    if lo < info.min or hi - 1 > info.max:
        raise _range_error("tg.randint", lo, hi - 1, dtype, kept)
    k = key_of(key)
    data: jax.Array
    if hi - 1 < info.max:
        data = jax.random.randint(k, shape, np.asarray(lo, kept), np.asarray(hi, kept), kept)
    elif lo > info.min:  # high is one past the dtype's largest value, which it cannot hold
        data = jax.random.randint(
            k, shape, np.asarray(lo - 1, kept), np.asarray(hi - 1, kept), kept
        )
        data = data + np.asarray(1, kept)
    else:  # every value of the dtype: its bits
        bits = jax.random.bits(k, shape, np.dtype(f"uint{8 * kept.itemsize}"))
        data = bits if kept.kind == "u" else jax.lax.bitcast_convert_type(bits, kept)
    return _finish(data, requires_grad, device, sharding, "randint")


def randperm(
    n: int,
    *,
    key: Any = None,
    dtype: Any = jnp.int32,
    requires_grad: bool = False,
    device: Any = None,
    sharding: Any = None,
) -> Tensor:
    """A random permutation of ``0, 1, ..., n - 1`` (``jax.random.permutation``), as
    ``torch.randperm(n)``.

    Args:
        n: how many values (0 gives an empty tensor).
        key: an int seed or a ``jax.random`` key; ``None`` draws from the process random
            state (``tg.manual_seed``), which advances.
        dtype: an integer dtype (int32 by default) that holds ``n - 1``.

    Returns:
        A tensor of shape ``(n,)``.

    Raises:
        TypeError: ``n`` is not an int, or ``dtype`` is not an integer dtype.
        ValueError: ``n`` is negative, or ``n - 1`` does not fit ``dtype``.
    """
    count = _args.integer(n, "tg.randperm: n")
    if count < 0:
        raise ValueError(f"tg.randperm: n must be >= 0, got {count}.")
    kept = _integer_dtype(dtype, "tg.randperm")
    if count - 1 > np.iinfo(kept).max:
        raise _range_error("tg.randperm", 0, count - 1, dtype, kept)
    data = jax.random.permutation(key_of(key), count)
    if data.dtype != kept:
        data = data.astype(kept)
    return _finish(data, requires_grad, device, sharding, "randperm")


@partial(kernel, static_argnames=("num_samples", "replacement"))
def _multinomial(
    key: jax.Array, weights: jax.Array, *, num_samples: int, replacement: bool
) -> tuple[jax.Array, jax.Array]:
    """``num_samples`` category indices per row of ``weights`` (categories on the last
    axis), and ``[any weight negative, NaN or infinite, fewest positive weights in a row]``
    for the caller's checks, in one compiled call.

    Drawn in log space, so rows need no normalising (and cannot overflow): with replacement
    ``jax.random.categorical`` of the log-weights; without, the Gumbel top-k trick (the
    ``num_samples`` largest of log-weight plus Gumbel noise are, in order, a draw without
    replacement: each is drawn from the weights the earlier ones left)."""
    logits = jnp.log(weights)  # 0 -> -inf: never drawn
    if replacement:
        draws = jax.random.categorical(
            key, logits, axis=-1, shape=(num_samples, *weights.shape[:-1])
        )
        samples = jnp.moveaxis(draws, 0, -1)
    else:
        noisy = logits + jax.random.gumbel(key, weights.shape, weights.dtype)
        _, samples = jax.lax.top_k(noisy, num_samples)
    bad = jnp.any(~(weights >= 0) | jnp.isinf(weights))  # NaN fails weights >= 0
    fewest = jnp.min(jnp.sum(weights > 0, axis=-1), initial=weights.shape[-1])
    info = jnp.stack([bad.astype(jnp.int32), fewest.astype(jnp.int32)])
    return samples.astype(jnp.int32), info


def multinomial(
    probs: Any, num_samples: int, replacement: bool = False, *, key: Any = None
) -> Tensor:
    """Category indices drawn from the weights in ``probs``, as ``torch.multinomial``.

    Args:
        probs: a 1-D tensor of non-negative weights (one per category), or a 2-D one (a row
            of weights per draw); rows need not sum to 1, and a zero weight is never drawn.
            A tensor (its values: no gradient flows through a draw), a JAX or NumPy array or
            a list. Integer weights are read as float32, half-precision ones in float32.
        num_samples: how many indices to draw per row.
        replacement: draw with replacement (indices may repeat); by default without
            (distinct indices per row, in the order drawn: the first is a draw from all the
            weights, the next from those left).
        key: an int seed or a ``jax.random`` key; ``None`` draws from the process random
            state (``tg.manual_seed``), which advances.

    Returns:
        An int32 tensor (PyTorch's is int64) of shape ``(num_samples,)`` for 1-D ``probs``,
        ``(rows, num_samples)`` for 2-D, that does not require grad, on ``probs``' device.

    Raises:
        TypeError: ``num_samples`` is not an int; complex ``probs``.
        ValueError: ``probs`` is not 1-D or 2-D or has no categories; ``num_samples`` < 1;
            a weight is negative, NaN or infinite; a row has no positive weight; without
            replacement, ``num_samples`` is larger than a row's number of positive weights
            (PyTorch raises for each of these). The weight checks read two numbers back from
            the device (a wait for the draw); under ``tg.jit`` or ``jax.jit``, where nothing
            can be read, they are not made.
    """
    weights = probs.data if isinstance(probs, Tensor) else jnp.asarray(probs)
    count = _args.integer(num_samples, "tg.multinomial: num_samples")
    if weights.ndim not in (1, 2) or weights.shape[-1] == 0:
        raise ValueError(
            f"tg.multinomial: probs must be 1-D (one weight per category) or 2-D (a row of "
            f"weights per draw) with at least one category, got shape {tuple(weights.shape)}."
        )
    if count < 1:
        raise ValueError(f"tg.multinomial: num_samples must be at least 1, got {count}.")
    categories = weights.shape[-1]
    if not replacement and count > categories:
        raise ValueError(
            f"tg.multinomial: cannot draw {count} samples without replacement from "
            f"{categories} categories; pass replacement=True, or num_samples <= {categories}."
        )
    if jnp.issubdtype(weights.dtype, jnp.complexfloating):
        raise TypeError(
            f"tg.multinomial: probs is {weights.dtype}; weights must be real (take abs() or "
            "the real part first)."
        )
    if not jnp.issubdtype(weights.dtype, jnp.floating) or weights.dtype.itemsize < 4:
        weights = weights.astype(jnp.float32)
    samples, info = _multinomial(
        key_of(key), weights, num_samples=count, replacement=bool(replacement)
    )
    if not isinstance(info, jax.core.Tracer):
        bad, fewest = (int(v) for v in np.asarray(info))
        if bad:
            raise ValueError(
                "tg.multinomial: probs holds a negative, NaN or infinite weight; weights must "
                "be finite and >= 0 (as in PyTorch). Check what computed them, e.g. "
                "tg.isfinite(probs).all()."
            )
        if fewest == 0:
            raise ValueError(
                "tg.multinomial: a row of probs has no positive weight (all zeros): there is "
                "nothing to draw from in it."
            )
        if not replacement and fewest < count:
            raise ValueError(
                f"tg.multinomial: cannot draw {count} samples without replacement from a row "
                f"with only {fewest} positive weight(s) (a zero weight is never drawn); pass "
                "replacement=True, or fewer samples."
            )
    return wrap(samples)
