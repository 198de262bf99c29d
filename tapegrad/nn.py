"""The small module surface of a training loop: Module, Linear, Sequential, ReLU, Tanh.

A :class:`Module` registers what is assigned to its attributes, as PyTorch's does:

- a ``Tensor`` that is a leaf requiring grad is a **parameter** (``parameters()``,
  ``named_parameters()``, ``state_dict()``); there is no separate ``Parameter`` class;
- another ``Tensor`` that does not require grad is a **buffer** (in ``state_dict()``, not
  in ``parameters()``);
- a ``Module`` is a **sub-module** (its parameters are listed under ``"name."``);
- anything else, including the output of a recorded op, is a plain attribute.

Parameters are ordinary tape leaves: an optimizer step replaces their value with
``p.data = new`` and keeps their node (``tapegrad.optim``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, overload

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._arrays import prng_key
from tapegrad._tensor import Tensor
from tapegrad.errors import ShapeError

__all__ = ["Module", "Linear", "Sequential", "ReLU", "Tanh", "LoadResult"]

_REGISTRIES = ("_parameters", "_buffers", "_modules")


class LoadResult(NamedTuple):
    """What ``load_state_dict(strict=False)`` did not match (PyTorch's ``_IncompatibleKeys``).

    Attributes:
        missing_keys: names of the module's entries the state dict lacks.
        unexpected_keys: names in the state dict the module does not have.
    """

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of layers and models: subclass it, assign layers and tensors, write ``forward``.

    Example:
        >>> class MLP(Module):
        ...     def __init__(self) -> None:
        ...         super().__init__()
        ...         self.fc1 = Linear(64, 32, key=0)
        ...         self.fc2 = Linear(32, 10, key=1)
        ...     def forward(self, x: Tensor) -> Tensor:
        ...         return self.fc2(self.fc1(x).relu())

    Attributes:
        training: ``True`` after ``train()`` (the default), ``False`` after ``eval()``. The
            layers here behave the same in both modes; the flag is for user modules.
    """

    training: bool
    _parameters: dict[str, Tensor]
    _buffers: dict[str, Tensor]
    _modules: dict[str, Module]

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    # ------------------------------------------------------------------ registration

    def __setattr__(self, name: str, value: Any) -> None:
        if "_modules" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() ran; call "
                "super().__init__() first in your module's __init__."
            )
        for registry in _REGISTRIES:
            self.__dict__[registry].pop(name, None)
        if isinstance(value, Module):
            self.__dict__.pop(name, None)
            self._modules[name] = value
        elif isinstance(value, Tensor) and value.requires_grad and value.is_leaf:
            self.__dict__.pop(name, None)
            self._parameters[name] = value
        elif isinstance(value, Tensor) and not value.requires_grad:
            self.__dict__.pop(name, None)
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Called only when normal lookup fails: registered entries live in the registries.
        d = self.__dict__
        for registry in _REGISTRIES:
            entries = d.get(registry)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for registry in _REGISTRIES:
            entries = self.__dict__[registry]
            if name in entries:
                del entries[name]
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        for registry in _REGISTRIES:
            names.update(self.__dict__[registry])
        return sorted(names)

    # ------------------------------------------------------------------ traversal

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Direct sub-modules with their attribute names, in assignment order, each once."""
        seen: set[int] = set()
        for name, module in self._modules.items():
            if id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        """Direct sub-modules, in assignment order, each once."""
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every sub-module (each once), depth first, with dotted names.

        Args:
            prefix: prepended to every name (the root itself is named ``prefix``).
        """
        seen: set[int] = set()
        stack: list[tuple[str, Module]] = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [
                (f"{name}.{child_name}" if name else child_name, child)
                for child_name, child in module._modules.items()
            ]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        """This module and every sub-module (each once), depth first."""
        for _, module in self.named_modules():
            yield module

    def _named_tensors(
        self, registry: str, prefix: str, recurse: bool
    ) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            entries: dict[str, Tensor] = module.__dict__[registry]
            for name, tensor in entries.items():
                if id(tensor) in seen:
                    continue
                seen.add(id(tensor))
                yield (f"{module_name}.{name}" if module_name else name), tensor

    def named_parameters(
        self, prefix: str = "", recurse: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        """Parameters with dotted names (``"0.weight"``), each shared tensor once.

        Args:
            prefix: prepended to every name.
            recurse: include the parameters of sub-modules.
        """
        return self._named_tensors("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        """The parameters (leaf tensors that require grad), each shared tensor once.

        Args:
            recurse: include the parameters of sub-modules.
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        """Buffers (tensor attributes that do not require grad) with dotted names."""
        return self._named_tensors("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Buffers (tensor attributes that do not require grad)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ training state

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter.

        Args:
            set_to_none: set ``.grad`` to ``None`` (PyTorch's default; frees the arrays);
                with ``False``, set it to zeros of the parameter's shape and dtype.
        """
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = Tensor(jnp.zeros_like(p.data))

    def train(self, mode: bool = True) -> Module:
        """Set ``training`` on this module and every sub-module.

        Returns:
            ``self``.
        """
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """``train(False)``. It does not turn grad mode off: wrap evaluation in
        ``tg.no_grad()`` or every op it runs is recorded on the tape.

        Returns:
            ``self``.
        """
        return self.train(False)

    # ------------------------------------------------------------------ state dict

    def state_dict(self) -> dict[str, Tensor]:
        """A snapshot of every parameter and buffer by dotted name, as tensors that do not
        require grad: parameters first, then buffers; a shared tensor under its first name.

        JAX arrays are immutable and an optimizer step replaces a parameter's array rather
        than writing into it, so the snapshot keeps the values of this moment (no copy is
        made, and none is needed).
        """
        out: dict[str, Tensor] = {}
        for name, p in self.named_parameters():
            out[name] = p.detach()
        for name, b in self.named_buffers():
            out[name] = b.detach()
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> LoadResult:
        """Replace parameter and buffer values from ``state_dict`` (name -> Tensor or array).

        Parameters keep their tape nodes (``p.data = value``); values are cast to each
        entry's dtype, as PyTorch's ``copy_`` does.

        Args:
            state_dict: values by dotted name, e.g. from ``state_dict()``.
            strict: raise when names are missing or unexpected.

        Returns:
            The missing and unexpected names (both empty when ``strict``).

        Raises:
            KeyError: ``strict`` and names do not match; nothing is changed.
            ShapeError: a value's shape differs from its entry's; nothing is changed.
        """
        targets = dict(self.named_parameters())
        targets.update(self.named_buffers())
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        if strict and (missing or unexpected):
            raise KeyError(
                f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}; "
                "pass strict=False to load the keys that match."
            )
        new: list[tuple[Tensor, jax.Array]] = []
        for name, target in targets.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            if isinstance(value, Tensor):
                value = value.data
            array = jnp.asarray(value, dtype=target.dtype)
            if tuple(array.shape) != target.shape:
                raise ShapeError(
                    f"load_state_dict: {name!r} has shape {tuple(array.shape)} in the state "
                    f"dict, but the module's is {target.shape}."
                )
            new.append((target, array))
        for target, array in new:
            target.data = array
        return LoadResult(missing, unexpected)

    # ------------------------------------------------------------------ calling

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; subclasses override it. Call the module, not ``forward``."""
        raise NotImplementedError(f"{type(self).__name__} must define forward().")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr()``."""
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, child in self._modules.items():
            child_repr = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child_repr}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n" + "\n".join(lines) + "\n)"


class Linear(Module):
    """``y = x @ weight + bias``: x (..., in_features) -> y (..., out_features).

    Initialisation as PyTorch's default: weight and bias uniform in ``[-k, k]`` with
    ``k = 1 / sqrt(in_features)`` (``k = 0`` when ``in_features == 0``).

    Args:
        in_features: size of the last input axis.
        out_features: size of the last output axis.
        bias: add a learned bias.
        key: an int seed or a ``jax.random`` key (required: initialisation is explicit).
        dtype: a floating dtype for the parameters (float32 by default).

    Attributes:
        weight: parameter of shape ``(in_features, out_features)`` (the transpose of
            PyTorch's layout, so the forward is a plain ``x @ weight``).
        bias: parameter of shape ``(out_features,)``, or ``None``.

    Raises:
        ValueError: a negative size.
        TypeError: ``key`` is neither an int nor a key, or ``dtype`` is not floating.
    """

    weight: Tensor
    bias: Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        bias: bool = True,
        key: Any,
        dtype: Any = jnp.float32,
    ) -> None:
        super().__init__()
        if in_features < 0 or out_features < 0:
            raise ValueError(f"Linear({in_features}, {out_features}): sizes must be non-negative.")
        if not jnp.issubdtype(dtype, jnp.floating):
            raise TypeError(f"Linear: dtype must be floating, got {np.dtype(dtype)}.")
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        k = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        # One draw for weight and bias (one compiled sampler per layer shape, not two).
        rows = in_features + (1 if bias else 0)
        u = jax.random.uniform(prng_key(key), (rows, out_features), dtype, minval=-k, maxval=k)
        self.weight = Tensor(u[:in_features]).require_grad()
        self.bias = Tensor(u[in_features]).require_grad() if bias else None

    def forward(self, x: Tensor) -> Tensor:
        """Apply the layer to ``x`` of shape ``(..., in_features)``."""
        y = x @ self.weight
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Sequential(Module):
    """Modules applied in order; sub-modules are named ``"0"``, ``"1"``, ...

    Args:
        *modules: the layers, applied first to last.
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: argument {i} is a {type(m).__name__}, not a Module.")
            setattr(self, str(i), m)

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
        """The layer at ``index``, or a ``Sequential`` of a slice (sharing the layers)."""
        mods = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*mods[index])
        return mods[index]


class ReLU(Module):
    """Elementwise ``max(x, 0)`` (subgradient 0 at 0, as JAX)."""

    def forward(self, x: Tensor) -> Tensor:
        """Apply ReLU elementwise."""
        return x.relu()


class Tanh(Module):
    """Elementwise hyperbolic tangent."""

    def forward(self, x: Tensor) -> Tensor:
        """Apply tanh elementwise."""
        return x.tanh()
