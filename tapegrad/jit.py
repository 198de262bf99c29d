"""``tg.jit``: an unchanged eager training step run as one compiled XLA computation.

How a call runs (docs/design.md "Compiled steps"):

1. The arguments are split into data (arrays, numbers, tensors that do not require grad:
   traced) and objects (modules, optimizers, tensors that require grad: reached by
   reference). A **plan** is found per argument structure: ``_discover`` walks the objects,
   the closure and the globals and lists the state (lifted tensors, array slots). A plan
   stays valid while every global and closure variable it read, every object argument and
   every attribute, registry, list and dict entry it walked is the same object, or, for a
   number, string, flag or ``None``, an equal value of the same type.
2. The plan's ``jax.jit`` function takes the state's arrays and the data. While JAX traces
   it, each lifted tensor holds its tracer and, if it requires grad, a leaf on a private tape
   that records tracers; the step runs unchanged on that tape; what it changed (values,
   ``.grad``, slots, module buffers, the values of tensor arguments) becomes the outputs;
   everything is put back.
3. After the compiled call the outputs are written back: ``t.data``, ``t.grad``, slots.

JAX compiles once per shape, dtype and static value; ``trace_count`` counts those compiles.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter, call, getitem, is_
from sys import getrefcount
from typing import Any, Generic, ParamSpec, TypeVar, overload

import jax
import numpy as np

from tapegrad import _discover, _placement
from tapegrad import random as _random
from tapegrad._tensor import (
    Tensor,
    array_of,
    arrays_of,
    grad_arrays_of,
    grad_of,
    node_of,
    restore,
    set_array,
    set_grad,
    state_of,
    store_results,
    wrap,
)
from tapegrad.current import current_tape, use_tape
from tapegrad.errors import DeviceError, RetraceWarning, TracerError, raise_instead
from tapegrad.grad_mode import grad_enabled
from tapegrad.optim.optimizer import Optimizer
from tapegrad.origin import format_origin, user_stacklevel
from tapegrad.records import Snapshot
from tapegrad.tape import Tape, saved_on_any_tape

__all__ = ["jit", "JitFunction", "TraceReport"]

P = ParamSpec("P")
R = TypeVar("R")

RETRACE_WARNING = 8
_PLANS_KEPT = 4
"""Plans a step keeps per argument structure: one per set of object arguments it was called
with (the most recently used)."""
"""Compiles after which every further one warns, naming the argument whose shape changes."""
_DATA = (jax.Array, np.ndarray, np.generic, bool, int, float, complex)
_CONTAINERS = (list, tuple, dict)
_ABSENT = "<not passed>"  # a static argument left to its default
_SAME = "<passed before>"  # the kind of a tensor argument passed again (``_split``)
_MAX_PASSES = 4  # passes over the body to find the state (each finds at least one tensor more)
_CELL = attrgetter("cell_contents")
_CONCRETE_ERRORS = (  # JAX's errors for a traced value where Python needs a concrete one
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.TracerArrayConversionError,
)
_Checks = tuple[list[Callable[[], Any]], list[Any]]  # a plan's readers and the values they read


@dataclass(frozen=True)
class TraceReport:
    """What the private tape of the last trace held when the step returned.

    Attributes:
        nodes: nodes the step recorded while traced.
        hanging: ``(origin, op, count)`` of the nodes left hanging: values the step computed
            under grad mode and never used in a backward. They are dead code that XLA
            removes from the compiled computation: counted, not an error.
        snapshot: the private tape's snapshot at that moment; ``diagnostics`` classifies
            it like the process tape's: ``diagnostics.report.build_report(snapshot)`` is a
            ``LeakReport`` (rendered with rich, in Jupyter, or ``to_dict()``).
    """

    nodes: int
    hanging: tuple[tuple[str, str, int], ...]
    snapshot: Snapshot

    @property
    def hanging_nodes(self) -> int:
        """How many nodes were left hanging (dead code)."""
        return sum(count for _, _, count in self.hanging)

    def __repr__(self) -> str:
        """The figures and the hanging origins, one per line (the snapshot is not printed:
        it holds every node's record)."""
        lines = [f"TraceReport: {self.nodes} nodes recorded, {self.hanging_nodes} left hanging"]
        lines += [f"  hanging {count} x {op} at {origin}" for origin, op, count in self.hanging]
        return "\n".join(lines)


class _Retrace(Exception):
    """The trace found more state (a constant tensor the step changed): trace again."""

    def __init__(self, tensors: set[int]) -> None:
        super().__init__()
        self.tensors = tensors


class _Plan:
    """The state of one argument structure and the jitted functions that carry it."""

    def __init__(
        self,
        owner: JitFunction[Any, Any],
        key: tuple[Any, tuple[Any, ...], tuple[Any, ...], bool],
        objects: list[Any],
        names: list[str],
        found: _discover.Found,
    ) -> None:
        self.key = key
        self.treedef, self.kinds, self.statics, _ = key
        self.objects = objects
        self._weak: list[Callable[[], Any]] | None = None  # set while not in use (``demote``)
        self.names = names
        self.found = found
        pairs = list(zip(found.tensors, found.labels, strict=True))
        pairs = [p for p in pairs if p[0].requires_grad] + [
            p for p in pairs if not p[0].requires_grad
        ]
        self.order = [t for t, _ in pairs]  # the order of the tensor values in and out
        self.labels = [label for _, label in pairs]
        self.n_donated = sum(t.requires_grad for t in self.order)
        slots = list(zip(found.slots, found.slot_owners, strict=True))
        own = [s for s, obj in slots if isinstance(obj, Optimizer)]  # donated with params
        self.slots = own + [s for s, obj in slots if not isinstance(obj, Optimizer)]
        self.n_donated_slots = len(own)
        slots.clear()
        found.slot_owners = []  # read: a plan not in use must not hold an optimizer (``demote``)
        self.donated_tensors = self.order[: self.n_donated]
        self.kept_tensors = self.order[self.n_donated :]
        self.donated_slots = self.slots[: self.n_donated_slots]
        self.kept_slots = self.slots[self.n_donated_slots :]
        self._same, self._equal = _guards(found)
        self._types = list(map(type, self._equal[1]))  # compared first: 1 == 1.0 == True
        # the values ``==`` cannot tell from another: zeros (``-0.0 == 0.0``)
        self._zeros = [i for i, v in enumerate(self._equal[1]) if _zero(v)]
        # the arrays of the constant tensors (captured, not requiring grad): baked into the
        # compiled step, so an array replaced since (``g *= 5``, ``g.data = ...``) makes the
        # plan invalid, and the next plan carries that tensor as state (``changed_constants``)
        self.constants = [(t, array_of(t)) for t, _ in found.constants.values()]
        self.constant_ids = frozenset(id(a) for _, a in self.constants)  # fixed while valid
        self.reached = frozenset(map(id, self.order)) | frozenset(found.constants)
        # which tensors require grad decides what is differentiated and donated: a tensor
        # frozen or unfrozen since (``requires_grad_``) makes the plan invalid
        self.watched = self.order + [t for t, _ in self.constants]
        self.requires = [node_of(t) is not None for t in self.watched]
        self.grads_used = True  # until the first trace shows the step never reads them
        self.spends: list[int] = []  # tensors whose .grad the step sets to a new array
        self.cleared: set[int] = set()  # tensors whose .grad the step sets to None
        self.ran = False  # a compiled call has run
        self.checked = False
        # weak references: a plan holds its jitted function, which must not hold it back
        # (tapegrad makes no reference cycles, so a dropped step frees its state at once)
        self.inner = functools.partial(_inner, weakref.ref(owner), weakref.ref(self))
        # the previous .grad arrays (argument 5) are donated too, unused: kept in the
        # computation (JAX prunes an unused argument, and donates nothing then), so that XLA
        # writes new arrays into them
        self.jitted = jax.jit(
            self.inner, donate_argnums=(0, 5) if owner.donate else (), keep_unused=owner.donate
        )
        self._plain: Any = None
        # per data argument, whether it is a tensor; and the call's concrete data, set
        # around a compiled call (``JitFunction._call``), which a trace reads placements from
        self.data_kinds = [k is Tensor for k in self.kinds if k is Tensor or k is None]
        self.where: list[Any] | None = None

    def demote(self) -> bool:
        """Hold the object arguments weakly (those that allow it): another plan is in use,
        and this one must not keep a model the caller dropped alive. When one of them goes,
        the plan lets go of everything it holds (``_drop``: the model's parameters, the
        optimizer's state) at once. Returns ``False``, keeping nothing, for a plan with a
        tensor among its object arguments: it holds that tensor as its state."""
        if any(isinstance(o, Tensor) for o in self.objects):
            return False
        gone = functools.partial(_drop, weakref.ref(self))
        self._weak = [_weakly(o, gone) for o in self.objects]
        self.objects = []
        return True

    def in_use(self) -> bool:
        """Whether the plan holds its object arguments (it is not demoted)."""
        return self._weak is None

    def alive(self) -> bool:
        """Whether every object argument still exists (always, for the plan in use)."""
        return self._weak is None or all(r() is not None for r in self._weak)

    def takes(self, objects: list[Any]) -> bool:
        """Whether ``objects`` are this plan's object arguments (held or demoted)."""
        mine = self.objects if self._weak is None else [r() for r in self._weak]
        return len(mine) == len(objects) and all(map(is_, objects, mine))

    def promote(self) -> bool:
        """Hold the object arguments strongly again, for a call; ``False`` (still demoted)
        when one is gone."""
        assert self._weak is not None
        objects = [r() for r in self._weak]
        if any(o is None for o in objects):
            return False
        self.objects, self._weak = objects, None
        return True

    def aliased(self, leaves: Sequence[Any], kinds: list[Any]) -> set[int]:
        """The ids of the tensor arguments passed as data (traced copies) that are also a
        tensor the step reaches as state or a constant (``step(bn.running_mean, bn)``, a
        global): inside the trace a copy and the original would be two tensors, so a change
        made through one would be lost or read stale; such a tensor is passed by reference
        (empty when there is none: the usual call). A tensor passed twice is one data
        argument already (``_split``).

        Raises:
            TracerError: an argument is the ``.grad`` of a tensor the step reaches.
        """
        ids = [id(x) for x, kind in zip(leaves, kinds, strict=True) if kind is Tensor]
        if not ids:
            return set()
        grads = {
            id(g): label
            for t, label in zip(self.order, self.labels, strict=True)
            if (g := grad_of(t)) is not None
        }
        for i in ids:
            if i in grads:
                raise TracerError(
                    f"an argument of this tg.jit step is {grads[i]}.grad, which the step also "
                    "reaches through its parameter: inside the compiled step they would be two "
                    "tensors. Pass the parameter only and read .grad inside the step."
                )
        return set() if self.reached.isdisjoint(ids) else {i for i in ids if i in self.reached}

    def plain(self) -> Any:
        """The jitted function without donation (for a call where a graph saves an array)."""
        if self._plain is None:
            self._plain = jax.jit(self.inner)
        return self._plain

    def valid(self, objects: list[Any]) -> bool:
        """Every object argument, global, closure variable and entry read is the same object, and
        every number read from modules, optimizers and tapegrad's other objects is equal
        (C-level reads and comparisons, no Python frame per value: this runs on every
        call)."""
        if self._weak is not None or not all(map(is_, objects, self.objects)):
            return False
        if self.constants and not all(is_(array_of(t), a) for t, a in self.constants):
            return False
        if [n is not None for n in map(node_of, self.watched)] != self.requires:
            return False
        if self.found.rates and not all(_discover.rate(d.get(k), k) for d, k in self.found.rates):
            return False  # a learning rate that became a schedule, a momentum set to 0, ...
        try:
            readers, same = self._same
            if not all(map(is_, map(call, readers), same)):
                return False
            readers, equal = self._equal
            now = list(map(call, readers))
        except (KeyError, IndexError, ValueError):  # a global, entry or closure cell gone
            return False
        # types first: a number that became a tensor is not compared with ``==``
        if list(map(type, now)) != self._types:
            return False
        if now == equal:  # identity first, then ``==``: an equal value, or the same NaN
            return all(_same_value(now[i], equal[i]) for i in self._zeros)
        if not all(map(_same_value, now, equal)):
            return False
        self._equal = readers, now  # a new NaN object: the same value, compared by identity
        return True

    def changed_numbers(self) -> list[str]:
        """Where the numbers (strings, flags) this plan read are no longer equal to what it
        was traced with: their keys in modules and optimizers (``"lr"``), their variables,
        attributes or entries elsewhere (``[]`` when none changed)."""
        readers, equal = self._equal
        try:
            now = list(map(call, readers))
        except (KeyError, IndexError, ValueError):
            return []
        return [
            label
            for label, a, b in zip(self.found.value_labels, now, equal, strict=True)
            if type(a) is not type(b) or not _same_value(a, b)
        ]

    def changed_constants(self) -> set[int]:
        """The ids of the constant tensors whose array was replaced since this plan was made
        (to lift into the next plan's state, so that later changes need no new trace)."""
        return {id(t) for t, a in self.constants if array_of(t) is not a}

    def inputs(self) -> tuple[list[Any], list[Any]]:
        """The donated and the kept arrays of the state, now."""
        donated = arrays_of(self.donated_tensors)
        donated += [d[k] for d, k in self.donated_slots]
        kept: list[Any] = arrays_of(self.kept_tensors)
        kept += [d[k] for d, k in self.kept_slots]
        for d, k in self.found.rates:  # hyperparameters, traced: as Python floats
            kept += _discover.rate_numbers(d[k])
        return donated, kept

    def spent(self) -> list[Any] | None:
        """The ``.grad`` arrays the call replaces, to donate, so that XLA writes new arrays
        into them: when the step never reads them and sets every one. ``None`` (a
        computation that takes none, compiled once more) when one of those ``.grad`` tensors
        or arrays has a holder besides its parameter (a ``p.grad`` the caller kept stays
        valid) or is ``None``; at the plan's first call a missing one is an uninitialised
        array of its parameter's shape, dtype and placement instead, so that a loop whose
        ``.grad`` is ``None`` only before its first step compiles once."""
        if self.grads_used or not self.spends:
            return None
        spent = []
        for i in self.spends:
            t = self.order[i]
            grad = grad_of(t)
            if grad is None:
                if self.ran:
                    return None
                spent.append(_blank(array_of(t)))
            elif _grad_refcounts(grad) == _GRAD_ALONE:
                spent.append(array_of(grad))
            else:
                return None
        return spent

    def grads(self) -> list[Any] | None:
        """The incoming ``.grad`` arrays (``None`` when the step never reads them)."""
        if not self.grads_used:
            return None
        return grad_arrays_of(self.order)


class JitFunction(Generic[P, R]):
    """A step compiled by ``tg.jit``; call it like the function it wraps.

    Attributes:
        trace_count: computations compiled so far (one per argument structure, shape, dtype,
            static value, set of module and optimizer arguments and grad mode; more passes
            over the body to find the state count once).
        donate: whether parameter and optimizer-state arrays are donated.
    """

    __name__: str

    def __init__(
        self,
        fn: Callable[P, R],
        static_argnums: int | Sequence[int],
        static_argnames: str | Sequence[str],
        donate: bool,
    ) -> None:
        # a callable object (a module) lends its name, not its attributes
        plain = isinstance(fn, (types.FunctionType, types.MethodType))
        functools.update_wrapper(self, fn, updated=functools.WRAPPER_UPDATES if plain else ())
        self.__name__ = _name(fn)
        self._fn = fn
        signature = inspect.signature(fn)
        self._params = list(signature.parameters)
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        if isinstance(static_argnames, str):
            static_argnames = (static_argnames,)
        argnums = _static_positions(fn, signature, static_argnums)
        kinds = {p.kind for p in signature.parameters.values()}
        unknown = set(static_argnames) - set(self._params)
        if unknown and inspect.Parameter.VAR_KEYWORD not in kinds:
            raise ValueError(
                f"tg.jit: static_argnames names {sorted(unknown)}, which "
                f"{_name(fn)} does not take (its parameters: {', '.join(self._params)})."
            )
        # as jax.jit: a static parameter is static whether it is passed by position or by name
        named = [
            p.name if p.kind == p.POSITIONAL_OR_KEYWORD else None
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        argnums += tuple(i for i, name in enumerate(named) if name in static_argnames)
        names = {n for i in argnums if i < len(named) and (n := named[i]) is not None}
        self._static_argnums = tuple(sorted(set(argnums)))
        self._static_argnames = tuple(sorted(set(static_argnames) | names))
        self.donate = donate
        self.trace_count = 0
        self._plans: dict[Any, list[_Plan]] = {}  # per key, the most recently used first
        self._lock = threading.RLock()  # one call at a time (``_run``)
        self._traced = False
        self._report: TraceReport | None = None
        self._shapes: dict[str, set[Any]] = {}
        self._number_retraces = 0  # traces a changed module or optimizer number caused
        self._numbers_changed: set[str] = set()
        self._object_retraces = 0  # traces a new object argument caused

    # ------------------------------------------------------------------ calling

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A step defined in a class body (``@tg.jit def step(self, x)``) is a method: read
        from an instance, it is bound to it, as a function is (the instance is its first
        argument, an object whose modules and optimizers are the step's state)."""
        if instance is None:
            return self
        return types.MethodType(self, instance)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        statics: tuple[Any, ...] = ()
        if self._static_argnums or self._static_argnames:
            statics, args, kwargs = self._split_statics(args, kwargs)  # type: ignore[assignment]
        treedef: Any = len(args)  # flat positional arguments: no pytree flattening
        leaves: Sequence[Any] = args
        split = None if kwargs else _split(args)
        if split is None:  # keyword arguments, or a list, tuple or dict among the arguments
            leaves, treedef = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
            split = _split(leaves, flat=True)
        assert split is not None
        kinds, data, objects = split
        if current_tape().allow_tracers:
            # inside another tg.jit step's trace: run inline, as jax.jit nested in jax.jit
            # does; the enclosing trace carries the state
            return self._fn(*args, **kwargs)
        if any(map(_traced_array, data)):  # inside the user's jax.jit, vmap or grad: inline
            try:
                return self._fn(*args, **kwargs)
            except TracerError as err:
                raise TracerError(
                    f"{self.__name__}: this tg.jit step was called with JAX tracers (inside "
                    "jax.jit, vmap or grad), so it ran inline on the process tape, which "
                    "records only concrete arrays; its ops on tensors that require grad "
                    "could not be recorded. Call the step outside the JAX transformation "
                    "(tg.jit compiles it whole already), or write the traced code as a pure "
                    "function differentiated with jax.grad."
                ) from err
        # the caller's grad mode is part of the key: the trace runs in it (under no_grad a
        # backward raises, as eager), and the compiled call does not read it again
        mode = grad_enabled()
        with self._lock:
            key = (treedef, tuple(kinds), statics, mode)
            plan = self._valid_plan(key, objects, args, kwargs)
            aliased = plan.aliased(leaves, kinds)
            if aliased:  # a tensor argument the step also reaches another way: by reference
                kinds, data, objects = _split(leaves, True, aliased)  # type: ignore[misc]
                key = (treedef, tuple(kinds), statics, mode)
                plan = self._valid_plan(key, objects, args, kwargs)
            return self._run(plan, key, data, objects, leaves)

    def _valid_plan(self, key: Any, objects: list[Any], args: Any, kwargs: dict[str, Any]) -> _Plan:
        """A valid plan of ``key``, made anew when there is none. A step keeps a plan per set
        of object arguments (up to ``_PLANS_KEPT``, the most recently used first), so one
        called in turn with several models and optimizers (an ensemble, folds, a GAN's two
        players) compiles once for each. Only the plan in use holds its object arguments;
        the others hold them weakly and go when one of them does (``_Plan.demote``): a
        dropped model is not kept alive by a step that once ran it."""
        plans = self._plans.get(key) or []  # (no list made on the usual call)
        if plans and plans[0].valid(objects):  # the usual call: the plan of the last call
            return plans[0]  # (the first plan is in use: ``_plan``, ``_call``)
        stale = None  # a plan of these objects whose numbers or constants changed since
        for i in range(1, len(plans)):
            p = plans[i]
            if p.takes(objects) and p.promote():
                if p.valid(objects):
                    plans.pop(i)
                    if plans[0].demote():
                        plans.insert(0, p)
                    else:
                        plans[0] = p  # the previous plan held a tensor argument: dropped
                    self._prune(plans)
                    return p
                stale = p
                break
        if stale is None and plans and plans[0].takes(objects):
            stale = plans[0]
        lifted: set[int] = set()
        if stale is not None:
            self._note_numbers(stale.changed_numbers())
            lifted = stale.changed_constants()
            if stale is not plans[0]:  # read: weakly held again until ``_plan`` replaces it
                stale.demote()
        elif plans:
            self._note_objects(plans[0], objects)
        names = self._leaf_names(args, kwargs, flat=type(key[0]) is int)
        return self._plan(key, objects, names, lifted)

    def _run(
        self, plan: _Plan, key: Any, data: list[Any], objects: list[Any], leaves: Sequence[Any]
    ) -> R:
        """The compiled call of ``__call__``, under the step's lock: one call at a time, so
        a call on another thread reads the state the previous call left (its parameters,
        not arrays that call donated), as if the calls ran one after another eagerly."""
        for _ in range(_MAX_PASSES):
            try:
                return self._call(plan, data, leaves)  # type: ignore[no-any-return]
            except _Retrace as more:
                lifted = {id(t) for t in plan.order[plan.n_donated :]}
                plan = self._plan(key, objects, plan.names, lifted | more.tensors)
        raise RuntimeError(  # pragma: no cover - each pass lifts at least one tensor more
            f"{self.__name__}: the state kept growing over {_MAX_PASSES} traces."
        )

    def _split_statics(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], tuple[Any, ...], dict[str, Any]]:
        statics = tuple(args[i] if i < len(args) else _ABSENT for i in self._static_argnums)
        statics += tuple(kwargs.get(k, _ABSENT) for k in self._static_argnames)
        try:
            hash(statics)
        except TypeError:
            raise TypeError(
                f"{self.__name__}: static arguments must be hashable, got {statics!r}; pass "
                "tuples instead of lists, or make the argument a traced one."
            ) from None
        args = tuple(None if i in self._static_argnums else a for i, a in enumerate(args))
        kwargs = {k: v for k, v in kwargs.items() if k not in self._static_argnames}
        return statics, args, kwargs

    def _plan(self, key: Any, objects: list[Any], names: list[str], extra: set[int]) -> _Plan:
        named = [n for n, kind in zip(names, key[1], strict=True) if type(kind) is int]
        roots = list(zip(objects, named, strict=True))
        # a tensor argument passed by reference (``_Plan.aliased``) is state: an input whose
        # changes are written back, as a parameter's are
        extra = extra | {id(o) for o in objects if isinstance(o, Tensor)}
        found = _discover.discover(self._fn, roots, extra)  # may raise: nothing changed yet
        plans = self._plans.setdefault(key, [])
        if plans and plans[0].in_use() and not plans[0].demote():
            del plans[0]
        # replaced (the same objects: numbers or constants changed since, a retrace) or gone
        plans[:] = [p for p in plans if p.alive() and not p.takes(objects)]
        del plans[_PLANS_KEPT - 1 :]  # the least recently used
        plan = _Plan(self, key, objects, names, found)
        plans.insert(0, plan)
        return plan

    @staticmethod
    def _prune(plans: list[_Plan]) -> None:
        """Drop the plans (but the one in use) with an object argument that is gone."""
        plans[1:] = [p for p in plans[1:] if p.alive()]

    def _call(self, plan: _Plan, data: list[Any], leaves: Sequence[Any]) -> Any:
        """Run ``plan``'s computation on ``data`` and write back what it changed: the state,
        and the tensor arguments (among ``leaves``: the call's flattened arguments) whose
        value the step replaced (``x += 1`` under ``no_grad``, ``x.data = ...``)."""
        donated, kept = plan.inputs()
        jitted = plan.jitted
        if (
            self.donate
            and donated
            and (
                _pending(donated[: plan.n_donated])
                or _shared(donated, kept + data, plan.constant_ids)
            )
        ):
            # a pending graph saves one of the arrays, or one array is the state of two
            # tensors or slots (XLA cannot donate a buffer twice), or also a kept tensor's
            # (a constant made with tg.tensor(w.data)) or an argument's (w.detach()): spare them
            jitted = plan.plain()
        plan.where = data  # read by a trace: the placement of the tensor arguments
        try:
            if not plan.checked:
                self._first_trace(plan, jitted, donated, kept, data)
            key = _random.get_state()
            spent = plan.spent() if self.donate and jitted is plan.jitted else None
            out, values, grads, slots, new_key, new_args = jitted(
                donated, kept, plan.grads(), data, key, spent
            )
            plan.ran = True
            plan.where = None
        except BaseException as e:
            plan.where = None
            self._traced = False
            if not plan.ran:  # a plan that never ran keeps nothing alive (graphs it reached)
                plans = self._plans.get(plan.key, [])
                if plan in plans:
                    plans.remove(plan)
                    while plans and not plans[0].in_use() and not plans[0].promote():
                        del plans[0]  # the previous plan in use, an object of it gone
            if isinstance(e, jax.errors.UnexpectedTracerError):
                raise TracerError(
                    f"{self.__name__}: the step used a tensor made inside another trace (a "
                    "tg.jit step or a JAX transformation that has ended, kept where tg.jit "
                    "could not see it); it has no value outside that trace. Return values from "
                    "a compiled step instead of storing them. JAX's message: "
                    f"{str(e).splitlines()[0]}"
                ) from None
            if isinstance(e, jax.errors.NonConcreteBooleanIndexError):
                raise TracerError(
                    f"{self.__name__}: boolean mask indexing (x[mask]){_at(e)} makes a shape "
                    "that depends on the values, which a compiled step cannot have; keep the "
                    "shape: tg.where(mask, x, 0), or (x * mask).sum() for a masked sum."
                ) from None
            formatted = isinstance(e, TypeError) and "Tracer.__format__" in str(e)
            if isinstance(e, _CONCRETE_ERRORS) or formatted:
                rates = (
                    " An optimizer's param_groups numbers ('lr', 'betas', 'momentum', "
                    "'weight_decay', ...) are traced too (inputs of the step, so that a "
                    "scheduler compiles nothing): read them outside the step, or return them."
                    if plan.found.rates
                    else ""
                )
                raise TracerError(
                    f"{self.__name__}: a traced value was used where Python needs a concrete "
                    f"one{_at(e)} (bool(), int(), float(), an if, while or range, a shape, a "
                    "format spec). Inside a compiled step, array and number arguments are "
                    "traced: pass a Python value that steers control flow as a static argument "
                    "(static_argnums / static_argnames), and choose between values with "
                    f"tg.where.{rates} JAX's message: {str(e).splitlines()[0]}"
                ) from None
            if type(e) is ValueError:  # JAX's "incompatible devices": say which and what to do
                raise_instead(self._mixed_devices(plan, data))
            raise
        if self._traced:
            self._traced = False
            self.trace_count += 1
            self._note_shapes(plan, data)
        store_results(plan.order, values, grads)
        for (d, k), v in zip(plan.slots, slots, strict=True):
            if v is not None:
                d[k] = v
        if new_key is not None:  # the step drew from the process random state
            _random.set_state(new_key)
        if any(v is not None for v in new_args):
            tensors = [x for x, kind in zip(leaves, plan.kinds, strict=True) if kind is Tensor]
            for t, v in zip(tensors, new_args, strict=True):
                if v is not None:
                    set_array(t, v)
        return out

    def _mixed_devices(self, plan: _Plan, data: list[Any]) -> DeviceError | None:
        """A ``DeviceError`` naming the arguments and state (parameters, their ``.grad``,
        optimizer and module slots) committed to unrelated devices, or ``None``."""
        arrays: list[Any] = []
        names: list[str] = []
        it = iter(data)
        for name, kind in zip(plan.names, plan.kinds, strict=True):
            if kind is Tensor or kind is None:
                arrays.append(next(it))
                names.append(f"argument {name!r}")
        for t, label in zip(plan.order, plan.labels, strict=True):
            arrays.append(array_of(t))
            names.append(label)
            grad = grad_of(t)
            if grad is not None:
                arrays.append(array_of(grad))
                names.append(f"{label}.grad")
        slot_labels = {
            (id(d), k): label
            for (d, k), label in zip(plan.found.slots, plan.found.slot_labels, strict=True)
        }
        for d, k in plan.slots:
            for leaf in jax.tree_util.tree_leaves(d[k]):
                arrays.append(leaf)
                names.append(slot_labels.get((id(d), k), k))
        return _placement.mixed_devices_error(self.__name__, arrays, 1, names)

    def _first_trace(
        self, plan: _Plan, jitted: Any, donated: list[Any], kept: list[Any], data: list[Any]
    ) -> None:
        """Trace once to learn whether the step reads the incoming ``.grad`` values (a step
        that starts with ``zero_grad()`` does not): if not, they are never passed, so a
        ``.grad`` that is ``None`` on the first call and set afterwards does not recompile.
        This trace passes every gradient (zeros where ``.grad`` is ``None``), so that a
        step that reads them shows it."""
        grads = [
            jax.numpy.zeros_like(t.data) if g is None else g
            for t, g in zip(plan.order, grad_arrays_of(plan.order), strict=True)
        ]
        key = _random.get_state()
        jaxpr = jitted.trace(donated, kept, grads, data, key, None).jaxpr.jaxpr
        n_in = len(jax.tree_util.tree_leaves((donated, kept)))
        n_grads = len(jax.tree_util.tree_leaves(grads))
        used = {id(v) for eqn in jaxpr.eqns for v in eqn.invars}
        used |= {id(v) for v in jaxpr.outvars}
        plan.grads_used = any(id(v) in used for v in jaxpr.invars[n_in : n_in + n_grads])
        plan.checked = True

    # ------------------------------------------------------------------ tracing

    def _inner(
        self,
        plan: _Plan,
        donated: list[Any],
        kept: list[Any],
        grads: list[Any] | None,
        data: list[Any],
        key: jax.Array,
        spent: list[Any] | None,
    ) -> tuple[Any, list[Any], list[Any], list[Any], jax.Array | None, list[Any]]:
        """The traced function: run the step on a private tape, return what it changed
        (the process random state's new key, ``None`` when the step drew nothing; the new
        value of each tensor argument, ``None`` where the step kept it). ``spent`` (the
        previous ``.grad`` arrays, donated) is not read."""
        self._traced = True
        nd, ns = plan.n_donated, plan.n_donated_slots
        nk = len(plan.order) - nd
        nr = len(kept) - sum(_discover.rate_count(d[k]) for d, k in plan.found.rates)
        values = donated[:nd] + kept[:nk]
        slot_values = donated[nd:] + kept[nk:nr]
        saved = [(t, state_of(t)) for t in plan.order]
        # the hyperparameters are inputs: the optimizer's update reads them as traced
        # values; placed before the watch, so that a step changing one is refused as for any
        # number
        rates = [(d, k, d[k]) for d, k in plan.found.rates]
        traced = iter(kept[nr:])
        for d, k, number in rates:
            d[k] = _discover.traced_rate(number, traced)
        watch = _discover.Watch(plan.found)
        private = Tape(allow_tracers=True)
        outer = current_tape()
        leaves = []  # (private leaf, original node) of the tensors that require grad
        try:
            grad_in: list[Tensor | None] = []
            for i, (t, v) in enumerate(zip(plan.order, values, strict=True)):
                set_array(t, v)
                g = None if grads is None else grads[i]
                grad = None if g is None else wrap(g)
                set_grad(t, grad)
                grad_in.append(grad)
                node = node_of(t)
                if node is not None:
                    mine = private.record(None, (), None, None, t, v, node.code, node.lasti)
                    leaves.append((mine, node, plan.labels[i]))
            for (d, k), v in zip(plan.slots, slot_values, strict=True):
                d[k] = v
            args, kwargs, tensors = self._rebuild(plan, data)
            arg_values = arrays_of(tensors)
            passed = None
            if type(plan.treedef) is not int:  # lists, tuples or dicts among the arguments
                passed = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
            with use_tape(private), _random.carried(key) as rng:  # draws advance the traced key
                result = self._fn(*args, **kwargs)
            _check_result(result, self.__name__)
            if passed is not None:
                self._check_arguments(plan, passed, args, kwargs)
            # a new value on its argument's sharding, as for the state (``_changed_tensors``)
            placed = [d for d, k in zip(plan.where or (), plan.data_kinds, strict=False) if k]
            new_args = [
                None if (a := array_of(t)) is v else _placement.constrained_like(a, w)
                for t, v, w in zip(
                    tensors, arg_values, placed or [None] * len(tensors), strict=True
                )
            ]
            new_values, new_grads = self._changed_tensors(
                plan, values, grad_in, grads or [None] * len(grad_in), saved
            )
            plan.spends = [i for i, g in enumerate(new_grads) if g]
            for i, v in self._check_changes(plan, watch).items():
                new_values[i] = _placement.constrained_like(v, saved[i][1][0])
            new_slots = [
                d[k] if (d[k] is not v or j < ns) else None
                for j, ((d, k), v) in enumerate(zip(plan.slots, slot_values, strict=True))
            ]
            self._check_escapes(private, plan, (result, args, kwargs))
            reached = [orig for mine, orig, _ in leaves if mine.reached]
            self._check_outside_graphs(leaves)
            if reached:  # trained by compiled steps: never reported as a hanging leaf
                outer.reach(reached)
            new_key = None if rng.key is key else rng.key
            # a returned parameter or buffer is restored to its concrete array when the trace
            # ends (``finally``), before JAX reads the result: return its traced array instead
            result = jax.tree_util.tree_map(
                lambda v: wrap(array_of(v)) if isinstance(v, Tensor) else v,
                result,
                is_leaf=_is_tensor,
            )
            return result, new_values, new_grads, new_slots, new_key, new_args
        finally:
            for t, state in saved:
                restore(t, state)
            for t, data_ in plan.constants:  # valid, so these are the arrays now
                set_array(t, data_)
            watch.restore()
            for d, k, number in rates:
                d[k] = number

    def _rebuild(
        self, plan: _Plan, data: list[Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any], list[Tensor]]:
        """The step's arguments inside the trace: data as tracers, objects as themselves;
        and the tensor arguments made (in order)."""
        it = iter(data)
        leaves = []
        tensors = []
        for kind in plan.kinds:
            if kind is Tensor:
                tensors.append(wrap(next(it)))
                leaves.append(tensors[-1])
            elif kind is None:
                leaves.append(next(it))
            elif kind.__class__ is tuple:  # (_SAME, i): the tensor passed at leaf i
                leaves.append(leaves[kind[1]])
            else:
                leaves.append(plan.objects[kind])
        args: list[Any]
        kwargs: dict[str, Any]
        if type(plan.treedef) is int:
            args, kwargs = leaves, {}
        else:
            tree_args, kwargs = jax.tree_util.tree_unflatten(plan.treedef, leaves)
            args = list(tree_args)
        if plan.statics:
            values = iter(plan.statics)
            for i in self._static_argnums:
                v = next(values)
                if v is not _ABSENT:
                    args[i] = v
            for k in self._static_argnames:
                v = next(values)
                if v is not _ABSENT:
                    kwargs[k] = v
        return tuple(args), kwargs, tensors

    def _check_arguments(
        self, plan: _Plan, before: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """The lists and dicts passed hold what they held before the step (``before``: their
        flattened leaves and structure): the compiled step gets copies, so a change made to
        them inside would be lost outside.

        Raises:
            TracerError: naming the argument the step changed.
        """
        leaves, treedef = before
        now, now_def = jax.tree_util.tree_flatten((args, kwargs), is_leaf=_is_tensor)
        if _same_tree(now, now_def, leaves, treedef):
            return
        was_args, was_kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
        names = [self._param_name(i) for i in range(len(args))] + list(was_kwargs)
        olds = [*was_args, *was_kwargs.values()]
        news = [*args, *(kwargs.get(k) for k in was_kwargs)]
        name = next(
            (
                name
                for name, old, new in zip(names, olds, news, strict=True)
                if not _same_tree(
                    *jax.tree_util.tree_flatten(new, is_leaf=_is_tensor),
                    *jax.tree_util.tree_flatten(old, is_leaf=_is_tensor),
                )
            ),
            "?",
        )
        raise TracerError(
            f"{self.__name__}: the step changed argument {name!r} (a list or dict passed to it) "
            "while it was traced; a compiled step gets a copy of the lists and dicts passed, "
            "so the change would be lost outside. Return the new values from the step instead "
            "(results come back as concrete tensors)."
        )

    def _changed_tensors(
        self,
        plan: _Plan,
        values: list[Any],
        grad_in: list[Tensor | None],
        grad_arrays: list[Any],
        saved: list[tuple[Tensor, Any]],
    ) -> tuple[list[Any], list[Any]]:
        """New values (every donated one; others where changed, else ``None``) and new
        gradients (``None``: unchanged; ``()``: set to ``None``; ``(array,)``).

        A trace without the incoming gradients (a step that never reads them) starts every
        ``.grad`` at ``None``, so a ``.grad`` the step sets to ``None`` (``zero_grad()``)
        looks unchanged there: ``plan.cleared`` remembers the ones a trace with the
        gradients (the first) saw set to ``None``, and those are cleared outside too."""
        new_values: list[Any] = []
        new_grads: list[Any] = []
        for i, (t, v) in enumerate(zip(plan.order, values, strict=True)):
            _, node_before, _, _ = saved[i][1]
            if t.requires_grad != (node_before is not None):
                raise TracerError(
                    f"{self.__name__}: the step changed whether {plan.labels[i]} requires "
                    "grad; do that outside the compiled step."
                )
            data = array_of(t)
            where = saved[i][1][0]
            # a new value on the tensor's sharding, as eager writes keep it (``nn.init``, an
            # update): XLA's choice for a value made inside (a draw) would be replicated
            changed = data is not v
            new_values.append(
                _placement.constrained_like(data, where)
                if changed
                else (data if i < plan.n_donated else None)
            )
            g = grad_of(t)
            if g is None and grad_in[i] is not None:
                plan.cleared.add(i)
            if g is not grad_in[i] or (g is not None and array_of(g) is not grad_arrays[i]):
                # a new .grad, or the same tensor changed in place (``p.grad *= 0.5``)
                # on its parameter's sharding (as eager backward leaves it), not XLA's choice
                new_grads.append(
                    () if g is None else (_placement.constrained_like(array_of(g), where),)
                )
            elif g is None and i in plan.cleared:  # set to None (seen when grads came in)
                new_grads.append(())
            else:
                new_grads.append(None)
        return new_values, new_grads

    def _check_changes(self, plan: _Plan, watch: _discover.Watch) -> dict[int, Any]:
        """Module buffers the step replaced are updates (index -> new value); any other
        container or attribute it changed is an error naming it.

        Raises:
            TracerError: a list, dict or attribute changed, or holds a tensor made inside.
            _Retrace: a constant tensor (not lifted) was changed: lift it and trace again.
        """
        found = plan.found
        index = {id(t): i for i, t in enumerate(plan.order)}
        slots = {(id(d), k) for d, k in plan.slots}
        updates: dict[int, Any] = {}
        for label, where, old, new in watch.changes(slots):
            if (
                id(where) in found.buffers
                and isinstance(old, Tensor)
                and isinstance(new, Tensor)
                and id(old) in index
                and new.shape == old.shape
                and new.dtype == old.dtype
            ):
                updates[index[id(old)]] = new.data
                continue
            if callable(new) and not isinstance(new, Tensor):
                continue  # a cache the step filled (an optimizer's compiled update): kept out
            if isinstance(new, Tensor):
                node = node_of(new)
                made = "" if node is None else f" (made at {node.origin})"
                raise TracerError(
                    f"{self.__name__}: the step stored a tensor made inside it{made} in "
                    f"{label}, where it would hold a JAX tracer after the trace. Return it "
                    "from the step instead (results come back as concrete tensors)."
                )
            raise TracerError(
                f"{self.__name__}: the step changed {label} (a Python variable, list, dict "
                "or attribute) while it was traced; compiled code makes that change only once, "
                "at the first call. Keep such bookkeeping outside the compiled step, or hold "
                "the value in a tensor attribute of a module (a buffer)."
            )
        more = {k for k, (t, _) in found.constants.items() if _traced_array(t.data)}
        if more:
            raise _Retrace(more)
        return updates

    def _check_outside_graphs(self, leaves: list[tuple[Any, Any, str]]) -> None:
        """A tensor computed outside the step (not a leaf: it has a graph there) that the
        step's backward reached would take the gradient its graph's leaves are owed: the
        compiled step cannot carry it into a graph recorded outside it.

        Raises:
            TracerError: naming the tensor and where it was made.
        """
        for mine, orig, label in leaves:
            if mine.reached and orig.op is not None:
                raise TracerError(
                    f"{self.__name__}: the step's backward reaches {label}, a tensor computed "
                    f"outside the step (op {orig.op.name!r} at {orig.origin}) from tensors "
                    "that require grad; a compiled step cannot send gradients into a graph "
                    "recorded outside it, so the leaves of that graph would get none. Compute "
                    "it inside the step, or use its .detach() there if it is a constant."
                )

    def _check_escapes(self, private: Tape, plan: _Plan, held: Any) -> None:
        """Live nodes on the private tape belong to lifted tensors, their ``.grad`` (a
        ``create_graph`` backward's), or ``held`` (the results, the argument tensors the
        trace made); any other tensor alive now escaped the trace. Records the trace report.

        Raises:
            TracerError: a tensor made inside the step outlived it, naming its origin.
        """
        keep = {id(t) for t in plan.order}
        keep |= {id(grad_of(t)) for t in plan.order}
        keep |= {id(x) for x in jax.tree_util.tree_leaves(held, is_leaf=_is_tensor)}
        snap = private.snapshot()
        for rec in snap.nodes:
            tensor = rec.tensor() if rec.tensor is not None else None
            if tensor is not None and id(tensor) not in keep:
                raise TracerError(
                    f"{self.__name__}: a tensor made inside the step at {rec.origin} (op "
                    f"{rec.op!r} in {rec.function}) is still alive after the trace: it was "
                    "kept in a list, on an object or in a global, where it would hold a JAX "
                    "tracer. Return it from the step instead (results come back as concrete "
                    "tensors), or keep .item() of a returned value outside the step."
                )
            del tensor
        counts: dict[tuple[str, str], int] = {}
        for rec in snap.nodes:
            if not rec.useful:
                counts[(rec.origin, rec.op)] = counts.get((rec.origin, rec.op), 0) + 1
        hanging = tuple((o, op, n) for (o, op), n in sorted(counts.items()))
        self._report = TraceReport(len(snap.nodes), hanging, snap)

    # ------------------------------------------------------------------ reporting

    def trace_report(self) -> TraceReport:
        """What the private tape held at the end of the last trace (nodes left hanging are
        dead code XLA removes).

        Raises:
            RuntimeError: the step has not been traced yet.
        """
        if self._report is None:
            raise RuntimeError(f"{self.__name__} has not been traced yet; call it first.")
        return self._report

    def _leaf_names(self, args: tuple[Any, ...], kwargs: dict[str, Any], flat: bool) -> list[str]:
        """A name per argument leaf: the parameter's name, then the path inside it; with
        ``flat``, one per positional argument (``None`` included: a static argument's place,
        or a ``None`` passed, which the flat split keeps as an object)."""
        if flat:
            return [self._param_name(i) for i in range(len(args))]
        names = []
        paths = jax.tree_util.tree_flatten_with_path((args, kwargs), is_leaf=_is_tensor)[0]
        for path, _ in paths:
            where, at, *rest = path
            if where.idx == 0:
                base = self._param_name(at.idx)
            else:
                base = str(at.key)
            names.append(base + "".join(str(k) for k in rest))
        return names

    def _param_name(self, i: int) -> str:
        """The name of positional parameter ``i`` (``args[i]`` past the named ones)."""
        return self._params[i] if i < len(self._params) else f"args[{i}]"

    def _note_numbers(self, changed: list[str]) -> None:
        """Count the traces a changed number caused (a hyperparameter, a global, a
        configuration object's attribute); at ``RETRACE_WARNING``, warn once naming them (a
        hyperparameter set every step compiles the step every step; a built-in optimizer's
        numeric hyperparameters are inputs, ``_discover.Found.rates``)."""
        if not changed:
            return
        self._number_retraces += 1
        self._numbers_changed.update(map(str, changed))
        if self._number_retraces != RETRACE_WARNING:
            return
        keys = ", ".join(sorted(self._numbers_changed))
        warnings.warn(
            RetraceWarning(
                f"{self.__name__} compiled again {self._number_retraces} times because numbers "
                f"it reads (from modules, optimizers, other objects, lists, dicts, globals or "
                f"closures) changed ({keys}): a compiled step holds them as constants, so each "
                "new value compiles it again (a built-in optimizer's param_groups numbers, "
                "'lr', 'betas', 'momentum', 'weight_decay', ..., are the exception: inputs, set "
                "between calls with no new compile). Pass a number that changes "
                "every call as an argument (traced), "
                "and keep counters the step does not need out of what it reaches."
            ),
            stacklevel=user_stacklevel(),
        )

    def _note_objects(self, plan: _Plan, objects: list[Any]) -> None:
        """Count the traces a new object argument caused (a module, an optimizer or a tensor
        that requires grad is state, reached by reference: another object is another
        state); at ``RETRACE_WARNING``, warn once naming the argument."""
        changed = [
            i for i, (a, b) in enumerate(zip(objects, plan.objects, strict=True)) if a is not b
        ]
        if not changed:
            return
        self._object_retraces += 1
        if self._object_retraces != RETRACE_WARNING:
            return
        named = [n for n, kind in zip(plan.names, plan.kinds, strict=True) if type(kind) is int]
        name = named[changed[0]]
        tensor = isinstance(objects[changed[0]], Tensor)
        warnings.warn(
            RetraceWarning(
                f"{self.__name__} compiled again {self._object_retraces} times because "
                f"argument {name!r} was another object each time: "
                + (
                    "a tensor that requires grad is the step's state (its value and .grad "
                    "are carried by reference), so each new one compiles again. Pass a tensor "
                    "that does not require grad (data, traced: x.detach()) and call "
                    ".require_grad() on it inside the step."
                    if tensor
                    else "modules and optimizers are the step's state, reached by reference: "
                    f"a step keeps what it compiled for the last {_PLANS_KEPT} sets of them it "
                    "was called with, and each new one compiles again. Create them once, "
                    f"outside the loop; to take turns with more than {_PLANS_KEPT}, make a "
                    "step for each (steps = [tg.jit(fn) for _ in models])."
                )
            ),
            stacklevel=user_stacklevel(),
        )

    def _note_shapes(self, plan: _Plan, data: list[Any]) -> None:
        """Remember the shapes each argument was compiled for; past ``RETRACE_WARNING``
        compiles, warn naming the argument whose shape keeps changing."""
        it = iter(data)
        for name, kind in zip(plan.names, plan.kinds, strict=True):
            if kind is Tensor or kind is None:
                x = next(it)
                sig = (np.shape(x), str(getattr(x, "dtype", type(x).__name__)))
                self._shapes.setdefault(name, set()).add(sig)
        if plan.statics:
            self._shapes.setdefault("<static arguments>", set()).add(plan.statics)
        if self.trace_count <= RETRACE_WARNING:
            return
        varied = sorted(self._shapes.items(), key=lambda kv: -len(kv[1]))
        if not varied or len(varied[0][1]) < 2:
            return
        name, sigs = varied[0]
        warnings.warn(
            RetraceWarning(
                f"{self.__name__} compiled {self.trace_count} times: argument {name!r} came "
                f"with {len(sigs)} different shapes/values (e.g. {sorted(map(str, sigs))[:3]}). "
                "Each new one compiles again: pad or bucket it to a few shapes (e.g. drop "
                "the last partial batch), or pass Python values as static arguments."
            ),
            stacklevel=user_stacklevel(),
        )


def _inner(
    owner: weakref.ref[JitFunction[Any, Any]], plan: weakref.ref[_Plan], *arrays: Any
) -> Any:
    step, p = owner(), plan()
    assert step is not None and p is not None  # both are alive while a call traces
    return step._inner(p, *arrays)


def _guards(found: _discover.Found) -> tuple[_Checks, _Checks]:
    """The plan's validity checks, ``(readers, values)``: per variable, entry or number the
    walk read, a reader taking no argument (a ``functools.partial``, called from C) and the
    value it read; identity for the globals, closure cells and entries (of attribute dicts,
    registries, lists and dicts: ``Found.entries``) that hold objects, equality for the
    numbers, strings, flags and ``None`` values (``Found.values``: a variable rebound to an
    equal number is valid). A reader raises ``KeyError`` for a deleted global or entry,
    ``IndexError`` for a list entry gone and ``ValueError`` for an emptied cell."""
    guards = [g for g in found.guards if not _discover.scalar(g[2])]
    same: list[Callable[[], Any]] = [
        functools.partial(_CELL, where) if name is None else functools.partial(getitem, where, name)
        for where, name, _ in guards
    ]
    same += [functools.partial(getitem, where, key) for where, key, _ in found.entries]
    equal: list[Callable[[], Any]] = [
        functools.partial(_CELL, where)
        if isinstance(where, types.CellType)
        else functools.partial(getitem, where, key)
        for where, key, _ in found.values
    ]
    values = [v for _, _, v in guards] + [v for _, _, v in found.entries]
    return (same, values), (equal, [v for _, _, v in found.values])


def _zero(value: Any) -> bool:
    """A float or complex number with a zero part (``-0.0`` is ``== 0.0``, another value)."""
    if isinstance(value, (float, np.floating)):
        return bool(value == 0)
    if isinstance(value, (complex, np.complexfloating)):
        return bool(value.real == 0 or value.imag == 0)
    return False


def _same_value(a: Any, b: Any) -> bool:
    """``a`` and ``b`` (of one type) are one value for a step that reads them as constants:
    equal, with the same sign where zero; two NaNs are one value."""
    if a is b:
        return True
    if isinstance(a, (complex, np.complexfloating)):
        return _same_value(a.real, b.real) and _same_value(a.imag, b.imag)
    if isinstance(a, (float, np.floating)):
        if a != a:  # NaN
            return bool(b != b)
        return bool(a == b) and (a != 0 or math.copysign(1.0, a) == math.copysign(1.0, b))
    return bool(a == b)


def _split(
    leaves: Sequence[Any], flat: bool = False, by_reference: Collection[int] = ()
) -> tuple[list[Any], list[Any], list[Any]] | None:
    """``(kinds, data, objects)`` of the argument leaves: a tensor that does not require
    grad (``Tensor``) and an array or number (``None``) are data, traced (a tensor passed
    again is ``(_SAME, i)``: the one passed at leaf ``i``); anything else (a
    tensor that requires grad, a module, an optimizer, a tensor whose id is in
    ``by_reference``) is an object, reached by reference (its kind: its index in
    ``objects``). ``None`` when a leaf is a list, tuple or dict (unless ``flat``: the
    leaves of a flattened pytree)."""
    kinds: list[Any] = []
    data: list[Any] = []
    objects: list[Any] = []
    first: dict[int, int] = {}  # a data tensor's id -> the position it was first passed at
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor) and node_of(x) is None and id(x) not in by_reference:
            j = first.setdefault(id(x), i)
            if j != i:  # passed before (``step(x, x)``): the same tensor inside, no copy
                kinds.append((_SAME, j))
                continue
            kinds.append(Tensor)
            data.append(array_of(x))
        elif isinstance(x, _DATA):
            kinds.append(None)
            data.append(x)
        elif not flat and isinstance(x, _CONTAINERS):
            return None
        else:
            kinds.append(len(objects))
            objects.append(x)
    return kinds, data, objects


def _at(error: BaseException) -> str:
    """`` at path:line``, the innermost frame of ``error``'s traceback in the user's code
    (``""`` when none is)."""
    where = ""
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if _discover.user_module(frame.f_globals.get("__name__")):
            where = f" at {format_origin(frame.f_code, tb.tb_lineno)}"
        tb = tb.tb_next
    return where


def _same_tree(leaves: list[Any], treedef: Any, other: list[Any], other_def: Any) -> bool:
    """Two flattened pytrees have one structure and the same objects as leaves."""
    return bool(treedef == other_def) and all(map(is_, leaves, other))


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def _traced_array(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def _grad_refcounts(grad: Tensor) -> tuple[int, int]:
    """The reference counts of a ``.grad`` tensor that its caller holds in a local variable,
    and of its array."""
    return getrefcount(grad), getrefcount(array_of(grad))


def _grad_alone() -> tuple[int, int]:
    """What ``_grad_refcounts`` gives for a ``.grad`` tensor that only its parameter holds,
    whose array only it holds (measured once: it depends on the interpreter)."""
    t = wrap(None)
    set_grad(t, wrap(object()))
    grad = grad_of(t)
    assert grad is not None
    return _grad_refcounts(grad)


_GRAD_ALONE = _grad_alone()


def _weakly(o: Any, gone: Callable[[Any], None]) -> Callable[[], Any]:
    """A weak reference to ``o`` calling ``gone`` when ``o`` goes, or, for an object that
    takes none (a number, a string, a tuple), a callable returning it."""
    try:
        return weakref.ref(o, gone)
    except TypeError:
        return functools.partial(_identity, o)


def _identity(o: Any) -> Any:
    return o


def _nothing() -> None:
    return None


def _drop(plan_ref: weakref.ref[_Plan], _: Any) -> None:
    """An object argument of a demoted plan went: the plan lets go of everything but its key
    (its lists, found state and compiled functions), so the object's parameters and
    optimizer state go too; it is taken out of its step's list at the next miss
    (``alive`` is false from now on). Runs wherever the object died: it takes no lock and
    reads nothing the plan in use needs."""
    plan = plan_ref()
    if plan is not None:
        plan._weak = [_nothing]  # first: from here on every reader sees a plan that is gone
        state = plan.__dict__  # emptied in place (replacing the dict under JAX crashed)
        for name in [n for n in state if n not in ("key", "_weak")]:
            del state[name]


def _blank(like: jax.Array) -> jax.Array:
    """A zeros array of ``like``'s shape, dtype and placement (committed to its devices only
    if ``like`` is: a compiled call's cache tells the two apart). Zeros, not ``np.empty``:
    across processes (``tapegrad.launch``) ``device_put`` needs the same values in each, and
    uninitialised memory differs."""
    where = like.sharding if like.committed else None
    blank: jax.Array = jax.device_put(np.zeros(like.shape, like.dtype), where)
    return blank


def _refcounts(arrays: list[Any]) -> Iterator[int]:
    return map(getrefcount, arrays)


def _alone() -> int:
    """The reference count ``_refcounts`` gives for an array that only its tensor and the
    call's two argument lists hold (measured once: it depends on the interpreter)."""
    probe: Any = object()
    holder = wrap(probe)
    held = [array_of(holder)]
    del probe
    return next(_refcounts(held[:1]))


_ALONE = _alone()


def _pending(arrays: list[Any]) -> bool:
    """Whether a graph on any tape still saves one of ``arrays`` (the donated tensors'
    arrays, a slice of the call's argument list). O(1) per array in the common case: a node
    that saves an array holds a reference to it, so an array that nothing but its tensor and
    the argument lists refer to is saved by no tape, and the tapes are asked only when one
    has another holder (a pending graph, or the caller keeping ``.data``)."""
    if all(map(_ALONE.__eq__, _refcounts(arrays))):
        return False
    return saved_on_any_tape(arrays)


def _shared(donated: list[Any], kept: list[Any], constants: frozenset[int]) -> bool:
    """Whether one of the ``donated`` arrays appears twice there, among the ``kept`` ones
    (the other state and the call's data arguments) or the step's captured constants (ids):
    two tensors made from one array (``b = tg.tensor(a.data)``, an anchor
    ``tg.tensor(w.data)``, an argument ``w.detach()``), optimizer states sharing one zeros
    array."""
    ids = set(map(id, donated))
    return len(ids) != len(donated) or not (
        ids.isdisjoint(map(id, kept)) and ids.isdisjoint(constants)
    )


def _check_result(result: Any, name: str) -> None:
    """The step's result must be a pytree of tensors, arrays and numbers (its tensors come
    back as concrete tensors that do not require grad: a tensor is a pytree of its array).

    Raises:
        TracerError: the result holds something else, naming its type.
    """
    for x in jax.tree_util.tree_leaves(result, is_leaf=_is_tensor):
        if not isinstance(x, (Tensor, *_DATA)):
            raise TracerError(
                f"{name}: the step returned a {type(x).__name__}; a compiled step returns "
                "tensors, arrays, numbers and tuples, lists or dicts of them. Return the "
                "values you need, and keep other objects outside the step."
            )


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _static_positions(
    fn: Callable[..., Any], signature: inspect.Signature, static_argnums: Sequence[int]
) -> tuple[int, ...]:
    """``static_argnums`` checked against ``fn``'s positional parameters (as ``jax.jit``
    does), negative positions counted from the last one; sorted.

    Raises:
        ValueError: a position ``fn`` does not have, or a negative one where ``fn`` takes
            ``*args`` (the number of positional arguments is unknown).
    """
    params = signature.parameters.values()
    positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    out = []
    for i in static_argnums:
        i = operator.index(i)
        if i < 0 and not variadic:
            i += positional
        if i < 0 or (i >= positional and not variadic):
            raise ValueError(
                f"tg.jit: static_argnums={tuple(static_argnums)}, but {_name(fn)} takes "
                f"{positional} positional argument(s)"
                + (" and *args: give non-negative positions" if variadic else "")
                + "."
            )
        out.append(i)
    return tuple(sorted(set(out)))


@overload
def jit(
    fn: Callable[P, R],
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate: bool = True,
) -> JitFunction[P, R]: ...


@overload
def jit(
    fn: None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate: bool = True,
) -> Callable[[Callable[P, R]], JitFunction[P, R]]: ...


def jit(
    fn: Callable[P, R] | None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    donate: bool = True,
) -> JitFunction[P, R] | Callable[[Callable[P, R]], JitFunction[P, R]]:
    """Compile an eager tapegrad step into one XLA computation (decorator).

    The step stays ordinary tapegrad code: forward, ``loss.backward()``, ``opt.step()``,
    ``opt.zero_grad()``, in-place updates under ``tg.no_grad()``. Its state is found, not
    declared: tensors that require grad, modules and optimizers passed as arguments or
    reached from its closure, default arguments and globals become inputs and outputs of the
    computation, and every change the step makes to them (values, ``.grad``, optimizer
    state, module buffers) is written back after each call, as if it had run eagerly.

    Args:
        fn: the step.
        static_argnums: positions (an int or a sequence) of arguments that are Python values
            (hashable); each value compiles its own computation.
        static_argnames: names (a str or a sequence) of arguments that are static. As in
            ``jax.jit``, a static parameter is static whether it is passed by position or by
            name.
        donate: donate the previous parameter and optimizer-state arrays to the computation
            (no copies; an array taken with ``.data`` before a call is invalid after it).
            An array that a pending graph on the tape still saves is never donated. The
            previous ``.grad`` arrays of a step that sets them without reading them are
            donated too, when nothing but their parameters holds them (a ``p.grad`` kept
            across a call stays valid; such a call runs a computation compiled once more).

    Returns:
        A ``JitFunction``: call it like ``fn``; results are concrete tensors that do not
        require grad. ``trace_count`` counts compiles; ``trace_report()`` describes the last
        trace.

    Raises:
        ValueError: a ``static_argnums`` position or ``static_argnames`` name ``fn`` does not
            take (as ``jax.jit``).
        TypeError: ``fn`` is a ``staticmethod`` or ``classmethod`` object (``@tg.jit`` below
            ``@staticmethod``): the message says to swap the two.
        TracerError: (when called) ``.item()``, ``float()``, ``bool()``, ``.numpy()`` or
            Python control flow on a traced value; a tensor made inside that outlives the
            call; a result that is not a tensor, array or number; a tensor from another
            trace; a list or dict argument the step changed (a tensor argument whose value
            it replaces, ``x += 1`` under ``no_grad``, is written back instead).
    """

    def wrap(f: Callable[P, R]) -> JitFunction[P, R]:
        if isinstance(f, (staticmethod, classmethod)):
            kind = type(f).__name__
            raise TypeError(
                f"tg.jit: got a {kind} object; put @{kind} above @tg.jit (a step defined "
                f"in a class body is a method: @tg.jit alone binds the instance)."
            )
        return JitFunction(f, static_argnums, static_argnames, donate)

    return wrap if fn is None else wrap(fn)
