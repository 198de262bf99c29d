"""Containers of modules: ``Sequential``, ``ModuleList``, ``ModuleDict`` (PyTorch's names)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from tapegrad.nn.module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _check(owner: str, i: Any, m: Any) -> Module:
    if not isinstance(m, Module):
        raise TypeError(f"{owner}: entry {i} is a {type(m).__name__}, not a Module.")
    return m


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
                setattr(self, name, _check("Sequential", repr(name), layer))
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
        name = list(self._modules)[index]
        setattr(self, name, _check("ModuleList", index, module))


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
        setattr(self, name, _check("ModuleDict", repr(name), module))

    def __delitem__(self, name: str) -> None:
        delattr(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self._modules

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._modules))

    def keys(self) -> list[str]:
        """The names, in insertion order."""
        return list(self._modules)

    def values(self) -> list[Module]:
        """The modules, in insertion order."""
        return list(self._modules.values())

    def items(self) -> list[tuple[str, Module]]:
        """``(name, module)`` pairs, in insertion order."""
        return list(self._modules.items())
