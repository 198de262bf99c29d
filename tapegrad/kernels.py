"""Built-in kernels: ``jax.jit`` functions whose compiled programs later processes load
without tracing or lowering them again.

JAX's persistent compilation cache (``tapegrad.compilation_cache``) keeps compiled programs
on disk, but it finds one by its lowered module: every new process traces and lowers each
kernel again before it can look the program up, ~5-10 ms per kernel on a 2-core CPU, which
is most of what a program's first run costs on a machine that ran it before (an eager
program uses dozens of kernels: one per op, shape and dtype). :func:`kernel` is
``jax.jit`` for tapegrad's own module-level kernels, plus a store of their compiled programs
keyed by what determines them without lowering: the kernel's name (a module-level
function's, or one its caller gives: a compiled backward pass's digest), its static arguments,
the shapes, dtypes and placement of its array arguments, JAX's tracing configuration, the
JAX, jaxlib and XLA versions and flags, and a digest of tapegrad's source. A call whose
program is in the store loads it (~1 ms) instead. A small kernel (``SMALL``, ``MEDIUM``)
compiles with XLA's classic CPU emitters, in about two thirds of the time, and the store
lowers its kernels in one MLIR context per thread instead of a new one each
(``_shared_ir_context``; JAX's ``make_ir_context`` is wrapped for that, and returns a
context of its own to every other caller).

Where the process may use two cores, programs also compile ahead on one background thread:
a kernel's ``compile_ahead`` (an optimizer's update while the first forward runs), a whole
function's kernels with :func:`trace_ahead` (a recorded op's VJP rule, while the forward
goes on: a first backward then finds its kernels compiled), each through the store.

Only the first call per shape in a process takes this path: a kernel is JAX's own C++ jit
function object (``jax.jit``'s dispatch, at the same cost per call), built with a different
miss handler. This path serves only concrete single-device CPU arrays outside any trace;
the store is used while tapegrad's compilation cache is on (it lives in a
``tapegrad-kernels`` folder inside that cache's folder, one subfolder per environment,
removed after a week unused: ``tg.set_compilation_cache(None)`` turns both off). Any other
call, and any JAX version whose internals this module does not recognise, gets plain
``jax.jit``'s behaviour. Like JAX's cache, the store holds executable code: never point the
cache at a folder others can write.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import operator
import os
import pickle
import shutil
import struct
import threading
import time
import weakref
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jaxlib
import numpy as np

from tapegrad import compilation_cache

__all__ = [
    "kernel",
    "static_key",
    "store_dir",
    "host_to_device",
    "plain_transfer",
    "trace_ahead",
    "dtype_text",
]

_FORMAT = 2
_FOLDER = "tapegrad-kernels"
_STATIC_TYPES = (type(None), bool, int, float, str, np.dtype)
_PYTHON_SCALARS = frozenset({bool, int, float, complex})
SMALL = 4096
"""A kernel whose inputs and outputs all have at most this many elements (and dtypes the
classic emitters compute alike, ``_classic``) is compiled with XLA's classic CPU emitters
(``xla_cpu_use_fusion_emitters=False``): about two thirds of the compile time of the
default fusion emitters, which run medium kernels faster (~1.5x on a (64, 512) softmax)
but a small kernel no faster (bench/RESULTS.md, turn 18)."""
MEDIUM = 16384
"""Up to this many elements per array, a kernel without reductions (``_REDUCING``) takes
the classic emitters too: there they run elementwise work, broadcasts, transposes and
matrix products as fast or faster (0.75x-1.02x here), while row reductions (softmax, sums,
layer norm) run 1.05x-1.17x slower (bench/RESULTS.md, turn 19)."""
_REDUCING = ("reduce", "arg", "cum", "sort", "scatter", "select_and")
"""Prefixes of the JAX primitives that keep a kernel over ``SMALL`` on XLA's default
emitters (reductions, scans, sorts, scatters, pooling gradients)."""
_SMALL_OPTIONS = {"xla_cpu_use_fusion_emitters": False}
_CLASSIC_DTYPES = frozenset(
    np.dtype(t)
    for t in ("float32", "float64", "bool", "int8", "int16", "int32", "int64")
    + ("uint8", "uint16", "uint32", "uint64")
)

TESTED_JAX = ((0, 10), (0, 10))
"""The JAX releases (major, minor) whose internals this module was tested with; under any
other, ``kernel`` is plain ``jax.jit`` (correct, without the store or the classic emitters)
until a release is tested and added here."""
JAX_TESTED = TESTED_JAX[0] <= jax.__version_info__[:2] <= TESTED_JAX[1]
"""Whether this process runs one of ``TESTED_JAX``'s releases (``random``'s threefry chunks
repeat its private conversions too)."""

try:  # the JAX internals a kernel is built from (checked once; plain jax.jit without them)
    from jax._src import compilation_cache as _jax_cache
    from jax._src import config as _config
    from jax._src import core as _core
    from jax._src import dispatch as _dispatch
    from jax._src import stages as _stages
    from jax._src import tree_util as _tree_util
    from jax._src import util as _jax_util
    from jax._src.compiler import get_compile_options as _compile_options
    from jax._src.interpreters import mlir as _mlir
    from jax._src.interpreters import pxla as _pxla
    from jax._src.lib import _jax, xla_client  # type: ignore[attr-defined]
    from jax.experimental import serialize_executable as _serialize

    _ArrayImpl = _jax.ArrayImpl
    _SingleDevice = jax.sharding.SingleDeviceSharding
    _SUPPORTED = JAX_TESTED and all(
        hasattr(obj, name)
        for obj, name in (
            (_jax, "pjit"),
            (_pxla, "JitGlobalCppCacheKeys"),
            (_pxla, "cc_shard_arg"),
            (_pxla.MeshExecutable, "create_cpp_call"),
            (_serialize, "_JaxPjrtUnpickler"),
            (_serialize, "serialize"),
            (_config, "trace_context"),
            (_core, "trace_state_clean"),
            (_dispatch, "needs_check_special"),
            (_jax_cache, "is_cache_used"),
            (_mlir, "make_ir_context"),
            (_core, "jaxprs_in_params"),
            (_jax_util, "_caches"),
            (_pxla, "shard_args"),
            (_pxla, "global_aval_to_result_handler"),
            (_pxla, "get_default_device"),
            (jax.sharding, "get_abstract_mesh"),
            (jax.sharding, "get_mesh"),
        )
    )
except (ImportError, AttributeError):  # pragma: no cover - a JAX without these internals
    _SUPPORTED = False


def kernel(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: str | Sequence[str] | None = None,
    classic: bool = False,
    name: str | None = None,
) -> Any:
    """``jax.jit(fn, static_argnums=..., static_argnames=...)`` for a tapegrad kernel defined
    at module level, whose compiled programs later processes load from the kernel store
    (module docstring); usable as ``@kernel``, ``@partial(kernel, static_argnames=...)`` or
    ``kernel(jnp.add)``.

    The result is a ``jax.jit`` function in every respect (the same C++ dispatch, ``lower``,
    ``trace``, nesting in other traces), plus ``compile_ahead(*args, **kwargs)``: start
    compiling for the signature of those arguments (arrays may be ``jax.ShapeDtypeStruct``)
    on a background thread, for the first such call to take (``_compile_ahead``). A
    function without a stable name (a lambda, a closure: an optimizer's update) is never
    stored, since the store could not tell two of them apart, but compiles ahead.

    ``classic``: compile with XLA's classic CPU emitters at any size, not only when small
    (``SMALL``): for kernels they compile faster and run at least as fast at every size
    (``jax.random``'s threefry draws).

    ``name``: the store's name for a function without a stable one (a closure), which the
    caller vouches means the same program in every process (``compiled_backward``: a digest
    of the structure a pass traces); with it the kernel also has ``stored(*args,
    **kwargs)``, whether the store holds its program for those arguments now (a file
    check: nothing is loaded), and ``forget(*args, **kwargs)``, which removes that program
    (where the store may be changed: a read-only one keeps it, as ``_save`` writes nothing
    there).
    """
    if fn is None:
        return functools.partial(
            kernel,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            classic=classic,
            name=name,
        )
    plain = jax.jit(fn, static_argnums=static_argnums, static_argnames=static_argnames)
    if not _SUPPORTED:
        return _plain(plain)
    name = name or _stable_name(fn)
    info = plain._jit_info  # type: ignore[attr-defined]
    static_nums = frozenset(info.static_argnums)
    static_names = frozenset(info.static_argnames)
    fallback = plain._cache_miss  # type: ignore[attr-defined]
    ahead = _AheadTable()  # signature -> its program, compiling on a thread

    def cache_miss(*args: Any, **kwargs: Any) -> Any:
        if _dry.active and _core.trace_state_clean():  # ``trace_ahead``'s run (not a kernel
            # traced inside another): compile this call ahead, give back its shapes
            compile_ahead(*args, **kwargs)
            shapes = plain.eval_shape(*args, **kwargs)  # type: ignore[no-untyped-call]
            shapes = jax.tree_util.tree_map(_unplaced, shapes)
            return shapes, None, False  # a miss handler's reply: no fast path kept
        if ahead:
            result = _run_ahead(ahead, static_nums, static_names, args, kwargs)
            if result is not _MISSED:
                if not MISSED:
                    MISSED.append(True)
                if name is not None:
                    _repeat_ahead(ahead, compile_ahead, args, kwargs)
                return result
        if name is None:
            return fallback(*args, **kwargs)
        # met before it compiles: a ``trace_ahead`` run on the other thread meeting this call's
        # signature meanwhile does not compile it a second time
        ahead.met(_signature(static_nums, static_names, args, kwargs))
        try:
            found = _from_store(plain, name, static_nums, static_names, classic, args, kwargs)
        except Exception:  # anything unexpected in JAX's internals: jax.jit's own path
            found = None
        if found is None:
            return fallback(*args, **kwargs)
        aot, loaded = found
        if loaded is None:
            if not MISSED:
                MISSED.append(True)
            _repeat_ahead(ahead, compile_ahead, args, kwargs)
        dyn, dyn_kw = _dynamic(static_nums, static_names, args, kwargs)
        try:
            return aot(*dyn, **dyn_kw)
        except Exception:
            if loaded is None:
                raise  # compiled here: a genuine error of the call
            result = fallback(*args, **kwargs)  # the caller's error, if it is one, raises here
            with contextlib.suppress(OSError):  # a store this process may not change alone
                loaded.unlink(missing_ok=True)  # the stored program did not run: replaced later
            return result

    def compile_ahead(*args: Any, **kwargs: Any) -> None:
        rule = classic if name is not None else None  # the options the call would compile with
        _compile_ahead(plain, name, ahead, static_nums, static_names, rule, args, kwargs)

    def pending(*args: Any, **kwargs: Any) -> bool:
        signature = _signature(static_nums, static_names, args, kwargs)
        entry = None if signature is None else ahead.get(signature)
        return entry is not None and entry[0] is _pool and not entry[1].done()

    def stored_path(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Path | None:
        found = (
            None if name is None else _key(name, classic, static_nums, static_names, args, kwargs)
        )
        return None if found is None else _file(found[0])

    def stored(*args: Any, **kwargs: Any) -> bool:
        path = stored_path(args, kwargs)
        try:
            return path is not None and path.exists()
        except OSError:  # a folder this process may not look into: as if nothing were
            return False

    def forget(*args: Any, **kwargs: Any) -> None:
        path = stored_path(args, kwargs)
        if path is not None:
            with contextlib.suppress(OSError):  # a store it may not change: it stays
                path.unlink(missing_ok=True)

    def clear_cache() -> None:
        ahead.cache_clear()
        alive = compiled_ref()
        if alive is not None:
            jax_clear_cache(alive)

    try:
        compiled = _jax.pjit(
            getattr(fn, "__name__", name or "kernel"),
            fn,
            cache_miss,
            info.static_argnums,
            info.static_argnames,
            _pxla.JitGlobalCppCacheKeys(),
            _tree_util.dispatch_registry,
            _pxla.cc_shard_arg,
        )
    except TypeError:  # pragma: no cover - another signature in another JAX version
        return _plain(plain)
    wrapped: Any = functools.wraps(fn)(compiled)
    wrapped._fun = fn  # what jax.jit's lower/trace/eval_shape read
    wrapped._jit_info = info
    wrapped.compile_ahead = compile_ahead
    wrapped.pending = pending
    jax_clear_cache = type(compiled).clear_cache
    compiled_ref = weakref.ref(compiled)  # no cycle: a dropped kernel goes at once
    wrapped.stored = stored
    wrapped.forget = forget
    wrapped.clear_cache = clear_cache  # programs compiled ahead too, as jax.clear_caches()
    _jax_util._caches[ahead] = "tapegrad programs compiled ahead"
    return wrapped


def _dynamic(
    static_nums: frozenset[int],
    static_names: frozenset[str],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments of a call that are not static (what a compiled program takes)."""
    dyn = [a for i, a in enumerate(args) if i not in static_nums]
    return dyn, {k: v for k, v in kwargs.items() if k not in static_names}


# ---------------------------------------------------------------- compiling ahead

_AHEAD_MAX = 8
"""Programs a kernel keeps compiled ahead for calls that have not come yet; a new one drops
the oldest (a VJP compiled ahead for a forward no backward followed: an evaluation under
grad mode)."""
_MISSED = object()
_pool: ThreadPoolExecutor | None = None


class _AheadTable(dict[Any, "tuple[ThreadPoolExecutor, Future[Any]]"]):
    """A kernel's programs compiling ahead: signature -> ``(pool, future)``, the pool it was
    given to (a process forked since has another or none: its thread did not come along);
    and ``seen``, the signatures whose program a call of this process loaded or compiled
    (the store's path), which nothing compiles ahead again. ``jax.clear_caches()`` and the
    kernel's ``clear_cache()`` empty both (``cache_clear``)."""

    __hash__ = object.__hash__  # type: ignore[assignment]  # a key of JAX's registry, by identity
    __eq__ = object.__eq__

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[Any] = set()

    def met(self, signature: Any) -> None:
        """Note that a call got the program of ``signature`` (``None``: not keyed)."""
        if signature is not None:
            if len(self.seen) >= _SEEN_MAX:
                self.seen.clear()
            self.seen.add(signature)

    def cache_clear(self) -> None:
        for _, future in list(self.values()):
            future.cancel()
        self.clear()
        self.seen.clear()


_SEEN_MAX = 4096
"""Signatures a kernel remembers as met (``_AheadTable.seen``) before it forgets them all."""
MISSED: list[bool] = []
"""Not empty (one ``True``) when a concrete call of a stored kernel compiled its program, or
took one compiled ahead, since the list was last cleared: ``op.apply`` reads it to compile
the VJP of the op it records ahead (a new op, shape or dtype was met, and the store did not
have it: a first-ever run; where the store has the programs, tracing the VJP rules ahead
would only take the interpreter from the caller), and clears it. (Not the kernel: it would
make a cycle through its miss handler.)"""


def _forget_pool() -> None:
    """In a child process after ``fork``: the pool's thread stayed in the parent."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _no_ahead(*args: Any, **kwargs: Any) -> None:
    """``compile_ahead`` (and ``forget``) where this module cannot serve it (another JAX):
    nothing."""


def _nothing_stored(*args: Any, **kwargs: Any) -> bool:
    """``stored`` where this module cannot serve it: nothing is."""
    return False


def _plain(plain: Any) -> Any:
    """``jax.jit``'s function as a kernel where this module cannot serve it: ``compile_ahead``
    and ``forget`` do nothing, ``stored`` is false."""
    plain.compile_ahead = plain.forget = _no_ahead
    plain.stored = _nothing_stored
    return plain


def _compile_ahead(
    plain: Any,
    name: str | None,
    ahead: _AheadTable,
    static_nums: frozenset[int],
    static_names: frozenset[str],
    classic: bool | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """Start compiling ``plain`` for the signature of ``args`` on a background thread, when
    this process may use two cores or more, for the first call of that signature to take
    (``_run_ahead``): the compile then overlaps what the caller does meanwhile (an
    optimizer's update compiles while the first forward and backward run). Arrays may be
    given as ``jax.ShapeDtypeStruct`` values. The program is traced on that thread, so what
    the function reads when traced (Python state) is read then, not at the call: only
    functions that read nothing but their arguments should compile ahead. A stored kernel
    (``name``) takes the store's path there (a program loaded from the store, or compiled
    and stored), with the options the call would have (``classic``: the store's
    ``_classic`` choice; ``None``: XLA's defaults, a kernel the store does not keep).
    Nothing starts under a trace, for a signature already started or met by a call
    (``_AheadTable.seen``), or for arguments ``_signature`` does not key; one beyond
    ``_AHEAD_MAX`` drops the kernel's oldest."""
    if not _core.trace_state_clean():
        return
    signature = _signature(static_nums, static_names, args, kwargs)
    pool = _background()
    if (
        signature is None
        or pool is None
        or signature in ahead.seen
        or ahead.get(signature, (None,))[0] is pool
    ):
        return
    if name is not None and any(
        leaf.__class__ is np.ndarray for leaf in jax.tree_util.tree_leaves((args, kwargs))
    ):  # the store refuses NumPy arguments: the call compiles as plain jit, so this does
        name = classic = None
    abstract = jax.tree_util.tree_map(_abstract, (args, kwargs))  # the thread holds no array
    while len(ahead) >= _AHEAD_MAX:  # the oldest goes (a running one finishes, unclaimed);
        # the other thread may take entries meanwhile (a call, a ``trace_ahead`` run)
        try:
            dropped = ahead.pop(next(iter(ahead)), None)
        except (StopIteration, RuntimeError):
            break
        if dropped is not None:
            dropped[1].cancel()
    future: Future[Any] = Future()
    ahead[signature] = (pool, future)  # before the thread may look for it
    job = (weakref.ref(ahead), signature, plain, name, static_nums, static_names, classic)
    try:
        pool.submit(_compile, future, job, *abstract)
    except RuntimeError:  # the interpreter is exiting: the pool takes no more work
        ahead.pop(signature, None)


_SEQUENCE_MAX = 64
"""Compiles a process remembers, in order, to find a sequence repeating (``_repeat_ahead``)."""
_REPEAT_MAX = 16
"""The most compiles ``_repeat_ahead`` predicts from one earlier sequence."""
_sequence: deque[tuple[weakref.ref[Any], weakref.ref[Any], list[Any], Any, Any]] = deque(
    maxlen=_SEQUENCE_MAX
)
_Shapes = dict[tuple[int, ...], tuple[int, ...]]


def _repeat_ahead(
    ahead: _AheadTable, compile_ahead: Callable[..., None], args: Any, kwargs: Any
) -> None:
    """Note a kernel's compile of a new signature (or its program compiled ahead, taken), and
    when the same kernel compiled before for arguments of other shapes only, compile ahead
    what followed that compile, its shapes mapped alike (``_remapped``): a loop over
    parameters of different shapes (an optimizer written in ops: ``mem += g * g;
    p -= lr * g / sqrt(mem + eps)``) compiles the same kernels in the same order per shape,
    and from the second parameter on, the background thread compiles them while this
    thread compiles too. They are queued last first: this thread compiles the first ones
    itself (a call takes a program not started yet) while the background thread works from
    the end, so the two meet in the middle. A prediction no call takes costs the background
    thread's time, and the interpreter's lock while that thread traces (~5 ms a kernel).
    Only compiles made under this thread's JAX settings now count (a sequence met inside
    ``with jax.enable_x64()`` holds float64 shapes, which traced with x64 off would be
    programs no call takes, and JAX warns while tracing them)."""
    leaves, tree = jax.tree_util.tree_flatten(jax.tree_util.tree_map(_abstract, (args, kwargs)))
    context = _config.trace_context()
    past = list(_sequence)
    # weakly: a kernel dropped (its table and ``compile_ahead`` with it) goes at once
    _sequence.append((weakref.ref(ahead), weakref.ref(compile_ahead), leaves, tree, context))
    for i in range(len(past) - 1, -1, -1):
        table, _, old, old_tree, old_context = past[i]
        if table() is ahead and old_tree == tree and old_context == context:
            shapes = _shape_map(old, leaves)
            if shapes is not None:
                break
    else:
        return
    predicted = []
    for table, start_ref, old, old_tree, old_context in past[i + 1 : i + 1 + _REPEAT_MAX]:
        if table() is ahead or old_context != context:
            break  # the sequence's next round began, or JAX's settings changed
        start = start_ref()
        mapped = None if start is None else _remapped(old, shapes)
        if mapped is not None:
            predicted.append((start, jax.tree_util.tree_unflatten(old_tree, mapped)))
    for start, (a, kw) in reversed(predicted):
        start(*a, **kw)


def _shape_map(old: list[Any], new: list[Any]) -> _Shapes | None:
    """Each array shape of ``old`` (flattened abstract arguments) to the shape in its place in
    ``new``, where the two differ in shapes only (same dtypes, weak types and other values),
    one shape maps to one shape and a 0-d shape only to itself; ``None`` otherwise, or where
    no shape changed."""
    if len(old) != len(new):
        return None
    shapes: _Shapes = {}
    for a, b in zip(old, new, strict=True):
        if a.__class__ is jax.ShapeDtypeStruct:
            if b.__class__ is not jax.ShapeDtypeStruct or (a.dtype, a.weak_type) != (
                b.dtype,
                b.weak_type,
            ):
                return None
            if (not a.shape) != (not b.shape) or shapes.setdefault(a.shape, b.shape) != b.shape:
                return None  # a scalar stays a scalar: ``x / s.sum()`` is no ``p / q``
        elif a.__class__ is not b.__class__ or a != b:
            return None
    if all(a == b for a, b in shapes.items()):
        return None
    return shapes


def _remapped(leaves: list[Any], shapes: _Shapes) -> list[Any] | None:
    """``leaves`` with each array shape mapped by ``shapes`` (a 0-d array as it is); ``None``
    when one is outside the map or nothing changed."""
    out = []
    changed = False
    for leaf in leaves:
        if leaf.__class__ is jax.ShapeDtypeStruct and leaf.shape:
            shape = shapes.get(leaf.shape)
            if shape is None:
                return None
            if shape != leaf.shape:
                changed = True
                leaf = jax.ShapeDtypeStruct(shape, leaf.dtype, weak_type=leaf.weak_type)  # type: ignore[no-untyped-call]
        out.append(leaf)
    return out if changed else None


_CREDIT = 128
"""``trace_ahead`` runs allowed in a row without a call taking a program compiled ahead."""
_credit = _CREDIT


class _Dry(threading.local):
    active = False  # inside ``_dry_run`` on this thread


_dry = _Dry()


def trace_ahead(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Run ``fn(*args, **kwargs)`` on the background thread with every array replaced by its
    ``jax.ShapeDtypeStruct``, each kernel it calls compiling ahead (``compile_ahead``) for
    the arguments it gets and returning the shapes of its results (``eval_shape``): so the
    programs a later concrete call of ``fn`` needs are compiled, or loaded from the store,
    by then, on another core. ``fn`` must be pure and compute only through kernels (a VJP
    rule of tapegrad's own); where it computes otherwise (a ``jnp`` call on a shape, a
    value it needs), the run stops there and what it started stays. Nothing runs where
    ``compile_ahead`` would not (one core, under a trace), where the background thread's
    JAX settings differ from the caller's (``with jax.enable_x64()`` on the caller's
    thread), or once ``_CREDIT`` runs went by without a call taking a program compiled ahead
    (runs hold the interpreter's lock while they trace, which a caller that never calls
    what they compile, a forward under grad mode no backward follows, would pay for)."""
    global _credit
    if not _SUPPORTED or not _core.trace_state_clean() or _credit <= 0:
        return
    pool = _background()
    if pool is None:
        return
    _credit -= 1
    abstract = jax.tree_util.tree_map(_abstract, (args, kwargs))
    try:
        pool.submit(_dry_run, fn, _config.trace_context(), *abstract)
    except RuntimeError:  # the interpreter is exiting: the pool takes no more work
        return


def _dry_run(fn: Callable[..., Any], context: Any, args: Any, kwargs: Any) -> None:
    """On the background thread: ``trace_ahead``'s run of ``fn``."""
    if _config.trace_context() != context:
        return
    _dry.active = True
    try:
        fn(*args, **kwargs)
    except Exception:  # noqa: S110 - computing outside kernels: the kernels met so far compile
        pass
    finally:
        _dry.active = False


def _unplaced(shape: Any) -> Any:
    """``eval_shape``'s result without its sharding: what ``_signature`` keys, as the
    uncommitted array a concrete call returns."""
    return jax.ShapeDtypeStruct(shape.shape, shape.dtype, weak_type=shape.weak_type)  # type: ignore[no-untyped-call]


def _abstract(leaf: Any) -> Any:
    """An array as a ``jax.ShapeDtypeStruct`` (anything else as it is)."""
    if isinstance(leaf, (jax.Array, np.ndarray)):
        return jax.ShapeDtypeStruct(  # type: ignore[no-untyped-call]
            leaf.shape,
            leaf.dtype,
            weak_type=getattr(getattr(leaf, "aval", None), "weak_type", False),
        )
    return leaf


def _compile(
    future: Future[Any], job: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """On the background thread: ``future``'s result, unless a call took it over first."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(_program(job, args, kwargs))
    except BaseException as err:
        future.set_exception(err)


def _program(job: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The fast call of the program for ``args``, or ``None`` when nothing will take it (its
    kernel is gone, its entry was taken or cleared) or when JAX's thread-local settings
    differ on this thread from the caller's (``with jax.enable_x64()`` on the caller's
    thread): a program traced here would be another."""
    table_ref, signature, plain, name, static_nums, static_names, classic = job
    table = table_ref()
    if table is None or signature not in table or _config.trace_context() != signature[-1]:
        return None
    del table
    if name is not None:
        found = _from_store(plain, name, static_nums, static_names, classic, args, kwargs)
        if found is not None:
            return found[0]
    lowered, options = _lower(plain, args, kwargs, classic)
    if _config.trace_context() != signature[-1]:  # a global setting changed while tracing
        return None
    return _fast_call(lowered.compile(compiler_options=options))


def _run_ahead(
    ahead: _AheadTable,
    static_nums: frozenset[int],
    static_names: frozenset[str],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """The result of a call by the program compiled ahead for its signature, or
    ``_MISSED``: no such program, it failed (then the call takes the usual path, which
    raises the caller's error if there is one), or it has not started yet (queued behind
    another: compiling it here is sooner). A program compiling now is waited for. Under
    a trace, queued programs of this kernel are dropped: a kernel traced into a compiled
    step (``tg.jit``) is unlikely to be called eagerly."""
    if not _core.trace_state_clean():
        for queued, (_, future) in list(ahead.items()):
            if future.cancel():
                ahead.pop(queued, None)  # the other thread may have taken it meanwhile
        return _MISSED
    signature = _signature(static_nums, static_names, args, kwargs)
    entry = None if signature is None else ahead.pop(signature, None)
    if entry is None or entry[0] is not _pool:  # none, or started before this process forked
        return _MISSED
    future = entry[1]
    if future.cancel():
        return _MISSED
    try:
        call = future.result()
        if call is None:
            return _MISSED
        dyn, dyn_kw = _dynamic(static_nums, static_names, args, kwargs)
        result = call(*dyn, **dyn_kw)
    except Exception:
        return _MISSED
    global _credit
    _credit = _CREDIT  # what was compiled ahead is used: ``trace_ahead`` may go on
    ahead.met(signature)
    return result


def _signature(
    static_nums: frozenset[int],
    static_names: frozenset[str],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[Any, ...] | None:
    """What selects a program in this process: static values, the argument tree, each
    array's shape, dtype and weak type, JAX's trace context (last). Only arrays on the
    default device and not committed to it, NumPy arrays of JAX's dtypes, Python scalars and
    ``jax.ShapeDtypeStruct`` values without a sharding are keyed; ``None`` for anything else.
    A Python scalar keys as the device scalar of its abstract value (``_scalar_aval``). A
    NumPy array keys apart from a JAX array or a ``ShapeDtypeStruct`` of its shape and
    dtype: the store does not serve a call with one (plain ``jax.jit`` compiles it, with
    XLA's default options), so a program compiled ahead for it must be compiled so too."""
    if _config.default_device.value is not None:
        return None
    statics: list[Any] = []
    try:
        for i in sorted(static_nums):
            if i < len(args):
                statics.append((i, static_key(args[i])))
        for k in sorted(static_names & kwargs.keys()):
            statics.append((k, static_key(kwargs[k])))
    except TypeError:
        return None
    leaves, tree = jax.tree_util.tree_flatten(_dynamic(static_nums, static_names, args, kwargs))
    default = _pxla.get_default_device()
    sigs: list[Any] = []
    for leaf in leaves:
        cls = leaf.__class__
        if cls in _PYTHON_SCALARS:
            sigs.append(_scalar_aval(cls))  # as a device scalar of its aval: one program
        elif cls is _ArrayImpl:
            sharding = leaf.sharding
            if (
                leaf.committed
                or leaf.is_deleted()
                or not isinstance(sharding, _SingleDevice)
                or next(iter(sharding.device_set)) != default
            ):
                return None
            sigs.append((leaf.shape, leaf.dtype, leaf.aval.weak_type))
        elif cls is np.ndarray and jax.dtypes.canonicalize_dtype(leaf.dtype) == leaf.dtype:
            sigs.append((leaf.shape, leaf.dtype, False, np.ndarray))  # see the docstring
        elif cls is jax.ShapeDtypeStruct and leaf.sharding is None:
            sigs.append((leaf.shape, np.dtype(leaf.dtype), leaf.weak_type))
        else:
            return None
    return (tuple(statics), tree, tuple(sigs), _config.trace_context())


_DTYPE_TEXT: dict[Any, str] = {}


def dtype_text(dtype: Any) -> str:
    """``str(dtype)`` of a NumPy dtype, remembered (NumPy builds the text anew each time,
    ~7 us: a key over a compiled backward pass's thousands of arrays would pay it for each)."""
    text = _DTYPE_TEXT.get(dtype)
    if text is None:
        text = _DTYPE_TEXT[dtype] = str(dtype)
    return text


_SCALAR_DTYPES = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}


def _scalar_aval(cls: type) -> tuple[tuple[()], np.dtype[Any], bool]:
    """``(shape, dtype, weak type)`` of a Python scalar of class ``cls`` as a jitted function
    sees it: a 0-d array of JAX's dtype for it (x64 decides; the trace context is keyed
    too), weakly typed unless a bool. A kernel called with such a scalar or with a device
    scalar of that abstract value (``op.int_arguments`` passes either, whether it met the
    value before) runs the same program, so ``_signature`` and ``_key`` key both alike: the
    second form takes the program the first compiled (JAX's own cache keys them apart)."""
    return (), jax.dtypes.canonicalize_dtype(_SCALAR_DTYPES[cls]), cls is not bool


def _background() -> ThreadPoolExecutor | None:
    """The one thread programs compile ahead on (a process's exit waits for the one it is
    compiling, and drops those queued); ``None`` on a machine (or an affinity mask) of a
    single core, where it would only take time from the caller."""
    global _pool
    if _pool is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # macOS, Windows
            cores = os.cpu_count() or 1
        if cores < 2:
            return None
        with _lock:
            if _pool is None:
                pool = ThreadPoolExecutor(1, thread_name_prefix="tapegrad-compile")
                # before concurrent.futures joins its threads at exit (callbacks run last
                # registered first): programs still queued are dropped, not compiled
                register = getattr(threading, "_register_atexit", None)
                try:
                    if register is not None:
                        register(functools.partial(pool.shutdown, wait=False, cancel_futures=True))
                except RuntimeError:  # the interpreter is exiting: nothing compiles ahead
                    return None
                _pool = pool
    return _pool


def _stable_name(fn: Callable[..., Any]) -> str | None:
    """``module.qualname`` of a module-level function or a JAX function object; ``None``
    for a lambda or a closure (no name that means the same code in another process)."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not module or not qualname or "<" in qualname:
        return None
    return f"{module}.{qualname}"


def store_dir() -> Path | None:
    """The kernel store's folder, ``None`` while tapegrad's compilation cache is off (or the
    user configured JAX's cache without tapegrad: the store then stays out of it)."""
    folder = compilation_cache.tapegrad_cache_dir()
    return None if folder is None else Path(folder) / _FOLDER


_NOT_KEYED = frozenset(
    {
        "jax_compilation_cache_dir",
        "jax_log_compiles",
        "jax_explain_cache_misses",
        "jax_logging_level",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
    }
)
"""JAX settings that change no compiled program (the others are part of every key: a
changed one only costs a compile)."""
_STALE_SECONDS = 7 * 24 * 3600
"""A store folder of another environment unused this long is removed (see ``_env_folder``)."""
_lock = threading.Lock()
_environment: tuple[Any, ...] | None = None
_used: set[Path] = set()  # environment folders this process touched already


def _env_folder(root: Path) -> Path:
    """This environment's folder in the store (one per ``_env()``: a tapegrad, JAX or flags
    change starts a new one). Once per process it is marked used (its modification time)
    and the folders of environments unused for ``_STALE_SECONDS`` are removed, so an
    upgrade or an edited source does not leave the old programs on disk for ever."""
    folder = root / hashlib.sha256(repr(_env()).encode()).hexdigest()[:16]
    if folder not in _used:
        _used.add(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            os.utime(folder)
            now = time.time()
            for other in root.iterdir():
                if other != folder and now - other.stat().st_mtime > _STALE_SECONDS:
                    shutil.rmtree(other, ignore_errors=True)
        except OSError:
            pass  # a store that cannot be written: entries are skipped (``_save``)
    return folder


def _env() -> tuple[Any, ...]:
    """What every stored program depends on beyond its kernel and arguments (once per
    process): versions, the backend, ``XLA_FLAGS``, JAX's tracing configuration and
    tapegrad's source (a changed file must not load programs compiled from the old one)."""
    global _environment
    if _environment is None:
        with _lock:
            if _environment is None:
                backend = jax.devices()[0].client
                source = hashlib.sha256()
                root = Path(__file__).parent
                for path in sorted(root.rglob("*.py")):
                    source.update(str(path.relative_to(root)).encode())
                    source.update(path.read_bytes())
                _environment = (
                    _FORMAT,
                    jax.__version__,
                    jaxlib.__version__,  # type: ignore[attr-defined]
                    backend.platform,
                    backend.platform_version,
                    os.environ.get("XLA_FLAGS", ""),
                    _host_fingerprint(),
                    source.hexdigest(),
                )
    return _environment


def _host_fingerprint() -> int | None:
    """XLA's fingerprint of the CPU (its instruction sets), as JAX's cache key has it: a
    cache folder shared by machines of different CPUs keeps their programs apart."""
    try:
        return int(xla_client.get_topology_for_devices(jax.devices("cpu")[:1]).fingerprint())
    except Exception:  # a jaxlib without it: the platform version stands alone
        return None


def static_key(value: Any) -> Any:
    """The cache-key form of a static value (a keyword parameter, a static residual): it
    keeps apart what ``==`` merges, ``1``, ``1.0`` and ``True`` (``x[1]`` is a row,
    ``x[True]`` a new axis), ``0.0`` and ``-0.0``, a NumPy scalar and a Python one (they
    promote differently); a NaN equals itself (one key per sign); a slice is hashable.

    Raises:
        TypeError: the value (or an item of a tuple) is not hashable.
    """
    cls = value.__class__
    if cls is float:
        return (float, struct.pack("<d", value).hex())  # the bits
    if cls is tuple:
        return (tuple, tuple([static_key(v) for v in value]))
    if cls is slice:  # unhashable before Python 3.12
        return (slice, static_key((value.start, value.stop, value.step)))
    hash(value)
    return (cls, value)


def _static(value: Any) -> str:
    """``static_key(value)`` as text that means the same in another process, or raise
    ``TypeError`` when a value in it is not of a type whose repr states its whole value
    (the store then stays out of the call)."""
    _check_static(value)
    return repr(static_key(value))


def _check_static(value: Any) -> None:
    if value.__class__ is tuple:
        for v in value:
            _check_static(v)
    elif value.__class__ is slice:
        _check_static((value.start, value.stop, value.step))
    elif not isinstance(value, _STATIC_TYPES) and not (
        isinstance(value, type)
        and (issubclass(value, np.generic) or value.__module__.startswith("jax"))
    ):  # np.float32 and jnp.float32 (a JAX scalar type) are named by where they are defined
        raise TypeError(value.__class__.__name__)


def _key(
    name: str,
    classic: bool,
    static_nums: frozenset[int],
    static_names: frozenset[str],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[str, Any] | None:
    """The store key of a call and the device it runs on, or ``None`` when the call is not
    one the store serves (a trace, a non-array argument, a sharded or non-CPU array)."""
    if not _core.trace_state_clean() or _dispatch.needs_check_special():
        return None  # a trace, or jax_debug_nans/infs: JAX's own checks and messages
    statics: list[Any] = []
    dyn: list[Any] = []
    try:
        for i, a in enumerate(args):
            if i in static_nums:
                statics.append((i, _static(a)))
            else:
                dyn.append(a)
        dyn_kw = {}
        for k in sorted(kwargs):
            if k in static_names:
                statics.append((k, _static(kwargs[k])))
            else:
                dyn_kw[k] = kwargs[k]
    except TypeError:
        return None
    leaves, tree = jax.tree_util.tree_flatten((dyn, dyn_kw))
    device = None
    default = _pxla.get_default_device()
    sigs: list[Any] = []
    for leaf in leaves:
        cls = leaf.__class__
        if cls in _PYTHON_SCALARS:  # keyed as the uncommitted device scalar of its aval
            shape, dtype, weak = _scalar_aval(cls)
            sigs.append((shape, dtype_text(dtype), weak, False))
            continue
        if cls is jax.ShapeDtypeStruct and leaf.sharding is None:  # compiling ahead: what
            # ``_signature`` keys, an uncommitted array on the default device
            if device is not None and default != device:
                return None
            device = default
            sigs.append((leaf.shape, dtype_text(np.dtype(leaf.dtype)), leaf.weak_type, False))
            continue
        if cls is not _ArrayImpl or leaf.is_deleted():
            return None
        sharding = leaf.sharding
        if not isinstance(sharding, _SingleDevice):
            return None
        dev = next(iter(sharding.device_set))
        if (device is not None and dev != device) or (not leaf.committed and dev != default):
            return None  # an uncommitted array elsewhere than the default device: JAX's own
        device = dev
        aval = leaf.aval
        sigs.append((aval.shape, dtype_text(aval.dtype), aval.weak_type, leaf.committed))
    if device is None:  # Python scalars only: JAX's default device
        if not sigs or _config.default_device.value is not None:
            return None
        device = default
    if device.platform != "cpu":
        return None
    text = repr((_settings(), name, classic, tuple(statics), str(tree), tuple(sigs), device.id))
    return hashlib.sha256(text.encode()).hexdigest(), device


_settings_seen: tuple[tuple[Any, ...], str] | None = None
"""The objects ``_settings`` last read and the digest it made of them."""


def _settings() -> str:
    """A digest of what every stored program depends on besides its own call: ``_env()``,
    JAX's trace context and every JAX setting that changes a program (x64, the PRNG,
    optimization levels, ...; ``_NOT_KEYED`` left out).

    Writing out and sorting JAX's ~130 settings took ~50 us of every ``_key`` (a first run
    makes one key per kernel it meets), so the digest is kept while the settings and the
    context are the very objects read last time (identity: a setting changed to an equal
    value of another type, ``1`` for ``True``, is written out again)."""
    global _settings_seen
    values = jax.config.values
    context = _config.trace_context()
    seen = (*values, *values.values(), *context)
    last = _settings_seen
    if last is not None and len(last[0]) == len(seen) and all(map(operator.is_, last[0], seen)):
        return last[1]
    text = repr(
        (
            _env(),
            tuple(type(v).__name__ if " at 0x" in repr(v) else repr(v) for v in context),
            sorted((k, repr(v)) for k, v in values.items() if k not in _NOT_KEYED),
        )
    )
    digest = hashlib.sha256(text.encode()).hexdigest()
    _settings_seen = (seen, digest)
    return digest


def _file(key: str) -> Path | None:
    """The store's file of the program of store key ``key`` (``None`` while the store is
    off)."""
    root = store_dir()
    return None if root is None else _env_folder(root) / f"{key}.bin"


def _from_store(
    plain: Any,
    name: str,
    static_nums: frozenset[int],
    static_names: frozenset[str],
    classic: bool,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[Callable[..., Any], Path | None] | None:
    """``(miss handler, path)`` of the compiled program for this call: loaded from the store
    (``path``: its entry) or compiled and stored (``path`` ``None``); ``None`` when the store
    does not serve the call (then plain ``jax.jit`` handles it).

    A program is compiled here past JAX's persistent cache (``_past_jax_cache``): a program
    JAX loaded from its cache, XLA's CPU backend serializes again without its code (it
    loads, then fails to run)."""
    found = _key(name, classic, static_nums, static_names, args, kwargs)
    if found is None:
        return None
    key, device = found
    path = _file(key)
    folder = None if path is None else path.parent
    if path is not None and path.with_suffix(".jax").exists():
        return None  # a program that calls out of XLA: plain jax.jit's (``_calls_out``)
    compiled = loaded = None
    if path is not None and path.exists():
        try:
            compiled, loaded = _load(path.read_bytes(), device), path
        except Exception:  # a stale or damaged entry: compile afresh and replace it
            compiled = None
    if compiled is None:
        context = _config.trace_context()
        lowered, options = _lower(plain, args, kwargs, classic)
        if _config.trace_context() != context:  # another thread changed a global setting
            return None  # while this one traced: the program may not be the key's
        if _calls_out(lowered):
            if folder is not None and path is not None:
                with contextlib.suppress(OSError):
                    folder.mkdir(parents=True, exist_ok=True)
                    path.with_suffix(".jax").touch()
            return None
        with _past_jax_cache():
            compiled = lowered.compile(compiler_options=options)
        if folder is not None and path is not None:
            _save(compiled, folder, path)
    call = _fast_call(compiled)
    return None if call is None else (call, loaded)


def _calls_out(lowered: Any) -> bool:
    """Whether a lowered program calls code outside XLA (a ``custom_call``: the LAPACK
    routines of ``det``, ``inv``, ``solve``, ``cholesky``, ``eigvalsh``). jaxlib readies
    those routines while it lowers a call to them, so a program loaded from the store into a
    process that lowered none crashed the interpreter when it ran (a segmentation fault):
    such a kernel is plain ``jax.jit``'s, which lowers first (and JAX's persistent cache
    keeps its program), and the store keeps an empty ``.jax`` entry saying so."""
    return "custom_call" in lowered.as_text()


def _lower(
    plain: Any, args: tuple[Any, ...], kwargs: dict[str, Any], classic: bool | None
) -> tuple[Any, dict[str, Any] | None]:
    """``plain`` traced and lowered for ``args`` (in this thread's shared MLIR context) and
    the compile options it takes: the classic emitters where ``_classic`` allows them
    (``classic``: at any size), XLA's defaults where ``classic`` is ``None``."""
    traced = plain.trace(*args, **kwargs)
    with _shared_ir_context():
        lowered = traced.lower()
    if classic is None or not _classic(traced.jaxpr, classic):
        return lowered, None
    return lowered, _SMALL_OPTIONS


def _fast_call(compiled: Any) -> Callable[..., Any] | None:
    """The C++ call of a ``jax.stages.Compiled`` as a jit miss handler returns it (JAX
    caches it for the signature), or ``None`` where JAX has none."""
    call = compiled._executable.create_cpp_call(compiled._params)
    return None if call is None else call._cache_miss


def host_to_device(host: np.ndarray) -> jax.Array | None:
    """A NumPy array (its dtype one JAX keeps: canonical) copied onto JAX's default device
    (this process's first device, or ``jax.default_device``'s), uncommitted, where
    ``jnp.asarray`` places it, with JAX's own transfer (``shard_args``) without
    ``jax.device_put``'s Python layers: ~14 us for a small array against ~32 us, and no
    compile (``jnp.asarray`` compiles a copy kernel per shape: ~10-50 ms, and the first
    lowering of a process makes an MLIR context, ~60 ms more).

    On a CPU the array may share ``host``'s buffer (as ``device_put``'s may): pass a buffer
    nothing writes afterwards (a private copy). ``None`` where JAX's own conversion does more
    than place the array: under a trace, under ``jax.set_mesh`` (``jnp.asarray`` replicates
    over the mesh), with ``jax_debug_nans``/``jax_debug_infs`` (it checks the values), under
    a host-to-device ``jax.transfer_guard`` (it logs or refuses the transfer; JAX's own
    path decides), and without the JAX internals this module recognises."""
    if not plain_transfer():
        return None
    device = _pxla.get_default_device()
    sharding = _SHARDINGS.get(device)
    if sharding is None:
        sharding = _SHARDINGS[device] = _SingleDevice(device)
    aval = _core.ShapedArray(host.shape, host.dtype)
    (array,) = _pxla.shard_args([sharding], [None], [None], [host])
    result: jax.Array = _pxla.global_aval_to_result_handler(aval, sharding, False)(array)
    return result


_SHARDINGS: dict[Any, Any] = {}  # device -> its SingleDeviceSharding (host_to_device)


def plain_transfer() -> bool:
    """Whether a host value made into a device array here is what JAX's own conversion of an
    argument would make, with nothing more to do (``host_to_device``'s condition): outside
    a trace, without ``jax.set_mesh``, NaN checks or a host-to-device transfer guard, and
    with the JAX internals this module recognises."""
    return (
        _SUPPORTED
        and _core.trace_state_clean()
        and not _dispatch.needs_check_special()
        and (jax.sharding.get_abstract_mesh().empty or jax.sharding.get_mesh().empty)
        and _config.transfer_guard_host_to_device.value in (None, "allow")
    )


def _classic(jaxpr: Any, always: bool) -> bool:
    """Whether the kernel of ``jaxpr`` (a closed jaxpr) compiles with XLA's classic CPU
    emitters: when every array in it, inputs, outputs and intermediates, is a float32,
    float64, integer or boolean array, no primitive computes differently there
    (``_INEXACT``), and every input and output has at most ``SMALL`` elements, or
    ``MEDIUM`` when no primitive reduces (``_REDUCING``), or any number when ``always``.
    Under those conditions the classic emitters compute each primitive bit for bit as the
    default ones (a test checks ~55 functions), and every kernel so in float64; a fused
    float32 expression may round differently in its last bits (XLA fuses and orders its
    arithmetic per emitter: up to 7 ulp, 4.8e-7 relative, in the tests), as any change of
    XLA's fusion may. In float16 and bfloat16, ``log1p`` and ``rsqrt`` alone differ by up
    to ~1.8 ulp, so those keep the default."""
    avals = (*jaxpr.in_avals, *jaxpr.out_avals)
    if not all(_classic_dtype(a.dtype) for a in avals):
        return False
    largest = max((int(np.prod(a.shape)) for a in avals), default=0)
    if not always and largest > MEDIUM:
        return False
    reduces = _scan(jaxpr.jaxpr)
    return reduces is not None and (always or largest <= SMALL or not reduces)


def _classic_dtype(dtype: Any) -> bool:
    """A dtype the classic emitters compute as the default ones: ``_CLASSIC_DTYPES``, and
    JAX's PRNG keys (uint32 words inside a random draw)."""
    if isinstance(dtype, np.dtype):
        return dtype in _CLASSIC_DTYPES
    return bool(jax.numpy.issubdtype(dtype, jax.dtypes.prng_key))


_INEXACT = frozenset({"tan", "atan", "cbrt"})
"""Primitives the classic emitters compute differently from the default ones in float32 and
float64 (some elements differ in the last bits): a kernel with one keeps the default."""


def _scan(jaxpr: Any) -> bool | None:
    """Whether ``jaxpr`` or a jaxpr nested in it (``pjit``, ``custom_jvp_call``, ...) has a
    primitive named in ``_REDUCING``; ``None`` when the classic emitters must not compile
    it: a primitive in ``_INEXACT``, or a value of a dtype outside ``_CLASSIC_DTYPES``
    (float16 computed inside a float32 kernel)."""
    reduces = False
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _INEXACT:
            return None
        for var in eqn.outvars:
            dtype = getattr(var.aval, "dtype", None)
            if dtype is not None and not _classic_dtype(dtype):
                return None
        if name.startswith(_REDUCING) and name != "reduce_precision":
            reduces = True
        for sub in _core.jaxprs_in_params(eqn.params):
            inner = _scan(sub)
            if inner is None:
                return None
            reduces = reduces or inner
    return reduces


_IR_USES = 256
"""Lowerings one MLIR context serves before it is replaced (``_shared_ir_context``)."""
_ir = threading.local()  # this thread's shared context: .active, .context, .uses


@contextlib.contextmanager
def _shared_ir_context() -> Iterator[None]:
    """Lower inside with this thread's shared MLIR context. JAX makes a new context for
    every lowering (loading every dialect it knows, GPU ones included) and the collector
    destroys it later: ~4.4 of the ~7 ms a small kernel's lowering takes here, paid by
    every kernel of a first-ever run. A shared context keeps what it interns (types,
    attributes), so it is replaced after ``_IR_USES`` lowerings. JAX's own lowerings
    (``jax.jit`` outside the store, other threads) keep a context each."""
    _ir.active = True
    try:
        yield
    finally:
        _ir.active = False


def _make_ir_context() -> Any:
    """``mlir.make_ir_context`` as JAX calls it: its own, but inside ``_shared_ir_context``
    this thread's shared context."""
    if not getattr(_ir, "active", False):
        return _jax_make_ir_context()
    uses = getattr(_ir, "uses", _IR_USES)
    if uses >= _IR_USES:
        _ir.context, uses = _jax_make_ir_context(), 0
    _ir.uses = uses + 1
    return _ir.context


if _SUPPORTED:  # JAX's function stays what every lowering outside the store calls
    _jax_make_ir_context = getattr(_mlir.make_ir_context, "jax_own", _mlir.make_ir_context)
    _make_ir_context.jax_own = _jax_make_ir_context  # type: ignore[attr-defined]
    _mlir.make_ir_context = _make_ir_context


_past = threading.local()  # .active: this thread compiles past JAX's persistent cache


@contextlib.contextmanager
def _past_jax_cache() -> Iterator[None]:
    """Compile on this thread without JAX's persistent cache (neither read nor written) while
    inside; other threads keep using it (JAX's ``is_cache_used`` is wrapped for that: a
    process-wide switch would keep the programs the main thread compiles meanwhile out of
    JAX's cache while the background thread compiles ahead)."""
    before = getattr(_past, "active", False)
    _past.active = True
    try:
        yield
    finally:
        _past.active = before


def _is_cache_used(backend: Any) -> bool:
    """JAX's ``is_cache_used``, false on a thread inside ``_past_jax_cache``."""
    if getattr(_past, "active", False):
        return False
    return bool(_jax_is_cache_used(backend))


if _SUPPORTED:  # as ``_make_ir_context``: JAX's compiler reads it from its module
    _jax_is_cache_used = getattr(_jax_cache.is_cache_used, "jax_own", _jax_cache.is_cache_used)
    _is_cache_used.jax_own = _jax_is_cache_used  # type: ignore[attr-defined]
    _jax_cache.is_cache_used = _is_cache_used


def _save(compiled: Any, folder: Path, path: Path) -> None:
    """Write ``compiled`` to ``path``, compressed (~3x smaller) and atomically (a reader
    never sees half a file); a program that cannot be serialized, or a folder that cannot
    be written, is skipped."""
    try:
        payload, in_tree, out_tree = _serialize.serialize(compiled)
        data = zlib.compress(pickle.dumps((_FORMAT, payload, in_tree, out_tree)), 1)
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        partial.write_bytes(data)
        os.replace(partial, path)
    except (OSError, ValueError, NotImplementedError, pickle.PicklingError, TypeError):
        return


class _Unpickler(_serialize._JaxPjrtUnpickler if _SUPPORTED else pickle.Unpickler):  # type: ignore[misc]
    """JAX's executable unpickler, passing the compile options a CPU executable needs to
    be deserialized (JAX's own passes none; its persistent cache passes them)."""

    def persistent_load(self, pid: Any) -> Any:
        if pid[0] == "exec":
            devices = tuple(self.execution_devices)
            options = _load_options(devices, _settings())
            return self.backend.deserialize_executable(pid[1], devices, options)
        return super().persistent_load(pid)


@functools.lru_cache(maxsize=64)
def _load_options(devices: tuple[Any, ...], settings: str) -> Any:
    """The compile options a program stored for ``devices`` is deserialized with, made once
    per device assignment and ``_settings()`` digest (JAX reads some settings into them;
    ~35 us of each load otherwise)."""
    return _compile_options(
        num_replicas=1, num_partitions=1, device_assignment=np.array([list(devices)])
    )


def _load(data: bytes, device: Any) -> Any:
    """The ``jax.stages.Compiled`` stored as ``data``, loaded onto ``device``."""
    fmt, payload, in_tree, out_tree = pickle.loads(zlib.decompress(data))
    if fmt != _FORMAT:
        raise ValueError("another store format")
    unloaded, args_info_flat, no_kwargs = _Unpickler(
        io.BytesIO(payload), device.client, [device]
    ).load()
    return _stages.Compiled(
        unloaded.load(), [], in_tree.unflatten(args_info_flat), out_tree, no_kwargs=no_kwargs
    )
