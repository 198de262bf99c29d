"""Containers of modules: ``Sequential``, ``ModuleList``, ``ModuleDict`` (PyTorch's names)."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from tapegrad.nn.module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _check(owner: str, i: Any, m: Any) -> Module:
    if not isinstance(m, Module):
        raise TypeError(f"{owner}: entry {i} is a {type(m).__name__}, not a Module.")
    return m


def _renumber(owner: Module, modules: list[Module]) -> None:
    """Register ``modules`` as ``owner``'s only sub-modules, named ``"0"``, ``"1"``, ...
    (what PyTorch's containers do after a deletion or an insertion)."""
    owner._modules.clear()
    for i, m in enumerate(modules):
        owner._modules[str(i)] = m


def _name(owner: str, name: Any) -> str:
    """``name`` when it can name a sub-module: a non-empty string without ``"."`` (a dotted
    name would make state-dict keys that cannot be told apart), else ``KeyError`` as
    PyTorch's."""
    if not isinstance(name, str) or not name or "." in name:
        raise KeyError(
            f"{owner}: module names are non-empty strings without '.', got {name!r}; "
            "use '_' in place of '.'."
        )
    return name


def _position(owner: Module, index: int) -> int:
    """``index`` (negative counts from the end) as a position in ``owner``, else
    ``IndexError``."""
    n = len(owner._modules)
    i = operator.index(index)
    if not -n <= i < n:
        raise IndexError(f"{type(owner).__name__}: index {i} is out of range for {n} modules.")
    return i % n


class Sequential(Module):
    """Modules applied in order; sub-modules are named ``"0"``, ``"1"``, ..., or by the keys of
    one mapping given instead (PyTorch's ``Sequential(OrderedDict(...))``).

    Args:
        *modules: the layers, applied first to last; or one mapping of names to layers (its
            order is the order applied).

    Raises:
        TypeError: an argument (or a value of the mapping) is not a ``Module``.
    """

    def __init__(self, *modules: Module | Mapping[str, Module]) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], Mapping):
            for name, layer in modules[0].items():
                setattr(self, _name("Sequential", name), _check("Sequential", repr(name), layer))
        else:
            for i, m in enumerate(modules):
                setattr(self, str(i), _check("Sequential", i, m))

    def forward(self, x: Any) -> Any:
        """Feed ``x`` through every layer in order."""
        for m in self._modules.values():
            x = m(x)
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> Sequential: ...

    def __getitem__(self, index: int | slice) -> Module:
        """The layer at ``index`` (its position), or a ``Sequential`` of a slice sharing the
        layers under their names (PyTorch's: ``seq[1:]``'s state dict keeps the keys of
        ``seq``'s)."""
        if isinstance(index, slice):
            return Sequential(dict(list(self._modules.items())[index]))
        return list(self._modules.values())[index]

    def __setitem__(self, index: int, module: Module) -> None:
        """Replace the layer at ``index``; it keeps the name and place of the one replaced."""
        name = list(self._modules)[_position(self, index)]
        setattr(self, name, _check("Sequential", index, module))

    def __delitem__(self, index: int | slice) -> None:
        """Remove the layer(s) at ``index``; the rest are renamed ``"0"``, ``"1"``, ... in
        order, as PyTorch's (``del model.classifier[-1]``)."""
        mods = list(self._modules.values())
        del mods[index if isinstance(index, slice) else _position(self, index)]
        _renumber(self, mods)

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end, named by its position; returns ``self``."""
        setattr(self, str(len(self._modules)), _check("Sequential", len(self._modules), module))
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        """Add every module of ``modules`` at the end; returns ``self``."""
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Put ``module`` before position ``index``; the layers are renamed ``"0"``, ``"1"``,
        ... in order; returns ``self``.

        Raises:
            IndexError: ``index`` outside ``[-len(self), len(self)]`` (PyTorch's; a list
                would clamp it).
        """
        n = len(self._modules)
        if not -n <= operator.index(index) <= n:
            raise IndexError(
                f"Sequential.insert: index {index} is out of range for {n} modules "
                f"(-{n} to {n}); append() adds at the end."
            )
        mods = list(self._modules.values())
        mods.insert(index, _check("Sequential", index, module))
        _renumber(self, mods)
        return self

    def pop(self, index: int | slice = -1) -> Module:
        """Remove and return the layer at ``index`` (the last by default; a slice gives a
        ``Sequential`` of the layers removed, as PyTorch's)."""
        module = self[index if isinstance(index, slice) else _position(self, index)]
        del self[index]
        return module


class ModuleList(Module):
    """A list of modules, registered as ``"0"``, ``"1"``, ... (it has no ``forward``).

    Args:
        modules: the initial modules.

    Raises:
        TypeError: an entry is not a ``Module``.
    """

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        super().__init__()
        self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end; returns ``self``."""
        setattr(self, str(len(self._modules)), _check("ModuleList", len(self._modules), module))
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Add every module of ``modules`` at the end; returns ``self``."""
        for m in modules:
            self.append(m)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(list(self._modules.values()))

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> ModuleList: ...

    def __getitem__(self, index: int | slice) -> Module:
        """The module at ``index`` (negative indices count from the end), or a
        ``ModuleList`` of a slice (sharing the modules), as PyTorch's."""
        mods = list(self._modules.values())
        if isinstance(index, slice):
            return ModuleList(mods[index])
        return mods[index]

    def __setitem__(self, index: int, module: Module) -> None:
        """Replace the module at ``index`` (negative counts from the end), in its place."""
        name = list(self._modules)[_position(self, index)]
        setattr(self, name, _check("ModuleList", index, module))

    def __delitem__(self, index: int | slice) -> None:
        """Remove the module(s) at ``index``; the rest are renumbered in order."""
        mods = list(self._modules.values())
        del mods[index if isinstance(index, slice) else _position(self, index)]
        _renumber(self, mods)

    def insert(self, index: int, module: Module) -> None:
        """Put ``module`` before position ``index`` (``list.insert``); renumbers the rest."""
        mods = list(self._modules.values())
        mods.insert(index, _check("ModuleList", index, module))
        _renumber(self, mods)

    def pop(self, index: int | slice = -1) -> Module:
        """Remove and return the module at ``index`` (the last by default; a slice gives a
        ``ModuleList`` of the modules removed, as PyTorch's)."""
        module = self[index if isinstance(index, slice) else _position(self, index)]
        del self[index]
        return module

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        """A new ``ModuleList`` of this one's modules then ``other``'s (sharing them)."""
        return ModuleList([*self, *other])


class ModuleDict(Module):
    """A dict of modules registered under their keys, in insertion order.

    Args:
        modules: a mapping or an iterable of ``(name, module)`` pairs.

    Raises:
        TypeError: a value is not a ``Module``.
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] = ()) -> None:
        super().__init__()
        self.update(modules)

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add or replace entries from a mapping or ``(name, module)`` pairs."""
        items = modules.items() if isinstance(modules, Mapping) else modules
        for name, m in items:
            self[name] = m

    def __getitem__(self, name: str) -> Module:
        return self._modules[name]

    def __setitem__(self, name: str, module: Module) -> None:
        setattr(self, _name("ModuleDict", name), _check("ModuleDict", repr(name), module))

    def __delitem__(self, name: str) -> None:
        delattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._modules))

    def pop(self, name: str) -> Module:
        """Remove the entry ``name`` and return its module (``KeyError`` if there is none)."""
        module = self._modules[name]
        delattr(self, name)
        return module

    def clear(self) -> None:
        """Remove every entry."""
        for name in list(self._modules):
            delattr(self, name)

    def keys(self) -> list[str]:
        """The names, in insertion order."""
        return list(self._modules)

    def values(self) -> list[Module]:
        """The modules, in insertion order."""
        return list(self._modules.values())

    def items(self) -> list[tuple[str, Module]]:
        """``(name, module)`` pairs, in insertion order."""
        return list(self._modules.items())
