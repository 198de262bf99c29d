"""Module state dicts: every name of every parameter and persistent buffer of a module tree,
and the checks that run before a state dict is loaded (keys, shapes, tied tensors)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from tapegrad._arrays import deleted, from_torch, is_torch
from tapegrad._placement import loaded_like
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError, donated_error

if TYPE_CHECKING:
    from tapegrad.nn.module import Module

__all__ = ["state_entries", "plan_load"]


def state_entries(root: Module) -> Iterator[tuple[str, Tensor]]:
    """Parameters and persistent buffers of ``root``'s tree in PyTorch's ``state_dict`` order:
    each module's own parameters, then its own buffers, then its sub-modules'. As in PyTorch, a
    tensor (or a module) reachable under several names is listed under each of them (tied
    weights); only a module's own ancestors are skipped, so a cycle ends."""
    stack: list[tuple[str, Module, frozenset[int]]] = [("", root, frozenset())]
    while stack:
        prefix, module, ancestors = stack.pop()
        own = module.__dict__
        for name, tensor in own["_parameters"].items():
            yield prefix + name, tensor
        for name, buffer in own["_buffers"].items():
            if buffer is not None and name not in own["_non_persistent"]:
                yield prefix + name, buffer
        inside = ancestors | {id(module)}
        stack.extend(
            (f"{prefix}{name}.", child, inside)
            for name, child in reversed(own["_modules"].items())
            if id(child) not in inside
        )


def plan_load(
    entries: Iterator[tuple[str, Tensor]], state_dict: Mapping[str, Any], strict: bool
) -> tuple[list[str], list[str], list[tuple[Tensor, jax.Array]]]:
    """Check ``state_dict`` against a module's ``entries`` and return what loading it does:
    ``(missing, unexpected, writes)``, ``writes`` one ``(tensor, new array)`` per tensor given,
    on the tensor's devices and sharding when it was placed, else uncommitted as it was (as
    PyTorch's ``copy_`` keeps the parameter's device: a checkpoint loads into a sharded model
    without gathering it, another model's state into an unplaced one without moving it).

    A tensor listed under several names (tied) is written once, from any of its names given;
    only a tensor none of whose names is given is missing (all its names are listed).

    Raises:
        KeyError: ``strict`` and names are missing or unexpected (all are listed).
        ShapeError: values whose shapes differ from their entries' (all are listed).
        ValueError: two names of one tied tensor hold different values (both named).
        TypeError: a value that is not an array or a tensor.
    """
    names: dict[int, list[str]] = {}  # tensor id -> its names given, in state_dict order
    targets: dict[int, Tensor] = {}
    listed: list[tuple[str, int]] = []  # every name with its tensor's id
    for name, tensor in entries:
        key = id(tensor)
        given = names.setdefault(key, [])
        targets[key] = tensor
        listed.append((name, key))
        if name in state_dict:
            given.append(name)
    missing = [name for name, key in listed if not names[key]]
    known = {name for name, _ in listed}
    unexpected = [k for k in state_dict if k not in known]
    if strict and (missing or unexpected):
        cached = (
            " A tensor a model caches on itself (self.x = y.detach() in forward) is a buffer "
            "saved with it: declare it in __init__ with self.register_buffer('x', None, "
            "persistent=False) to keep it out of checkpoints."
            if unexpected
            else ""
        )
        raise KeyError(
            f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}; nothing "
            f"was loaded. Pass strict=False to load the keys that match.{cached}"
        )
    writes: list[tuple[Tensor, jax.Array]] = []
    wrong: list[str] = []
    differ: list[str] = []
    for key, given in names.items():
        target = targets[key]
        arrays = [_as_array(n, state_dict[n], target.dtype) for n in given]
        shapes_ok = True
        for name, array in zip(given, arrays, strict=True):
            if tuple(array.shape) != target.shape:
                wrong.append(f"{name!r}: {tuple(array.shape)} given, {target.shape} expected")
                shapes_ok = False
        if not arrays or not shapes_ok:
            continue
        first = arrays[0]
        differ.extend(
            f"{given[0]!r} and {name!r}"
            for name, array in zip(given[1:], arrays[1:], strict=True)
            if array is not first and not bool(jnp.array_equal(array, first, equal_nan=True))
        )
        writes.append((target, loaded_like(first, target.data)))  # where the entry lives
    if wrong:
        raise ShapeError(
            "load_state_dict: shapes differ from the module's (nothing was loaded): "
            + "; ".join(wrong)
            + ". Build the module with the sizes the checkpoint was saved with."
        )
    if differ:
        raise ValueError(
            "load_state_dict: "
            + "; ".join(differ)
            + " name one tied tensor (shared weights) but hold different values; nothing was "
            "loaded. Give them equal values, or keep one of the names in the dict."
        )
    return missing, unexpected, writes


def _as_array(name: str, value: Any, dtype: Any) -> jax.Array:
    """``value`` (Tensor, JAX/NumPy array, ``torch.Tensor``) as a new JAX array of ``dtype``:
    always a copy (``jnp.asarray`` may share a CPU buffer, and a JAX array would be shared with
    the source: later changes to the source, or a ``tg.jit`` step donating its arrays, would
    reach the loaded module, as ``torch.Tensor.copy_`` never lets them).

    Raises:
        RuntimeError: ``value`` is an array a ``tg.jit`` step donated (deleted).
        TypeError: ``value`` is not an array or a tensor.
    """
    if isinstance(value, Tensor):
        value = value.data
    elif is_torch(value) and hasattr(value, "detach"):
        value = from_torch(value)  # bfloat16 too, which torch's .numpy() refuses
    if deleted(value):
        raise donated_error(f"load_state_dict: {name!r}")
    try:
        # always a copy, as torch's copy_: a JAX array shared with the source module would
        # die with it when a tg.jit step donates the source's arrays
        return jnp.array(value, dtype=dtype, copy=True)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"load_state_dict: {name!r} is a {type(value).__name__}, not an array ({err}); "
            "pass tensors or arrays, e.g. from state_dict() or tg.load()."
        ) from None
