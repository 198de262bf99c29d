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
from jax.sharding import SingleDeviceSharding

from tapegrad import compilation_cache
from tapegrad.errors import TracerError
from tapegrad.kernels import host_to_device, kernel

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
                key = jax.random.PRNGKey(0)
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
        return jax.random.PRNGKey(seed)
    if not -_TWO_63 <= seed < _TWO_64:
        raise ValueError(
            f"seed {seed} is outside [-2**63, 2**64) (64 bits, PyTorch's range); reduce it, "
            "e.g. seed % 2**64."
        )
    # made now even under a trace (a traced seed would carry an int64 into an x64-off trace)
    with jax.ensure_compile_time_eval(), jax.enable_x64(True):
        key: jax.Array = jax.random.PRNGKey(seed - _TWO_64 if seed >= _TWO_63 else seed)
    return key


def get_state() -> jax.Array:
    """The current key of the process random state (a ``jax.Array``; made from seed 0 on
    first use). Passing it to ``set_state`` later replays the same draws."""
    state = _state()
    with state._lock:
        if state.key is None:
            state.key = jax.random.PRNGKey(0)
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


_BUCKET_MAX = 1 << 16
"""Draws of at most this many elements share a kernel per size bucket (``_draw``); larger
ones compile per shape (a bucket would draw up to twice the elements)."""


def uniform(
    key: jax.Array, shape: tuple[int, ...], dtype: Any, minval: float = 0.0, maxval: float = 1.0
) -> jax.Array:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``: the same numbers, where a
    small draw compiles once per size bucket instead of once per shape (``_draw``)."""
    return _draw(jax.random.uniform, key, shape, dtype, minval, maxval)


def normal(key: jax.Array, shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """``jax.random.normal(key, shape, dtype)``: the same numbers (see ``uniform``)."""
    return _draw(jax.random.normal, key, shape, dtype)


def _draw(fn: Any, key: jax.Array, shape: tuple[int, ...], dtype: Any, *bounds: float) -> jax.Array:
    """``fn(key, shape, dtype, *bounds)`` (a ``jax.random`` sampler). Each shape is a kernel
    compile (10-60 ms of a first run, and a model's parameters come in many shapes), so a
    draw of at most ``_BUCKET_MAX`` elements is made as a flat draw of the next power of two
    (at least 256) and cut to ``shape`` on the host. With threefry keys in JAX's partitionable
    mode (its default) element ``i`` of a draw depends on ``key`` and ``i`` only, so the
    numbers equal ``fn``'s for ``shape``, on the key's device. With another generator, a
    larger draw, under a trace (where the draw is traced: nothing to cut on the host) or a
    key spread over several devices, ``fn`` runs as it is."""
    size = math.prod(shape)
    if (
        not 0 < size <= _BUCKET_MAX
        or isinstance(key, jax.core.Tracer)
        or not jax.config.jax_threefry_partitionable  # type: ignore[attr-defined]
        or _impl(key) != "threefry2x32"
    ):
        out: jax.Array = fn(key, shape, dtype, *bounds)  # a bad key raises JAX's error here
        return out
    bucket = max(256, 1 << (size - 1).bit_length())
    flat = _bucket(key, *bounds, kind=fn.__name__, size=bucket, dtype=dtype)
    if isinstance(flat, jax.core.Tracer) or flat.sharding.__class__ is not SingleDeviceSharding:
        whole: jax.Array = fn(key, shape, dtype, *bounds)  # a concrete key met inside a trace
        return whole
    host = np.asarray(flat)[:size].reshape(shape)
    # on the key's device (``_placement.placed_like`` lies above this module)
    if flat.committed:
        placed: jax.Array = jax.device_put(host, flat.sharding)
        return placed
    cut = host_to_device(host)  # a view of ``flat``'s buffer, which nothing writes
    return cut if cut is not None else jax.device_put(host)


@partial(kernel, static_argnames=("kind", "size", "dtype"), classic=True)
def _bucket(key: jax.Array, *bounds: float, kind: str, size: int, dtype: Any) -> Any:
    """The flat draw of ``_draw``, as a kernel (its program is stored across processes, and
    XLA's classic emitters compile and run threefry faster: ~90 against ~120 ms, 46
    against 84 us for 256 normals here)."""
    return getattr(jax.random, kind)(key, (size,), dtype, *bounds)


def _impl(key: jax.Array) -> str:
    """The name of ``key``'s generator; ``""`` for what is not a key (``fn`` says why)."""
    try:
        return str(jax.random.key_impl(key))
    except (TypeError, ValueError):
        return ""
