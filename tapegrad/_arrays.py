"""Array helpers shared by constructors and the engine: compiled fills and the
unbroadcast axes."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad import compilation_cache
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel

__all__ = ["filled", "Meetings", "broadcast_axes", "sum_to", "normalize_axes", "axis_check"]


@partial(kernel, static_argnums=(0, 2))
def _filled(shape: tuple[int, ...], value: Any, dtype: Any) -> jax.Array:
    return jnp.full(shape, value, dtype)


def filled(shape: tuple[int, ...], value: Any, dtype: Any) -> jax.Array:
    """An array of ``shape`` and ``dtype`` filled with ``value``.

    The first small array of a (shape, dtype, value) is copied from the host (NumPy's fill,
    then ``jax.device_put``: no compile, where a first run pays ~10-60 ms per kernel); met
    again, it takes one compiled constructor per (shape, dtype), ~5 us a call instead of
    ``jnp.zeros``' ~50. It caches code, never values, so it is safe under a trace
    (docs/design.md rule 9).
    """
    if not compilation_cache.ready:
        compilation_cache.ensure()
    if (
        value.__class__ in (int, float, bool)
        and _FILLS.early((shape, dtype, value))  # a met fill pays this lookup only
        and math.prod(shape) * np.dtype(dtype).itemsize <= _HOST_FILL_BYTES
        and _exact_on_host(value, dtype)
    ):
        host: jax.Array = jax.device_put(np.full(shape, value, dtype))
        return host
    out: jax.Array = _filled(shape, value, dtype)
    return out


def _exact_on_host(value: int | float | bool, dtype: Any) -> bool:
    """Whether NumPy's cast of the Python scalar ``value`` to ``dtype`` is XLA's convert: for
    booleans and in-range floats always, for integer dtypes only in-range ints (out of range,
    or from a float, the two round and wrap differently)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return True
    if dt.kind in "iu":
        if value.__class__ is float:
            return False
        info = np.iinfo(dt)
        return bool(info.min <= value <= info.max)
    if dt.kind in "fc":
        # jnp's finfo: NumPy's refuses some ml_dtypes (float8_e5m2) with newer NumPy
        return not math.isfinite(value) or abs(value) <= float(jnp.finfo(dt).max)  # type: ignore[no-untyped-call]  # JAX leaves finfo untyped
    return False


class Meetings:
    """How many times each key was met, bounded: ``early(key)`` counts a meeting and says
    whether it is one of the first ``times``. The first meetings of a shape take a path that
    compiles nothing (a host copy); later ones, the compiled path (faster per call)."""

    __slots__ = ("times", "_seen")

    def __init__(self, times: int) -> None:
        self.times = times
        self._seen: dict[Any, int] = {}

    def early(self, key: Any) -> bool:
        seen = self._seen.get(key, 0)
        if seen >= self.times:
            return False
        if len(self._seen) >= 1024:
            self._seen.clear()
        self._seen[key] = seen + 1
        return True


_FILLS = Meetings(1)  # (shape, dtype, value) of the fills made so far
_HOST_FILL_BYTES = 1 << 20  # larger first fills compile: a host copy would cost more


def deleted(x: Any) -> bool:
    """Whether ``x`` is a concrete JAX array that was deleted (donated to a ``tg.jit`` step)."""
    return isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and x.is_deleted()


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a PyTorch object (checked by module, without importing torch)."""
    return type(x).__module__.split(".")[0] == "torch"


def from_torch(t: Any) -> Any:
    """A ``torch.Tensor``'s values as a NumPy array on the host, sharing a CPU tensor's memory
    (callers copy it into a JAX array): bfloat16, which ``torch.Tensor.numpy()`` refuses,
    goes through float32 (exact) to ml_dtypes' bfloat16."""
    t = t.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        return t.float().numpy().astype(jnp.bfloat16)
    return t.numpy()


def broadcast_axes(gshape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The axes to sum a cotangent of shape ``gshape`` over to get ``shape``, or ``None`` when
    ``gshape`` is not a broadcast of ``shape``."""
    lead = len(gshape) - len(shape)
    if lead < 0:
        return None
    axes = list(range(lead))
    for i, s in enumerate(shape):
        gs = gshape[lead + i]
        if s == 1 and gs != 1:
            axes.append(lead + i)
        elif s != gs:
            return None
    return tuple(axes)


def sum_to(x: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Inside a compiled VJP: the cotangent ``x`` summed down to ``shape`` when ``x.shape`` is a
    broadcast of it (so the reduction is part of the VJP's one dispatch, not a second one);
    else ``x`` unchanged (the engine checks it)."""
    if x.shape == shape:
        return x
    axes = broadcast_axes(x.shape, shape)
    return x if axes is None else jnp.sum(x, axis=axes).reshape(shape)


def normalize_axes(axis: int | tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    """Normalise ``axis`` to sorted non-negative axes of an ``ndim``-dimensional input.

    A 0-d input takes axis 0 or -1 (PyTorch's convention) and has no axis to reduce: ``()``.

    Raises:
        ShapeError: an axis out of range, or one listed twice.
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else axis
    span = max(ndim, 1)  # a 0-d input counts as one axis, as in PyTorch
    out = []
    for a in axes:
        if not -span <= a < span:
            raise ShapeError(
                f"axis {a} is out of range for a tensor with {ndim} dimensions; use an axis "
                f"in [{-span}, {span - 1}]."
            )
        out.append(a % span)
    if len(set(out)) != len(out):
        raise ShapeError(f"axis {axis} repeats an axis; list each axis once.")
    return tuple(sorted(out)) if ndim else ()


def axis_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    """``defop``'s ``check`` for an op along ``axis`` (-1 by default) of its first input: the
    reductions' ``ShapeError`` for an axis out of range, instead of JAX's error."""
    normalize_axes(params.get("axis", -1), jnp.ndim(arrays[0]))
