"""``tg.save`` / ``tg.load``: nested dicts of tensors and numbers in one safetensors file."""

from __future__ import annotations

import io
import json
import os
from typing import Any, BinaryIO, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Sharding

from tapegrad._arrays import deleted
from tapegrad._placement import resolve
from tapegrad._tensor import Tensor
from tapegrad.errors import DeviceError, donated_error

__all__ = ["save", "load"]

_META_KEY = "tapegrad.structure"
_FORMAT = 1
_Path = str | os.PathLike[str]
# The dtypes safetensors stores, by its name and NumPy's (safetensors.numpy writes ``dtype.name``;
# its reader cannot name the float8 ones, which ml_dtypes, shipped with JAX, registers with NumPy)
_DTYPES = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "F16": "float16",
    "BF16": "bfloat16",
    "U32": "uint32",
    "I32": "int32",
    "F32": "float32",
    "U64": "uint64",
    "I64": "int64",
    "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
}


def _encode(obj: Any, path: tuple[str, ...], arrays: dict[str, np.ndarray]) -> Any:
    """``obj`` as JSON data, tensors moved into ``arrays`` under their path's name."""
    where = "/".join(path) or "the object"
    if isinstance(obj, (Tensor, jax.Array, np.ndarray)):
        array = obj.data if isinstance(obj, Tensor) else obj
        if deleted(array):
            raise donated_error(f"tg.save: {where}")
        if jnp.issubdtype(array.dtype, jax.dtypes.prng_key):
            raise TypeError(
                f"tg.save: {where} is a typed PRNG key array ({array.dtype}), which has no "
                "NumPy form; save its bits instead, jax.random.key_data(key), and rebuild the "
                "key after tg.load with jax.random.wrap_key_data(bits)."
            )
        if array.dtype.name not in _DTYPES.values():
            raise TypeError(
                f"tg.save: {where} is {array.dtype}, which safetensors cannot store; convert it "
                f"first (t.astype(...)) to one of {', '.join(_DTYPES.values())}."
            )
        if isinstance(array, jax.Array) and not array.is_fully_addressable:
            raise ValueError(
                f"tg.save: {where} is a global array whose shards live in several processes "
                f"({len(array.sharding.device_set)} devices; this process holds "
                f"{len(array.addressable_shards)} shards), so no process has all its values. "
                "Gather it first, in every process: jax.experimental.multihost_utils."
                "process_allgather(t.data, tiled=True), then save from one process."
            )
        name = "/".join(path) or "tensor"
        while name in arrays:
            name += "'"
        host = np.asarray(array)  # exact bytes, no conversion
        arrays[name] = host if host.flags.c_contiguous else host.copy(order="C")
        return {"__tensor__": name}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return obj.item()
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"tg.save: key {key!r} at {'/'.join(path) or 'the top'} is a "
                    f"{type(key).__name__}; dict keys must be strings."
                )
            out[key] = _encode(value, (*path, key), arrays)
        return {"__dict__": out}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, (*path, str(i)), arrays) for i, v in enumerate(obj)]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    raise TypeError(
        f"tg.save: {where} is a {type(obj).__name__}; save tensors, arrays, numbers, "
        "strings, None, and dicts, lists or tuples of them (e.g. model.state_dict())."
    )


def _decode(data: Any, tensors: dict[str, Tensor]) -> Any:
    if isinstance(data, list):
        return [_decode(v, tensors) for v in data]
    if isinstance(data, dict):
        if "__tensor__" in data:
            return tensors[data["__tensor__"]]
        if "__tuple__" in data:  # a tuple comes back a tuple (torch.load's pickle does)
            return tuple(_decode(v, tensors) for v in data["__tuple__"])
        return {k: _decode(v, tensors) for k, v in data["__dict__"].items()}
    return data


def _read(source: _Path | BinaryIO) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """The metadata and the arrays, by name in name order, of the safetensors file at
    ``source`` (a path, or a binary file object read to its end).

    safetensors checks the file; its bytes are then viewed here in each tensor's dtype (the
    float8 ones included, which safetensors' NumPy reader cannot name).

    Raises:
        FileNotFoundError: no file at ``source``.
        ValueError: not a complete safetensors file, or a tensor in a dtype not in ``_DTYPES``.
    """
    from safetensors import SafetensorError, deserialize, safe_open

    where = _where(source)
    try:
        if isinstance(source, (str, os.PathLike)):
            with safe_open(source, framework="numpy") as f:  # checks without reading it all
                f.metadata()
            with open(source, "rb") as file:
                raw = file.read()
        else:
            if isinstance(source, io.TextIOBase):
                raise TypeError(
                    f"tg.load: {where} is a text file object; open the file in binary mode: "
                    "open(name, 'rb')."
                )
            raw = _one_file(source)
            deserialize(raw)  # type: ignore[no-untyped-call]  # the check of a buffer
    except SafetensorError as err:
        size = os.path.getsize(source) if isinstance(source, (str, os.PathLike)) else len(raw)
        raise ValueError(
            f"tg.load: {where} ({size} bytes) is not a complete safetensors file ({err}); it "
            "is truncated or in another format. Save checkpoints with tg.save."
        ) from None
    length = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + length])
    data = np.frombuffer(raw, np.uint8, offset=8 + length)
    meta = header.pop("__metadata__", None) or {}
    arrays = {}
    for name in sorted(header):
        info = header[name]
        if info["dtype"] not in _DTYPES:
            raise ValueError(
                f"tg.load: {name!r} in {where} has the safetensors dtype {info['dtype']}, "
                f"which tg.load cannot read; convert it to one of {', '.join(_DTYPES)} with "
                "the tool that wrote the file."
            )
        begin, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        arrays[name] = data[begin:end].view(dtype).reshape(info["shape"])
    return meta, arrays


def _one_file(stream: BinaryIO) -> bytes:
    """The bytes of the one safetensors file at ``stream``'s position (its header says how
    many), so that files saved one after another into one stream load one after another;
    what is there when the header is not readable (for the check to reject)."""
    head = stream.read(8)
    if len(head) < 8:
        return head
    length = int.from_bytes(head, "little")
    header = stream.read(length) if length < 100_000_000 else b""
    try:
        entries = json.loads(header)
        size = max(
            [int(v["data_offsets"][1]) for k, v in entries.items() if k != "__metadata__"] or [0]
        )
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return head + header + stream.read()
    return head + header + stream.read(size)


def _where(source: _Path | BinaryIO) -> str:
    """How messages name a file: its path, or the file object's name when it has one."""
    if isinstance(source, (str, os.PathLike)):
        return repr(os.fspath(source))
    name = getattr(source, "name", None)
    return repr(name) if isinstance(name, str) else f"the {type(source).__name__} object"


def _tensor(name: str, host: np.ndarray, where: str) -> Tensor:
    """``host`` as a tensor, in the dtype JAX gives it (64-bit ones narrowed with x64 off).

    Raises:
        ValueError: 64-bit integers that narrowing would change (out of the 32-bit range).
    """
    narrow = jax.dtypes.canonicalize_dtype(host.dtype)
    if host.dtype.kind in "iu" and narrow != host.dtype:
        info = np.iinfo(narrow)
        outside = host[(host < info.min) | (host > info.max)]
        if outside.size:
            raise ValueError(
                f"tg.load: {name!r} in {where} is {host.dtype} and holds {outside.size} "
                f"value(s) outside the {narrow} range (e.g. {outside[0]}), which JAX, with "
                f"64-bit types off, would store as {narrow} and change. Turn x64 on before "
                "loading: jax.config.update('jax_enable_x64', True)."
            )
    return Tensor(jnp.asarray(host))


def save(obj: Any, path: _Path | BinaryIO) -> None:
    """Write ``obj`` (a state dict: nested dicts, lists and tuples of tensors and numbers) to
    ``path`` in safetensors format; ``path`` may also be a binary file object open for
    writing (``io.BytesIO()``, ``open(name, "wb")``: written at its position, as
    ``torch.save`` writes).

    Tensors are stored as safetensors tensors, bit for bit in their dtype (named by their
    path, ``"fc.weight"`` for a module's state dict, so other safetensors readers find
    them); everything else is JSON in the file's metadata. ``tg.load`` in any process gives
    back equal values (64-bit ones: see ``tg.load``). The file is written to a temporary name
    and renamed, so an interrupted save never leaves a truncated checkpoint at ``path``.

    Raises:
        TypeError: something that is not a tensor, an array, a number, a string, ``None``,
            a dict with string keys or a list; a typed PRNG key array (save
            ``jax.random.key_data(key)`` instead); a dtype safetensors cannot store (float4,
            int4, some float8 variants).
        RuntimeError: a tensor whose array was donated to a ``tg.jit`` step.
        ValueError: a global array sharded over several processes (gather it first).
        FileNotFoundError: the folder ``path`` names does not exist.
        TypeError: ``path`` is neither a path nor an object with a ``write`` method.
    """
    from safetensors.numpy import save as to_bytes
    from safetensors.numpy import save_file

    if isinstance(path, (str, os.PathLike)):
        folder = os.path.dirname(os.path.abspath(os.fspath(path)))
        if not os.path.isdir(folder):
            raise FileNotFoundError(
                f"tg.save: the folder {folder!r} does not exist; create it first "
                "(os.makedirs(folder, exist_ok=True))."
            )
    elif not callable(getattr(path, "write", None)) or isinstance(path, io.TextIOBase):
        raise TypeError(
            f"tg.save: the destination must be a path or a binary file object (open(name, "
            f"'wb'), io.BytesIO()), got {type(path).__name__}."
        )
    arrays: dict[str, np.ndarray] = {}
    structure = _encode(obj, (), arrays)
    meta = {_META_KEY: json.dumps({"format": _FORMAT, "root": structure})}
    if not isinstance(path, (str, os.PathLike)):
        path.write(to_bytes(arrays, metadata=meta))
        return
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        save_file(arrays, tmp, metadata=meta)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load(path: _Path | BinaryIO, map_location: Any = None, weights_only: bool | None = None) -> Any:
    """Read what ``tg.save`` wrote, from a path or a binary file object (read from its
    position to its end): tensors come back as ``Tensor``\\ s that do not require grad
    (load them with ``model.load_state_dict`` / ``opt.load_state_dict``).

    A safetensors file written by another tool (e.g. PyTorch's ``save_file``) loads as a
    flat dict of tensors by name.

    With x64 off (JAX's default), 64-bit tensors come back in 32 bits, as ``jnp.asarray``
    makes them: float64 rounded to float32, int64 and uint64 only when every value fits.

    Args:
        path: a path, or a binary file object.
        map_location: ``torch.load``'s keyword: where to put the tensors, a device as
            constructors' ``device=`` takes it (``"cpu"``, ``"cuda:0"``, a ``torch.device``,
            a ``jax.Device``, an index into ``jax.devices()``). ``None``, or the device
            tensors go to anyway (JAX's default device: ``"cpu"`` on a machine without an
            accelerator), loads them as without it, unplaced; another device places them
            there (committed, as ``device=`` does). A file records no devices, so there is
            nothing to remap: a function or a dict (PyTorch's remappings) or a sharding is a
            ``TypeError`` saying how to move tensors after loading.
        weights_only: ``torch.load``'s keyword, accepted and ignored: ``tg.load`` never
            unpickles. It reads the tensors as raw bytes (safetensors) and everything else as
            JSON, so a file cannot run code whatever this says (PyTorch's
            ``weights_only=True`` guards its pickle loader against that).

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a complete safetensors file (truncated, or another
            format), or holds a dtype tg.load cannot read; or, with x64 off, 64-bit integers
            outside the 32-bit range (turn x64 on before loading). Nothing is returned.
        DeviceError: ``map_location`` names a device this process does not have (e.g.
            ``"cuda:0"`` without a GPU: leave it out to load onto the CPU); checked before
            the file is read.
        TypeError: ``map_location`` is a function, a dict or a sharding.
    """
    del weights_only  # nothing to guard: no pickle (docstring)
    dest: jax.Device | None = None
    if map_location is not None:
        if callable(map_location) or isinstance(map_location, (dict, Sharding)):
            raise TypeError(
                f"tg.load: map_location={type(map_location).__name__} has nothing to remap: a "
                "tg.save file records no devices. Pass a device (map_location='cpu', "
                "'cuda:0', a jax.Device), or load and then move the tensors: "
                "model.load_state_dict(ck) puts each value on its parameter's device or "
                "sharding, tg.device_put(t, device_or_sharding) moves one tensor."
            )
        try:  # a DeviceError before reading the file
            target = resolve(map_location, "tg.load")
        except DeviceError as err:  # its advice names shardings, which map_location refuses
            raise DeviceError(
                str(err).replace(
                    "Pass one of jax.devices(), an index into it, or a jax.sharding.Sharding.",
                    "Pass map_location='cpu', one of jax.devices() or an index into it, or "
                    "leave it out and move the tensors after loading.",
                )
            ) from None
        default = jax.config.jax_default_device  # type: ignore[attr-defined]
        if not isinstance(default, jax.Device):
            default = jax.local_devices(backend=default)[0]
        if target != default:
            dest = cast(jax.Device, target)
    meta, arrays = _read(path)
    tensors = {name: _tensor(name, host, _where(path)) for name, host in arrays.items()}
    if dest is not None:
        tensors = {name: Tensor(jax.device_put(t.data, dest)) for name, t in tensors.items()}
    if _META_KEY not in meta:
        return tensors
    structure = json.loads(meta[_META_KEY])
    return _decode(structure["root"], tensors)
