"""Why an object is alive: the shortest chain of referrers from a user-visible name to it.

A breadth-first search outward from the object through ``gc.get_referrers`` (bounded in depth
and time) that stops at the first user-visible name: a module global (IPython's ``Out[n]`` is
the global ``Out`` and then ``[n]``) or a local variable of a function on the current stack.
On the way it names each hop: a list or tuple element (``[3]``), a dict item (``['key']``), an
attribute (``.running``). Nothing is kept afterwards: every strong reference the search took
is dropped before it returns, and it never calls ``gc.collect()``.
"""

from __future__ import annotations

import functools
import gc
import os
import sys
import time
from types import CellType, FrameType, FunctionType, MethodType
from typing import Any

__all__ = ["describe_tensor", "referrer_chain"]

_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PROGRAMS = frozenset(
    _HERE + f"{name}.py" for name in ("demo", "demo_cnn", "demo_text", "demo_models", "training")
)
"""diagnostics' own training programs: their frames are user code (a demo's ``task``), unlike
the frames of the report being made, whose locals hold the very tensor being explained."""
_CO_OPTIMIZED = 0x0001  # inspect.CO_OPTIMIZED: a function frame with fast locals
_SNAPSHOT_LOCALS = sys.version_info < (3, 13)  # before PEP 667, f_locals is a cached copy


def describe_tensor(tensor: Any, origin: str) -> str:
    """Name a tensor briefly: ``Tensor(shape=(3, 2), origin=train.py:42)``."""
    shape = getattr(tensor, "shape", None)
    shape_text = repr(tuple(shape)) if shape is not None else "?"
    return f"{type(tensor).__name__}(shape={shape_text}, origin={origin})"


def referrer_chain(
    target: object, *, max_depth: int = 12, time_limit: float = 2.0
) -> tuple[str, ...]:
    """Find how user code reaches ``target``.

    The search goes outward one level of referrers at a time, with one
    ``gc.get_referrers`` scan per level (a scan visits every object the collector tracks:
    ~0.1 s with JAX and torch loaded), so its cost is the depth of the answer.

    Args:
        target: the object to explain (a live tensor).
        max_depth: most hops from a name to ``target``.
        time_limit: seconds after which the search gives up (checked after every scan).

    Returns:
        The steps from the name to ``target``, e.g. ``("global running",)``,
        ``("global history", "[3]")``, ``("local state in train()", ".hidden")``,
        ``("local model in main()", ".blocks", "[0]", ".attention")`` (a Module's
        parameters, buffers and submodules by attribute) or ``("local step in main()",
        "(closure variable total)")``; empty when no name was found within the bounds. Names
        that start with ``_`` (IPython's ``_``, ``_3``) are used only when no other name is
        found one hop further.
    """
    deadline = time.perf_counter() + time_limit
    local_names = _stack_locals()
    held: dict[int, object] = {id(target): target}  # strong refs while searching
    came_from: dict[int, tuple[int, str]] = {}  # container id -> (id it holds, step label)
    own = {id(held), id(came_from), id(local_names)}
    frontier = [id(target)]
    marker = object()
    fallback: tuple[str, ...] = ()
    fallback_depth = max_depth
    try:
        for depth in range(max_depth):
            if fallback and depth > fallback_depth + 1:
                break
            for oid in frontier:
                if oid in local_names:
                    return _path(local_names[oid], oid, came_from, id(target), held)
            # The marker first: the argument tuple of this call is the tuple that starts with it.
            level = [marker, *(held[oid] for oid in frontier)]
            wanted = set(frontier)
            refs = gc.get_referrers(*level)
            own.update((id(level), id(refs)))
            next_frontier: list[int] = []
            for r in refs:
                rid = id(r)
                if rid in own or rid in held or isinstance(r, FrameType) or _is_args(r, marker):
                    continue
                # The frontier objects r holds, in frontier order (deterministic answers).
                inside = {id(x) for x in gc.get_referents(r)} & wanted
                holds = [oid for oid in frontier if oid in inside]
                if not holds:
                    continue
                if _is_namespace(r):
                    for oid in holds:
                        name = _global_name(r, held[oid])
                        if name is None:
                            continue
                        path = _path(name, oid, came_from, id(target), held)
                        if not name.rsplit(".", 1)[-1].removeprefix("global ").startswith("_"):
                            return path
                        if not fallback:
                            fallback, fallback_depth = path, depth
                    continue
                oid = holds[0]
                held[rid] = r
                came_from[rid] = (oid, _step(r, held[oid]))
                next_frontier.append(rid)
            del refs, level
            if time.perf_counter() > deadline:
                return fallback
            frontier = next_frontier
            if not frontier:
                break
        return fallback
    finally:
        held.clear()
        came_from.clear()


def _is_args(obj: object, marker: object) -> bool:
    """Whether ``obj`` is the argument tuple of our own ``gc.get_referrers(marker, ...)``."""
    return type(obj) is tuple and len(obj) > 0 and obj[0] is marker


def _stack_locals() -> dict[int, str]:
    """Map ``id(value)`` to ``"local NAME in FUNC()"`` for the locals of user frames on the
    stack, and of those in the traceback of an exception being handled (a report made in an
    ``except`` block, such as ``python -m diagnostics run`` after the script raised or called
    ``sys.exit`` inside a function: those frames are off the stack but alive).

    Only ids are kept. Before Python 3.13, reading ``f_locals`` of a function frame refreshes
    a copy of its locals cached on the frame (what ``locals()`` returns), which would keep
    their values alive after the function rebinds them. So the copy is emptied again after
    reading (this does not touch the real locals), except under a trace function (a debugger
    such as pdb writes the copy back into the frame after its callback, which would delete
    the locals) or when something else holds it (a ``locals()`` result the function kept:
    that dict is then refreshed, as a second ``locals()`` call would refresh it).
    """
    names: dict[int, str] = {}
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    tb = sys.exc_info()[2]
    while tb is not None:  # innermost last: the frame that raised names a value last
        if tb.tb_frame not in frames:
            frames.append(tb.tb_frame)
        tb = tb.tb_next
    may_clear = _SNAPSHOT_LOCALS and sys.gettrace() is None
    for frame in frames:
        code = frame.f_code
        if code.co_flags & _CO_OPTIMIZED and _is_user_file(code.co_filename):
            scope = frame.f_locals
            for key, value in scope.items():
                if key.isidentifier():  # not ``.0`` or pytest's ``@py_assert1``
                    names.setdefault(id(value), f"local {key} in {code.co_qualname}()")
            # References to ``scope``: the frame's, ours and getrefcount's argument.
            if may_clear and sys.getrefcount(scope) <= 3:
                scope.clear()
            del scope
    del frames
    return names


def _is_user_file(filename: str) -> bool:
    """Whether a frame of ``filename`` is user code: outside diagnostics, or a demo program."""
    return not filename.startswith(_HERE) or filename in _PROGRAMS


def _is_namespace(obj: object) -> bool:
    """A module's globals (or a script's, or IPython's user namespace)."""
    return type(obj) is dict and "__builtins__" in obj and isinstance(obj.get("__name__"), str)


def _global_name(namespace: dict[str, Any], obj: object) -> str | None:
    """``"global NAME"`` for a key of ``namespace`` bound to ``obj`` (public names first)."""
    keys = sorted((k for k, v in namespace.items() if v is obj), key=lambda k: (k[:1] == "_", k))
    if not keys:
        return None
    module = namespace["__name__"]
    return f"global {keys[0]}" if module == "__main__" else f"global {module}.{keys[0]}"


def _step(container: object, obj: object) -> str:
    """How ``container`` holds ``obj``: ``[3]``, ``['key']``, ``.attr``, ``.__dict__``..."""
    if isinstance(container, (list, tuple)):
        for i, item in enumerate(container):
            if item is obj:
                return f"[{i}]"
    elif isinstance(container, dict):
        for key, value in container.items():
            if value is obj:
                return f"[{key!r}]"
    elif isinstance(container, CellType):
        return "(closure cell)"
    else:
        if isinstance(container, (FunctionType, MethodType, functools.partial)):
            for attr in ("__closure__", "__self__", "__func__", "func", "args", "keywords"):
                if getattr(container, attr, None) is obj:
                    return f".{attr}"
        attrs = getattr(container, "__dict__", None)
        if attrs is obj:
            return ".__dict__"
        if isinstance(attrs, dict):
            for key, value in attrs.items():
                if value is obj:
                    return f".{key}"
        for cls in type(container).__mro__:
            for slot in cls.__dict__.get("__slots__", ()):
                if isinstance(slot, str) and getattr(container, slot, None) is obj:
                    return f".{slot}"
    return f"(in a {type(container).__name__})"


def _path(
    root: str,
    oid: int,
    came_from: dict[int, tuple[int, str]],
    target: int,
    held: dict[int, object],
) -> tuple[str, ...]:
    """Steps from ``root`` (which holds the object ``oid``) down to ``target``, read as code:
    ``obj.__dict__['x']`` is ``.x``; a Module's ``._modules['fc']`` is ``.fc`` (``[0]`` in
    a ``ModuleList``), likewise its parameters and buffers; a function's
    ``.__closure__[i]`` cell is ``(closure variable NAME)``."""
    steps = [root]
    owners: list[object] = [None]  # the object each step was taken from
    while oid != target:
        container = held[oid]
        oid, label = came_from[oid]
        key = label[2:-2] if label.startswith("['") else None
        if steps[-1] == ".__closure__" and label[1:-1].isdigit():
            function = owners[-1]
            names = function.__code__.co_freevars  # type: ignore[attr-defined]
            steps[-1] = f"(closure variable {names[int(label[1:-1])]})"
        elif label == "(closure cell)" and steps[-1].startswith("(closure variable "):
            continue
        elif key is not None and steps[-1] == ".__dict__":  # obj.__dict__['x'] -> obj.x
            steps[-1] = "." + key
        elif key is not None and steps[-1] in _REGISTRIES and _is_module(owners[-1]):
            steps[-1] = f"[{key}]" if key.isdigit() else f".{key}"
        else:
            steps.append(label)
            owners.append(container)
    return tuple(steps)


_REGISTRIES = ("._parameters", "._buffers", "._modules")
"""Where a ``tapegrad.nn.Module`` keeps its parameters, buffers and submodules."""


def _is_module(obj: object) -> bool:
    """Whether ``obj`` is a ``tapegrad.nn.Module`` (its registries are read as attributes)."""
    from tapegrad.nn import Module

    return isinstance(obj, Module)
