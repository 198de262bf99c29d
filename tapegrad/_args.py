"""Argument validation shared by every entry point: axes and dimensions checked as NumPy does.

NumPy takes any integer (a Python ``int``, ``np.int64``, a 0-d integer array: whatever
``operator.index`` accepts) where an axis or a dimension is expected, and refuses floats
(``reshape(2.5, 2)``) and booleans rather than truncating them. Ops declare these arguments by
name (``axis``, ``axes``, ``shape``, ...): ``Op.__call__`` runs the matching check here, so a
new op gets the same rules without code of its own; functions and methods that compute with an
axis before calling an op use the same checks. PyTorch keywords that tapegrad spells
differently (``dim=``) or does not take (an optimizer's ``foreach=``) raise a ``TypeError``
saying what to do instead (:func:`torch_keywords`).
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, TypeVar

import jax
import numpy as np

from tapegrad.errors import raise_instead

__all__ = [
    "integer",
    "axis",
    "dims",
    "CHECKS",
    "torch_keyword",
    "torch_keywords",
    "numpy_keywords",
    "shape_keywords",
]

P = ParamSpec("P")
R = TypeVar("R")


def integer(value: Any, what: str) -> int:
    """``value`` as an ``int`` when it is an integer of any kind (``operator.index``).

    Raises:
        TypeError: a float, a bool, a traced value (under ``tg.jit``: the message says to
            make its argument static), or anything else that is not an integer.
    """
    if type(value) is int:
        return value
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        raise TypeError(f"{what} must be an integer, got the boolean {value!r}.")
    try:
        return operator.index(value)
    except TypeError:
        if isinstance(value, jax.core.Tracer):
            raise TypeError(
                f"{what} must be an integer known when the function is compiled, got a traced "
                "value (an argument of a function under tg.jit or jax.jit): shapes and axes "
                "are fixed at compile time; mark that argument static, "
                "tg.jit(f, static_argnums=...) or static_argnames=..."
            ) from None
        hint = "; floats are not truncated (NumPy refuses them too)" if _is_float(value) else ""
        raise TypeError(
            f"{what} must be an integer, got {type(value).__name__} {value!r}{hint}."
        ) from None


def fraction(value: Any, what: str) -> float:
    """``value`` as a ``float`` when it is a number in ``[0, 1]`` (a probability, a momentum).

    A one-element array or tensor is its number (``number_of``).

    Raises:
        TypeError: a bool, a string, ``None`` or anything else that is not a real number.
        ValueError: a number outside ``[0, 1]``.
    """
    value = number_of(value, what)
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise TypeError(f"{what} must be a number in [0, 1], got {value!r}.")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{what} must be in [0, 1], got {value}.")
    return float(value)


def _is_float(value: Any) -> bool:
    return isinstance(value, float) or getattr(getattr(value, "dtype", None), "kind", "") == "f"


def axis(value: Any, what: str = "axis") -> int | tuple[int, ...] | None:
    """An axis argument: ``None``, one integer, or a sequence of integers (a tuple).

    Raises:
        TypeError: an entry is not an integer (see :func:`integer`).
    """
    if value is None or type(value) is int:
        return value
    if isinstance(value, (tuple, list)):
        return tuple(integer(a, what) for a in value)
    return integer(value, what)


def dims(value: Any, what: str = "shape") -> tuple[int, ...]:
    """A shape argument: one integer or a sequence of integers, as a tuple of ints.

    Raises:
        TypeError: an entry is not an integer (see :func:`integer`).
    """
    if isinstance(value, (tuple, list)):
        return tuple(integer(d, what) for d in value)
    try:
        iter(value)
    except TypeError:
        return (integer(value, what),)
    if hasattr(value, "ndim") and value.ndim == 0:  # a 0-d array is one dimension
        return (integer(value, what),)
    return tuple(integer(d, what) for d in value)


_ELEMENTWISE = {"max": "maximum", "min": "minimum"}


def _is_tensor_like(value: Any) -> bool:
    """A tensor or array (not a NumPy scalar) where an axis goes: PyTorch's elementwise
    ``torch.max(a, b)``."""
    return hasattr(value, "shape") and not isinstance(value, np.generic)


_TORCH_PAIRS = ("max", "min")  # torch's x.max(dim) returns (values, indices); NumPy's values


def check_positional_axis(op: str, value: Any) -> None:
    """Refuse an axis given by position to ``op`` when PyTorch reads that call differently.

    ``x.max(1)`` in PyTorch returns ``(values, indices)``, in NumPy the values only: the
    PyTorch idiom ``_, pred = x.max(1)`` would unpack the values' rows (a wrong result with
    two rows, an unhelpful unpacking error otherwise).

    Raises:
        TypeError: ``op`` is one of those ops; says what to write instead.
    """
    if op in _TORCH_PAIRS and not _is_tensor_like(value):  # a tensor: torch.max(a, b)
        arg = "arg" + op
        raise TypeError(
            f"{op}: pass the axis by keyword, {op}(axis={value!r}): it returns the values "
            f"only (as NumPy does). PyTorch's x.{op}({value!r}) returns (values, indices); "
            f"write x.{op}(axis={value!r}) and x.{arg}(axis={value!r}) for those."
        )


def _axis_param(value: Any, op: str) -> Any:
    try:
        return axis(value, f"{op}: axis")
    except TypeError as err:
        # torch.max(a, b) is elementwise: a tensor (not a NumPy scalar) where the axis goes
        if op in _ELEMENTWISE and _is_tensor_like(value):
            raise TypeError(
                f"{op}: axis must be an integer, got a tensor: {op} reduces one tensor; for "
                f"the elementwise {_ELEMENTWISE[op]} of two tensors (torch.{op}(a, b)) use "
                f"tg.{_ELEMENTWISE[op]}(a, b)."
            ) from err
        raise


def _axes_param(value: Any, op: str) -> Any:
    return axis(value, f"{op}: axes")


def _shape_param(value: Any, op: str) -> Any:
    return dims(value, f"{op}: shape")


def number_of(value: Any, what: str) -> Any:
    """``value``, or for a one-element NumPy or JAX array or tensor its Python number (as
    PyTorch takes a 0-d tensor for a number); anything that is not an array is returned as
    it is (its user checks it).

    Raises:
        TypeError: an array of more than one element, or a traced value (a number
            compiled into an op must be concrete).
    """
    if not (hasattr(value, "shape") and hasattr(value, "__array__")):
        return value
    if isinstance(value, jax.core.Tracer) or isinstance(
        getattr(value, "data", None), jax.core.Tracer
    ):
        raise TypeError(
            f"{what} is a traced value (inside jax.jit, vmap or a tg.jit step); it must be "
            "a concrete number, compiled into the op: pass a Python number, or make the "
            "argument it comes from static."
        )
    if np.size(value) != 1:
        raise TypeError(f"{what} must be a number, got an array of shape {np.shape(value)}.")
    return np.asarray(value).reshape(()).item()


def _number_param(name: str) -> Callable[[Any, str], Any]:
    """The check of a number parameter that an op's kernels take as a static (hashed)
    value: ``number_of``."""

    def check(value: Any, op: str) -> Any:
        return number_of(value, f"{op}: {name}")

    return check


CHECKS: dict[str, Callable[[Any, str], Any]] = {
    "axis": _axis_param,
    "axes": _axes_param,
    "shape": _shape_param,
    **{
        name: _number_param(name)
        for name in (
            "negative_slope",
            "alpha",
            "beta",
            "threshold",
            "eps",
            "label_smoothing",
            "p",
            "scale",
            "value",
            "lambd",
        )
    },
}
"""Op parameter name -> its check ``(value, op name) -> normalised value``."""

_TORCH_KEYWORDS = {
    "dim": "axis",
    "dims": "axis",
    "keepdim": "keepdims",
    "input": "the tensor itself, positionally",
    "size": "shape",
    "p": "ord",
    "unbiased": "ddof=1 for unbiased=True (ddof=0, NumPy's default, is unbiased=False)",
    "correction": "ddof",
}


def torch_keyword(
    names: Iterable[str], where: str, advice: Mapping[str, str] | None = None
) -> TypeError | None:
    """The error for the first of ``names`` that is a PyTorch keyword: one in ``advice``
    (PyTorch's keyword -> what to do in tapegrad, for keywords tapegrad does not take), or
    PyTorch's spelling of a tapegrad keyword (``dim`` for ``axis``, ...); ``None`` when there
    is none."""
    for name in names:
        if advice is not None and name in advice:
            return TypeError(f"{where} got {name}=, a PyTorch keyword; {advice[name]}")
        ours = _TORCH_KEYWORDS.get(name)
        if ours is not None:
            example = f"{ours}=" if ours.isidentifier() else ours
            return TypeError(
                f"{where} got {name}=, PyTorch's spelling; tapegrad follows NumPy: use {example}."
            )
    return None


def _too_many_positional(
    where: str, params: Mapping[str, inspect.Parameter], given: int, order: str | None
) -> TypeError:
    """Too many positional arguments, most likely in PyTorch's positional order: say which
    parameters go by position here and that the rest go by keyword; ``order`` says how
    PyTorch's positional order differs (for the message), when it is known."""
    names = [n for n, p in params.items() if p.kind <= inspect.Parameter.POSITIONAL_OR_KEYWORD]
    keywords = [  # a private keyword (Embedding's _weight, from_pretrained's) is not advertised
        n
        for n, p in params.items()
        if p.kind == inspect.Parameter.KEYWORD_ONLY and not n.startswith("_")
    ]
    shown = [n for n in names if n not in ("self", "cls")]
    offset = len(names) - len(shown)
    why = (
        f"PyTorch's positional order differs for some of them ({order}), so tapegrad takes "
        "them only by keyword."
        if order is not None
        else "tapegrad takes only these by position, so that an argument in another positional "
        "order (PyTorch's) cannot reach the wrong parameter."
    )
    return TypeError(
        f"{where} takes at most {len(shown)} positional argument(s) ({', '.join(shown)}), got "
        f"{given - offset}. Pass the others by keyword"
        + (f" ({', '.join(k + '=' for k in keywords)})" if keywords else "")
        + f": {why}"
    )


def torch_keywords(
    advice: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    order: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function, method or ``__init__``: a PyTorch keyword it does not take raises a
    ``TypeError`` naming the keyword and what to do (``advice``: PyTorch's keyword -> what to
    do; PyTorch's spellings ``dim=``, ``keepdim=``, ... name tapegrad's) instead of Python's
    bare "unexpected keyword argument". Keywords the function takes are passed through. A
    keyword of ``defaults`` given PyTorch's default value there (``bidirectional=False``) is
    dropped: it asks for what tapegrad does. Too many positional arguments raise a
    ``TypeError`` naming the parameters taken by position and the keyword-only ones;
    ``order``, where given, says there how PyTorch's positional order differs ("its SGD's
    fourth parameter is dampening"). On an ``__init__``, the errors name the class of the
    object made (``LSTM()``, not the private base class that defines ``__init__``)."""
    kept = dict(defaults or {})

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        taken = inspect.signature(fn).parameters
        flagged = frozenset({*_TORCH_KEYWORDS, *(advice or {}), *kept} - set(taken))
        where = f"{fn.__qualname__.removesuffix('.__init__')}()"
        init = fn.__name__ == "__init__"
        kinds = [p.kind for p in taken.values()]
        limit = (
            None  # takes any number of positional arguments
            if inspect.Parameter.VAR_POSITIONAL in kinds
            else sum(k <= inspect.Parameter.POSITIONAL_OR_KEYWORD for k in kinds)
        )

        def place(args: tuple[Any, ...]) -> str:
            return f"{type(args[0]).__name__}()" if init and args else where

        @functools.wraps(fn)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            if kwargs and not flagged.isdisjoint(kwargs):
                for k in [k for k in kwargs if k in kept and _is_default(kwargs[k], kept[k])]:
                    del kwargs[k]
                given = (k for k in kwargs if k in flagged)
                raise_instead(torch_keyword(given, place(args), advice))
            if limit is not None and len(args) > limit:
                raise _too_many_positional(place(args), taken, len(args), order)
            return fn(*args, **kwargs)

        return checked

    return decorate


def _is_default(value: Any, default: Any) -> bool:
    """Whether ``value`` is PyTorch's ``default`` (``None``, a bool, a number or a string):
    ``2`` is ``2.0``, but ``1`` is not ``True`` and an array is nothing."""
    if value is default:
        return True
    plain = (int, float, str)
    return (
        not isinstance(value, bool)
        and not isinstance(default, bool)
        and isinstance(value, plain)
        and isinstance(default, plain)
        and value == default
    )


numpy_keywords = torch_keywords()
"""Decorate a function or method that takes ``axis``/``keepdims``: PyTorch's ``dim=`` and
``keepdim=`` raise a ``TypeError`` naming the tapegrad spelling (:func:`torch_keywords`)."""

shape_keywords = torch_keywords(
    {
        "dim0": "pass the two axes by position: x.transpose(0, 1).",
        "dim1": "pass the two axes by position: x.transpose(0, 1).",
        "dims": "pass the axes by position: x.permute(2, 0, 1).",
        "start_dim": "use start= (x.flatten(start=1)).",
        "end_dim": "use end= (x.flatten(0, end=1)).",
        "dim": "pass the axes by position: x.transpose(0, 1), x.permute(2, 0, 1), x.flatten(1).",
    }
)
"""Decorate ``transpose``, ``permute`` and ``flatten`` (the functions and the methods): their
PyTorch keywords (``dim0=``, ``dims=``, ``start_dim=``, ``dim=``, ...) raise a ``TypeError``
saying what to write (:func:`torch_keywords`), and so does ``keepdim=``."""
