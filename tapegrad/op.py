"""How an op is declared (``defop``/``defvjp``) and applied: unwrap, forward, wrap, record."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, overload

import jax
import numpy as np

from tapegrad import _args, compilation_cache
from tapegrad._args import torch_keyword
from tapegrad._arrays import deleted, is_torch
from tapegrad._dtypes import DIFFERENTIABLE
from tapegrad._placement import mixed_devices_error
from tapegrad._tensor import Tensor, unpack, wrap
from tapegrad.current import tape_now
from tapegrad.errors import (
    DuplicateOpError,
    MissingVJPError,
    ShapeError,
    VJPShapeError,
    donated_error,
    raise_instead,
)
from tapegrad.grad_mode import grad_enabled
from tapegrad.kernels import MISSED, host_to_device, plain_transfer, trace_ahead
from tapegrad.origin import user_site

__all__ = [
    "Op",
    "defop",
    "registry",
    "apply",
    "OperandTypeError",
    "int_arguments",
    "index_arguments",
]

Forward = Callable[..., tuple[Any, Any]]
VJPRule = Callable[..., tuple[Any, ...]]
TensorVJPRule = Callable[..., tuple[Tensor | None, ...]]
ShapeCheck = Callable[[str, list[Any], dict[str, Any]], None]

_REGISTRY: dict[str, Op] = {}
_CAST_ADVICE = "cast them first: x.astype(tg.float32)"


class OperandTypeError(TypeError):
    """An op received an operand it cannot use (not a tensor, array or Python scalar)."""


class Op:
    """A forward written in jnp plus its VJP rule (docs/style.md's op pattern).

    ``forward(*arrays, **params) -> (output, residuals)``; the VJP rule takes
    ``(residuals, g, needs, **params)`` (``needs`` may be omitted from its signature) and
    returns one cotangent per tensor input, ``None`` where none is needed.
    """

    __slots__ = (
        "name",
        "forward",
        "vjp",
        "differentiable",
        "check",
        "dtype_advice",
        "arity",
        "param_names",
        "checks",
        "jax_vjp",
        "builtin",
        "traced_ints",
        "tensor_vjp",
        "_vjp_needs",
        "__dict__",
    )

    def __init__(
        self,
        forward: Forward,
        *,
        name: str,
        differentiable: bool = True,
        check: ShapeCheck | None = None,
        dtype_advice: str = _CAST_ADVICE,
    ) -> None:
        self.name = name
        self.forward = forward
        self.vjp: VJPRule | None = None
        self.differentiable = differentiable
        self.check = check
        # what to write when JAX refuses an input's dtype ("neg does not accept dtype bool")
        self.dtype_advice = dtype_advice
        # its VJP is pure JAX, so a compiled backward may trace it: tapegrad's own rule
        # (``defop``) or JAX's derivative (``tg.jax_op``, a create_graph pass's derived op)
        self.jax_vjp = False
        self.builtin = False  # declared by tapegrad (``defop``), in the registry
        # parameters whose int items a compiled backward passes as traced scalars (the rule
        # handles them: an index), so a new value is not a new structure
        self.traced_ints: tuple[str, ...] = ()
        # the VJP a ``create_graph`` pass records, written with tapegrad ops on tensors
        # (``defvjp_on_tensors``); ``None``: the rule itself, as one derived op per input
        self.tensor_vjp: TensorVJPRule | None = None
        self._vjp_needs = False
        self.arity = _arity(forward)
        self.param_names = _param_names(forward)
        self.checks = tuple((p, _args.CHECKS[p]) for p in self.param_names if p in _args.CHECKS)
        functools.update_wrapper(self, forward)
        self.__signature__ = _call_signature(forward)

    @property
    def own_rule(self) -> bool:
        """Whether this op's VJP is tapegrad's own: the op is declared by tapegrad
        (``builtin``; ``tg.defop`` marks a user's op so too) and its rule is defined in
        tapegrad's source (a user may give a built-in op a rule of their own). Only such a
        rule is pure and computes through kernels (``_vjp_ahead`` traces it ahead), and only
        such a rule is covered by the kernel store's digest of tapegrad's source
        (``compiled_backward._store_name``)."""
        module = getattr(self.vjp, "__module__", None) or ""
        return self.builtin and module.startswith("tapegrad.")

    def defvjp(self, rule: VJPRule) -> VJPRule:
        """Attach ``rule`` as this op's VJP and return it unchanged (decorator)."""
        self.vjp = rule
        self._vjp_needs = "needs" in inspect.signature(rule).parameters
        return rule

    def defvjp_on_tensors(self, rule: TensorVJPRule) -> TensorVJPRule:
        """Attach ``rule`` as the VJP a ``create_graph=True`` pass records, and return it
        unchanged (decorator).

        ``rule(residuals, g, needs, **params)`` takes the residuals as saved and the
        cotangent as a tensor, and returns one cotangent tensor per tensor input in the
        input's shape (``None`` where ``needs`` is false), computed with tapegrad ops, whose
        own VJPs differentiate it again. Without one, the pass records the jnp rule as a
        derived op that ``jax.jit`` compiles; this is for a rule no single jit can run
        (``device_put``'s moves the cotangent to another device) whose residuals need no
        derivative.
        """
        self.tensor_vjp = rule
        return rule

    def call_vjp(self, saved: Any, g: Any, needs: tuple[bool, ...], params: dict[str, Any]) -> Any:
        """Run the VJP rule; returns its tuple of cotangents (a list is taken as one).

        Raises:
            VJPShapeError: the rule returned something else, such as a bare array (whose
                rows would be taken for the cotangents of several inputs).
        """
        assert self.vjp is not None
        if self._vjp_needs:
            cts = self.vjp(saved, g, needs, **params)
        else:
            cts = self.vjp(saved, g, **params)
        if cts.__class__ is tuple:
            return cts
        if isinstance(cts, (tuple, list)):
            return tuple(cts)
        raise VJPShapeError(
            f"VJP of {self.name!r} returned a value of type {type(cts).__name__}, not a tuple of "
            "cotangents; "
            "return one per tensor input, in a tuple ((g * 2,) for an op of one input; None "
            "where one is not needed)."
        )

    def __call__(self, *inputs: Any, **params: Any) -> Tensor:
        """Apply the op; parameters may also follow the tensor inputs positionally, in the
        forward's order (``tg.sum(x, 1)``, as ``np.sum``). Axes and shapes are checked as NumPy
        checks them (``tapegrad._args``: any integer, never a float)."""
        if len(inputs) != self.arity or (params and self.checks):
            inputs, params = self._arguments(inputs, params)
        return apply(self, inputs, params)

    def from_method(self, *inputs: Any, **params: Any) -> Tensor:
        """Engine only: ``self(*inputs, **params)`` called from a ``Tensor`` method's body
        (``x.exp()``). A node's origin is then read at the method's caller at once instead of
        stepping over the method's frame (~0.2 us, and ~0.2 us to start the walk). A method
        under a checking decorator (``x.sum()``) uses it too: the decorator's frame is then
        stepped over, so a call of the undecorated method (``__wrapped__``) still names the
        right line."""
        if len(inputs) != self.arity or (params and self.checks):
            inputs, params = self._arguments(inputs, params)
        return apply(self, inputs, params, 4)  # user_site, apply, this, the method, its caller

    def _arguments(
        self, inputs: tuple[Any, ...], params: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The tensor inputs and checked parameters of a call (``__call__``'s arguments)."""
        arity = self.arity
        if arity is not None and len(inputs) != arity:
            if len(inputs) < arity:
                raise TypeError(
                    f"{self.name} takes {arity} tensor input(s), got {len(inputs)}; pass "
                    "parameters such as axis by keyword."
                )
            inputs, params = self._positional(inputs, params)
        if params and self.checks:
            for name, check in self.checks:
                if name in params:
                    params[name] = check(params[name], self.name)
        return inputs, params

    def _positional(
        self, inputs: tuple[Any, ...], params: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Move the values after the tensor inputs to the parameters they stand for."""
        assert self.arity is not None
        extra = inputs[self.arity :]
        names = self.param_names[: len(extra)]
        if names[:1] == ("axis",):
            _args.check_positional_axis(self.name, extra[0])
        if len(extra) > len(self.param_names) or any(n in params for n in names):
            params_text = ", ".join(self.param_names)
            raise TypeError(
                f"{self.name} takes {self.arity} tensor input(s), got {len(inputs)}; "
                + (
                    f"values after them stand for its parameters ({params_text}) in that order, "
                    "each given once (by position or by keyword)."
                    if self.param_names
                    else "it takes no parameters (an op that has some takes them after the "
                    "tensor inputs or by keyword)."
                )
            )
        return inputs[: self.arity], {**params, **dict(zip(names, extra, strict=True))}

    def __repr__(self) -> str:
        return f"<tapegrad op {self.name}>"


def _param_names(forward: Forward) -> tuple[str, ...]:
    """The forward's keyword-only parameters (the op's static parameters), in order."""
    params = inspect.signature(forward).parameters.values()
    return tuple(p.name for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY)


def _call_signature(forward: Forward) -> inspect.Signature:
    """How an op is called (what ``inspect.signature`` and editors show), not its forward's:
    tensors in, a ``Tensor`` out, its parameters by keyword or, where the forward's order
    allows, after the tensors (``Op.__call__``)."""
    sig = inspect.signature(forward)
    tensors = [
        p.replace(annotation="Tensor | ArrayLike") if p.kind != p.KEYWORD_ONLY else p
        for p in sig.parameters.values()
    ]
    plain = sig.replace(parameters=tensors, return_annotation="Tensor")
    if any(p.kind == p.VAR_POSITIONAL for p in tensors):
        return plain
    try:
        return plain.replace(parameters=[p.replace(kind=p.POSITIONAL_OR_KEYWORD) for p in tensors])
    except ValueError:  # a parameter without a default after one with: by keyword only
        return plain


def _arity(forward: Forward) -> int | None:
    """The number of tensor inputs (positional parameters), or ``None`` when variadic."""
    kinds = [p.kind for p in inspect.signature(forward).parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds:
        return None
    return sum(k == inspect.Parameter.POSITIONAL_OR_KEYWORD for k in kinds)


@overload
def defop(fn: Forward, /) -> Op: ...


@overload
def defop(
    *,
    name: str | None = None,
    differentiable: bool = True,
    check: ShapeCheck | None = None,
    dtype_advice: str = ...,
) -> Callable[[Forward], Op]: ...


def defop(
    fn: Forward | None = None,
    /,
    *,
    name: str | None = None,
    differentiable: bool = True,
    check: ShapeCheck | None = None,
    dtype_advice: str = _CAST_ADVICE,
) -> Op | Callable[[Forward], Op]:
    """Declare a built-in op from its jnp forward; use as ``@defop`` or ``@defop(...)``.

    Args:
        fn: the forward, ``(*arrays, **params) -> (output, residuals)``.
        name: the op name (default: the function's name, which equals jnp's).
        differentiable: ``False`` for ops never recorded (comparisons).
        check: called with ``(name, arrays, params)`` only when the forward raised, to turn a
            shape problem into a ``ShapeError`` (JAX raises ``TypeError`` for some).
        dtype_advice: what the ``TypeError`` says to write when JAX refuses an input's dtype
            (default: cast to a float dtype).

    Raises:
        DuplicateOpError: a built-in op of that name exists already.
    """

    def make(forward: Forward) -> Op:
        op_name = name or forward.__name__
        if op_name in _REGISTRY:
            raise DuplicateOpError(
                f"A built-in op named {op_name!r} is already registered; choose another name."
            )
        op = Op(
            forward,
            name=op_name,
            differentiable=differentiable,
            check=check,
            dtype_advice=dtype_advice,
        )
        op.jax_vjp = op.builtin = True
        _REGISTRY[op_name] = op
        return op

    return make if fn is None else make(fn)


def registry() -> MappingProxyType[str, Op]:
    """A read-only view of the built-in ops by name."""
    return MappingProxyType(_REGISTRY)


try:  # this thread's x64 setting, read without the public config's Python layers (~0.07 us)
    from jax._src.config import enable_x64 as _X64
except ImportError:  # pragma: no cover - a JAX without it: the public flag

    class _PublicX64:
        @property
        def value(self) -> bool:
            return bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]

    _X64 = _PublicX64()  # type: ignore[assignment]


@functools.lru_cache(maxsize=512)
def _constant(kind: str, value: Any, x64: bool) -> jax.Array:
    """A Python scalar as a weakly typed 0-d array, made once per (type, value, x64 setting:
    ``jax.enable_x64`` may differ by thread and block, and so does the array's dtype).

    Built under ``ensure_compile_time_eval`` so that it is a concrete array even when first
    met inside a trace (docs/design.md rule 9: no cache keeps a traced value), with
    ``jax.device_put``, which keeps the weak type and compiles nothing (``jnp.asarray``
    compiles a copy kernel per type, ~10-60 ms of a first run).
    """
    with jax.ensure_compile_time_eval():
        array: jax.Array = jax.device_put(value)
    return array


class _SecondSight:
    """Device constants for kernel arguments JAX would transfer on every call (Python ints,
    NumPy index arrays), made for a value the second time a forward meets it and kept: a loop
    that slices or gathers at the same places every epoch reuses them, and values that never
    repeat (random windows of a long text, random minibatch rows) make none (a backward's
    call with the forward's values only looks its constant up). At most ``limit`` are kept,
    with no eviction (a loop over more places passes its values as they are), so one costs
    ~30-80 us once; the values met once are remembered by hash (no copy of an array's
    contents)."""

    def __init__(self, make: Callable[[Any], jax.Array | None], limit: int) -> None:
        self.make = make
        self.limit = limit
        self.made: dict[Any, jax.Array] = {}
        self.met: set[int] = set()

    def get(self, key: Any, value: Any, count: bool) -> Any:
        """The constant for ``value`` (identified by ``key``), or ``value`` itself; ``count``:
        a forward's call, which counts as a sight of it."""
        made = self.made.get(key)
        if made is not None or not count:
            return value if made is None else made
        seen = hash(key)
        if seen in self.met:
            if len(self.made) < self.limit:
                made = self.make(value)
                if made is not None:
                    self.made[key] = made
                    return made
        elif len(self.met) < 4 * self.limit:
            self.met.add(seen)
        return value


def _int_constant(value: int) -> jax.Array | None:
    if not plain_transfer():  # a trace, a transfer guard: JAX's own conversion decides
        return None
    try:
        return _constant("int", value, _X64.value)
    except OverflowError:
        return None  # beyond the int dtype: JAX's own conversion raises its error


def _index_constant(host: np.ndarray) -> jax.Array | None:
    # the dtype JAX's call would give it (x64 off: int32; the bounds were checked already)
    return host_to_device(np.array(host, dtype=jax.dtypes.canonicalize_dtype(host.dtype)))


_INTS = _SecondSight(_int_constant, 4096)
_INDICES = _SecondSight(_index_constant, 256)
_INDEX_SIZE = 1024  # larger NumPy index arrays are passed as they are (no key to hash)


def int_arguments(values: tuple[Any, ...], count: bool = True) -> tuple[Any, ...]:
    """Python ints passed to a kernel as traced arguments (a slice's starts), each as a weakly
    typed device constant once a forward met its value before (``_SecondSight``; ``count``
    false: a backward's call, which only looks constants up), else as it is. JAX turns every
    Python int argument of a call into a device scalar (~3-6 us each); both forms have the
    same abstract value (x64 off: a weak int32), so one compiled kernel."""
    x64 = _X64.value
    return tuple([_INTS.get((v, x64), v, count) if v.__class__ is int else v for v in values])


def index_arguments(index: tuple[Any, ...], count: bool = True) -> tuple[Any, ...]:
    """An index's integer NumPy arrays (a gather's rows, checked on the host already) as
    cached device arrays once a forward met their contents before (``_SecondSight``;
    ``count`` as in ``int_arguments``): JAX transfers a NumPy argument on every call (~6 us
    for 64 indices). Outside a trace only (``host_to_device``); other items pass as they
    are."""
    out = []
    for v in index:
        if v.__class__ is np.ndarray and v.dtype.kind in "iu" and v.size <= _INDEX_SIZE:
            key = (v.shape, v.dtype.str, v.tobytes(), _X64.value)
            v = _INDICES.get(key, v, count)
        out.append(v)
    return tuple(out)


def as_operand(x: Any, op_name: str) -> Any:
    """Turn a non-tensor operand into what jnp takes: Python scalars stay weakly typed.

    A NumPy integer or floating scalar (``np.sqrt(d)``, ``np.float32(2)``) counts as a Python
    scalar, as in PyTorch: ``bf16 / np.sqrt(8)`` stays bfloat16 (JAX would make it float32).

    Raises:
        OperandTypeError: ``x`` is not a Python scalar, NumPy value or JAX array.
    """
    kind = type(x)
    if kind is not float and kind is not int and isinstance(x, np.generic):
        if x.dtype.kind in "fiu":  # after the usual Python scalars: they pay two identity tests
            x = x.item()
            kind = type(x)
    if (kind is float and x != 0.0) or kind is int:  # 0.0 == -0.0 would share one entry
        try:
            return _constant(kind.__name__, x, _X64.value)  # the type keeps 1 and 1.0 apart
        except OverflowError:
            bits = 64 if jax.config.jax_enable_x64 else 32  # type: ignore[attr-defined]
            raise OverflowError(
                f"{op_name}: the integer {x} does not fit JAX's int{bits}"
                + (
                    f" (x64 is off); write it as a float ({float(x)!r}) or turn x64 on "
                    "(jax.config.update('jax_enable_x64', True)) before making tensors."
                    if bits == 32
                    else "; write it as a float."
                )
            ) from None
    if isinstance(x, (bool, int, float, complex, jax.Array, np.generic)):
        return x
    if isinstance(x, np.ndarray):
        return jax.numpy.asarray(x)
    refuse_torch(x, op_name)
    raise OperandTypeError(
        f"{op_name}: unsupported operand type {type(x).__name__}; pass a tapegrad Tensor, a "
        "jax.Array, a NumPy array or a Python scalar (convert lists with tg.tensor(...))."
    )


def operand_shape(x: Any, op_name: str) -> tuple[int, ...]:
    """The shape of an operand of ``op_name``, read by an entry point's shape checks before the
    op converts its operands: a tensor's or an array's, or a Python scalar's ``()``.

    Raises:
        OperandTypeError: ``x`` is not a tensor, array or scalar (a list: convert it with
            ``tg.tensor``), as ``as_operand`` raises.
    """
    shape = getattr(x, "shape", None)
    return tuple(np.shape(as_operand(x, op_name)) if shape is None else shape)


def refuse_torch(x: Any, op_name: str) -> None:
    """Refuse a PyTorch tensor as an operand of ``op_name`` (``as_operand``'s check, also for
    entry points that read an operand's shape or dtype before the op converts it).

    Raises:
        OperandTypeError: ``x`` is a PyTorch object; says to convert it with ``tg.tensor``.
    """
    if is_torch(x):
        raise OperandTypeError(
            f"{op_name}: a PyTorch tensor ({type(x).__module__}.{type(x).__name__}) cannot be "
            "an operand; convert it first: tg.tensor(t) (a copy)."
        )


def apply(op: Op, inputs: tuple[Any, ...], params: dict[str, Any], depth: int = 3) -> Tensor:
    """Run ``op`` on ``inputs`` and record a node when grad mode is on and an input requires grad.

    The inputs stay referenced by this frame until the node is registered (docs/design.md rule 10).
    ``depth`` is where the origin search starts: 3, the caller of ``Op.__call__``; an entry
    point that calls ``apply`` itself passes the depth of its own caller, so the search
    starts at the user's frame (each frame it steps over costs a frame object, ~0.3 us).

    Raises:
        ShapeError: the operand shapes do not fit the op.
        DeviceError: the inputs live on devices no sharding relates.
        OperandTypeError: an operand of an unsupported type.
        TracerError: the op would be recorded but computes on a JAX tracer (and the current
            tape does not allow tracers).
        TapeMismatchError: an input that requires grad belongs to another tape.
        MissingVJPError: the op is differentiable but has no VJP rule.
    """
    if not compilation_cache.ready:
        compilation_cache.ensure()  # before the first compile of this process (lazy, once)
    arrays, parents, tracked = unpack(inputs, as_operand, op.name)
    try:  # without parameters, no keyword dict is built (every binary operator: ~60 ns)
        y, saved = op.forward(*arrays, **params) if params else op.forward(*arrays)
    except (TypeError, ValueError, RuntimeError) as err:
        raise_instead(_explained(op, arrays, params, err, depth + 1))
        raise
    out = wrap(y)
    if tracked and op.differentiable and grad_enabled() and DIFFERENTIABLE[y.aval.dtype]:
        if op.vjp is None:
            raise MissingVJPError(
                f"Op {op.name!r} is differentiable but has no VJP rule; define one with "
                f"@{op.name}.defvjp, or declare the op with differentiable=False."
            )
        code, lasti = user_site(depth)
        prov: tuple[int | None, ...] | None = None
        if saved.__class__ is tuple and saved:
            if len(saved) == len(arrays) == 2 and saved[0] is arrays[0] and saved[1] is arrays[1]:
                prov = _IDENTITY[2]  # a binary op saving its inputs: the usual case, no call
            elif len(saved) == 1 and saved[0] is y and arrays[0] is not y:
                prov = _OUTPUT  # exp, tanh, sqrt: a unary op saving its output, no call
            else:
                prov = _provenance(saved, arrays, y)
        # an empty params dict is not kept: one GC-tracked object less per node
        tape_now().record(op, parents, saved, params or None, out, y, code, lasti, prov)
        if MISSED:  # a kernel met a new op, shape or dtype: its VJP's will be met too
            MISSED.clear()
            _vjp_ahead(op, saved, y, parents, params)
    return out


def _vjp_ahead(
    op: Op, saved: Any, y: jax.Array, parents: tuple[Any, ...], params: dict[str, Any]
) -> None:
    """Start compiling the kernels of ``op``'s VJP for the node just recorded, on the
    background thread (``kernels.trace_ahead``): a backward pass calls the rule with these
    residuals and parameters, a cotangent of the output's shape and dtype, and ``needs``
    true for the inputs that require grad. A program's first backward then finds most of its
    VJP kernels compiled while its forward ran (on a second core) instead of compiling them
    one by one. Only tapegrad's own rules (pure, computing through kernels), and only when
    a kernel of this thread just met a new signature (``kernels.MISSED``): the forward of a
    new op, shape or dtype."""
    rule = op.vjp
    if rule is None or not op.own_rule:
        return  # a rule of the user's (``tg.defop``) may have effects: it runs when called
    g = jax.ShapeDtypeStruct(y.shape, y.dtype)  # type: ignore[no-untyped-call]
    if op._vjp_needs:
        trace_ahead(rule, saved, g, tuple([p is not None for p in parents]), **params)
    else:
        trace_ahead(rule, saved, g, **params)


def _explained(
    op: Op, arrays: list[Any], params: dict[str, Any], err: Exception, depth: int
) -> Exception | None:
    """The error to raise instead of ``err``, which ``op``'s forward raised on ``arrays``:
    one that says what happened and what to do (a donated input, inputs on unrelated
    devices, shapes that do not fit, a PyTorch keyword, a dtype the op refuses), or ``None``
    to raise ``err`` itself. ``depth``: the frames above the user's (the error's origin)."""
    if _donated(arrays):  # a deleted buffer: a RuntimeError, or from PjRt a ValueError
        return donated_error(op.name)
    if isinstance(err, RuntimeError):
        return None
    mixed = mixed_devices_error(op.name, arrays, depth, params=params)
    if mixed is not None:
        return mixed
    if op.check is not None and not isinstance(err, ShapeError):
        try:
            op.check(op.name, arrays, params)
        except ShapeError as shape_error:  # names the shapes: JAX's message is noise here
            return shape_error.with_traceback(None)
    unknown = torch_keyword((k for k in params if k not in op.param_names), f"{op.name}()")
    if unknown is not None:
        return unknown
    refused = _REFUSED_DTYPE.search(str(err)) if isinstance(err, TypeError) else None
    if refused is not None:  # JAX's "neg does not accept dtype bool": name the op instead
        return TypeError(
            f"{op.name} does not take {refused[1]} values (JAX: {str(err).splitlines()[0]}); "
            f"{op.dtype_advice}."
        )
    return None


_REFUSED_DTYPE = re.compile(r"does not accept dtype (\w+)")


def _donated(arrays: list[Any]) -> bool:
    """Whether one of an op's input arrays was deleted (donated to a ``tg.jit`` step)."""
    return any(map(deleted, arrays))


_IDENTITY = tuple(tuple(range(n)) for n in range(8))  # shared provenance tuples: (0, 1, ...)
_OUTPUT = (-1,)  # the provenance of a lone residual that is the op's output


def _provenance(saved: tuple[Any, ...], arrays: list[Any], y: Any) -> tuple[int | None, ...] | None:
    """Per residual: the index of the input array it is, -1 if it is the output, else
    ``None`` (compared by identity, at forward time); ``None`` when no residual is either.

    One array may be several inputs (``x.detach() * x``, two leaves made from one array):
    a residual then takes the first of those inputs no earlier residual took, so residuals
    saved in the inputs' order link to their own inputs."""
    n = len(saved)
    if n == 1:  # a lone shape or count (sum, mean): no array at all, quickly
        kind = saved[0].__class__
        if kind is tuple or kind is int or saved[0] is None:
            return None
    if n == len(arrays) and n < len(_IDENTITY):  # the usual case: the residuals are the inputs
        i = 0
        for s in saved:
            if s is not arrays[i]:
                break
            i += 1
        else:
            return _IDENTITY[n]  # first: an op returning its input array saved the input
    if n == 1 and saved[0] is y:  # one residual, not the input: the output (exp, tanh)
        return _OUTPUT
    slots: list[int | None] = []
    found = False
    for s in saved:
        slot = None
        if s is y:
            slot = -1
        else:
            for i, a in enumerate(arrays):
                if a is s:
                    if slot is None:
                        slot = i
                    if i not in slots:
                        slot = i
                        break
        found = found or slot is not None
        slots.append(slot)
    return tuple(slots) if found else None


def broadcast_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    """Raise ``ShapeError`` when the operands of an elementwise op do not broadcast."""
    shapes = [tuple(np.shape(a)) for a in arrays]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(
            f"{name}: operand shapes {', '.join(map(str, shapes))} cannot be broadcast "
            "together (NumPy rules: trailing dimensions must be equal or 1); reshape or "
            "expand_dims one operand."
        ) from None
