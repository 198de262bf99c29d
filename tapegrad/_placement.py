"""Where arrays live: resolving a device or sharding, placing arrays, the device memory they
hold (per addressable shard), and clear errors for placements JAX refuses."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import jax
from jax.sharding import Sharding, SingleDeviceSharding

from tapegrad.errors import DeviceError
from tapegrad.origin import format_origin, user_frame

__all__ = [
    "resolve",
    "check_fits",
    "place",
    "committed",
    "placed_like",
    "held_bytes",
    "bytes_by_device",
    "mixed_devices_error",
]

Target = Any
"""A ``jax.Device``, a ``jax.sharding.Sharding``, a device index or a ``"platform:index"``
string (``"cpu:3"``, ``"gpu:0"``)."""


def _where() -> str:
    code, line = user_frame(3)
    return format_origin(code, line)


def resolve(target: Target, what: str) -> jax.Device | Sharding:
    """The ``jax.Device`` or ``Sharding`` that ``target`` names.

    Raises:
        DeviceError: an index or name of a device this process does not have (the message
            lists the devices there are), or a value that names no device.
    """
    if isinstance(target, (jax.Device, Sharding)):
        return target
    platform: str | None = None
    index = target
    if isinstance(target, str):
        platform, _, rest = target.partition(":")
        index = int(rest) if rest.isdigit() else (0 if not rest else None)
    if isinstance(index, int) and not isinstance(index, bool):
        try:
            devices = jax.devices(platform) if platform else jax.devices()
        except (RuntimeError, ValueError):  # an unknown or unavailable backend
            devices = []
        if 0 <= index < len(devices):
            return devices[index]
        raise DeviceError(
            f"{what} at {_where()}: there is no device {target!r}; this process has "
            f"{', '.join(str(d) for d in jax.devices())}. Pass one of jax.devices(), an index "
            "into it, or a jax.sharding.Sharding."
        )
    raise DeviceError(
        f"{what} at {_where()}: {target!r} names no device; pass a jax.Device, a "
        "jax.sharding.Sharding, an index into jax.devices() or a string such as 'cpu:0'."
    )


def check_fits(dest: jax.Device | Sharding, shape: tuple[int, ...], what: str) -> None:
    """Check that a sharding ``dest`` can split an array of ``shape``.

    Raises:
        DeviceError: its mesh does not divide the shape (JAX's ``IndivisibleError``), or its
            spec names more dimensions than the shape has.
    """
    if not isinstance(dest, Sharding):
        return
    try:
        dest.shard_shape(tuple(shape))
    except ValueError as err:
        raise DeviceError(
            f"{what} at {_where()}: the sharding {dest} does not fit shape {tuple(shape)} "
            f"({err}). Each sharded dimension must be divisible by the size of the mesh axes "
            "it is split over: pad the array or change the PartitionSpec."
        ) from None


def place(array: jax.Array, target: Target, what: str) -> jax.Array:
    """``array`` put on ``target`` (a device or a sharding, checked against its shape).

    Raises:
        DeviceError: ``target`` names no device, or its mesh does not divide the shape.
    """
    dest = resolve(target, what)
    check_fits(dest, array.shape, what)
    out: jax.Array = jax.device_put(array, dest)
    return out


def committed(a: Any) -> bool:
    """Whether ``a`` is a concrete ``jax.Array`` the user placed on devices (JAX's
    ``committed``); ``False`` for tracers, which live nowhere yet, and for non-arrays."""
    if isinstance(a, jax.core.Tracer):
        return False
    return bool(getattr(a, "committed", False))


def placed_like(array: jax.Array, ref: Any) -> jax.Array:
    """``array`` on ``ref``'s sharding when ``ref`` is an array placed by the user (committed)
    and ``array`` is elsewhere (the backward seed on the root's devices, not the default one).
    """
    if committed(ref):
        sharding = ref.sharding
        if array.sharding != sharding:
            moved: jax.Array = jax.device_put(array, sharding)
            return moved
    return array


_MULTI: list[bool] = []  # [whether a backend of this process has several local devices]


def _multi_device() -> bool:
    """Whether any local backend has more than one device (read once: devices are fixed
    once JAX has started); on one device every array holds ``nbytes``, the fast path."""
    if not _MULTI:
        count = max(jax.local_device_count(), len(jax.local_devices(backend="cpu")))
        _MULTI.append(count > 1)
    return _MULTI[0]


def _shards(a: jax.Array) -> tuple[int, tuple[Any, ...]] | None:
    """Bytes of one shard and the local devices holding one, or ``None`` for an array on one
    device (or a tracer, which holds no device memory of its own)."""
    try:
        sharding = a.sharding
        if sharding.__class__ is SingleDeviceSharding:
            return None
        shape = sharding.shard_shape(a.shape)
        devices = tuple(sharding.addressable_devices)
    except Exception:  # noqa: BLE001 - a tracer's abstract sharding
        return None
    return math.prod(shape) * a.dtype.itemsize, devices


def held_bytes(a: jax.Array) -> int:
    """The device memory ``a`` holds in this process: the bytes of its addressable shards (an
    array replicated on 8 devices counts 8 copies; on one device, ``nbytes``)."""
    if _MULTI[0] if _MULTI else _multi_device():
        shards = _shards(a)
        if shards is not None:
            return shards[0] * len(shards[1])
    aval = a.aval  # sized once per shape and dtype: every node a sweep frees sizes its arrays
    n = _NBYTES.get(aval)
    if n is None:
        if len(_NBYTES) >= 4096:
            _NBYTES.clear()
        n = _NBYTES[aval] = math.prod(aval.shape) * aval.dtype.itemsize
    return n


_NBYTES: dict[Any, int] = {}  # aval -> bytes of an array of that shape and dtype


def bytes_by_device(arrays: Iterable[jax.Array]) -> dict[str, int]:
    """The bytes of ``arrays`` (each counted once) on each local device, by device name;
    tracers hold none."""
    out: dict[str, int] = {}
    seen: set[int] = set()
    for a in arrays:
        if id(a) in seen:
            continue
        seen.add(id(a))
        shards = _shards(a)
        if shards is None:
            try:
                devices: tuple[Any, ...] = tuple(a.devices())
            except Exception:  # noqa: BLE001 - a tracer lives on no device
                continue
            nbytes = int(a.size) * a.dtype.itemsize
        else:
            nbytes, devices = shards
        for d in devices:
            out[str(d)] = out.get(str(d), 0) + nbytes
    return out


def mixed_devices_error(op: str, arrays: list[Any], depth: int) -> DeviceError | None:
    """A ``DeviceError`` naming ``op`` and its origin when ``arrays`` are committed to
    different devices JAX will not relate (what made the forward raise), else ``None``."""
    placed = [(i, a) for i, a in enumerate(arrays) if committed(a)]
    sets = {frozenset(a.sharding.device_set) for _, a in placed}
    if len(sets) < 2:
        return None
    code, line = user_frame(depth + 1)
    where = ", ".join(
        f"input {i} on {sorted(str(d) for d in a.sharding.device_set)}" for i, a in placed
    )
    return DeviceError(
        f"{op} at {format_origin(code, line)}: its inputs live on different devices ({where}) "
        "and no sharding relates them. Move them together first: tg.device_put(t, "
        "other.sharding), or build both on one Mesh (NamedSharding)."
    )
