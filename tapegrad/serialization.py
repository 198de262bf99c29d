"""``tg.save`` / ``tg.load``: nested dicts of tensors and numbers in one safetensors file."""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._tensor import Tensor

__all__ = ["save", "load"]

_META_KEY = "tapegrad.structure"
_FORMAT = 1
_Path = str | os.PathLike[str]


def _encode(obj: Any, path: tuple[str, ...], arrays: dict[str, np.ndarray]) -> Any:
    """``obj`` as JSON data, tensors moved into ``arrays`` under their path's name."""
    if isinstance(obj, (Tensor, jax.Array, np.ndarray)):
        array = obj.data if isinstance(obj, Tensor) else obj
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
        return [_encode(v, (*path, str(i)), arrays) for i, v in enumerate(obj)]
    raise TypeError(
        f"tg.save: {'/'.join(path) or 'the object'} is a {type(obj).__name__}; save tensors, "
        "arrays, numbers, strings, None, and dicts/lists of them (e.g. model.state_dict())."
    )


def _decode(data: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(data, list):
        return [_decode(v, arrays) for v in data]
    if isinstance(data, dict):
        if "__tensor__" in data:
            return Tensor(jnp.asarray(arrays[data["__tensor__"]]))
        return {k: _decode(v, arrays) for k, v in data["__dict__"].items()}
    return data


def save(obj: Any, path: _Path) -> None:
    """Write ``obj`` (a state dict: nested dicts and lists of tensors and numbers) to
    ``path`` in safetensors format.

    Tensors are stored as safetensors tensors, bit for bit in their dtype (named by their
    path, ``"fc.weight"`` for a module's state dict, so other safetensors readers find
    them); everything else is JSON in the file's metadata. ``tg.load`` in any process gives
    back equal values. The file is written to a temporary name and renamed, so an
    interrupted save never leaves a truncated checkpoint at ``path``.

    Raises:
        TypeError: something that is not a tensor, an array, a number, a string, ``None``,
            a dict with string keys or a list.
        FileNotFoundError: the folder ``path`` names does not exist.
    """
    from safetensors.numpy import save_file

    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"tg.save: the folder {folder!r} does not exist; create it first "
            "(os.makedirs(folder, exist_ok=True))."
        )
    arrays: dict[str, np.ndarray] = {}
    structure = _encode(obj, (), arrays)
    meta = {_META_KEY: json.dumps({"format": _FORMAT, "root": structure})}
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    try:
        save_file(arrays, tmp, metadata=meta)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load(path: _Path) -> Any:
    """Read what ``tg.save`` wrote: tensors come back as ``Tensor``\\ s that do not require
    grad (load them with ``model.load_state_dict`` / ``opt.load_state_dict``).

    A safetensors file written by another tool (e.g. PyTorch's ``save_file``) loads as a
    flat dict of tensors by name.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a complete safetensors file (truncated, or another
            format); nothing is returned.
    """
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(os.fspath(path), framework="numpy") as f:
            meta = f.metadata() or {}
            arrays = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - not a dict
    except SafetensorError as err:
        size = os.path.getsize(path)
        raise ValueError(
            f"tg.load: {os.fspath(path)!r} ({size} bytes) is not a complete safetensors file "
            f"({err}); it is truncated or in another format. Save checkpoints with tg.save."
        ) from None
    if _META_KEY not in meta:
        return {name: Tensor(jnp.asarray(a)) for name, a in arrays.items()}
    structure = json.loads(meta[_META_KEY])
    return _decode(structure["root"], arrays)
