"""Tensor: a ``jax.Array`` plus an optional tape node; its methods delegate to ops."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from tapegrad._args import numpy_keywords, shape_keywords, torch_keywords
from tapegrad._arrays import deleted, is_torch
from tapegrad._dtypes import DIFFERENTIABLE, as_dtype
from tapegrad._placement import placement_key
from tapegrad.current import current_tape
from tapegrad.errors import (
    DeviceError,
    InPlaceError,
    ShapeError,
    TapegradWarning,
    TracerError,
    donated_error,
)
from tapegrad.grad_mode import grad_enabled
from tapegrad.node import Node
from tapegrad.origin import format_origin, function_name, user_frame, user_site
from tapegrad.tape import Tape, use_tensor_interface

__all__ = ["Tensor", "zero_grads"]

ENGINE = (
    "wrap",
    "array_of",
    "node_of",
    "grad_of",
    "tape_of",
    "set_array",
    "set_grad",
    "attach",
    "unpack",
    "arrays_of",
    "grad_arrays_of",
    "store_results",
    "state_of",
    "restore",
)
"""The engine-internal interface (see its section at the end): the tensor's slots are known
to this module only; op.py, the tape, backward, tg.jit, ... use these functions. They check
nothing and are not public API (not exported by ``tapegrad``)."""

_new = object.__new__


class Tensor:
    """An n-dimensional value held as a ``jax.Array``, optionally tracked on the tape.

    A tensor requires grad when it has a node: a leaf (``require_grad()``) or the output of
    an op recorded under grad mode. Tensors hash by identity, support weak references, and
    are JAX pytrees whose only child is the array (unflattening gives a tensor that does not
    require grad). Create them with ``tg.tensor``, ``tg.zeros``, ``tg.randn``, ...
    """

    __slots__ = ("_data", "_node", "_grad", "_tape", "_frozen", "__weakref__")
    __array_ufunc__ = None  # NumPy defers ``np_array * t`` to Tensor.__rmul__
    __array_priority__ = 1000

    _data: jax.Array
    _node: Node | None
    _grad: Tensor | None
    _tape: Tape | None  # the tape of ``_node``, kept alive by the tensor (set by the tape)

    def __init__(self, data: Any) -> None:
        """Wrap ``data`` (a ``jax.Array`` without a copy; else ``jnp.asarray(data)``)."""
        self._data = data if isinstance(data, jax.Array) else jax.numpy.asarray(data)
        self._node = self._grad = self._tape = None

    # ------------------------------------------------------------------ attributes

    @property
    def data(self) -> jax.Array:
        """The ``jax.Array``. Setting it replaces the value (same shape and dtype), keeping the
        node (the usual parameter update).

        Raises:
            ShapeError: the new array's shape differs.
            TypeError: the new array's dtype differs, or it is not an array.
            TracerError: a JAX tracer for a tensor that requires grad, on a tape that does
                not allow tracers.
        """
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        if isinstance(value, Tensor):
            value = value._data
        elif isinstance(value, (np.ndarray, np.generic)):  # a NumPy scalar for a 0-d tensor
            value = jax.numpy.asarray(value)
        old = self._data
        # the old value's class passed this check already (an optimizer's step sets every
        # parameter this way: skip the slow abstract-class check, read shapes from ``aval``)
        if value.__class__ is not old.__class__ and not isinstance(value, jax.Array):
            kind = type(value)
            raise TypeError(
                "Tensor.data must be set to a jax.Array, NumPy array or tapegrad Tensor, got "
                f"{kind.__module__ + '.' if is_torch(value) else ''}{kind.__qualname__}; "
                "convert it first: t.data = tg.tensor(value, dtype=t.dtype).data."
            )
        new_aval, old_aval = value.aval, old.aval
        if new_aval.shape != old_aval.shape:
            raise ShapeError(
                f"Tensor.data: new shape {value.shape} differs from {self._data.shape}; "
                "create a new tensor for a different shape."
            )
        if new_aval.dtype != old_aval.dtype:
            raise TypeError(
                f"Tensor.data: new dtype {value.dtype} differs from {self._data.dtype}; "
                f"cast first with .astype({self._data.dtype})."
            )
        if self._tape is not None:
            self._tape.check_value(value, "Tensor.data")
        self._data = value

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, a tuple of ints."""
        return tuple(self._data.shape)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return int(self._data.ndim)

    @property
    def size(self) -> int:
        """The number of elements (NumPy's attribute; calling it, PyTorch's ``x.size()``, raises
        a ``TypeError`` that names ``x.shape``)."""
        return _Size(self._data.size)

    @property
    def dtype(self) -> Any:
        """The dtype (a NumPy dtype, as JAX reports it)."""
        return self._data.dtype

    @property
    def device(self) -> Any:
        """The device the array lives on (for a sharded array, see ``.sharding``)."""
        return self._data.device

    @property
    def sharding(self) -> Any:
        """The array's ``jax.sharding.Sharding``."""
        return self._data.sharding

    @property
    def requires_grad(self) -> bool:
        """Whether the tensor has a node on the tape (a leaf or a recorded op output).

        Setting it is ``requires_grad_(flag)``: ``False`` freezes a leaf (PyTorch's
        ``p.requires_grad = False``), ``True`` makes the tensor a leaf that requires grad.

        Raises:
            RuntimeError: set to ``False`` on the output of a recorded op (use ``.detach()``).
            TypeError: set to ``True`` on a tensor whose dtype is not float or complex.
        """
        return self._node is not None

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(bool(flag))

    @property
    def is_leaf(self) -> bool:
        """``True`` for a tensor that does not require grad and for a user-made leaf."""
        return self._node is None or self._node.op is None

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient, or ``None``: a ``Tensor`` without a node, except after
        ``backward(create_graph=True)``, whose gradient requires grad (it is differentiable).

        Backward fills it for leaves (and for tensors that called ``retain_grad()``); reading
        it on any other tensor that requires grad warns, as PyTorch does, since it stays
        ``None``.

        Warns:
            TapegradWarning: read on a non-leaf that did not call ``retain_grad()``.

        Raises:
            TypeError: set to something other than ``None`` or a ``Tensor``.
            ShapeError: set to a tensor of another shape.
            DeviceError: set to a tensor committed to other devices (as PyTorch refuses a
                gradient on another device).
        """
        node = self._node
        if self._grad is None and node is not None and node.op is not None and not node.retain:
            warnings.warn(  # one the user set is returned without a warning, as in PyTorch
                f"Reading .grad of a tensor that is not a leaf (the output of op {node.name!r}); "
                "backward() fills .grad only for leaves, so it is None here. Call "
                ".retain_grad() on it before backward() to keep its gradient, or read the "
                ".grad of the leaf it was computed from (tg.grad(out, t) returns it too).",
                TapegradWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f".grad must be None or a Tensor, got {type(value).__name__}.")
            if value.shape != self.shape:
                raise ShapeError(
                    f".grad must have the tensor's shape {self.shape}, got {value.shape}."
                )
            if value.dtype != self.dtype:
                raise TypeError(
                    f".grad must have the tensor's dtype {self.dtype}, got {value.dtype}; cast "
                    f"it first (value.astype(tg.{self.dtype}))."
                )
            mine, theirs = placement_key(self._data), placement_key(value._data)
            if mine is not None and theirs is not None and mine != theirs:
                raise DeviceError(
                    f".grad must live on the tensor's devices {[str(d) for d in mine]}, got "
                    f"one on {[str(d) for d in theirs]}; move it first: "
                    "tg.device_put(value, t.sharding)."
                )
            if value._node is not None:
                value = value.detach()
        self._grad = value

    # ------------------------------------------------------------------ grad state

    def require_grad(self) -> Tensor:
        """Make this tensor a leaf that requires grad (no-op if it already requires grad).

        Returns:
            ``self``.

        Raises:
            TypeError: the dtype is not a float (or complex) dtype.
            TracerError: the value is a JAX tracer and the current tape does not allow them.
        """
        if self._node is None:
            frozen = getattr(self, "_frozen", None)  # set only by requires_grad_(False)
            if frozen is not None:
                del self._frozen
                tape = frozen.tape()
                if tape is current_tape() and tape.reattach(frozen, self):
                    self._node, self._tape = frozen, tape
                    return self
            self._make_leaf(3)  # the origin: this method's caller, not this frame
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """PyTorch's spelling: ``True`` is ``require_grad()``; ``False`` detaches a leaf in place
        (freezes it): its node leaves the tape at once, not as a hanging leaf; one that a graph
        not yet backwarded uses stays as that graph's leaf and goes with it. A backward of that
        graph while the tensor is frozen writes no ``.grad``; unfrozen again before the graph
        is gone, the tensor takes its node back, so that graph's gradient reaches ``.grad``
        again (as in PyTorch, where a leaf's place in a graph is the tensor itself).

        Raises:
            RuntimeError: ``False`` on a tensor that is the output of a recorded op.
        """
        if requires_grad:
            return self.require_grad()
        node = self._node
        if node is not None:
            if node.op is not None:
                raise RuntimeError(
                    "requires_grad_(False) works only on leaves; this tensor is the output of "
                    f"op {node.name!r}. Use .detach() to get a tensor that does not require grad."
                )
            tape = self._tape
            self._node = self._tape = None
            _release(self)  # a node it gets later is younger than graphs it is below
            if tape is not None and tape.release(node):
                self._frozen = node  # a pending graph uses it: taken back on unfreezing
        return self

    def _make_leaf(self, depth: int = 2) -> None:
        """Record this tensor as a leaf; its origin is read ``depth`` frames up (``user_site``'s
        count: 2 is this method's caller)."""
        data = self._data
        if not DIFFERENTIABLE[data.dtype]:
            raise TypeError(
                "Only floating-point (or complex) tensors can require grad; this one is "
                f"{data.dtype}. Cast first, e.g. t.astype(tg.float32).require_grad()."
            )
        code, lasti = user_site(depth)
        current_tape().record(None, (), None, None, self, data, code, lasti)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward (as in PyTorch).

        Raises:
            RuntimeError: the tensor does not require grad.
        """
        if self._node is None:
            raise RuntimeError(
                "retain_grad() on a tensor that does not require grad; call require_grad() "
                "on the inputs it is computed from."
            )
        if self._tape is not None:
            self._tape.retain_grad(self._node)

    def detach(self) -> Tensor:
        """A tensor sharing this value that does not require grad."""
        return wrap(self._data)

    def backward(
        self,
        grad: Any = None,
        *,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Tensor | Sequence[Tensor] | None = None,
        gradient: Any = None,
    ) -> None:
        """Accumulate d(self)/d(leaf) into ``.grad`` of every live leaf it depends on.

        ``.grad`` gets the leaf's shape and dtype (added to a ``.grad`` already there: set it
        to ``None``, or call ``optimizer.zero_grad()``, between steps). Without
        ``retain_graph`` the graph is consumed: its saved arrays are freed, and another
        backward through it raises ``GraphConsumedError``. Returns ``None``.

        Args:
            grad: the cotangent, same shape as ``self``; optional for one-element tensors.
            retain_graph: keep the graph so another backward can run through it (default:
                ``create_graph``).
            create_graph: record the backward pass, so ``.grad`` requires grad and can be
                differentiated again (higher-order gradients).
            inputs: fill ``.grad`` of these tensors only (PyTorch's ``inputs``): leaves or
                non-leaves that require grad; the other leaves' ``.grad`` stays as it was.
            gradient: PyTorch's name for ``grad``.

        Raises:
            RuntimeError: ``self`` does not require grad (``NoGradError``), is multi-element
                or complex without ``grad`` (``NonScalarBackwardError``), or its graph was
                consumed by an earlier backward (``GraphConsumedError``: see
                ``retain_graph``); each a ``RuntimeError``, raised before any ``.grad``
                changes.
            ShapeError: ``grad`` has another shape.
            TypeError: both ``grad`` and ``gradient``; an ``inputs`` entry that does not
                require grad; ``retain_graph`` or ``create_graph`` is not a bool.
            ValueError: ``inputs`` is empty.
        """
        if gradient is not None:
            if grad is not None:
                raise TypeError(
                    "backward() got the cotangent twice (grad and gradient, PyTorch's name "
                    "for it); pass it once."
                )
            grad = gradient
        _backward.backward(
            self, grad, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs
        )

    # ------------------------------------------------------------------ conversion

    def item(self) -> Any:
        """The value of a one-element tensor (any shape: ``()``, ``(1,)``, ``(1, 1)``, ...) as
        a Python ``float``, ``int``, ``bool`` or ``complex``, by its dtype. A tensor that
        requires grad needs no ``.detach()`` first. The graph stays as it was: an output read
        with ``.item()`` and never passed to ``backward()`` leaves its graph hanging (compute
        values you only read under ``tg.no_grad()``).

        Raises:
            ValueError: the tensor has more than one element.
            TracerError: the value is traced (inside ``tg.jit`` or a JAX transformation).
        """
        if self._data.size != 1:
            raise ValueError(
                f"item() needs a one-element tensor, this one has shape {self.shape}; "
                "reduce it first (.sum(), .mean()) or use .tolist()."
            )
        return self._host("item()").reshape(()).item()

    def numpy(self) -> np.ndarray:
        """The value as a read-only NumPy array on the host (as ``np.asarray`` of a JAX
        array: on CPU it shares the tensor's buffer, elsewhere it is a host copy). JAX arrays
        are immutable, so writing to it raises ``ValueError``; call ``.copy()`` on it to get
        an array to write (PyTorch's ``.numpy()`` shares a writable buffer instead). Shape and
        dtype are the tensor's. A tensor that requires grad needs no ``.detach()`` first (as
        PyTorch's would): the array holds the value only.

        Raises:
            TracerError: the value is traced (inside ``tg.jit`` or a JAX transformation).
        """
        return self._host(".numpy()")

    def tolist(self) -> Any:
        """The value as nested Python lists."""
        return self._host(".tolist()").tolist()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        # NumPy 2 passes ``copy``: ``np.array(t)`` asks for a copy (a writable array, as for
        # a jax.Array), ``copy=False`` for none (a cast then raises); NumPy 1 passes nothing
        host = self._host("np.asarray()")
        if copy is None:
            return np.asarray(host, dtype=dtype)
        return np.array(host, dtype=dtype, copy=copy)

    def _host(self, what: str) -> np.ndarray:
        """The value on the host; a traced value has none yet: ``TracerError`` naming the
        user's line and what to do instead."""
        data = self._data
        if isinstance(data, jax.core.Tracer):
            code, lineno = user_frame(2)
            raise TracerError(
                f"{what} on a traced tensor at {format_origin(code, lineno)} (in "
                f"{function_name(code)}): inside tg.jit its value is not known until the "
                f"compiled step runs. Return the tensor from the step and call {what} on the "
                "result; for a choice that depends on a value use tg.where (or jax.lax.cond), "
                "not Python's if/while."
            )
        try:
            return np.asarray(data)
        except (RuntimeError, ValueError):
            if data.is_deleted():
                raise donated_error(what) from None
            raise

    def _scalar(self, kind: str) -> Any:
        if self._data.size != 1:
            raise TypeError(
                f"{kind}() needs a one-element tensor, this one has shape {self.shape}; "
                "reduce it first (.sum(), .mean()), index one element (t[0]) or use .tolist()."
            )
        return self._host(f"{kind}()").reshape(()).item()

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __index__(self) -> int:
        """The value of a 0-d integer tensor, so ``range(t)`` and ``lst[t]`` work (NumPy's rule;
        PyTorch also takes one-element and boolean tensors).

        Raises:
            TypeError: the tensor is not 0-d or its dtype is not an integer one.
            TracerError: under ``tg.jit``, a traced value (not known until the step runs).
        """
        if self._data.ndim != 0 or self._data.dtype.kind not in "iu":
            raise TypeError(
                f"only a 0-d integer tensor converts to an index, got shape {self.shape} and "
                f"dtype {self.dtype}; cast a float or boolean one with t.astype(tg.int32), "
                "make a one-element one 0-d with t.reshape(())."
            )
        return int(self._host("__index__() (range(t), lst[t])").item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise ValueError(
                f"The truth value of a tensor with shape {self.shape} is ambiguous; "
                "reduce it first, e.g. bool((t > 0).all()). (`t in a_list`, `a_list.index(t)` "
                "and `a_list.remove(t)` compare tensors with ==, elementwise: find a tensor "
                "with any(t is u for u in a_list), or keep tensors in a set or dict: they hash "
                "by identity.)"
            )
        return bool(self._host("bool() (an if or while on a tensor)").reshape(()).item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError(_zero_d("len() of"))
        return int(self._data.shape[0])

    def __iter__(self) -> Iterator[Tensor]:
        """The rows along the first axis, each ``self[i]`` (so gradients flow back)."""
        if self._data.ndim == 0:  # raised by iter() itself, as in PyTorch
            raise TypeError(_zero_d("iteration over"))
        return (self[i] for i in range(self._data.shape[0]))

    def __repr__(self) -> str:
        data = self._data
        head = f"shape={tuple(data.shape)}, dtype={data.dtype}"
        node = self._node
        if node is not None:
            head += ", requires_grad=True" if node.op is None else f", op={node.name}"
        if isinstance(data, jax.core.Tracer):
            return f"tensor(<traced>, {head})"
        if data.is_deleted():
            return f"tensor(<donated to a tg.jit step: no value>, {head})"
        if not data.is_fully_addressable:  # its values live in several processes
            return (
                f"tensor(<global array over {len(data.sharding.device_set)} devices of several "
                f"processes: jax.experimental.multihost_utils.process_allgather(t.data) gathers "
                f"it>, {head})"
            )
        values = np.asarray(data)
        if values.dtype.kind == "V" and jax.numpy.issubdtype(values.dtype, jax.numpy.floating):
            values = values.astype(np.float32)  # ml_dtypes' floats (bfloat16, float8): NumPy
            # prints 1.0 as "1"; float32 holds each value exactly (int4 stays an integer)
        body = np.array2string(values, separator=", ", prefix="tensor(")
        return f"tensor({body}, {head})"

    def __format__(self, spec: str) -> str:
        if not spec:
            return repr(self)
        if self._data.size == 1:
            return format(self.item(), spec)
        raise TypeError(
            f"unsupported format string passed to Tensor.__format__: {spec!r} formats a "
            f"one-element tensor, this one has shape {tuple(self._data.shape)}; format its "
            f"values one by one ([f'{{v:{spec}}}' for v in t.tolist()]) or print it whole."
        )

    __hash__ = object.__hash__

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A copy of the value in a new array (as PyTorch copies the storage: a ``tg.jit`` step
        donates its parameters' arrays, which would take a copy sharing them along, an EMA
        or target network); a leaf copies as a new leaf with a copy of its ``.grad``.

        Raises:
            RuntimeError: the tensor is the output of a recorded op (only leaves copy).
        """
        node = self._node
        if node is not None and node.op is not None:
            raise RuntimeError(
                f"Only leaves support copying; this tensor is the output of op {node.name!r}. "
                "Copy .detach() (a value), or the leaf it was computed from."
            )
        out = wrap(_copied(self._data))
        memo[id(self)] = out
        if node is not None:
            out._make_leaf()
        if self._grad is not None:
            out._grad = wrap(_copied(self._grad._data))
        return out

    def __copy__(self) -> Tensor:
        return self.__deepcopy__({})

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickles the value and whether it is a leaf requiring grad; never the graph.
        if self._node is not None and self._node.op is not None:
            raise RuntimeError(
                "Only leaves and tensors that do not require grad can be pickled; pickle "
                ".detach() instead."
            )
        return (_rebuild, (self._host("pickle"), self._node is not None))

    # ------------------------------------------------------------------ methods

    def clone(self) -> Tensor:
        """A differentiable copy (gradient flows back to ``self``)."""
        return _ops.copy.from_method(self)

    def astype(self, dtype: Any) -> Tensor:
        """Cast to ``dtype``; differentiable between float dtypes.

        Raises:
            TypeError: ``dtype`` is not a dtype (a PyTorch one: the message names its tg name).
        """
        return _ops.astype.from_method(self, dtype=as_dtype(dtype, "astype"))

    @numpy_keywords
    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Sum over ``axis`` (an int, negative int or tuple; ``None`` for all)."""
        if axis is None and keepdims is False:  # the op's defaults: no parameters to check
            return _ops.sum.from_method(self)
        return _ops.sum.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def all(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Whether every element along ``axis`` is nonzero (boolean; not differentiable)."""
        return _ops.all.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def any(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Whether some element along ``axis`` is nonzero (boolean; not differentiable)."""
        return _ops.any.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def prod(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Product over ``axis`` (``None`` for all); its gradient is JAX's, exact at zeros."""
        return _ops.prod.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Mean over ``axis``."""
        if axis is None and keepdims is False:  # the op's defaults: no parameters to check
            return _ops.mean.from_method(self)
        return _ops.mean.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def max(
        self, *args: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False
    ) -> Tensor:
        """Maximum over ``axis`` (ties share the gradient equally, as in JAX).

        Raises:
            TypeError: the axis given by position (``x.max(1)``: PyTorch returns values and
                indices there, NumPy the values; the message says what to write).
        """
        if args:  # refused with a message, or torch.max(a, b) pointed to tg.maximum
            return _ops.max.from_method(self, *args, keepdims=keepdims)
        return _ops.max.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def min(
        self, *args: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False
    ) -> Tensor:
        """Minimum over ``axis`` (ties share the gradient equally, as in JAX).

        Raises:
            TypeError: the axis given by position (``x.min(1)``: PyTorch returns values and
                indices there, NumPy the values; the message says what to write).
        """
        if args:  # refused with a message, or torch.min(a, b) pointed to tg.minimum
            return _ops.min.from_method(self, *args, keepdims=keepdims)
        return _ops.min.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def var(
        self, axis: int | Sequence[int] | None = None, ddof: int = 0, keepdims: bool = False
    ) -> Tensor:
        """Variance over ``axis`` (``ddof=0``: NumPy's default; PyTorch's is 1)."""
        return _ops.var.from_method(self, axis=axis, ddof=ddof, keepdims=keepdims)

    @numpy_keywords
    def std(
        self, axis: int | Sequence[int] | None = None, ddof: int = 0, keepdims: bool = False
    ) -> Tensor:
        """Standard deviation over ``axis`` (``ddof=0``: NumPy's default; PyTorch's is 1)."""
        return _ops.std.from_method(self, axis=axis, ddof=ddof, keepdims=keepdims)

    @numpy_keywords
    def cumsum(self, axis: int | None = None) -> Tensor:
        """Running sum along ``axis`` (``None``: over the flattened tensor)."""
        return _ops.cumsum.from_method(self, axis=axis)

    @numpy_keywords
    def cumprod(self, axis: int | None = None) -> Tensor:
        """Running product along ``axis`` (``None``: over the flattened tensor)."""
        return _ops.cumprod.from_method(self, axis=axis)

    def gather(self, *args: Any, **kwargs: Any) -> Tensor:
        """``tg.gather(self, axis, indices)``: PyTorch's ``gather(dim, index)``, values picked
        along ``axis`` by integer ``indices`` of the same rank."""
        return _ops.gather(self, *args, **kwargs)

    def index_add(self, *args: Any, **kwargs: Any) -> Tensor:
        """``tg.index_add(self, axis, index, source, *, alpha=1)``: PyTorch's ``index_add``
        (out of place), ``alpha * source`` added along ``axis`` at the positions ``index``
        names."""
        return _ops.index_add(self, *args, **kwargs)

    def scatter_add(self, *args: Any, **kwargs: Any) -> Tensor:
        """``tg.scatter_add(self, axis, index, src)``: PyTorch's ``scatter_add`` (out of
        place), each ``src`` entry added where ``index`` sends it along ``axis``."""
        return _ops.scatter_add(self, *args, **kwargs)

    def diagonal(self, *args: Any, **kwargs: Any) -> Tensor:
        """``tg.diagonal(self, offset=0, axis1=0, axis2=1)``: the ``offset`` diagonal of the
        matrices over ``axis1`` and ``axis2``, as a new last axis (NumPy's and PyTorch's)."""
        return _ops.diagonal(self, *args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Tensor:
        """``tg.trace(self, offset=0, axis1=0, axis2=1)``: the sum of that diagonal (NumPy's;
        PyTorch's ``trace()`` of a matrix)."""
        return _ops.trace(self, *args, **kwargs)

    @numpy_keywords
    def argsort(self, axis: int = -1, descending: bool = False) -> Tensor:
        """The indices that sort the tensor along ``axis`` (stable; not differentiable)."""
        return _ops.argsort.from_method(self, axis=axis, descending=descending)

    def sort(self, *args: Any, **kwargs: Any) -> _ops.SortResult:
        """``tg.sort(self, axis=-1, descending=False)``: ``(values, indices)`` sorted along
        ``axis``, as PyTorch's."""
        return _ops.sort(self, *args, **kwargs)

    def topk(self, *args: Any, **kwargs: Any) -> _ops.SortResult:
        """``tg.topk(self, k, axis=-1, largest=True)``: the ``k`` largest (or smallest)
        values along ``axis`` with their indices, as PyTorch's."""
        return _ops.topk(self, *args, **kwargs)

    @numpy_keywords
    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index of the largest element along ``axis`` (not differentiable)."""
        return _ops.argmax.from_method(self, axis=axis, keepdims=keepdims)

    @numpy_keywords
    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index of the smallest element along ``axis`` (not differentiable)."""
        return _ops.argmin.from_method(self, axis=axis, keepdims=keepdims)

    @shape_keywords
    def flatten(self, start: int = 0, end: int = -1) -> Tensor:
        """Merge axes ``start``..``end`` (inclusive) into one (PyTorch's ``flatten``)."""
        return _ops.flatten(self, start, end)

    def reshape(self, *shape: Any) -> Tensor:
        """Reshape to ``shape`` (integers or one tuple; one entry may be -1).

        Raises:
            ShapeError: the sizes do not match.
            TypeError: a dimension is not an integer (``reshape(2.5, 2)``).
        """
        return _ops.reshape.from_method(self, shape=_sizes(shape))

    @shape_keywords
    def transpose(self, *axes: Any) -> Tensor:
        """Transpose: no axes reverses them; two integers ``a, b`` swap those two axes (as in
        PyTorch, on any ndim); one tuple, or three or more integers, is a full permutation
        (as in NumPy). See ``tg.transpose``."""
        return _ops.transpose(self, *axes)

    @shape_keywords
    def permute(self, *axes: Any) -> Tensor:
        """Permute the axes (PyTorch's ``permute``): ``t.permute(2, 0, 1)`` or a tuple."""
        return _ops.permute(self, *axes)

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        """Swap two axes (NumPy's ``swapaxes``; PyTorch's ``transpose(a, b)``)."""
        return _ops.swapaxes(self, axis1, axis2)

    @property
    def T(self) -> Tensor:  # noqa: N802 - NumPy's name
        """The tensor with its axes reversed."""
        return _ops.transpose(self)

    @property
    def mT(self) -> Tensor:  # noqa: N802 - NumPy's and PyTorch's name
        """The last two axes swapped (a batch of matrices transposed)."""
        return _ops.swapaxes(self, -1, -2)

    @numpy_keywords
    def squeeze(self, axis: int | Sequence[int] | None = None) -> Tensor:
        """Remove axes of length one (all of them when ``axis`` is ``None``)."""
        return _ops.squeeze.from_method(self, axis=axis)

    def tile(self, *reps: Any) -> Tensor:
        """``tg.tile(self, reps)``: repeated ``reps[i]`` times along each axis (NumPy's
        ``tile``; counts as integers or one tuple)."""
        return _ops.tile(self, _sizes(reps))

    def repeat(self, *sizes: Any) -> Tensor:
        """PyTorch's ``repeat``: ``tg.tile`` with at least one count per axis (more add
        leading axes). (PyTorch's ``repeat_interleave``, NumPy's ``repeat``, is an index:
        ``x[np.repeat(np.arange(n), k)]``.)

        Raises:
            ShapeError: fewer counts than axes (PyTorch refuses them too).
        """
        counts = _sizes(sizes)
        if len(counts) < self.ndim:
            raise ShapeError(
                f"repeat: {len(counts)} count(s) for a tensor of {self.ndim} dimensions; give "
                "one per axis (PyTorch's rule; tg.tile repeats the trailing axes)."
            )
        return _ops.tile(self, counts)

    def expand(self, *sizes: Any) -> Tensor:
        """PyTorch's ``expand``: ``tg.broadcast_to`` this tensor to ``sizes``, where ``-1``
        keeps an axis's length (integers or one tuple; more sizes add leading axes).

        Raises:
            ShapeError: the tensor does not broadcast to ``sizes``, or ``-1`` for a new
                leading axis.
        """
        shape = _sizes(sizes)
        lead = len(shape) - self.ndim
        if lead < 0 or any(n == -1 for n in shape[:lead]):
            raise ShapeError(
                f"expand: sizes {shape} do not fit a tensor of shape {self.shape}; give one "
                "size per axis (-1 keeps it), leading new axes with their lengths."
            )
        full = shape[:lead] + tuple(
            own if n == -1 else n for n, own in zip(shape[lead:], self.shape, strict=True)
        )
        return _ops.broadcast_to(self, full)

    def expand_as(self, other: Any) -> Tensor:
        """PyTorch's ``expand_as``: ``tg.broadcast_to(self, other.shape)``.

        Raises:
            TypeError: ``other`` has no shape (a tuple: use ``expand``).
        """
        shape = getattr(other, "shape", None)
        if shape is None:
            raise TypeError(
                f"expand_as: expected a tensor or an array, got {type(other).__name__}; for a "
                "shape, write x.expand(*shape)."
            )
        return _ops.broadcast_to(self, tuple(shape))

    @numpy_keywords
    def unsqueeze(self, axis: int) -> Tensor:
        """Insert an axis of length one at ``axis`` (PyTorch's name for ``expand_dims``)."""
        return _ops.expand_dims(self, axis)

    def clip(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """Clamp values to ``[min, max]``. A tensor bound broadcasts, as in PyTorch's ``clamp``,
        and is ``tg.minimum(tg.maximum(self, min), max)``: the gradient flows to the bound
        where it wins (half of it at a tie, as for number bounds)."""
        if not isinstance(min, Tensor) and not isinstance(max, Tensor):
            return _ops.clip.from_method(self, min=min, max=max)
        y = self if min is None else _ops.maximum.from_method(self, min)
        return y if max is None else _ops.minimum.from_method(y, max)

    def exp(self) -> Tensor:
        """Elementwise e**x."""
        return _ops.exp.from_method(self)

    def log(self) -> Tensor:
        """Elementwise natural logarithm."""
        return _ops.log.from_method(self)

    def log1p(self) -> Tensor:
        """Elementwise log(1 + x), accurate where x is small."""
        return _ops.log1p.from_method(self)

    def tanh(self) -> Tensor:
        """Elementwise hyperbolic tangent."""
        return _ops.tanh.from_method(self)

    def relu(self) -> Tensor:
        """Elementwise max(x, 0)."""
        return _ops.relu.from_method(self)

    def sigmoid(self) -> Tensor:
        """Elementwise logistic sigmoid."""
        return _ops.sigmoid.from_method(self)

    def sqrt(self) -> Tensor:
        """Elementwise square root."""
        return _ops.sqrt.from_method(self)

    def abs(self) -> Tensor:
        """Elementwise absolute value."""
        return _ops.abs.from_method(self)

    def sin(self) -> Tensor:
        """Elementwise sine."""
        return _ops.sin.from_method(self)

    def cos(self) -> Tensor:
        """Elementwise cosine."""
        return _ops.cos.from_method(self)

    def square(self) -> Tensor:
        """Elementwise ``x * x`` (``x ** 2``)."""
        return self**2

    def rsqrt(self) -> Tensor:
        """Elementwise ``1 / sqrt(x)``."""
        return _ops.rsqrt.from_method(self)

    def erf(self) -> Tensor:
        """Elementwise Gauss error function."""
        return _ops.erf.from_method(self)

    def tan(self) -> Tensor:
        """Elementwise tangent."""
        return _ops.tan.from_method(self)

    def arcsin(self) -> Tensor:
        """Elementwise inverse sine (PyTorch's asin)."""
        return _ops.arcsin.from_method(self)

    def arccos(self) -> Tensor:
        """Elementwise inverse cosine (PyTorch's acos)."""
        return _ops.arccos.from_method(self)

    def arctan(self) -> Tensor:
        """Elementwise inverse tangent (PyTorch's atan)."""
        return _ops.arctan.from_method(self)

    def sinh(self) -> Tensor:
        """Elementwise hyperbolic sine."""
        return _ops.sinh.from_method(self)

    def cosh(self) -> Tensor:
        """Elementwise hyperbolic cosine."""
        return _ops.cosh.from_method(self)

    def arcsinh(self) -> Tensor:
        """Elementwise inverse hyperbolic sine (PyTorch's asinh)."""
        return _ops.arcsinh.from_method(self)

    def arccosh(self) -> Tensor:
        """Elementwise inverse hyperbolic cosine (PyTorch's acosh)."""
        return _ops.arccosh.from_method(self)

    def arctanh(self) -> Tensor:
        """Elementwise inverse hyperbolic tangent (PyTorch's atanh)."""
        return _ops.arctanh.from_method(self)

    def exp2(self) -> Tensor:
        """Elementwise 2**x."""
        return _ops.exp2.from_method(self)

    def expm1(self) -> Tensor:
        """Elementwise exp(x) - 1, accurate where x is small."""
        return _ops.expm1.from_method(self)

    def log2(self) -> Tensor:
        """Elementwise base-2 logarithm."""
        return _ops.log2.from_method(self)

    def log10(self) -> Tensor:
        """Elementwise base-10 logarithm."""
        return _ops.log10.from_method(self)

    def reciprocal(self) -> Tensor:
        """Elementwise 1 / x."""
        return _ops.reciprocal.from_method(self)

    def erfc(self) -> Tensor:
        """Elementwise complementary error function 1 - erf(x)."""
        return _ops.erfc.from_method(self)

    def erfinv(self) -> Tensor:
        """Elementwise inverse error function."""
        return _ops.erfinv.from_method(self)

    def lgamma(self) -> Tensor:
        """Elementwise log |Gamma(x)|."""
        return _ops.lgamma.from_method(self)

    def digamma(self) -> Tensor:
        """Elementwise digamma, d/dx lgamma(x)."""
        return _ops.digamma.from_method(self)

    def sinc(self) -> Tensor:
        """Elementwise normalised sinc sin(pi x) / (pi x)."""
        return _ops.sinc.from_method(self)

    def deg2rad(self) -> Tensor:
        """Elementwise degrees to radians."""
        return _ops.deg2rad(self)

    def rad2deg(self) -> Tensor:
        """Elementwise radians to degrees."""
        return _ops.rad2deg(self)

    def logaddexp(self, other: Any) -> Tensor:
        """``tg.logaddexp(self, other)``."""
        return _ops.logaddexp.from_method(self, other)

    def hypot(self, other: Any) -> Tensor:
        """``tg.hypot(self, other)``."""
        return _ops.hypot.from_method(self, other)

    def xlogy(self, other: Any) -> Tensor:
        """``tg.xlogy(self, other)``."""
        return _ops.xlogy.from_method(self, other)

    def fmod(self, other: Any) -> Tensor:
        """``tg.fmod(self, other)``."""
        return _ops.fmod.from_method(self, other)

    def copysign(self, other: Any) -> Tensor:
        """``tg.copysign(self, other)``."""
        return _ops.copysign.from_method(self, other)

    def isnan(self) -> Tensor:
        """Elementwise: whether the value is NaN (a boolean tensor, never requiring grad)."""
        return _ops.isnan.from_method(self)

    def isfinite(self) -> Tensor:
        """Elementwise: whether the value is finite (a boolean tensor)."""
        return _ops.isfinite.from_method(self)

    def isinf(self) -> Tensor:
        """Elementwise: whether the value is +inf or -inf (a boolean tensor)."""
        return _ops.isinf.from_method(self)

    @torch_keywords({"dims": "pass the axes by position: x.flip(0, 1)"})
    def flip(self, *axes: Any, axis: Any = None) -> Tensor:
        """Reverse the elements along the given axes (``x.flip(0)``, ``x.flip(0, 1)``,
        ``x.flip((0, 1))`` or ``x.flip(axis=0)``; none: every axis), as ``tg.flip``.

        Raises:
            TypeError: axes given both by position and as ``axis=``.
        """
        if axes:
            if axis is not None:
                raise TypeError("flip: give the axes by position or as axis=, not both.")
            axis = axes[0] if len(axes) == 1 else axes
        return _ops.flip.from_method(self, axis=tuple(axis) if isinstance(axis, list) else axis)

    def roll(self, *args: Any, **kwargs: Any) -> Tensor:
        """``tg.roll(self, shift, axis=None)``: shift the elements along ``axis``, wrapping
        around."""
        return _ops.roll(self, *args, **kwargs)

    def tril(self, k: int = 0) -> Tensor:
        """The lower triangle of the last two axes (``tg.tril``)."""
        return _ops.tril(self, k)

    def triu(self, k: int = 0) -> Tensor:
        """The upper triangle of the last two axes (``tg.triu``)."""
        return _ops.triu(self, k)

    def floor(self) -> Tensor:
        """Elementwise floor (round toward -inf); its gradient is 0."""
        return _ops.floor.from_method(self)

    def ceil(self) -> Tensor:
        """Elementwise ceiling (round toward +inf); its gradient is 0."""
        return _ops.ceil.from_method(self)

    def round(self, decimals: int = 0) -> Tensor:
        """Elementwise rounding to ``decimals`` places, halves to even; its gradient is 0."""
        return _ops.round.from_method(self, decimals=decimals)

    def trunc(self) -> Tensor:
        """Elementwise rounding toward 0; its gradient is 0."""
        return _ops.trunc.from_method(self)

    def sign(self) -> Tensor:
        """Elementwise sign: -1, 0 or 1; its gradient is 0."""
        return _ops.sign.from_method(self)

    def __round__(self, ndigits: int | None = None) -> Tensor:
        return self.round(ndigits or 0)

    @numpy_keywords
    def norm(
        self, ord: Any = None, axis: int | Sequence[int] | None = None, keepdims: bool = False
    ) -> Tensor:
        """``jnp.linalg.norm``: with the defaults, the 2-norm of all elements (PyTorch's
        ``norm()``); ``ord`` 1, 2, ``inf``, ... for vectors, ``"fro"``, ``"nuc"``, ... over two
        axes. Its gradient is JAX's.

        Raises:
            ShapeError: ``ord`` and ``axis`` do not fit the tensor's dimensions.
        """
        return _ops.linalg.norm(self, ord=ord, axis=axis, keepdims=keepdims)  # ops.norm: a module

    def masked_fill(self, mask: Any, value: Any) -> Tensor:
        """``value`` where the boolean ``mask`` is true, ``self`` elsewhere (PyTorch's
        ``masked_fill``; ``tg.where(mask, value, self)``); the gradient flows to ``self``
        where the mask is false.

        Raises:
            TypeError: ``mask`` is not boolean.
            OperandTypeError: ``mask`` is a PyTorch tensor (says to convert it).
            ShapeError: ``mask`` does not broadcast to this tensor's shape.
        """
        _op.refuse_torch(mask, "masked_fill")
        mask_dtype = getattr(mask, "dtype", None)
        if mask_dtype is None or np.dtype(mask_dtype) != np.bool_:
            raise TypeError(
                f"masked_fill: mask must be boolean, got {mask_dtype or type(mask).__name__}; "
                "build it with a comparison, e.g. x.masked_fill(x < 0, 0.0)."
            )
        out = _ops.where.from_method(mask, value, self)
        if out.shape != self.shape:
            raise ShapeError(
                f"masked_fill: mask of shape {tuple(np.shape(mask))} does not broadcast to the "
                f"tensor's shape {self.shape}."
            )
        return out

    def __getitem__(self, index: Any) -> Tensor:
        return _ops.getitem.from_method(self, index=_ops.normalize_index(index, self.shape))

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError(
            "tapegrad tensors cannot be assigned into (x[i] = v): they hold immutable JAX "
            "arrays. Build the new value instead: x = tg.where(mask, v, x) or "
            "x = x.masked_fill(mask, v) (mask: a boolean tensor, e.g. tg.arange(n) == i)."
        )

    def __dir__(self) -> list[str]:
        # PyTorch's spellings are class attributes that raise (``_PyTorchName``): not listed,
        # unless a subclass or the user defined the name since (then it resolves)
        mro = type(self).__mro__
        return [n for n in super().__dir__() if not _hint_resolves(mro, n)]

    # ------------------------------------------------------------------ operators

    def __add__(self, other: Any) -> Tensor:
        return _binary(_ops.add, self, other, "__radd__")

    def __radd__(self, other: Any) -> Tensor:
        return _binary(_ops.add, other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _binary(_ops.subtract, self, other, "__rsub__")

    def __rsub__(self, other: Any) -> Tensor:
        return _binary(_ops.subtract, other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _binary(_ops.multiply, self, other, "__rmul__")

    def __rmul__(self, other: Any) -> Tensor:
        return _binary(_ops.multiply, other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _binary(_ops.divide, self, other, "__rtruediv__")

    def __rtruediv__(self, other: Any) -> Tensor:
        return _binary(_ops.divide, other, self)

    def __floordiv__(self, other: Any) -> Tensor:
        return _binary(_ops.floor_divide, self, other, "__rfloordiv__")

    def __rfloordiv__(self, other: Any) -> Tensor:
        return _binary(_ops.floor_divide, other, self)

    def __mod__(self, other: Any) -> Tensor:
        return _binary(_ops.remainder, self, other, "__rmod__")

    def __rmod__(self, other: Any) -> Tensor:
        return _binary(_ops.remainder, other, self)

    def __pow__(self, other: Any) -> Tensor:
        if other.__class__ is int:
            if -2 <= other <= 8 and DIFFERENTIABLE[self._data.aval.dtype]:
                # as jnp computes x ** 2; a few small exponents only: one kernel per exponent
                return _op.apply(_ops.integer_pow, (self,), {"n": other})
            if other < 0 and self._data.dtype.kind in "iu":
                raise ValueError(
                    f"Integers to negative integer powers are not allowed (a {self.dtype} "
                    f"tensor ** {other}, as in PyTorch and NumPy); cast the tensor first: "
                    "x.astype(tg.float32) ** n."
                )
        return _binary(_ops.power, self, other, "__rpow__")

    def __rpow__(self, other: Any) -> Tensor:
        return _binary(_ops.power, other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _binary(_ops.matmul, self, other, "__rmatmul__")

    def __rmatmul__(self, other: Any) -> Tensor:
        return _binary(_ops.matmul, other, self)

    def __neg__(self) -> Tensor:
        return _ops.negative.from_method(self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _ops.abs.from_method(self)

    def __and__(self, other: Any) -> Tensor:
        return _binary(_ops.bitwise_and, self, other, "__rand__")

    def __rand__(self, other: Any) -> Tensor:
        return _binary(_ops.bitwise_and, other, self)

    def __or__(self, other: Any) -> Tensor:
        return _binary(_ops.bitwise_or, self, other, "__ror__")

    def __ror__(self, other: Any) -> Tensor:
        return _binary(_ops.bitwise_or, other, self)

    def __xor__(self, other: Any) -> Tensor:
        return _binary(_ops.bitwise_xor, self, other, "__rxor__")

    def __rxor__(self, other: Any) -> Tensor:
        return _binary(_ops.bitwise_xor, other, self)

    def __invert__(self) -> Tensor:
        return _ops.bitwise_not.from_method(self)

    def __lt__(self, other: Any) -> Tensor:
        return _binary(_ops.less, self, other, "__gt__")

    def __le__(self, other: Any) -> Tensor:
        return _binary(_ops.less_equal, self, other, "__ge__")

    def __gt__(self, other: Any) -> Tensor:
        return _binary(_ops.greater, self, other, "__lt__")

    def __ge__(self, other: Any) -> Tensor:
        return _binary(_ops.greater_equal, self, other, "__le__")

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _binary(_ops.equal, self, other, "__eq__")

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _binary(_ops.not_equal, self, other, "__ne__")

    def __iadd__(self, other: Any) -> Tensor:
        return self._inplace(_ops.add, other, "+=")

    def __isub__(self, other: Any) -> Tensor:
        return self._inplace(_ops.subtract, other, "-=")

    def __imul__(self, other: Any) -> Tensor:
        return self._inplace(_ops.multiply, other, "*=")

    def __itruediv__(self, other: Any) -> Tensor:
        return self._inplace(_ops.divide, other, "/=")

    def __ifloordiv__(self, other: Any) -> Tensor:
        return self._inplace(_ops.floor_divide, other, "//=")

    def __imod__(self, other: Any) -> Tensor:
        return self._inplace(_ops.remainder, other, "%=")

    def __ipow__(self, other: Any) -> Tensor:
        return self._inplace(Tensor.__pow__, other, "**=")

    def __imatmul__(self, other: Any) -> Tensor:
        return self._inplace(_ops.matmul, other, "@=")

    def __iand__(self, other: Any) -> Tensor:
        return self._inplace(_ops.bitwise_and, other, "&=")

    def __ior__(self, other: Any) -> Tensor:
        return self._inplace(_ops.bitwise_or, other, "|=")

    def __ixor__(self, other: Any) -> Tensor:
        return self._inplace(_ops.bitwise_xor, other, "^=")

    def _inplace(self, op: Any, other: Any, symbol: str) -> Tensor:
        """In-place operators, as docs/api.md "Tensors" describes them.

        - A leaf that requires grad, under grad mode: ``InPlaceError`` (its value is what the
          gradient is taken at; the advice names ``.item()``/``.detach()``, then ``no_grad``).
          Not for ``&= |= ^=``: they refuse its float dtype themselves, saying what to write.
        - Otherwise, when the result requires grad (grad mode, and ``self`` or ``other``
          requires grad): the name is rebound to the new tensor, ``c += x`` is ``c = c + x``
          (as ``+=`` on a ``jax.Array``; PyTorch gives the same values).
        - Otherwise the value is replaced in place and the node kept (a parameter update
          under ``no_grad``, or a tensor that does not require grad).

        The result keeps the target's shape and dtype kind in every case (``ShapeError`` /
        ``TypeError`` otherwise), as PyTorch's in-place operators do.
        """
        node = self._node
        if (
            node is not None
            and node.op is None
            and grad_enabled()
            and getattr(op, "differentiable", True)  # & | ^ take no float: their error says so
        ):
            accumulate = (
                f"To accumulate a value (a running loss), write `total {symbol} loss.item()` "
                f"or `total {symbol} loss.detach()`; for"
                if symbol in ("+=", "-=", "*=", "/=")
                else "For"
            )
            raise InPlaceError(
                f"In-place {symbol} on a leaf that requires grad, under grad mode: it would "
                f"change the value its gradient is taken at. {accumulate} a parameter update, "
                f"wrap it in `with tg.no_grad():`; for a new tensor, write `x = x {symbol[:-1]} y`."
            )
        try:
            result: Tensor = op(self, other)
        except _op.OperandTypeError:
            return NotImplemented  # type: ignore[no-any-return]  # Python's binary-op protocol
        if result is NotImplemented:  # ``__pow__`` deferring to ``other.__rpow__``
            return NotImplemented  # type: ignore[no-any-return]
        if result.shape != self.shape:
            optional_output(result)  # refused: its node is freed with it instead of hanging
            raise ShapeError(
                f"In-place {symbol}: the result has shape {result.shape}, but the tensor has "
                f"shape {self.shape}; an in-place result keeps the target's shape. Write "
                f"`x = x {symbol[:-1]} y` for a new tensor of the result's shape."
            )
        data = result._data
        if data.dtype != self._data.dtype:
            if not np.can_cast(data.dtype, self._data.dtype, casting="same_kind"):
                optional_output(result)
                raise TypeError(
                    f"In-place {symbol}: the result is {data.dtype}, which cannot be stored in "
                    f"this {self._data.dtype} tensor without losing its kind; write "
                    f"`x = x {symbol[:-1]} y` for a new tensor, or cast y first."
                )
            if result._node is not None:
                return result.astype(self._data.dtype)
            data = data.astype(self._data.dtype)
        if result._node is not None:
            return result  # the name is rebound to the tracked result
        self._data = data
        return self


_RELEASED: dict[int, weakref.ref[Tensor]] = {}
"""Leaves whose node was released (``requires_grad_(False)``), by ``id``, held weakly (a
``WeakSet`` would compare tensors with ``==``): their next node can be younger than a graph
the tensor is below (``renewed``)."""


def _release(t: Tensor) -> None:
    key = id(t)
    if key not in _RELEASED:
        _RELEASED[key] = weakref.ref(t, lambda _: _RELEASED.pop(key, None))


def renewed(t: Tensor) -> bool:
    """Whether ``t`` is a leaf that had another node before (frozen and unfrozen): a graph
    older than its node may still lie above its tensor (``backward._spares``)."""
    ref = _RELEASED.get(id(t))
    return ref is not None and ref() is t


def zero_grads(tensors: Iterable[Tensor], set_to_none: bool = True) -> None:
    """Reset ``.grad`` of each tensor (``Module.zero_grad`` and ``Optimizer.zero_grad``).

    Args:
        tensors: the parameters.
        set_to_none: set ``.grad`` to ``None`` (PyTorch's default: frees the arrays, and the
            next optimizer step skips a parameter no backward reached); with ``False``,
            existing gradients become zeros of the parameter's shape and dtype.
    """
    for t in tensors:
        if set_to_none:
            t._grad = None
        elif t._grad is not None:
            t._grad = Tensor(jax.numpy.zeros_like(t._data))


def _sizes(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Sizes given one by one or as one tuple or list (``x.reshape(2, 3)``,
    ``x.repeat((2, 3))``), as one tuple (the op checks they are integers)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return args


def _zero_d(what: str) -> str:
    """The message for ``len()`` or iteration of a 0-d tensor: it has no first axis."""
    return (
        f"{what} a 0-d tensor (shape ()): it has no first axis. Use t.item() for its value, "
        "or t.reshape(1) for a tensor of one element."
    )


_NO_PARAMS: dict[str, Any] = {}  # an operator's op parameters: none (read-only, shared)


def _binary(op: Any, a: Any, b: Any, reflected: str | None = None) -> Tensor:
    """Apply a binary op for an operator; for an operand it cannot use, defer to the other
    operand's ``reflected`` method when it has one (Python's protocol), else raise the op's
    own ``TypeError``, which says what to pass instead."""
    try:
        # depth 4: user_site, apply, _binary, the operator method, then the user's frame
        out: Tensor = _op.apply(op, (a, b), _NO_PARAMS, 4)
    except _op.OperandTypeError:
        if reflected is not None and hasattr(type(b), reflected) and not is_torch(b):
            return NotImplemented  # type: ignore[no-any-return]
        raise
    return out


_TORCH_METHODS = {
    "view": "use x.reshape(...)",
    "split": "use tg.split(x, sections_or_cut_indices, axis=...) (NumPy's split: PyTorch's "
    "takes chunk sizes)",
    "chunk": "use tg.split(x, n, axis=...) (n equal parts)",
    "view_as": "use x.reshape(other.shape)",
    "float": "use x.astype(tg.float32)",
    "double": "use x.astype(tg.float64) (with jax_enable_x64 on)",
    "half": "use x.astype(tg.float16)",
    "bfloat16": "use x.astype(tg.bfloat16)",
    "long": "use x.astype(tg.int32) (JAX's default integers are 32-bit)",
    "int": "use x.astype(tg.int32)",
    "bool": "use x.astype(tg.bool_)",
    "type": "use x.astype(dtype)",
    "to": "use x.astype(dtype) for a dtype, tg.device_put(x, device) for a device",
    "cpu": "use tg.device_put(x, jax.devices('cpu')[0]); x.numpy() gives a NumPy array",
    "cuda": "use tg.device_put(x, jax.devices('gpu')[0])",
    "softmax": "use tg.softmax(x, axis=-1)",
    "log_softmax": "use tg.log_softmax(x, axis=-1)",
    "dim": "use x.ndim",
    "numel": "use x.size (NumPy's element count)",
    "nelement": "use x.size",
    "clamp": "use x.clip(min, max)",
    "contiguous": "drop the call: JAX arrays have no strides",
    "t": "use x.T",
    "mm": "use x @ y",
    "matmul": "use x @ y (or tg.matmul)",
    "bmm": "use x @ y",
    "pow": "use x ** p",
    "add": "use x + y",
    "sub": "use x - y",
    "mul": "use x * y",
    "div": "use x / y",
    "neg": "use -x",
    "zero_": "to reset a gradient set p.grad = None (as optimizer.zero_grad() does); else "
    "x = tg.zeros_like(x)",
    "fill_": "tensors are immutable: x = tg.full(x.shape, v)",
    "copy_": "use x.data = src.data (keeps x's node) or x = src.clone()",
    "uniform_": "use tg.rand(shape) (or nn.init)",
    "normal_": "use tg.randn(shape) (or nn.init)",
    "register_hook": "tapegrad has no tensor hooks: get the gradient with tg.grad(out, x), or "
    "call x.retain_grad() before backward() and read x.grad, then change it as you need",
    "new_zeros": "use tg.zeros(shape, dtype=x.dtype)",
    "new_ones": "use tg.ones(shape, dtype=x.dtype)",
    "new_full": "use tg.full(shape, value, dtype=x.dtype)",
    "new_empty": "use tg.zeros(shape, dtype=x.dtype) (JAX has no uninitialised memory)",
    "new_tensor": "use tg.tensor(data, dtype=x.dtype)",
    "type_as": "use x.astype(other.dtype)",
    "reshape_as": "use x.reshape(other.shape)",
    "is_floating_point": "use jnp.issubdtype(x.dtype, jnp.floating) (jnp: jax.numpy)",
    "ndimension": "use x.ndim",
    "amax": "use x.max(axis=...) (NumPy's max reduces, as amax)",
    "amin": "use x.min(axis=...)",
    "clamp_min": "use x.clip(min=v)",
    "clamp_max": "use x.clip(max=v)",
    "index_select": "use indexing: index_select(0, idx) is x[idx], index_select(1, idx) is "
    "x[:, idx] (integer arrays, lists or tensors); tg.take_along_axis(x, indices, axis) picks "
    "per row",
    "masked_select": "use indexing with the boolean mask: x[mask] (1-D, as PyTorch's)",
    "narrow": "use slicing: narrow(1, start, n) is x[:, start:start + n]",
    "select": "use indexing: select(1, i) is x[:, i]",
    "dot": "use x @ y",
    "mv": "use x @ v",
    "outer": "use tg.outer(x, y)",
    "inverse": "use tg.inv(x)",
    "det": "use tg.det(x)",
    "slogdet": "use tg.slogdet(x)",
    "logdet": "use tg.logdet(x)",
    "cholesky": "use tg.cholesky(x)",
    "diag": "use tg.diag(x, k) (x.diagonal(k) reads a diagonal too)",
    "atan2": "use tg.arctan2(x, other) (NumPy's name)",
    "asin": "use x.arcsin() (NumPy's name)",
    "acos": "use x.arccos() (NumPy's name)",
    "atan": "use x.arctan() (NumPy's name)",
    "asinh": "use x.arcsinh() (NumPy's name)",
    "acosh": "use x.arccosh() (NumPy's name)",
    "atanh": "use x.arctanh() (NumPy's name)",
    "arctan2": "use tg.arctan2(x, other)",
    "lerp": "use tg.lerp(x, end, weight)",
    "allclose": "use tg.allclose(x, other, rtol=1e-05, atol=1e-08)",
    "logical_and": "use x & y on boolean masks",
    "logical_or": "use x | y on boolean masks",
    "logical_not": "use ~x on a boolean mask",
    "grad_fn": "use x.is_leaf (False for the output of a recorded op) and x.requires_grad; "
    "repr(x) names the op that made it",
}
"""PyTorch tensor methods tapegrad spells otherwise: the hint their ``AttributeError`` gives."""


def _torch_hint(name: str) -> str | None:
    """The hint for PyTorch's method ``name``: listed, or an in-place method (``add_``)."""
    hint = _TORCH_METHODS.get(name)
    if hint is not None or not name.endswith("_") or name.startswith("_"):
        return hint
    base = name[:-1]
    immutable = "tensors hold immutable JAX arrays, so there are no in-place methods"
    if hasattr(Tensor, base):
        return f"{immutable}: write x = x.{base}(...)"
    if base in _TORCH_METHODS:
        return f"{immutable}: {_TORCH_METHODS[base]} and rebind x (x += y works too)"
    return None


class _PyTorchName:
    """A PyTorch method name on ``Tensor`` that tapegrad spells otherwise: reading it raises
    ``AttributeError`` naming tapegrad's spelling (so ``hasattr`` is false).

    A descriptor per name rather than ``Tensor.__getattr__``: a class with ``__getattr__``
    has every attribute read of its instances take CPython's slow path (no specialized
    ``LOAD_ATTR``), which every op pays several times."""

    __slots__ = ("name", "hint")

    def __init__(self, name: str, hint: str) -> None:
        self.name = name
        self.hint = hint

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        what = "'Tensor' object" if obj is not None else "type object 'Tensor'"
        raise AttributeError(f"{what} has no attribute {self.name!r} (PyTorch's); {self.hint}")


def _hint_resolves(mro: tuple[type, ...], name: str) -> bool:
    """Whether ``name`` on an instance of a class with this ``mro`` finds a ``_PyTorchName``
    (the first class of the MRO that defines it decides, as attribute lookup does)."""
    for klass in mro:
        if name in klass.__dict__:
            return isinstance(klass.__dict__[name], _PyTorchName)
    return False


def _install_pytorch_names() -> None:
    """Put a ``_PyTorchName`` on ``Tensor`` for each listed PyTorch method and for each
    in-place spelling (``add_``) of a tensor method or listed name that ``Tensor`` lacks."""
    names = [*_TORCH_METHODS, *(f"{n}_" for n in [*dir(Tensor), *_TORCH_METHODS])]
    for name in names:
        if name.startswith("_") or name in Tensor.__dict__ or hasattr(Tensor, name):
            continue
        hint = _torch_hint(name)
        if hint is not None:
            setattr(Tensor, name, _PyTorchName(name, hint))


_install_pytorch_names()


class _Size(int):
    """``t.size``: an ``int`` (NumPy's element count) that names ``t.shape`` when called as
    PyTorch's ``t.size()``."""

    __slots__ = ()

    def __call__(self, *axis: Any) -> Any:
        spelling = "x.shape" if not axis else f"x.shape[{axis[0]!r}]"
        raise TypeError(
            f"x.size is the number of elements ({int(self)}), NumPy's attribute, not a method; "
            f"for PyTorch's x.size({', '.join(map(repr, axis))}) write {spelling}."
        )


def _rebuild(value: np.ndarray, requires_grad: bool) -> Tensor:
    t = wrap(jax.numpy.asarray(value))
    if requires_grad:
        t._make_leaf()
    return t


def _flatten(t: Tensor) -> tuple[tuple[jax.Array], None]:
    return (t._data,), None


def _unflatten(aux: None, children: Sequence[Any]) -> Tensor:
    return wrap(children[0])


jax.tree_util.register_pytree_node(Tensor, _flatten, _unflatten)


# ---------------------------------------------------------------------- engine interface
# For the engine only (``ENGINE``): the one place besides ``Tensor`` that reads or writes its
# slots. Plain Python functions (in CPython 3.11 a call to one costs less than a C accessor
# such as ``operator.attrgetter``); a loop over many tensors on a hot path is one function
# here, not a call per tensor.


def _copied(data: Any) -> Any:
    """``data`` in a new array.

    Raises:
        RuntimeError: ``data`` was donated to a ``tg.jit`` step (``donated_error``).
    """
    try:
        return jax.numpy.array(data, copy=True)
    except RuntimeError:
        if deleted(data):
            raise donated_error("copy.deepcopy()") from None
        raise


def wrap(array: Any, node: Node | None = None, tape: Tape | None = None) -> Tensor:
    """Engine only: a new tensor holding ``array`` (no copy, no check), without a gradient;
    without a node unless ``node`` (of ``tape``) is given: a view that shares the node of
    another tensor (the residuals of a recorded VJP). Every op's output is made here."""
    t = _new(Tensor)
    t._data = array
    t._node = node
    t._grad = None
    t._tape = tape
    return t


def array_of(t: Tensor) -> jax.Array:
    """Engine only: reads ``t``'s array (``t.data`` without a property call)."""
    return t._data


def node_of(t: Tensor) -> Node | None:
    """Engine only: reads ``t``'s node, ``None`` when it does not require grad."""
    return t._node


def grad_of(t: Tensor) -> Tensor | None:
    """Engine only: reads ``t``'s gradient tensor (``t.grad`` without its non-leaf warning)."""
    return t._grad


def tape_of(t: Tensor) -> Tape | None:
    """Engine only: reads the tape of ``t``'s node (``None`` without a node)."""
    return t._tape


def set_array(t: Tensor, array: Any) -> None:
    """Engine only: writes ``t``'s array, unchecked (``t.data = ...`` checks shape, dtype and
    tracers; tg.jit writes its traced and computed values here)."""
    t._data = array


def set_grad(t: Tensor, grad: Tensor | None) -> None:
    """Engine only: writes ``t``'s gradient tensor, unchecked (backward's accumulation)."""
    t._grad = grad


def optional_output(t: Tensor, *made: Tensor) -> Tensor:
    """Engine only: ``t``, an output its user may drop unused (a layer's secondary output: an
    RNN's final states, attention weights; an in-place operator's result it refuses), made by
    ops whose outputs are ``t`` and ``made``: dropped, their nodes are freed with them instead
    of hanging (``Tape.reach``)."""
    if t._tape is not None:
        t._tape.reach(x._node for x in (t, *made) if x._node is not None)
    return t


def attach(t: Tensor, node: Node, tape: Tape) -> None:
    """Engine only: writes ``t``'s node and its tape (``Tape.record``, the tape's lock held);
    the tensor keeps its tape alive."""
    t._node = node
    t._tape = tape


def unpack(
    inputs: tuple[Any, ...], convert: Callable[[Any, str], Any], name: str
) -> tuple[list[Any], tuple[Node | None, ...], bool]:
    """Engine only: reads an op's inputs: ``(arrays, parents, tracked)``, the arrays (a
    non-tensor through ``convert(x, name)``), the parent nodes (``None`` for an input that
    does not require grad) and whether one has a node. Every op's hot path (``op.apply``)."""
    # the usual cases without a loop: a binary op on two tensors or a tensor and a scalar, a
    # unary op on a tensor (``__class__ is``: a test cheaper than ``isinstance``)
    n = len(inputs)
    if n == 2:
        a, b = inputs
        if a.__class__ is Tensor:
            pa = a._node
            if b.__class__ is Tensor:
                pb = b._node
                return [a._data, b._data], (pa, pb), pa is not None or pb is not None
            if not isinstance(b, Tensor):
                return [a._data, convert(b, name)], (pa, None), pa is not None
        elif b.__class__ is Tensor and not isinstance(a, Tensor):
            pb = b._node
            return [convert(a, name), b._data], (None, pb), pb is not None
    elif n == 1:
        (a,) = inputs
        if a.__class__ is Tensor:
            pa = a._node
            return [a._data], (pa,), pa is not None
    arrays: list[Any] = []
    parents: list[Node | None] = []
    tracked = False
    for x in inputs:
        if isinstance(x, Tensor):
            arrays.append(x._data)
            node = x._node
            parents.append(node)
            if node is not None:
                tracked = True
        else:
            arrays.append(convert(x, name))
            parents.append(None)
    return arrays, tuple(parents), tracked


def arrays_of(tensors: Iterable[Tensor]) -> list[jax.Array]:
    """Engine only: reads the arrays of ``tensors`` (tg.jit's state, on every call)."""
    return [t._data for t in tensors]


def grad_arrays_of(tensors: Iterable[Tensor]) -> list[jax.Array | None]:
    """Engine only: reads the arrays of the gradients of ``tensors`` (``None`` where a tensor
    has none; tg.jit's incoming ``.grad`` values, on every call)."""
    return [None if t._grad is None else t._grad._data for t in tensors]


def store_results(tensors: Sequence[Tensor], values: Sequence[Any], grads: Sequence[Any]) -> None:
    """Engine only: writes tg.jit's results, per tensor a new array (``None``: unchanged) and
    a new gradient (``None``: unchanged; ``()``: no gradient; ``(array,)``: a new gradient
    tensor holding it), unchecked (the compiled step made them; every call)."""
    for t, v in zip(tensors, values, strict=True):
        if v is not None:
            t._data = v
    for t, g in zip(tensors, grads, strict=True):
        if g is not None:
            if g:
                grad = t._grad = _new(Tensor)  # wrap, inlined: a call less per tensor
                grad._data = g[0]
                grad._node = grad._grad = grad._tape = None
            else:
                t._grad = None


def state_of(t: Tensor) -> tuple[Any, Node | None, Tensor | None, Tape | None]:
    """Engine only: reads ``t``'s whole state (array, node, gradient, tape), for ``restore``
    (tg.jit swaps traced values in for a trace)."""
    return t._data, t._node, t._grad, t._tape


def restore(t: Tensor, state: tuple[Any, Node | None, Tensor | None, Tape | None]) -> None:
    """Engine only: writes back a state that ``state_of`` read."""
    t._data, t._node, t._grad, t._tape = state


use_tensor_interface(attach, node_of)


# Imported last: ops and backward build on Tensor, and Tensor's methods delegate to them.
from tapegrad import backward as _backward  # noqa: E402
from tapegrad import op as _op  # noqa: E402
from tapegrad import ops as _ops  # noqa: E402
