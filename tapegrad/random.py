"""The process random state: one JAX key, split once per random call that is given no ``key=``.

``tg.manual_seed(seed)`` resets it; every random op (``tg.randn``, ``tg.rand``,
``tg.randn_like``, ``tg.dropout``, the layers' initialisers) takes ``key=`` (an int seed or a
``jax.random`` key) and draws from this state only when ``key`` is ``None``. Given a seed, a
program's random numbers are reproducible.

The state is one object, ``STATE`` (a ``RandomState``), read and written through
``get_state()``/``set_state()``, so a compiled step (``tg.jit``) can lift the key to an input
of its computation and write the advanced key back after each call. While ``tg.jit`` traces a
step, ``carried(key)`` gives the tracing context a state of its own holding the traced key:
draws there advance it, while other threads keep drawing from ``STATE``. Before the first use
the state is as after ``manual_seed(0)``.

``uniform`` and ``normal`` are ``jax.random``'s, bit for bit, where a draw of up to 65536
elements of any shape runs one compiled kernel per kind and dtype (``_draw``, ``_chunk``): a
kernel per shape, or per power-of-two size as before, was a compile of a program's first-ever
run per size (~80-110 ms each here; nanoGPT's model drew from five sizes).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.sharding import SingleDeviceSharding

from tapegrad import compilation_cache
from tapegrad.errors import TracerError
from tapegrad.kernels import JAX_TESTED, host_to_device, kernel

__all__ = [
    "RandomState",
    "STATE",
    "manual_seed",
    "get_state",
    "set_state",
    "next_key",
    "key_of",
    "seed_key",
    "split_key",
    "split_keys",
    "carried",
    "uniform",
    "normal",
]


@kernel
def _split(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    new, sub = jax.random.split(key)
    return new, sub


class RandomState:
    """A JAX PRNG key that advances by one split per draw (thread-safe).

    Attributes:
        key: the current key (a raw ``uint32[2]`` key or a typed ``jax.random.key``), or
            ``None`` before the first use (then ``manual_seed(0)``'s key is made on demand).
    """

    __slots__ = ("key", "_lock")

    def __init__(self) -> None:
        self.key: jax.Array | None = None
        self._lock = threading.Lock()

    def seed(self, seed: int) -> None:
        """Reset the key to the key of ``seed`` (:func:`seed_key`)."""
        self.key = seed_key(seed)

    def next_key(self) -> jax.Array:
        """Split the key: keep one half as the new state and return the other.

        Raises:
            TracerError: this is the process state (``STATE``), it is concrete, but the split
                happened under a JAX trace (``jax.jit`` of code that draws without ``key=``);
                the traced key would leak out of the trace and every call of the compiled
                function would reuse one number stream. Pass ``key=`` inside ``jax.jit``, or
                use ``tg.jit``, which lifts this state into the computation (a state
                ``carried`` there may hold a concrete key: ``manual_seed`` inside the step).
        """
        with self._lock:
            key = self.key
            if key is None:
                key = _low_key(0)
            new, sub = split_key(key)
            if (
                self is STATE
                and isinstance(new, jax.core.Tracer)
                and not isinstance(key, jax.core.Tracer)
            ):
                raise TracerError(
                    "A random op without key= ran inside a JAX trace (jax.jit, vmap, ...): "
                    "the process random state cannot advance there. Pass key=... explicitly, "
                    "or compile the step with tg.jit, which carries the random state."
                )
            self.key = new
            return sub


STATE = RandomState()
"""The process random state (one per process, shared by all threads)."""

_CARRIED: ContextVar[RandomState | None] = ContextVar("tapegrad_carried_random", default=None)


def _state() -> RandomState:
    """The state draws use here: the one ``carried`` set in this context, else ``STATE``."""
    carried = _CARRIED.get()
    return STATE if carried is None else carried


@contextmanager
def carried(key: jax.Array) -> Iterator[RandomState]:
    """Within the block, this context's random state is a new one holding ``key`` (what
    ``tg.jit`` does while it traces a step, with a traced key); ``manual_seed``,
    ``get_state``, ``set_state`` and draws without ``key=`` act on it. Other threads and
    contexts keep the process state. Yields the state, to read its advanced key."""
    state = RandomState()
    state.key = key
    token = _CARRIED.set(state)
    try:
        yield state
    finally:
        _CARRIED.reset(token)


def manual_seed(seed: int) -> None:
    """Seed the process random state (PyTorch's ``torch.manual_seed``).

    Args:
        seed: an int in PyTorch's range ``[-2**63, 2**64)``; the state becomes its key
            (:func:`seed_key`).

    Raises:
        TypeError: ``seed`` is not an int.
        ValueError: ``seed`` is outside that range.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed takes an int seed, got {type(seed).__name__}.")
    _state().seed(int(seed))


_TWO_32, _TWO_63, _TWO_64 = 1 << 32, 1 << 63, 1 << 64


def seed_key(seed: int) -> jax.Array:
    """The key of an int seed: ``jax.random.PRNGKey(seed)`` as JAX makes it with x64 on,
    in either mode. With x64 off JAX keeps only the low 32 bits of a seed (``2**32`` would
    give seed 0's numbers, and ``-1`` other numbers than with x64 on); a seed in
    ``[2**63, 2**64)`` is the int64 of the same 64 bits, as in PyTorch.

    Raises:
        ValueError: ``seed`` is outside ``[-2**63, 2**64)``.
    """
    if 0 <= seed < _TWO_32:  # every seed's key in both modes: no mode switch
        return _low_key(seed) if seed.__class__ is int else jax.random.PRNGKey(seed)
    if not -_TWO_63 <= seed < _TWO_64:
        raise ValueError(
            f"seed {seed} is outside [-2**63, 2**64) (64 bits, PyTorch's range); reduce it, "
            "e.g. seed % 2**64."
        )
    # made now even under a trace (a traced seed would carry an int64 into an x64-off trace)
    with jax.ensure_compile_time_eval(), jax.enable_x64(True):
        key: jax.Array = jax.random.PRNGKey(seed - _TWO_64 if seed >= _TWO_63 else seed)
    return key


def _low_key(seed: int) -> jax.Array:
    """``jax.random.PRNGKey(seed)`` for ``0 <= seed < 2**32``. Under JAX's default generator
    (threefry) that key is the words ``[0, seed]`` (``threefry_seed``: the seed's high and low
    32 bits), made here on the host and moved to the device without a compile (JAX's
    ``_threefry_seed`` compiles one, ~30 ms of a first run); under another generator, or
    where ``host_to_device`` leaves it to JAX (a trace), JAX makes it."""
    if jax.config.jax_default_prng_impl == "threefry2x32":  # type: ignore[attr-defined]
        key = host_to_device(np.array([0, seed], dtype=np.uint32))
        if key is not None:
            return key
    made: jax.Array = jax.random.PRNGKey(seed)
    return made


def get_state() -> jax.Array:
    """The current key of the process random state (a ``jax.Array``; made from seed 0 on
    first use). Passing it to ``set_state`` later replays the same draws."""
    state = _state()
    with state._lock:
        if state.key is None:
            state.key = _low_key(0)
        return state.key


def set_state(key: jax.Array) -> None:
    """Replace the key of the process random state.

    Args:
        key: a ``jax.random`` key (raw ``uint32[2]`` or typed), e.g. one ``get_state()``
            returned; ``tg.jit`` passes a traced key here while it traces a step.

    Raises:
        TypeError: ``key`` is not a ``jax.Array``.
    """
    if not isinstance(key, jax.Array):
        raise TypeError(
            f"set_state takes a jax.random key (a jax.Array), got {type(key).__name__}; "
            "use manual_seed(int) to seed from an integer."
        )
    state = _state()
    with state._lock:
        state.key = key


def next_key() -> jax.Array:
    """A fresh key from the process random state (which advances by one split)."""
    return _state().next_key()


def split_key(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(new, sub)``: the key that replaces ``key`` as a state, and a key to draw from now
    (how a layer that holds its own key, such as ``nn.Dropout(key=...)``, advances it)."""
    pair: tuple[jax.Array, jax.Array] = _split(key)
    return pair


def split_keys(key: jax.Array, n: int) -> list[jax.Array]:
    """``list(jax.random.split(key, n))``. One or two keys come from the state's own
    compiled split (``split_key``), saving a first run two kernel compiles (JAX's split
    for that ``n`` and the unstacking): in JAX's partitionable threefry mode (its default)
    key ``i`` of a split does not depend on ``n``, so the one key of ``split(key, 1)`` is
    the first of ``split(key)``."""
    if n == 2 or (
        n == 1
        and not isinstance(key, jax.core.Tracer)
        and jax.config.jax_threefry_partitionable  # type: ignore[attr-defined]
        and _impl(key) == "threefry2x32"
    ):
        return list(split_key(key))[:n]
    return list(jax.random.split(key, n))


def key_of(key: Any) -> jax.Array:
    """The key a random op uses: ``key`` itself (an int seed or a ``jax.random`` key), or a
    fresh key from the process random state when ``key`` is ``None``. A 0-d integer
    ``jax.Array`` is a seed too (an int argument of a ``tg.jit`` step is traced as one).

    Raises:
        TypeError: ``key`` is neither ``None``, an int nor a JAX array.
        ValueError: an int seed outside ``[-2**63, 2**64)`` (:func:`seed_key`).
    """
    if not compilation_cache.ready:
        compilation_cache.ensure()  # a draw from the key compiles
    if key is None:
        return _state().next_key()
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return seed_key(int(key))
    if isinstance(key, jax.Array):
        if key.ndim == 0 and getattr(key.dtype, "kind", "") in ("i", "u"):
            seeded: jax.Array = jax.random.PRNGKey(key)
            return seeded
        return key
    raise TypeError(
        f"key must be None, an int seed or a jax.random key, got {type(key).__name__}; "
        "e.g. key=0, or tg.manual_seed(0) and no key."
    )


_DRAW_MAX = 1 << 16
"""Draws of at most this many elements run one compiled kernel per kind and dtype
(``_draw``); larger ones compile per shape (``jax.random`` as it is)."""

_CHUNK = 1 << 14
"""The most elements one call of ``_chunk`` draws: a draw of ``_DRAW_MAX`` is four calls."""

_BLOCK = 1 << 10
"""The elements ``_chunk`` computes per step of its loop: a call computes as many blocks as
its draw needs, so a small draw costs what a draw of ``_BLOCK`` does."""


def uniform(
    key: jax.Array, shape: tuple[int, ...], dtype: Any, minval: float = 0.0, maxval: float = 1.0
) -> jax.Array:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``: the same numbers, where a
    small draw of any shape runs one compiled kernel per dtype (``_draw``)."""
    return _draw(jax.random.uniform, key, shape, dtype, minval, maxval)


def normal(key: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """``jax.random.normal(key, shape, dtype)``: the same numbers (see ``uniform``)."""
    return _draw(jax.random.normal, key, shape, dtype)


def _draw(fn: Any, key: jax.Array, shape: tuple[int, ...], dtype: Any, *bounds: float) -> jax.Array:
    """``fn(key, shape, dtype, *bounds)`` (``jax.random.uniform`` or ``normal``).

    ``fn`` compiles a kernel per shape, and a model's parameters come in many shapes, so a
    draw of at most ``_DRAW_MAX`` elements of a real float dtype is made by one compiled
    kernel per kind (uniform, normal), dtype and key type, ``_chunk``: elements
    ``[offset, offset + _CHUNK)`` of a flat draw, the offset an argument, called once per
    ``_CHUNK`` elements, and the pieces joined and cut to ``shape`` on the host. With
    threefry keys in JAX's partitionable mode (its default) element ``i`` of a draw is
    threefry of ``key`` on the counter ``(0, i)`` turned into a float on its own, so the
    numbers equal ``fn``'s for ``shape`` to the bit, on the key's device.

    Before, a draw was a flat draw of the next power of two (at least 256), one kernel per
    size: nanoGPT's model (bench/programs/nanogpt.py, 20 draws of 32 to 4096 elements)
    compiled five, 0.39-0.44 s of its first-ever run, and now compiles two, 0.17-0.20 s
    (its first run, four runs each: 3.62-3.74 -> 3.11-3.48 s). A float32 draw, all of
    ``_draw``, took here (old -> new, us): 256 elements 90 -> 115, 4096 200 -> 145, 16384
    290-340 -> 250-260, 65536 600-750 -> 730-850 (four calls). Dropout does not draw here
    (its mask is drawn inside its own kernel).

    With another JAX release than the tested ones (``kernels.TESTED_JAX``), another
    generator, a larger draw, another dtype (complex, or one JAX would canonicalize:
    float64 without x64), under a trace (the draw is traced: nothing to cut on the host)
    or a key spread over several devices, ``fn`` runs as it is."""
    size = math.prod(shape)
    dt = _real_float(dtype)
    if (
        not JAX_TESTED  # another release's conversions may differ: jax.random's own
        or not 0 < size <= _DRAW_MAX
        or dt is None
        or isinstance(key, jax.core.Tracer)
        or not jax.config.jax_threefry_partitionable  # type: ignore[attr-defined]
        or _impl(key) != "threefry2x32"
        or key.ndim != (0 if jax.numpy.issubdtype(key.dtype, jax.dtypes.prng_key) else 1)
    ):  # the last: several keys (JAX's error)
        out: jax.Array = fn(key, shape, dtype, *bounds)  # a bad key raises JAX's error here
        return out
    kind = fn.__name__
    counts = [min(_CHUNK, size - start) for start in range(0, size, _CHUNK)]
    parts = [  # all dispatched before the first is read
        _chunk(key, i * _CHUNK, -(-n // _BLOCK), *bounds, kind=kind, dtype=dt)
        for i, n in enumerate(counts)
    ]
    first = parts[0]
    if isinstance(first, jax.core.Tracer) or first.sharding.__class__ is not SingleDeviceSharding:
        whole: jax.Array = fn(key, shape, dtype, *bounds)  # a concrete key met inside a trace
        return whole
    # a copy of the cut: a view would keep a whole chunk's buffer alive for a small tensor
    pieces = [np.asarray(part)[:n] for part, n in zip(parts, counts, strict=True)]
    host = np.concatenate(pieces).reshape(shape)
    # on the key's device (``_placement.placed_like`` lies above this module)
    if first.committed:
        placed: jax.Array = jax.device_put(host, first.sharding)
        return placed
    cut = host_to_device(host)  # may share ``host``'s buffer, which nothing else holds
    return cut if cut is not None else jax.device_put(host)


@partial(kernel, static_argnames=("kind", "dtype"), classic=True)
def _chunk(
    key: jax.Array, offset: int, blocks: int, *bounds: float, kind: str, dtype: np.dtype
) -> jax.Array:
    """Elements ``[offset, offset + blocks * _BLOCK)`` of the flat draw
    ``jax.random.<kind>(key, (n,), dtype, *bounds)`` for any ``n`` past them (threefry,
    partitionable mode), at the start of a ``_CHUNK``-element array (the rest is zeros), as
    a kernel (its program is stored across processes).

    Each block is JAX's ``_threefry_random_bits_partitionable`` on the counters
    ``(0, offset + iota)`` (``offset + _CHUNK <= 2**32``: the high word is 0), then
    ``jax.random``'s ``_uniform`` bits-to-float conversion (and ``_normal_real``'s
    ``sqrt(2) * erf_inv`` of a uniform draw in ``[nextafter(-1, 0), 1)``) step for step, so
    the floats are JAX's to the bit (the tests compare them).

    Why a loop of blocks with ``offset`` and ``blocks`` traced: one program serves every
    size, and a call computes only the blocks it needs. Measured here for float32 normals
    (a call and its result read, us): a kernel of a fixed 4096 elements, no loop, took
    ~120 for any draw up to 4096 elements, and 350 for 16384 (four calls); of 1024
    elements ~45 for 256, but 1300 for 65536 (64 calls); this one ~50 for 256, ~75 for
    4096, ~160 for 16384 (blocks of 256 or 512 cost more per element and no less for a
    small draw). It compiles in ~90-140 ms, as the fixed ones do (this shared machine's
    load varies). XLA's classic emitters compile it faster (~130 against ~210 ms) and run
    it as fast."""
    threefry2x32_p = _threefry2x32_p()
    if jax.numpy.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    k1, k2 = key[0], key[1]
    low: Any
    high: Any
    if kind == "uniform":
        low, high = bounds
    else:  # normal: a uniform draw in [nextafter(-1, 0), 1)
        low = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
        high = np.array(1.0, dtype)
    minval = lax.convert_element_type(low, dtype)  # staged values, as in JAX's ``_uniform``
    maxval = lax.convert_element_type(high, dtype)
    info = _finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    rng_bits = 8 if nmant < 8 else nbits
    uint = _UINTS[nbits]
    start = lax.convert_element_type(offset, np.uint32)

    def block(i: jax.Array, out: jax.Array) -> jax.Array:
        first = start + lax.convert_element_type(i, np.uint32) * np.uint32(_BLOCK)
        counts = first + lax.iota(np.uint32, _BLOCK)
        hi = jax.numpy.zeros_like(counts)
        bits1, bits2 = threefry2x32_p.bind(k1, k2, hi, counts)
        if rng_bits == 64:
            bits = lax.shift_left(lax.convert_element_type(bits1, uint), np.array(32, uint))
            bits = bits | lax.convert_element_type(bits2, uint)
        else:
            bits = bits1 ^ bits2
            if rng_bits != 32:
                bits = lax.convert_element_type(bits, _UINTS[rng_bits])
            bits = lax.convert_element_type(bits, uint)
        float_bits = lax.shift_right_logical(bits, np.array(rng_bits - nmant, uint))
        float_bits = lax.bitwise_or(float_bits, np.array(1.0, dtype).view(uint))
        floats = lax.bitcast_convert_type(float_bits, dtype) - np.array(1.0, dtype)
        values = lax.max(minval, floats * (maxval - minval) + minval)
        if kind == "normal":
            values = lax.mul(np.array(np.sqrt(2), dtype), lax.erf_inv(values))
        return lax.dynamic_update_slice(out, values, (i * _BLOCK,))

    filled: jax.Array = lax.fori_loop(0, blocks, block, jax.numpy.zeros(_CHUNK, dtype))
    return filled


def _threefry2x32_p() -> Any:
    """JAX's threefry primitive, from where ``jax.extend.random`` takes it (importing
    ``jax.extend`` costs a first run ~20-30 ms), else from there."""
    try:
        from jax._src.random.threefry2x32 import threefry2x32_p
    except ImportError:  # JAX moved it
        from jax.extend.random import threefry2x32_p
    return threefry2x32_p


def _real_float(dtype: Any) -> np.dtype | None:
    """``dtype`` as a NumPy dtype where ``_chunk`` draws it: a real float of 8, 16, 32 or 64
    bits that JAX keeps as it is (not float64 with x64 off); else ``None``."""
    try:
        dt: np.dtype = np.dtype(dtype)
    except TypeError:
        return None
    if (
        not jax.numpy.issubdtype(dt, jax.numpy.floating)
        or _finfo(dt).bits not in _UINTS
        or jax.dtypes.canonicalize_dtype(dt) != dt
    ):
        return None
    return dt


def _finfo(dtype: Any) -> Any:
    """``jnp.finfo(dtype)`` (NumPy's refuses some ml_dtypes; JAX leaves it untyped)."""
    return jax.numpy.finfo(dtype)  # type: ignore[no-untyped-call]


_UINTS: dict[int, Any] = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
"""The unsigned integer dtype of each float width ``jax.random``'s conversion uses."""


def _impl(key: jax.Array) -> str:
    """The name of ``key``'s generator; ``""`` for what is not a key (``fn`` says why)."""
    try:
        return str(jax.random.key_impl(key))
    except (TypeError, ValueError):
        return ""
