"""State discovery for ``tg.jit``: what a step reaches, and what it changed while traced.

A step's state is found, not declared (docs/design.md "Compiled steps"). Starting from its
arguments, its closure cells and the globals its code names, a walk visits containers (lists,
tuples, dicts), modules and optimizers (wherever their class is defined), other objects whose
class is not from a library, and user functions (their closures and globals, transitively):

- every tensor that requires grad is **lifted** (an input and output of the computation);
- a tensor that does not require grad is lifted when it is an attribute of an object (a
  module buffer, an optimizer's tensor); one reached only through a list, a dict, a global
  or a closure is a constant, unless the step changes it (then it is lifted and traced again);
- an attribute holding a pytree of ``jax.Array``s (an optimizer's optax state, a random
  key) is a **slot**: its value goes in and the new value comes out.

Before a trace, ``Watch`` records the global and closure variables, containers and attribute
dicts the walk met; afterwards it says what changed (a module buffer replaced, a list mutated,
a tensor stored on ``self`` or in a variable) and puts every one of them back, so a trace,
successful or not, leaves no trace in the state.
"""

from __future__ import annotations

import dis
import functools
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from tapegrad._tensor import Tensor
from tapegrad.errors import TracerError
from tapegrad.nn.module import Module
from tapegrad.optim.lr_scheduler import LRScheduler
from tapegrad.optim.optimizer import Optimizer

__all__ = [
    "Found",
    "Watch",
    "discover",
    "scalar",
    "rate",
    "rate_count",
    "rate_numbers",
    "traced_rate",
    "user_module",
    "user_function",
    "code_names",
]

_LIBRARIES = frozenset(
    {"jax", "jaxlib", "numpy", "optax", "chex", "torch", "rich", "sklearn", "scipy", "diagnostics"}
)
_MACHINERY = frozenset({"tapegrad.jit", "tapegrad.tape"})  # compiled steps, tapes: not state
_MAX_CONTAINER = 4096  # longer lists and dicts (data sets) are not walked item by item


def _library(module: str | None) -> bool:
    top = (module or "").partition(".")[0]
    return top in _LIBRARIES or top in sys.stdlib_module_names or top == "builtins"


def user_module(module: str | None) -> bool:
    """A module name outside the libraries and tapegrad: the user's code."""
    return not (_library(module) or (module or "").startswith("tapegrad"))


def user_function(fn: Any) -> bool:
    """``fn`` is a Python function defined outside the libraries (its closure and globals
    are part of what a step can reach)."""
    return isinstance(fn, types.FunctionType) and user_module(fn.__module__)


_GLOBAL_OPS = frozenset(
    {
        "LOAD_GLOBAL",
        "STORE_GLOBAL",
        "DELETE_GLOBAL",
        "LOAD_NAME",
        "STORE_NAME",
        "DELETE_NAME",
        "LOAD_FROM_DICT_OR_GLOBALS",
    }
)


def code_names(code: types.CodeType) -> Iterator[str]:
    """The global names ``code`` and the code objects nested in it (lambdas,
    comprehensions, inner functions) may read or bind. Only the names of global loads and
    stores: ``co_names`` also holds the attribute names (``opt.step()`` names ``step``), and a
    script's loop variable ``step`` is no variable of the step."""
    stack = [code]
    while stack:
        c = stack.pop()
        yield from _global_names(c)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


@functools.lru_cache(maxsize=1024)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    names = (i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_OPS)
    return tuple(dict.fromkeys(names))


def _array_pytree(value: Any) -> bool:
    """A slot value: a ``jax.Array`` or a tuple/list/dict pytree whose leaves are all arrays
    (optax states; ``EmptyState()`` has none), holding no tensor."""
    if isinstance(value, jax.Array):
        return True
    if not isinstance(value, (tuple, list, dict)):
        return False
    leaves = jax.tree_util.tree_leaves(value, is_leaf=lambda x: isinstance(x, Tensor))
    if not leaves and not isinstance(value, tuple):  # an empty list or dict: bookkeeping
        return False
    return all(isinstance(x, jax.Array) and not isinstance(x, Tensor) for x in leaves)


@dataclass(eq=False)
class Found:
    """What a walk found, in a deterministic order (first visit)."""

    tensors: list[Tensor] = field(default_factory=list)
    """Lifted tensors (inputs and outputs of the computation)."""
    labels: list[str] = field(default_factory=list)
    """Where each lifted tensor was found (``"global model.fc1.weight"``)."""
    slots: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    """Attribute slots ``(obj.__dict__, name)`` holding array pytrees."""
    slot_labels: list[str] = field(default_factory=list)
    slot_owners: list[Any] = field(default_factory=list)
    """The object of each slot (an optimizer's state is donated with the parameters)."""
    rates: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    """``(param group, key)``: an optimizer's numeric hyperparameter (``"lr"``, ``"betas"``,
    ``"momentum"``, ``"weight_decay"``, ... : ``Optimizer._inputs``) as Python or NumPy
    numbers, an input of the computation (traced scalars), not a constant: a scheduler
    (``OneCycleLR`` cycles the momentum too) or the loop sets it between steps, and a new
    value must not compile the step again."""
    constants: dict[int, tuple[Tensor, str]] = field(default_factory=dict)
    """Tensors reached only through containers, globals or closures: not lifted unless changed."""
    attrs: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    """Attribute dicts of the objects walked (checked and restored around a trace)."""
    lists: list[tuple[list[Any], str]] = field(default_factory=list)
    dicts: list[tuple[dict[Any, Any], str]] = field(default_factory=list)
    """Dicts walked; a module registry's label ends with ``"."`` (entries read ``label.name``)."""
    buffers: dict[int, dict[str, Tensor]] = field(default_factory=dict)
    """``Module._buffers`` registries by id: an entry replaced during a trace is an update."""
    guards: list[tuple[Any, Any, Any]] = field(default_factory=list)
    """``(mapping or cell, key, value)`` read from globals and closures: the walk stays valid
    while each still holds the same object."""
    guard_labels: list[str] = field(default_factory=list)
    """The name of each guard's variable (checked and restored around a trace, too)."""
    entries: list[tuple[Any, Any, Any]] = field(default_factory=list)
    """``(container, key, value)``: each entry the walk read from an attribute dict, a module
    registry, a list or a dict whose value is not a Python scalar (those of modules and
    optimizers are ``values``) nor a slot. The compiled step holds what it reached, so the
    walk stays valid while each entry holds the same object: a submodule, buffer or tensor
    attribute replaced between calls (``model.fc = nn.Linear(...)``) compiles again."""
    values: list[tuple[Any, Any, Any]] = field(default_factory=list)
    """``(mapping, key, value)``, or ``(cell, None, value)`` for a closure variable: the
    Python numbers, strings, flags and ``None`` values the walk met, in the attributes of every
    object it walked (a module's ``training``, a configuration object's ``lr``), in the
    hyperparameter dicts of optimizers (``param_groups``), in lists and dicts, in the class
    attributes of user classes (``class Config: lr = 0.1``), and in the globals and closure
    variables the step reads (NumPy scalars too). The step reads them as constants, so the
    compiled computation is valid while each is equal (and of the same type): a number
    rebound to an equal value compiles nothing, a changed one compiles again."""
    value_labels: list[str] = field(default_factory=list)
    """Where each of ``values`` was read: its key for modules and optimizers (``"lr"``), the
    variable's name, ``label.name``, ``label[key]`` otherwise."""
    scanned: set[int] = field(default_factory=set)
    """Ids of the mappings and lists whose scalars are in ``values`` already."""


def discover(
    fn: Callable[..., Any],
    roots: list[tuple[Any, str]],
    extra: set[int] | None = None,
) -> Found:
    """Walk from ``roots`` (the step's arguments that are objects, with labels) and from
    ``fn``'s closure, defaults and globals (``fn`` a callable object: its attributes, and the
    closure and globals of its class's ``__call__`` and, for a module, ``forward``); lift the
    tensors whose ids are in ``extra`` too.

    Raises:
        TracerError: a tensor reached holds a JAX tracer (made inside another trace).
    """
    found = Found()
    extra = extra or set()
    seen: set[int] = set()
    lifted: set[int] = set()
    name = getattr(fn, "__name__", type(fn).__name__)
    stack: list[tuple[Any, str, bool]] = [(fn, name, False)]
    if not isinstance(fn, (types.FunctionType, types.MethodType)):
        methods = ("__call__", "forward") if isinstance(fn, Module) else ("__call__",)
        stack = [(getattr(type(fn), m, None), name, False) for m in methods] + stack
    stack.extend((obj, label, False) for obj, label in reversed(roots))
    stack.reverse()  # visit roots first, in order, then the function
    while stack:
        obj, label, attr = stack.pop()
        if isinstance(obj, Tensor):
            if isinstance(obj.data, jax.core.Tracer):
                raise TracerError(
                    f"{label} is a tensor holding a JAX tracer from another trace (made inside "
                    "a tg.jit step or jax transformation that has ended); it has no value "
                    "outside that trace. Return values from a compiled step instead of "
                    "storing them, and use the returned tensors."
                )
            key = id(obj)
            if key in lifted:
                continue
            if obj.requires_grad or attr or key in extra:
                lifted.add(key)
                found.constants.pop(key, None)
                found.tensors.append(obj)
                found.labels.append(label)
            else:
                found.constants.setdefault(key, (obj, label))
            continue
        key = id(obj)
        if key in seen:
            continue
        seen.add(key)
        children: list[tuple[Any, str, bool]] = []
        if isinstance(obj, (list, tuple)):
            if len(obj) > _MAX_CONTAINER:
                continue
            if isinstance(obj, list):
                found.lists.append((obj, label))
                _entries(obj, enumerate(obj), found)
                _scalars(obj, enumerate(obj), found, functools.partial(_item_label, label))
            children = [(v, f"{label}[{i}]", False) for i, v in enumerate(obj)]
        elif isinstance(obj, dict):
            if len(obj) > _MAX_CONTAINER:
                continue
            found.dicts.append((obj, label))
            _entries(obj, obj.items(), found)
            _scalars(obj, obj.items(), found, functools.partial(_item_label, label))
            children = [(v, f"{label}[{k!r}]", False) for k, v in obj.items()]
        elif isinstance(obj, types.MethodType):
            children = [(obj.__self__, label, False), (obj.__func__, label, False)]
        elif isinstance(obj, types.FunctionType):
            if user_function(obj):
                children = _function_children(obj, found)
        elif type(obj).__module__ in _MACHINERY:
            wrapped = getattr(obj, "__wrapped__", None)  # a tg.jit step the step calls
            if wrapped is not None:
                children = [(wrapped, label, False)]
        elif isinstance(obj, LRScheduler):  # its count and rates change every step: not state
            children = [(obj.optimizer, f"{label}.optimizer", False)]
        elif isinstance(obj, type):  # a class used as a configuration namespace
            _class_scalars(obj, found)
        elif _walked_object(obj):
            children = _object_children(obj, label, found)
        stack.extend(reversed(children))
    _drop_rates_from_values(found)
    return found


def _drop_rates_from_values(found: Found) -> None:
    """Take the hyperparameters that are inputs out of the constants (``values``) and the
    entries held by identity (``entries``: the ``betas`` pair): the walk read each as a
    number (or a tuple), from its optimizer or, reached earlier as a plain dict, from a
    closure holding ``opt.param_groups[0]``; it is an input instead."""
    rated = {(id(d), k) for d, k in found.rates}
    if not rated:
        return
    kept = [
        (v, label)
        for v, label in zip(found.values, found.value_labels, strict=True)
        if (id(v[0]), v[1]) not in rated
    ]
    found.values = [v for v, _ in kept]
    found.value_labels = [label for _, label in kept]
    found.entries = [e for e in found.entries if (id(e[0]), e[1]) not in rated]


def _walked_object(obj: Any) -> bool:
    if isinstance(obj, (Module, Optimizer)):  # wherever its class is defined
        return True
    if isinstance(obj, types.SimpleNamespace) or _argparse_namespace(obj):
        return True  # the standard library's attribute bags: a script's configuration
    if isinstance(obj, (type, types.ModuleType)) or not hasattr(obj, "__dict__"):
        return False
    module = type(obj).__module__
    return not (_library(module) or module in _MACHINERY)


def _function_children(fn: types.FunctionType, found: Found) -> list[tuple[Any, str, bool]]:
    children: list[tuple[Any, str, bool]] = []
    code = fn.__code__
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=True):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (a name assigned later)
            continue
        found.guards.append((cell, None, value))
        found.guard_labels.append(name)
        if scalar(value):
            found.values.append((cell, None, value))
            found.value_labels.append(name)
        children.append((value, name, False))
    defaults = fn.__defaults__ or ()  # ``def step(x, model=model)``: the last parameters'
    params = code.co_varnames[code.co_argcount - len(defaults) : code.co_argcount]
    children.extend((v, name, False) for name, v in zip(params, defaults, strict=True))
    children.extend((v, name, False) for name, v in (fn.__kwdefaults__ or {}).items())
    space = fn.__globals__
    for name in dict.fromkeys(code_names(code)):
        if name in space:
            value = space[name]
            if isinstance(value, types.ModuleType):
                continue
            found.guards.append((space, name, value))
            found.guard_labels.append(name)
            if scalar(value):
                found.values.append((space, name, value))
                found.value_labels.append(name)
            children.append((value, name, False))
    return children


def _object_children(obj: Any, label: str, found: Found) -> list[tuple[Any, str, bool]]:
    attrs = vars(obj)
    found.attrs.append((attrs, label))
    if isinstance(obj, (Module, Optimizer)) or type(obj).__module__.startswith("tapegrad."):
        _scalars(attrs, attrs.items(), found)  # a user module's too (``self.training``)
        for value in attrs.values():
            if isinstance(value, list) and all(isinstance(d, dict) for d in value):
                for d in value:  # hyperparameter dicts (an optimizer's param_groups)
                    if isinstance(obj, Optimizer):
                        for key in obj._inputs:
                            if rate(d.get(key), key):  # an input (``Found.rates``)
                                found.rates.append((d, key))
                        lr = d.get("lr")
                        if not scalar(lr):  # a schedule: held as is
                            _entries(d, (("lr", lr),), found)
                    _scalars(d, d.items(), found)
    else:  # a configuration object's numbers (``cfg.lr``)
        _scalars(attrs, attrs.items(), found, lambda k: f"{label}.{k}")
    _class_scalars(type(obj), found)  # ``cfg.lr`` where ``lr`` is a class attribute
    children: list[tuple[Any, str, bool]] = []
    for name, value in attrs.items():
        if name in ("_parameters", "_buffers", "_modules") and isinstance(value, dict):
            if name == "_buffers":
                found.buffers[id(value)] = value
            found.dicts.append((value, f"{label}."))
            _entries(value, value.items(), found)
            children.extend((v, f"{label}.{k}", True) for k, v in value.items())
        elif _array_pytree(value):
            found.slots.append((attrs, name))
            found.slot_labels.append(f"{label}.{name}")
            found.slot_owners.append(obj)
        else:
            _entries(attrs, ((name, value),), found)
            children.append((value, f"{label}.{name}", isinstance(value, Tensor)))
    return children


def _argparse_namespace(obj: Any) -> bool:
    cls = type(obj)
    return cls.__module__ == "argparse" and cls.__name__ == "Namespace"


def _class_scalars(cls: type, found: Found) -> None:
    """Add the scalar class attributes of ``cls`` and its bases defined in the user's code
    (``class Config: lr = 0.1``; dunder names aside) to ``found.values``."""
    for c in cls.__mro__:
        if not user_module(c.__module__) or id(c) in found.scanned:
            continue
        found.scanned.add(id(c))
        space = vars(c)  # a read-only view of the class's namespace: reads stay current
        for k, v in space.items():
            if isinstance(v, _SCALARS) and not (k.startswith("__") and k.endswith("__")):
                found.values.append((space, k, v))
                found.value_labels.append(f"{c.__qualname__}.{k}")


_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.bool_, np.number)
"""Compared by value (and type), not identity: Python's and NumPy's scalars."""


def _entries(container: Any, items: Iterable[tuple[Any, Any]], found: Found) -> None:
    """Add the non-scalar ``(key, value)`` items of ``container`` to ``found.entries``."""
    found.entries.extend((container, k, v) for k, v in items if not isinstance(v, _SCALARS))


def scalar(value: Any) -> bool:
    """A Python or NumPy number, a string, flag or ``None``: compared by value, not
    identity."""
    return isinstance(value, _SCALARS)


def rate(value: Any, key: str = "lr") -> bool:
    """A hyperparameter ``key`` a compiled step takes as an input: a real Python or NumPy
    number (not a flag, not a schedule, not a tensor); for ``"betas"`` a pair of them; a
    ``"momentum"`` above 0 only (at 0 the update has no momentum buffer: a momentum set
    above 0 later changes the update's form, which compiles again)."""
    if key == "betas":
        return isinstance(value, (tuple, list)) and len(value) == 2 and all(map(_real, value))
    return _real(value) and (key != "momentum" or value > 0)


def _real(value: Any) -> bool:
    """A real number: Python's, NumPy's, or a one-element tensor or concrete array of a
    real dtype (PyTorch takes a tensor learning rate)."""
    if isinstance(value, (Tensor, jax.Array)):
        if isinstance(value, Tensor):
            value = value.data
        return (
            not isinstance(value, jax.core.Tracer) and value.size == 1 and value.dtype.kind in "iuf"
        )
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def rate_numbers(value: Any) -> list[float]:
    """An input hyperparameter's numbers as Python floats (``rate``): one, or a pair's two.
    Floats, so that an int (even beyond int32) or a NumPy number is the value eager uses,
    of one abstract value (no compile per type)."""
    if isinstance(value, (tuple, list)):
        return [_float(v) for v in value]
    return [_float(value)]


def _float(value: Any) -> float:
    """A number (``_real``) as a Python float (a tensor's or array's one element read)."""
    if isinstance(value, Tensor):
        value = value.data
    if isinstance(value, jax.Array):
        return float(value.item())
    return float(value)


def rate_count(value: Any) -> int:
    """How many numbers an input hyperparameter holds (``rate_numbers``, without reading
    them: inside a trace)."""
    return len(value) if isinstance(value, (tuple, list)) else 1


def traced_rate(value: Any, numbers: Iterator[Any]) -> Any:
    """``value`` (an input hyperparameter) with its numbers taken from ``numbers`` (traced
    scalars), as a number, or a tuple or list like the pair."""
    if isinstance(value, (tuple, list)):
        return type(value)(next(numbers) for _ in value)
    return next(numbers)


def _item_label(label: str, key: Any) -> str:
    return f"{label}[{key!r}]"


def _scalars(
    container: Any,
    items: Iterable[tuple[Any, Any]],
    found: Found,
    label: Callable[[Any], str] = str,
) -> None:
    """Add the scalar ``(key, value)`` items of ``container`` to ``found.values`` (once per
    container), each labelled ``label(key)``."""
    if id(container) in found.scanned:
        return
    found.scanned.add(id(container))
    for k, v in items:
        if isinstance(v, _SCALARS):
            found.values.append((container, k, v))
            found.value_labels.append(label(k))


_MISSING = object()
"""What a guard reads for a global or a closure variable that is gone."""


def _read(where: Any, name: Any) -> Any:
    """A guard's variable now: a closure cell's contents or a global's value (``_MISSING``
    when it is gone)."""
    if name is None:
        try:
            return where.cell_contents
        except ValueError:  # the cell was emptied (``del`` of a nonlocal)
            return _MISSING
    return where.get(name, _MISSING)


class Watch:
    """The variables, containers and attribute dicts of a ``Found``, as they were before a
    trace."""

    def __init__(self, found: Found) -> None:
        self.found = found
        self.attrs = [(d, dict(d)) for d, _ in found.attrs]
        self.lists = [(lst, list(lst)) for lst, _ in found.lists]
        self.dicts = [(d, dict(d)) for d, _ in found.dicts]

    def changes(self, slots: set[tuple[int, str]]) -> Iterator[tuple[str, Any, Any, Any]]:
        """What the trace changed: ``(label, container, old, new)`` for every global or
        closure variable the step reads, attribute, list or dict entry now holding another
        object (slots excepted; ``old``/``new`` are ``None`` where an entry appeared or went)."""
        found = self.found
        for (where, name, value), label in zip(found.guards, found.guard_labels, strict=True):
            now = _read(where, name)
            if now is not value:
                yield label, where, value, (None if now is _MISSING else now)
        for (d, before), (_, label) in zip(self.attrs, found.attrs, strict=True):
            for name in before.keys() | d.keys():
                old, new = before.get(name), d.get(name)
                if old is not new and (id(d), name) not in slots:
                    yield f"{label}.{name}", d, old, new
        for (lst, items), (_, label) in zip(self.lists, found.lists, strict=True):
            if not _same(lst, items):
                ids = {id(x) for x in items}
                added = [x for x in lst if id(x) not in ids]
                yield label, lst, None, added[0] if added else None
        for (d, before), (_, label) in zip(self.dicts, found.dicts, strict=True):
            for k in before.keys() | d.keys():
                old, new = before.get(k), d.get(k)
                if old is not new:
                    yield (f"{label}{k}" if label.endswith(".") else f"{label}[{k!r}]"), d, old, new

    def restore(self) -> None:
        """Put every variable, attribute, list and dict back as it was."""
        for where, name, value in self.found.guards:
            if _read(where, name) is not value:
                if name is None:
                    where.cell_contents = value
                else:
                    where[name] = value
        for d, before in self.attrs + self.dicts:
            if len(d) != len(before) or any(d.get(k, d) is not v for k, v in before.items()):
                d.clear()
                d.update(before)
        for lst, items in self.lists:
            if not _same(lst, items):
                lst[:] = items


def _same(a: list[Any], b: list[Any]) -> bool:
    """The two lists hold the same objects in the same order."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
