"""Compiled backward passes: a pass whose structure repeats runs as one XLA computation.

The eager pass (``backward``) dispatches one compiled VJP per node: ~10 us of JAX dispatch
each on a CPU, so a 1,000-node chain costs milliseconds however small its arrays. A training
loop runs the same graph every step, so once the passes of one *structure* have taken as much
eager time in this process as compiling it is estimated to take (counted from the second
pass, as passes times the fastest one, so a first pass's kernel compiles do not count), the
next pass of that structure runs the very same VJP rules traced under ``jax.jit``: one
dispatch for the whole pass, compiled once and cached here per structure (and by JAX per
shape, dtype and placement). The kernel store (``tapegrad.kernels``) keeps the program under
a digest of its structure (``_store_name``), so a later process on the machine loads it at
that structure's second pass (``Pass.stored``: on the background thread, passes staying
eager until it is ready) instead of earning and compiling it again; a program found slower
than the eager pass leaves the store.

That is the rent-or-buy rule: a structure that stops repeating has cost at most twice what
compiling at once would have. One exception buys at once: a new structure of at least eight
nodes whose ops (by op, shape and dtype) no structure met before had compiles before its first
pass when its first eager pass would compile at least as much: its new VJP kernels, ~40 ms
each on a CPU with an empty cache, against the whole pass's estimate. A program's first
backward is then one compile instead of one per op and shape (a cold start's largest part);
such a structure has no eager pass to be compared with (see below).

That exception is for one core. Where a second core is free (``kernels``' background
thread), a program's first backward is eager but cheap: each tracked op whose forward
compiled started its VJP's kernels compiling on that thread (``op._vjp_ahead``), so
nothing is bought at once; and a structure that earned its compile compiles there, passes
staying eager until the program is ready and the first pass after that taking it
(``Pass.ready``), so the compile (~0.1-1 s) overlaps the loop instead of stopping it. On
one core a pass compiles at its first compiled call.

The estimate is ``0.1 s + 1 ms`` per node ``+ 1 us`` per node squared: XLA's compile time
grows faster than the program (measured on a 2-core CPU with an empty compilation cache:
76 ms for an 8-node pass, 1.6 s for a 1,000-node chain of multiplies, 1.3 s for a 411-node
RNN and 7.0 s for a 1,611-node one). It is scaled up when the compiles this process timed took
longer (a GPU's compiler, a slower machine), never down (a compile that hit the persistent
cache says nothing of what a new structure costs; assuming it cheap would compile every rare
variant of a data-dependent graph), and the eager time a structure waits is never more than
``compile_after()`` seconds (1 s by default). A structure estimated to compile for more than
10 s (``MAX_COMPILE_SECONDS``: ~2,700 nodes, an RNN unrolled over ~650 steps) stays eager for
good, and is never looked up: a 12,000-node pass (an RNN over 3,000 steps) took 5 minutes of
a core to compile, which a process's exit would wait for.

The five calls after the one that compiles are timed too: a structure whose compiled pass was
never faster than its fastest eager pass (a pass of a few nodes, where one dispatch with many
arguments costs what a few VJP dispatches do) goes back to eager passes for good.

The structure of a pass is, for every node in pass order: its op, the positions of its
parents, its shape and dtype, whether its cotangent is returned (a leaf, ``retain_grad``, a
``tg.grad`` input), and the non-array parts of its residuals and parameters. Arrays in
residuals and parameters (NumPy index arrays too) are arguments of the computation, so new
values never recompile, nor do new integers in an index (``Op.traced_ints``); anything else
that changes (a Python float saved by an op, a slice) is a new structure.

A pass of fewer than four nodes (two VJPs or fewer: a compiled call saves nothing there)
stays eager without a lookup. A pass also stays eager when it records
(``create_graph=True``), when anomaly detection is on, when it holds a ``tg.Op`` (a
hand-written rule may need concrete values or read state that changes; a ``tg.jax_op``'s
VJP is JAX's, traced already, so it joins the compiled pass as tapegrad's own ops do), on a
tape that records tracers (``tg.jit`` compiles the whole step already), when a residual or
parameter is neither an array (on one device, or NumPy's) nor a hashable value, or when its
structure once failed to trace (a VJP rule that needs concrete values): the eager pass then
raises whatever that rule raises. Results equal the eager pass's up to float rounding (XLA
may fuse and reorder the arithmetic).

``TAPEGRAD_COMPILED_BACKWARD`` in the environment sets ``compile_after()`` at import: the most
seconds of eager time a structure waits (``0``: compile a structure the second time it runs;
``off``: never compile).
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import SingleDeviceSharding

from tapegrad import kernels
from tapegrad.kernels import dtype_text, kernel
from tapegrad.node import Node, Step

__all__ = [
    "compile_after",
    "set_compile_after",
    "estimated_compile_seconds",
    "MAX_COMPILE_SECONDS",
    "Pass",
    "lookup",
    "cached",
    "clear",
]

Propagate = Callable[
    [list[Any], Sequence[int], Sequence[Any], frozenset[int]], dict[int, tuple[Any, Any]]
]
"""The VJP loop: ``(steps, root ids, seeds, wanted ids) -> {id: (node, cotangent)}``."""

_MAX_STRUCTURES = 64  # structures remembered (least recently used dropped)
_BASE_SECONDS = 0.1  # the compile-time estimate of a pass: base + per node + per node
_NODE_SECONDS = 0.001  # squared, times _scale
_PAIR_SECONDS = 1e-6
MAX_COMPILE_SECONDS = 10.0
"""A structure whose estimated compile time is longer stays eager (module docstring)."""
_scale = 1.0  # measured compile time / estimate (>= 1), blended over the compiles timed
_TRIALS = 5  # compiled calls timed against the eager pass after the one that compiles
_MIN_NODES = 4  # a smaller pass (two VJPs or fewer) stays eager: one dispatch saves nothing
_KERNEL_SECONDS = 0.04  # the compile of one eager VJP kernel, empty cache, CPU (~45 ms seen)
_BUY_NODES = 8  # a smaller new structure is not bought at once: its compiled pass, never
# compared with an eager one, could be the slower (a few VJPs against one call of many arrays)
_met: set[tuple[Any, Any, Any]] = set()  # (op, shape, dtype) of the op nodes of structures met
_MET_MAX = 4096
_lock = threading.Lock()
_cache: OrderedDict[_Key, Pass] = OrderedDict()
_Tracer = jax.core.Tracer


def _threshold_from_env() -> float | None:
    value = os.environ.get("TAPEGRAD_COMPILED_BACKWARD", "").strip().lower()
    if value in ("", "default"):
        return 1.0
    if value in ("off", "none", "never"):
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(
            f"TAPEGRAD_COMPILED_BACKWARD={value!r}: give seconds of eager backward time per "
            "structure before it is compiled (e.g. 1, or 0 to compile at the second pass), "
            "or 'off'."
        ) from None
    return max(seconds, 0.0)


_after: float | None = _threshold_from_env()


def compile_after() -> float | None:
    """The most seconds of eager backward time a structure runs before it is compiled (it is
    compiled sooner when its estimated compile time is shorter; ``None``: never)."""
    return _after


def set_compile_after(seconds: float | None) -> None:
    """Set ``compile_after()``: the most seconds of eager time a structure waits (``0``
    compiles a structure at its second pass), or ``None`` to keep every pass eager.
    Structures already compiled stay compiled until ``clear()``.

    Raises:
        ValueError: a negative or non-numeric number of seconds.
    """
    global _after
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0
    ):
        raise ValueError(f"seconds must be a number >= 0 or None, got {seconds!r}.")
    _after = None if seconds is None else float(seconds)


def cached() -> list[Pass]:
    """The structures remembered now, least recently used first (for tests and benchmarks:
    how many passes ran eagerly, which compiled)."""
    with _lock:
        return list(_cache.values())


def clear() -> None:
    """Forget every structure and its compiled pass, and the compile times measured."""
    global _scale
    with _lock:
        _cache.clear()
        _scale = 1.0


def estimated_compile_seconds(nodes: int) -> float:
    """The estimated seconds to compile a pass of ``nodes`` nodes: ``0.1 + 0.001 * nodes +
    1e-6 * nodes ** 2``, scaled up by the compiles this process timed when they took longer
    (module docstring)."""
    return _scale * _unscaled(nodes)


def _unscaled(nodes: int) -> float:
    return _BASE_SECONDS + _NODE_SECONDS * nodes + _PAIR_SECONDS * nodes * nodes


def _timed_compile(seconds: float, nodes: int) -> None:
    """Fold a measured compile (the first call of a compiled pass) into ``_scale``: the
    geometric mean of the old scale and this compile's, so one slow compile on a busy machine
    moves the estimate by half; at least 1 (see the module docstring), at most 20."""
    global _scale
    ratio = seconds / _unscaled(nodes)
    _scale = min(max((_scale * ratio) ** 0.5, 1.0), 20.0)


# type -> 0: other, 1: array, 2: tracer, 3: NumPy array (isinstance on ABCs is slow)
_KIND: dict[type, int] = {np.ndarray: 3}


class _Unfit(Exception):
    """A value a compiled pass cannot take (an unhashable static, a tracer, a placed array)."""


def _spec(value: Any, arrays: list[Any]) -> Any:
    """The static description of ``value`` (a residual or parameter): an array is its
    position in ``arrays``, a tuple the tuple of its items' specs, any other value
    ``(type, value)``. An array met twice is passed twice: which arrays are the same object
    (a constant, a one-hot row picked again) changes from step to step, the graph does not.
    A NumPy array (an index kept on the host, ``x[rows, targets]``) is an argument like a
    device array: its values change from step to step, its shape and dtype key the kernel."""
    cls = value.__class__
    kind = _KIND.get(cls)
    if kind is None:
        kind = _KIND[cls] = 2 if issubclass(cls, _Tracer) else int(issubclass(cls, jax.Array))
    if kind == 3 or (kind == 1 and value.sharding.__class__ is SingleDeviceSharding):
        arrays.append(value)
        return len(arrays) - 1
    if kind:
        raise _Unfit  # a tracer, or a placed array (it keeps the eager pass's shardings)
    if cls is tuple:
        return tuple([_spec(v, arrays) for v in value])
    if cls is float:
        return (float, value.hex())  # 0.0 and -0.0, 1 and 1.0 stay apart
    if cls is slice:  # unhashable before Python 3.12
        return (slice, (value.start, value.stop, value.step))
    if cls is list or cls is dict:
        items = value.items() if cls is dict else enumerate(value)
        return (cls, tuple([(k, _spec(v, arrays)) for k, v in items]))
    try:
        hash(value)
    except TypeError:
        raise _Unfit from None
    return (cls, value)


class _Key:
    """A structure as a cache key, hashed once: Python does not cache a tuple's hash, and the
    cache's lookup and its LRU update would each hash the whole structure again."""

    __slots__ = ("structure", "hash")

    def __init__(self, structure: tuple[Any, ...]) -> None:
        self.structure = structure
        self.hash = hash(structure)  # TypeError: an unhashable value inside

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.structure == other.structure


class _TracedInt:
    """The marker of a Python int passed as a traced scalar (``Op.traced_ints``)."""


def _params_spec(op: Any, params: dict[str, Any], arrays: list[Any]) -> Any:
    """``_spec`` of an op's parameters; the int items of its ``traced_ints`` parameters are
    arguments (traced scalars), so a new index value is the same structure."""
    traced = op.traced_ints
    if not traced:
        return _spec(params, arrays)
    items = []
    for name, value in params.items():
        if name in traced and value.__class__ is tuple:
            parts = []
            for item in value:
                if item.__class__ is int:
                    parts.append((_TracedInt, len(arrays)))
                    arrays.append(item)
                else:
                    parts.append(_spec(item, arrays))
            items.append((name, tuple(parts)))
        else:
            items.append((name, _spec(value, arrays)))
    return (dict, tuple(items))


def _build(spec: Any, arrays: list[Any]) -> Any:
    """Rebuild a value from its ``_spec``, its arrays taken from ``arrays``."""
    if spec.__class__ is int:
        return arrays[spec]
    if not spec or not isinstance(spec[0], type):  # a tuple of specs
        return tuple([_build(v, arrays) for v in spec])
    cls, inner = spec
    if cls is list:
        return [_build(v, arrays) for _, v in inner]
    if cls is dict:
        return {k: _build(v, arrays) for k, v in inner}
    if cls is float:
        return float.fromhex(inner)
    if cls is slice:
        return slice(*inner)
    if cls is _TracedInt:
        return arrays[inner]
    return inner  # another scalar or hashable value


class _Stand:
    """A node as the traced pass sees it: position, metadata, no arrays (plans are cached)."""

    __slots__ = ("id", "op", "shape", "dtype", "retain")

    def __init__(self, pos: int, op: Any, shape: Any, dtype: Any, retain: bool) -> None:
        self.id = pos
        self.op = op
        self.shape = shape
        self.dtype = dtype
        self.retain = retain

    @property
    def name(self) -> str:
        return "leaf" if self.op is None else self.op.name


def _program(
    structure: tuple[Any, ...],
    propagate: Propagate,
    seeds: list[Any],
    arrays: list[Any],
) -> dict[int, Any]:
    """The pass of ``structure`` on ``arrays`` (traced once per shape under ``jax.jit``)."""
    rows, roots = structure
    stands = [_Stand(i, r[0], r[2], r[3], r[4]) for i, r in enumerate(rows)]
    steps = []
    for stand, (op, parents, _, _, _, saved, params) in zip(stands, rows, strict=True):
        links = tuple(None if j < 0 else stands[j] for j in parents)
        rebuilt = None if params is None else _build(params, arrays)
        steps.append((stand, op, links, None if saved is None else _build(saved, arrays), rebuilt))
    out = propagate(steps, roots, seeds, frozenset())
    return {pos: g for pos, (_, g) in out.items()}


class Pass:
    """One structure: its eager passes so far, and its compiled pass once there is one.

    The eager time a structure has cost is counted from its second pass on, as those passes
    times the fastest of them: the first pass compiles the eager kernels it meets, and a
    pass slowed by a busy machine or a kernel met late should not count as steady state.
    The compiled pass's first call (its compile) is timed for the estimate; its next
    ``_TRIALS`` calls are timed against the fastest eager pass, and when none was faster
    (a tiny pass, where one dispatch of many arguments costs what a few eager VJPs do) the
    structure goes back to eager passes for good (``slower``)."""

    __slots__ = (
        "structure",
        "nodes",
        "passes",
        "fastest",
        "compiled",
        "calls",
        "fastest_compiled",
        "broken",
        "slower",
        "fresh",
        "key",
        "ahead",
        "looked",
    )

    def __init__(self, structure: tuple[Any, ...], fresh: int = 0) -> None:
        self.structure = structure
        self.nodes = len(structure[0]) if structure else 0
        self.fresh = fresh  # VJP kernels of it this process had not met (``lookup``)
        self.passes = 0
        self.fastest = float("inf")
        self.compiled: Any = None
        self.calls = 0  # calls of the compiled pass so far (its compile ahead counts as one)
        self.fastest_compiled = float("inf")
        self.broken = False  # it failed to trace or run: eager for good
        self.slower = False  # compiled, it was no faster than eager: eager for good
        self.key: _Key | None = None  # its key in the cache (``lookup``)
        self.ahead = False  # its compiled pass is compiling on the background thread
        self.looked = False  # the kernel store was asked for its compiled pass (``stored``)

    @property
    def threshold(self) -> float | None:
        """The eager seconds after which this structure compiles: its estimated compile time,
        at most ``compile_after()`` (``None``: never, also when that estimate is over
        ``MAX_COMPILE_SECONDS``)."""
        after = _after
        estimate = estimated_compile_seconds(self.nodes)
        if after is None or estimate > MAX_COMPILE_SECONDS:
            return None
        return min(after, estimate)

    @property
    def seconds(self) -> float:
        """The eager time counted for this structure (seconds; see the class docstring)."""
        return (self.passes - 1) * self.fastest if self.passes > 1 else 0.0

    def ran_eagerly(
        self,
        seconds: float,
        propagate: Propagate,
        seeds: Sequence[Any] = (),
        arrays: Sequence[Any] = (),
    ) -> None:
        """Count an eager pass of ``seconds``; compile the structure once it has earned it
        (for a pass of these ``seeds`` and ``arrays``: see ``compile``)."""
        self.passes += 1
        if self.passes > 1 and seconds < self.fastest:
            self.fastest = seconds
        threshold = self.threshold
        if threshold is None or self.broken or self.slower or self.compiled is not None:
            return
        if self.seconds >= threshold:
            self.compile(propagate, seeds, arrays)

    def buys_at_once(self) -> bool:
        """Whether this structure, never run yet, compiles before its first pass: that pass
        would compile its ``fresh`` VJP kernels one by one (``_KERNEL_SECONDS`` each), and
        when they are estimated to cost at least compiling the whole pass, buying at once is
        cheaper (a program's first backward: one compile instead of one per op and shape).
        Only on one core: with a background thread its VJP kernels compiled ahead."""
        return (
            self.passes == 0
            and kernels._background() is None
            and self.nodes >= _BUY_NODES
            and self.compiled is None
            and not self.broken
            and self.threshold is not None
            and self.fresh * _KERNEL_SECONDS >= estimated_compile_seconds(self.nodes)
        )

    def compile(
        self, propagate: Propagate, seeds: Sequence[Any] = (), arrays: Sequence[Any] = ()
    ) -> None:
        """Make the compiled pass, and start compiling it for a pass of these ``seeds`` and
        ``arrays`` on the background thread (``kernels``' ``compile_ahead``): passes stay
        eager until it is ready (``ready``), so its compile, ~0.1-1 s, overlaps the loop on
        another core instead of stopping it. Where nothing compiles ahead (one core, arrays
        placed on a device) JAX compiles it at its first call, as ``jax.jit`` does."""
        self.compiled = _pass_kernel(self.structure, propagate, _store_name(self.structure))
        if seeds:
            self.compiled.compile_ahead(list(seeds), list(arrays))
            self.ahead = self.compiled.pending(list(seeds), list(arrays))

    def stored(self, propagate: Propagate, seeds: Sequence[Any], arrays: Sequence[Any]) -> None:
        """Take this structure's compiled pass from the kernel store when an earlier process
        stored it (it compiled there, and its trials did not find it slower than the eager
        pass): its program is loaded instead of compiled, without eager passes to earn it,
        so a program's second run on a machine runs compiled backward passes from its
        first steps. It loads on the background thread (~0.1 s for a 350-node pass), the passes
        staying eager until it is ready, and is then tried against them as a program
        compiled here is; on one core its first call loads it, untried. Asked once per
        structure, at its second pass: a structure met once may never come again (a graph
        that changes every step), and naming one and keying its arrays costs ~8 ms per
        1,000 nodes; under ``compile_after() == 0`` the second pass is also the one that
        compiles it in a first-ever run, so gradients are the same run after run. A
        structure the store cannot name (``_store_name``), one compiled or broken already,
        or one the rule keeps eager is left as it is."""
        if self.passes == 0:
            return
        self.looked = True
        if (
            self.compiled is not None
            or self.broken
            or self.threshold is None
            or kernels.store_dir() is None
        ):
            return
        name = _store_name(self.structure)
        if name is None:
            return
        compiled = _pass_kernel(self.structure, propagate, name)
        if compiled.stored(list(seeds), list(arrays)):
            self.compiled = compiled
            compiled.compile_ahead(list(seeds), list(arrays))  # loaded on the other core
            self.ahead = compiled.pending(list(seeds), list(arrays))
            if not self.ahead:  # loaded by its first call, with no eager pass to try it on
                self.calls = _TRIALS + 1

    def ready(self, seeds: Sequence[Any], arrays: list[Any]) -> bool:
        """Whether the compiled pass runs this pass: it exists and is not compiling on the
        background thread any more (the first pass after it is ready takes it). Which pass
        that is depends on timing, as the eager seconds that earn a compile always did;
        with ``compile_after() == 0`` the pass after the one that earned it takes the
        program, waiting for it if need be, so that a program's gradients are the same
        run after run."""
        if self.compiled is None:
            return False
        if self.ahead:
            if _after != 0 and self.compiled.pending(list(seeds), arrays):
                return False  # (``compile_after() == 0``: this pass takes it, as on one core)
            self.ahead = False
            self.calls = 1  # its compile: not on this thread, so no call times it
        return True

    def run(
        self, steps: Sequence[Step], seeds: Sequence[Any], arrays: list[Any]
    ) -> dict[int, tuple[Node, Any]] | None:
        """Run the compiled pass; ``None`` (and never again for this structure) when it does
        not trace or run: the caller then runs the eager pass, which raises what it raises."""
        try:
            start = time.perf_counter()
            result = self.compiled(list(seeds), arrays)
            out = {steps[pos][0].id: (steps[pos][0], g) for pos, g in result.items()}
        except Exception:  # a rule that needs concrete values, an op JAX cannot trace
            self.compiled = None
            self.broken = True
            return None
        if self.calls <= _TRIALS:
            self._timed(time.perf_counter() - start, seeds, arrays)
        return out

    def _timed(self, seconds: float, seeds: Sequence[Any], arrays: list[Any]) -> None:
        """Account a timed call of the compiled pass (see the class docstring); a pass found
        slower leaves the kernel store too (later processes would take it untried)."""
        self.calls += 1
        if self.calls == 1:
            _timed_compile(seconds, self.nodes)
            return
        self.fastest_compiled = min(self.fastest_compiled, seconds)
        if self.calls > _TRIALS and self.fastest_compiled >= self.fastest:
            self.compiled.forget(list(seeds), arrays)
            self.compiled = None
            self.slower = True


def lookup(
    steps: Sequence[Step], roots: Sequence[Node], wanted: frozenset[int]
) -> tuple[Pass, list[Any]] | None:
    """The ``Pass`` of this pass's structure (made on first sight) and its array arguments;
    ``None`` when the pass cannot be compiled (see the module docstring).

    Every pass of a loop pays this (~1.5 us per node), so the usual residuals, a tuple of
    arrays on one device, are described here without a ``_spec`` call per array, and the
    structure is hashed once (``_Key``)."""
    n = len(steps)
    if _after is None or n < _MIN_NODES or estimated_compile_seconds(n) > MAX_COMPILE_SECONDS:
        return None
    position: dict[Node | None, int] = {None: -1}  # nodes hash by identity; no parent: -1
    for i, step in enumerate(steps):
        position[step[0]] = i
    arrays: list[Any] = []
    kinds = _KIND
    single = SingleDeviceSharding
    rows = []
    try:
        for node, op, parents, saved, params in steps:
            if op is not None and not op.jax_vjp:
                raise _Unfit  # a tg.Op's rule may need concrete values or read changing state
            if op is not None and not parents:  # a consumed node the walk spared: no VJP
                raise _Unfit
            if saved is None:
                spec: Any = None
            elif saved.__class__ is tuple:
                for v in saved:
                    if kinds.get(v.__class__) != 1 or v.sharding.__class__ is not single:
                        spec = _spec(saved, arrays)
                        break
                else:  # arrays on one device each (the usual residuals): what ``_spec`` makes
                    # of them, without a call or a list per node
                    start = len(arrays)
                    arrays.extend(saved)
                    n = len(saved)
                    if n == 2:
                        spec = (start, start + 1)
                    elif n == 1:
                        spec = (start,)
                    else:
                        spec = tuple(range(start, start + n))
            else:
                spec = _spec(saved, arrays)
            n = len(parents)  # the usual one or two parents without a comprehension
            if n == 1:
                links: tuple[int, ...] = (position[parents[0]],)
            elif n == 2:
                links = (position[parents[0]], position[parents[1]])
            else:
                links = tuple([position[p] for p in parents])
            rows.append(
                (
                    op,
                    links,
                    node.shape,
                    node.dtype,
                    node.retain or node.id in wanted,
                    spec,
                    None if params is None else _params_spec(op, params, arrays),
                )
            )
        key = _Key((tuple(rows), tuple([position[r] for r in roots])))
    except _Unfit:
        return None
    except TypeError:  # an unhashable value inside a tuple
        return None
    with _lock:
        entry = _cache.get(key)
        if entry is None:
            entry = _cache[key] = Pass(key.structure, _fresh(rows))
            entry.key = key
            if len(_cache) > _MAX_STRUCTURES:
                _cache.popitem(last=False)
        else:  # the stored key: found by identity, not by comparing the structure again
            _cache.move_to_end(entry.key or key)
    return entry, arrays


def _pass_kernel(structure: tuple[Any, ...], propagate: Propagate, name: str | None) -> Any:
    """The compiled pass of ``structure`` as a kernel, kept in the kernel store under
    ``name`` (``_store_name``; ``None``: not stored)."""
    return kernel(functools.partial(_program, structure, propagate), name=name)


def _store_name(structure: tuple[Any, ...]) -> str | None:
    """The kernel store's name of the compiled pass of ``structure``: a digest of its text,
    ops by name, so that the same structure in another process (of the same tapegrad, JAX
    and settings: the store keys those) finds the program this one stored. ``None`` when an
    op's VJP rule is not tapegrad's own (the store's key digests tapegrad's source only): a
    ``tg.jax_op`` is a new function in every process, and a ``tg.defop`` op of the user's,
    or a rule the user gave a built-in op, is named as one but runs the user's code, which
    may differ in the next process (edited, or reading its state); or when a value has no
    text that means the same in another process (an object shown by its address)."""
    rows, roots = structure
    named = []
    for op, links, shape, dtype, retained, saved, params in rows:
        if op is not None and not op.own_rule:
            return None
        named.append(
            (
                "leaf" if op is None else op.name,
                links,
                shape,
                dtype_text(dtype),
                retained,
                saved,
                params,
            )
        )
    text = repr((named, roots))
    if " at 0x" in text:
        return None
    return f"{__name__}.pass_{hashlib.sha256(text.encode()).hexdigest()}"


def _fresh(rows: list[tuple[Any, ...]]) -> int:
    """How many distinct (op, shape, dtype) among a new structure's op nodes no structure
    met before had: the VJP kernels its first eager pass would compile (an estimate: a VJP
    kernel also depends on its inputs' shapes). Counts them as met from now on. 0 when an
    op is not one of tapegrad's built-in ops (a ``tg.jax_op``, a recorded ``vjp(...)``):
    such an op may be made anew every step (a ``jax_op`` defined in the loop), so its
    structure is never bought at once, only rented (compiled once its passes repeated)."""
    if any(r[0] is not None and not r[0].builtin for r in rows):
        return 0
    new = {(r[0], r[2], r[3]) for r in rows if r[0] is not None} - _met
    if len(_met) + len(new) > _MET_MAX:
        _met.clear()
    _met.update(new)
    return len(new)
