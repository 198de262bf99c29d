"""Where arrays live: resolving a device or sharding, placing arrays, the device memory they
hold (per addressable shard), and clear errors for placements JAX refuses."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding

from tapegrad.errors import DeviceError
from tapegrad.origin import format_origin, user_frame

__all__ = [
    "resolve",
    "check_fits",
    "place",
    "committed",
    "placed_like",
    "replicated_like",
    "constrained_like",
    "held_bytes",
    "NBYTES",
    "multi_device",
    "bytes_by_device",
    "placement_key",
    "device_groups",
    "mixed_devices_error",
]

Target = Any
"""A ``jax.Device``, a ``jax.sharding.Sharding``, a device index, a ``"platform:index"``
string (``"cpu:3"``, ``"gpu:0"``) or a ``torch.device`` (read as its string)."""


_ACCELERATORS = {
    "cuda": ("GPU", "cuda12"),
    "gpu": ("GPU", "cuda12"),
    "rocm": ("GPU", "rocm"),
    "tpu": ("TPU", "tpu"),
}
"""Platform names of accelerators: what a ``DeviceError`` calls them, and the extra of the
``jax`` package that brings their backend."""


def _where() -> str:
    code, line = user_frame(3)
    return format_origin(code, line)


def resolve(target: Target, what: str) -> jax.Device | Sharding:
    """The ``jax.Device`` or ``Sharding`` that ``target`` names.

    Raises:
        DeviceError: an index or name of a device this process does not have (the message
            lists the devices there are), a device of another process (multi-process runs:
            ``jax.devices()`` lists every process's devices), or a value that names no device.
    """
    if isinstance(target, Sharding):
        return target
    if isinstance(target, jax.Device):
        return _local(target, target, what)
    if type(target).__name__ == "device" and type(target).__module__ == "torch":
        target = str(target)  # torch.device("cuda", 0): "cuda:0", as a PyTorch program says
    platform: str | None = None
    index = target
    if isinstance(target, str):
        platform, _, rest = target.partition(":")
        index = int(rest) if rest.isdigit() else (0 if not rest else None)
    elif not isinstance(target, bool):
        try:
            index = operator.index(target)  # NumPy integers too, as axes take them
        except TypeError:
            index = None
    if isinstance(index, int) and not isinstance(index, bool):
        try:
            devices = jax.devices(platform) if platform else jax.devices()
        except (RuntimeError, ValueError):  # an unknown or unavailable backend
            devices = []
        if 0 <= index < len(devices):
            return _local(devices[index], target, what)
        accelerator = ""
        if platform in _ACCELERATORS and not devices:  # .cuda() habits on a CPU-only JAX
            kind, extra = _ACCELERATORS[platform]
            accelerator = (
                f" JAX sees no {kind} here: the machine has none, or the jax installed has no "
                f"{kind} backend (install one with pip install -U 'jax[{extra}]'). Leave the "
                "device out to stay on the CPU."
            )
        raise DeviceError(
            f"{what} at {_where()}: there is no device {target!r}; this process has "
            f"{', '.join(str(d) for d in jax.devices())}. Pass one of jax.devices(), an index "
            f"into it, or a jax.sharding.Sharding.{accelerator}"
        )
    raise DeviceError(
        f"{what} at {_where()}: {target!r} names no device; pass a jax.Device, a "
        "jax.sharding.Sharding, an index into jax.devices() or a string such as 'cpu:0'."
    )


def _local(device: jax.Device, target: Target, what: str) -> jax.Device:
    """``device`` when this process can place arrays on it; in a multi-process run a device
    of another process (an index into the global ``jax.devices()``) would make an array with
    no data here, so it is refused."""
    if device.process_index == jax.process_index():
        return device
    mine = ", ".join(f"{d} (index {jax.devices().index(d)})" for d in jax.local_devices())
    raise DeviceError(
        f"{what} at {_where()}: {target!r} is device {device} of process "
        f"{device.process_index}, not of this process ({jax.process_index()}); jax.devices() "
        f"lists every process's devices. Place tensors on this process's own devices "
        f"(jax.local_devices(): {mine}), or on a jax.sharding.Sharding over a Mesh of all "
        "processes' devices."
    )


def check_fits(dest: jax.Device | Sharding, shape: tuple[int, ...], what: str) -> None:
    """Check that a sharding ``dest`` can split an array of ``shape``.

    Raises:
        DeviceError: its mesh does not divide the shape (JAX's ``IndivisibleError``), or its
            spec names more dimensions than the shape has.
    """
    if not isinstance(dest, Sharding):
        return
    spec = getattr(dest, "spec", None)
    if spec is not None and len(spec) > len(shape):  # JAX's shard_shape: an IndexError
        raise DeviceError(
            f"{what} at {_where()}: the sharding {dest} splits {len(spec)} dimensions, but "
            f"shape {tuple(shape)} has {len(shape)}. Use a PartitionSpec with at most "
            + (f"{len(shape)} entries." if shape else "0 entries: P() for a scalar.")
        )
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
    and ``array`` is elsewhere (the backward seed on the root's devices, not the default one);
    a traced ``array`` (inside ``tg.jit``, writing into a constant it reached) constrained to
    that sharding."""
    if committed(ref):
        sharding = ref.sharding
        if isinstance(array, jax.core.Tracer):  # a value made inside a trace: constrained
            return jax.lax.with_sharding_constraint(array, sharding)  # type: ignore[no-any-return,no-untyped-call]
        if array.sharding != sharding:
            moved: jax.Array = jax.device_put(array, sharding)
            return moved
    return array


def replicated_like(arrays: Iterable[Any]) -> Sharding | None:
    """Where a computation on ``arrays`` puts a small value it makes (a step count): the
    devices of the first array the user placed (committed), the value replicated on each;
    ``None`` when none is placed (JAX may move them all) or for a sharding of a kind other
    than a single device or a mesh (``NamedSharding``)."""
    for a in arrays:
        if committed(a):
            sharding = a.sharding
            if isinstance(sharding, SingleDeviceSharding):
                return sharding
            if isinstance(sharding, NamedSharding):
                return NamedSharding(sharding.mesh, PartitionSpec())  # type: ignore[no-untyped-call]
            return None
    return None


def loaded_like(array: jax.Array, ref: Any) -> jax.Array:
    """``array``, a value loaded into ``ref`` (a checkpoint's, or a state dict held on other
    devices), placed as ``ref`` is: on its sharding when the user placed it, else uncommitted
    on the default device, as ``ref`` (loading never moves a parameter, and an optimizer's
    uncommitted step count follows its parameters, as when it was made). JAX uncommits only
    through the host: loading is rare, and an array of several processes stays as it is."""
    if committed(ref) or not committed(array) or not array.is_fully_addressable:
        return placed_like(array, ref)
    uncommitted: jax.Array = jnp.asarray(np.asarray(array))
    return uncommitted


def constrained_like(x: Any, ref: Any) -> Any:
    """Inside a trace, ``x`` (a tracer) kept on ``ref``'s sharding when ``ref`` is an array
    placed by the user (a ``tg.jit`` step's new ``.grad`` on its parameter's devices, not
    where XLA's propagation would put it); else ``x`` unchanged."""
    if committed(ref) and isinstance(x, jax.core.Tracer):
        return jax.lax.with_sharding_constraint(x, ref.sharding)  # type: ignore[no-untyped-call]  # JAX leaves it untyped
    return x


_MULTI: list[bool] = []  # [whether a backend of this process has several local devices]


def multi_device() -> bool:
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
    if _MULTI[0] if _MULTI else multi_device():
        shards = _shards(a)
        if shards is not None:
            return shards[0] * len(shards[1])
    aval = a.aval  # sized once per shape and dtype: every node a sweep frees sizes its arrays
    n = NBYTES.get(aval)
    if n is None:
        if len(NBYTES) >= 4096:
            NBYTES.clear()
        n = NBYTES[aval] = math.prod(aval.shape) * aval.dtype.itemsize
    return n


NBYTES: dict[Any, int] = {}
"""aval -> bytes of an array of that shape and dtype on one device (``held_bytes``' cache,
read directly where every swept node is sized: ``census.unhold``)."""


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


def placement_key(a: Any) -> tuple[Any, ...] | None:
    """The devices a committed array is placed on, in its sharding's order (JAX computes on
    committed arrays together only when these are equal: the same devices in another order,
    two Meshes over one device set, are unrelated); ``None`` for an array JAX may move
    (uncommitted) and for tracers."""
    if not committed(a):
        return None
    sharding = a.sharding
    order = getattr(sharding, "_device_assignment", None)  # JAX's own order (private)
    if order is None:  # a JAX without it: the device set, in id order (order not compared)
        order = sorted(sharding.device_set, key=lambda d: d.id)
    return tuple(order)


def device_groups(arrays: Sequence[Any]) -> list[list[int]]:
    """The indices of ``arrays`` grouped by the devices they are committed to
    (``placement_key``), groups in order of first appearance; arrays JAX may move
    (uncommitted) join the first group. One group: JAX can compute on them all together."""
    groups: dict[tuple[Any, ...] | None, list[int]] = {}
    loose = []
    for i, a in enumerate(arrays):
        key = placement_key(a)
        if key is None:
            loose.append(i)
        else:
            groups.setdefault(key, []).append(i)
    out = list(groups.values()) or [[]]
    out[0] = sorted(out[0] + loose)
    return out


def mixed_devices_error(
    op: str,
    arrays: Sequence[Any],
    depth: int,
    names: Sequence[str] | None = None,
    params: Mapping[str, Any] | None = None,
) -> DeviceError | None:
    """A ``DeviceError`` naming ``op`` and its origin when ``arrays`` are committed to
    different devices JAX will not relate (what made the forward raise), else ``None``.
    ``names``: how the message calls each array (``input i`` by default); ``params``: the
    op's parameters, whose arrays (an index, a mask) count too, named by their key."""
    if params:
        extra = [
            (key, leaf)
            for key, value in params.items()
            for leaf in jax.tree_util.tree_leaves(value)
            if isinstance(leaf, jax.Array)
        ]
        if extra:
            names = [*(names or [f"input {i}" for i in range(len(arrays))]), *(k for k, _ in extra)]
            arrays = [*arrays, *(leaf for _, leaf in extra)]
    placed = [(i, key) for i, a in enumerate(arrays) if (key := placement_key(a)) is not None]
    keys = {key for _, key in placed}
    if len(keys) < 2:
        return None
    code, line = user_frame(depth + 1)
    groups: dict[tuple[Any, ...], list[str]] = {}
    for i, key in placed:
        groups.setdefault(key, []).append(names[i] if names is not None else f"input {i}")
    where = "; ".join(
        f"{', '.join(held[:4])}{f' and {len(held) - 4} more' if len(held) > 4 else ''} on "
        f"{[str(d) for d in key]}"
        for key, held in groups.items()
    )
    order = (
        " (the same devices in another order: Meshes built from differently ordered device lists)"
        if len({frozenset(key) for key in keys}) == 1
        else ""
    )
    return DeviceError(
        f"{op} at {format_origin(code, line)}: its inputs live on different devices ({where})"
        f"{order} and no sharding relates them. Move them together first: tg.device_put(t, "
        "other.sharding), or build both on one Mesh (NamedSharding)."
    )
