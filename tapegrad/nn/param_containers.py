"""Containers of parameters: ``ParameterList`` and ``ParameterDict`` (PyTorch's names).

Their entries are parameters of the container, registered under ``"0"``, ``"1"``, ... or
under their keys, so ``named_parameters()``, ``state_dict()`` and optimizers see them as
PyTorch's do. An entry is converted as PyTorch's ``nn.Parameter(t)`` converts it: a parameter
(a leaf that requires grad, or one frozen with ``requires_grad_(False)``) is kept as it is;
any other tensor becomes a new leaf that requires grad holding the same values
(``t.detach().require_grad()``). Unlike PyTorch's, which also hold other objects as plain
attributes, these hold tensors only: a NumPy or JAX array would silently not train, so it is
refused with what to write instead.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeAlias, overload

from tapegrad._arrays import is_torch
from tapegrad._dtypes import is_float
from tapegrad._tensor import Tensor
from tapegrad.nn.module import Module, _was_parameter

__all__ = ["ParameterList", "ParameterDict"]

Pairs: TypeAlias = "Mapping[str, Tensor] | Iterable[tuple[str, Tensor]]"


def _parameter(owner: str, where: str, value: Any) -> Tensor:
    """``value`` as an entry of ``owner`` (PyTorch's ``nn.Parameter(value)``).

    Raises:
        TypeError: ``value`` is not a tapegrad tensor (an array, a PyTorch tensor, another
            object: the message says how to make one), or is not floating.
    """
    if not isinstance(value, Tensor):
        if is_torch(value):
            how = "convert a PyTorch tensor first: tg.tensor(t)"
        elif hasattr(value, "shape") and hasattr(value, "dtype"):
            how = "wrap an array first: tg.tensor(a)"
        else:
            how = "keep other objects in a plain list or dict attribute"
        raise TypeError(
            f"{owner}: entry {where} is a {type(value).__name__}, not a Tensor; {owner} holds "
            f"tensors, registered as parameters ({how})."
        )
    if value.is_leaf and (value.requires_grad or _was_parameter(value)):
        return value  # a parameter, trainable or frozen, as it is
    if not is_float(value.dtype):
        raise TypeError(
            f"{owner}: entry {where} has dtype {value.dtype}; only floating tensors can be "
            "parameters (they require grad), as in PyTorch: cast it first, "
            "t.astype(tg.float32)."
        )
    return value.detach().require_grad()


def _repr(owner: Module) -> str:
    """PyTorch's repr of a parameter container: a line per entry,
    ``(0): Parameter containing: [float32 of size 3x4]``."""
    lines = [
        f"  ({k}): Parameter containing: [{p.dtype} of size {'x'.join(map(str, p.shape))}]"
        for k, p in owner._parameters.items()
    ]
    body = "".join("\n" + line for line in lines) + ("\n" if lines else "")
    return f"{type(owner).__name__}({body})"


class ParameterList(Module):
    """A list of parameters, registered as ``"0"``, ``"1"``, ... (it has no ``forward``).

    Args:
        values: the initial entries (tensors; see the module docstring for how each is
            converted).

    Raises:
        TypeError: an entry that is not a floating tensor; ``values`` (or ``extend``'s
            argument) that is a tensor or not iterable.
    """

    def __init__(self, values: Iterable[Tensor] | None = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    def _index(self, index: Any) -> str:
        """``index`` (negative counts from the end) as an entry's name, else ``IndexError``."""
        n = len(self._parameters)
        i = operator.index(index)
        if not -n <= i < n:
            raise IndexError(f"ParameterList: index {i} is out of range for {n} entries.")
        return str(i % n)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Tensor]:
        return iter(list(self._parameters.values()))

    @overload
    def __getitem__(self, index: int) -> Tensor: ...

    @overload
    def __getitem__(self, index: slice) -> ParameterList: ...

    def __getitem__(self, index: int | slice) -> Tensor | ParameterList:
        """The entry at ``index`` (negative counts from the end), or a ``ParameterList`` of a
        slice sharing the entries, as PyTorch's."""
        if isinstance(index, slice):
            return ParameterList(list(self._parameters.values())[index])
        return self._parameters[self._index(index)]

    def __setitem__(self, index: int, value: Tensor) -> None:
        """Replace the entry at ``index``, in its place (converted as on ``append``)."""
        name = self._index(index)
        setattr(self, name, _parameter("ParameterList", name, value))

    def append(self, value: Tensor) -> ParameterList:
        """Add ``value`` at the end (converted: see the module docstring); returns ``self``."""
        name = str(len(self._parameters))
        setattr(self, name, _parameter("ParameterList", name, value))
        return self

    def extend(self, values: Iterable[Tensor]) -> ParameterList:
        """Add every entry of ``values`` at the end; returns ``self``.

        Raises:
            TypeError: ``values`` is a tensor or is not iterable (PyTorch's rule), or an
                entry is not a floating tensor.
        """
        if isinstance(values, Tensor) or not isinstance(values, Iterable):
            raise TypeError(
                "ParameterList.extend should be called with an iterable of tensors, but got "
                f"{type(values).__name__}; append(t) adds one tensor."
            )
        for value in values:
            self.append(value)
        return self

    def __iadd__(self, values: Iterable[Tensor]) -> ParameterList:
        return self.extend(values)

    def __repr__(self) -> str:
        return _repr(self)


def _key(key: Any) -> str:
    """``key`` when it can name a parameter.

    Raises:
        TypeError: not a string (PyTorch's rule).
        KeyError: empty or dotted (a dotted key would make state-dict keys that cannot be
            told apart).
    """
    if not isinstance(key, str):
        raise TypeError(
            f"ParameterDict: keys are strings, got {type(key).__name__} {key!r}; use str(key)."
        )
    if not key or "." in key:
        raise KeyError(
            f"ParameterDict: keys are non-empty strings without '.', got {key!r}; use '_' in "
            "place of '.'."
        )
    return key


class ParameterDict(Module):
    """A dict of parameters registered under their keys, in insertion order.

    Args:
        parameters: a mapping, or an iterable of ``(key, tensor)`` pairs (see ``update``
            for the order; the module docstring for how each tensor is converted).

    Raises:
        TypeError: a key that is not a string; a value that is not a floating tensor.
        KeyError: a key that is empty, contains ``"."``, or names an attribute or method of
            the dict (``"training"``, ``"keys"``, ...).
    """

    def __init__(
        self,
        parameters: ParameterDict
        | Mapping[str, Tensor]
        | Iterable[tuple[str, Tensor]]
        | None = None,
    ) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Tensor:
        return self._parameters[key]

    def __setitem__(self, key: str, value: Tensor) -> None:
        """Add or replace the entry ``key`` (a replaced key keeps its place)."""
        name = _key(key)
        if name not in self._parameters and (name in self.__dict__ or hasattr(type(self), name)):
            raise KeyError(
                f"ParameterDict: the key {name!r} is an attribute or method of the dict "
                "(PyTorch refuses it too); pick another key."
            )
        setattr(self, name, _parameter("ParameterDict", repr(name), value))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __contains__(self, key: object) -> bool:
        return key in self._parameters

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._parameters))

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._parameters))

    def keys(self) -> list[str]:
        """The keys, in insertion order."""
        return list(self._parameters)

    def values(self) -> list[Tensor]:
        """The parameters, in insertion order."""
        return list(self._parameters.values())

    def items(self) -> list[tuple[str, Tensor]]:
        """``(key, parameter)`` pairs, in insertion order."""
        return list(self._parameters.items())

    def get(self, key: str, default: Any = None) -> Any:
        """The parameter at ``key``, or ``default`` when there is none."""
        return self._parameters.get(key, default)

    def pop(self, key: str) -> Tensor:
        """Remove the entry ``key`` and return its parameter (``KeyError`` if there is none)."""
        return self._parameters.pop(key)

    def popitem(self) -> tuple[str, Tensor]:
        """Remove and return the last ``(key, parameter)`` pair (``KeyError`` when empty)."""
        return self._parameters.popitem()

    def setdefault(self, key: str, default: Tensor) -> Tensor:
        """The parameter at ``key``; when there is none, ``default`` stored there first."""
        if key not in self._parameters:
            self[key] = default
        return self._parameters[key]

    def clear(self) -> None:
        """Remove every entry."""
        self._parameters.clear()

    def copy(self) -> ParameterDict:
        """A new ``ParameterDict`` sharing the parameters, in the same order."""
        return ParameterDict(OrderedDict(self._parameters))

    def update(
        self,
        parameters: ParameterDict | Pairs,
    ) -> None:
        """Add or replace entries, as PyTorch's: an ``OrderedDict`` or a ``ParameterDict`` in
        its order, another mapping (a ``dict``) in the sorted order of its keys, an iterable
        of ``(key, tensor)`` pairs in its order.

        Raises:
            TypeError: ``parameters`` is not iterable, or a pair is not iterable.
            ValueError: a pair that is not of length 2.
        """
        if not isinstance(parameters, Iterable):
            raise TypeError(
                "ParameterDict.update should be called with a mapping or an iterable of "
                f"(key, tensor) pairs, but got {type(parameters).__name__}."
            )
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs: Iterable[Any] = list(parameters.items())
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())  # PyTorch's order for a plain mapping
        else:
            pairs = parameters
        for j, pair in enumerate(pairs):
            if not isinstance(pair, Iterable):
                raise TypeError(
                    f"ParameterDict.update: element #{j} should be a (key, tensor) pair, got "
                    f"{type(pair).__name__}."
                )
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(
                    f"ParameterDict.update: element #{j} has length {len(pair)}; 2 is required "
                    "(key, tensor)."
                )
            self[pair[0]] = pair[1]

    def __or__(self, other: ParameterDict) -> ParameterDict:
        """A new ``ParameterDict``: this one's entries updated with ``other``'s."""
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self

    def __repr__(self) -> str:
        return _repr(self)
