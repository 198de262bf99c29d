"""The ``Module`` protocol: registration, traversal, modes, state dicts, devices.

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

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._arrays import deleted
from tapegrad._placement import check_fits, resolve
from tapegrad._tensor import Tensor, zero_grads
from tapegrad.errors import ShapeError, donated_error

__all__ = ["Module", "LoadResult"]

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
        ...         self.fc1 = nn.Linear(64, 32)
        ...         self.fc2 = nn.Linear(32, 10)
        ...     def forward(self, x: Tensor) -> Tensor:
        ...         return self.fc2(self.fc1(x).relu())

    Attributes:
        training: ``True`` after ``train()`` (the default), ``False`` after ``eval()``.
            ``Dropout`` and ``BatchNorm`` read it; ``eval()`` does not turn recording off
            (use ``tg.no_grad()`` for that).
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
        zero_grads(self.parameters(), set_to_none)

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

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Make every parameter require grad (or stop requiring it: freeze the module).

        A frozen parameter stays a parameter (``parameters()``, ``state_dict()``); a
        backward writes no ``.grad`` to it and optimizers skip it, as in PyTorch.

        Returns:
            ``self``.
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def to(self, device: Any) -> Module:
        """Move every parameter and buffer to ``device`` (a ``jax.Device``, a sharding, an
        index into ``jax.devices()`` or a string such as ``"cpu:2"``), in place: each keeps
        its tensor object and its tape node, as ``t.data = ...`` does; a ``.grad`` moves with
        its parameter, and gradients of a later backward land on the same device. (Make
        optimizers after moving the model: their state stays where it was made.)

        Returns:
            ``self``.

        Raises:
            DeviceError: the device does not exist, or a sharding does not divide the shape
                of a parameter (checked for all of them before any moves).
        """
        tensors = (*self.parameters(), *self.buffers())
        dest = resolve(device, "Module.to")
        for t in tensors:
            check_fits(dest, t.shape, "Module.to")
        for t in tensors:
            t.data = jax.device_put(t.data, dest)
            if t.grad is not None:  # the gradient moves with its parameter, as in PyTorch
                t.grad = Tensor(jax.device_put(t.grad.data, dest))
        return self

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every sub-module and then on this one (PyTorch's order), e.g. to
        re-initialise weights.

        Returns:
            ``self``.
        """
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ state dict

    def _state_entries(self) -> Iterator[tuple[str, Tensor]]:
        """Parameters and buffers in PyTorch's ``state_dict`` order: each module's own
        parameters, then its own buffers, then its sub-modules'; a shared tensor once."""
        seen: set[int] = set()
        for module_name, module in self.named_modules():
            prefix = f"{module_name}." if module_name else ""
            for registry in ("_parameters", "_buffers"):
                for name, tensor in module.__dict__[registry].items():
                    if id(tensor) not in seen:
                        seen.add(id(tensor))
                        yield prefix + name, tensor

    def state_dict(self) -> dict[str, Tensor]:
        """A snapshot of every parameter and buffer by dotted name (PyTorch's names and
        order), as tensors that do not require grad.

        JAX arrays are immutable and an eager optimizer step replaces a parameter's array
        rather than writing into it, so the snapshot keeps the values of this moment (no copy
        is made, and none is needed). A ``tg.jit`` step with ``donate=True`` (the default)
        donates those arrays, as ``jax.jit`` does: to keep a snapshot across such steps, save
        it (``tg.save``) or copy it to the host (``{k: v.numpy() for k, v in ...}``) first.
        """
        return {name: t.detach() for name, t in self._state_entries()}

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> LoadResult:
        """Replace parameter and buffer values from ``state_dict``: name -> a Tensor, a JAX
        or NumPy array, or a ``torch.Tensor`` (a PyTorch ``state_dict()`` loads unchanged).

        Everything is checked before anything is written: on an error the module is left
        exactly as it was. Parameters keep their tape nodes (``p.data = value``); values are
        cast to each entry's dtype, as PyTorch's ``copy_`` does.

        Args:
            state_dict: values by dotted name, e.g. from ``state_dict()`` or ``tg.load``.
            strict: raise when names are missing or unexpected.

        Returns:
            The missing and unexpected names (both empty when ``strict``).

        Raises:
            KeyError: ``strict`` and names are missing or unexpected (all are listed).
            ShapeError: values whose shapes differ from their entries' (all are listed).
            TypeError: a value that is not an array or a tensor.
        """
        targets = dict(self._state_entries())
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        if strict and (missing or unexpected):
            raise KeyError(
                f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}; "
                "nothing was loaded. Pass strict=False to load the keys that match."
            )
        new: list[tuple[Tensor, jax.Array]] = []
        wrong: list[str] = []
        for name, target in targets.items():
            if name not in state_dict:
                continue
            array = _as_array(name, state_dict[name], target.dtype)
            if tuple(array.shape) != target.shape:
                wrong.append(f"{name!r}: {tuple(array.shape)} given, {target.shape} expected")
            new.append((target, array))
        if wrong:
            raise ShapeError(
                "load_state_dict: shapes differ from the module's (nothing was loaded): "
                + "; ".join(wrong)
                + ". Build the module with the sizes the checkpoint was saved with."
            )
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


def _as_array(name: str, value: Any, dtype: Any) -> jax.Array:
    """``value`` (Tensor, JAX/NumPy array, ``torch.Tensor``) as a JAX array of ``dtype``, a copy
    of a NumPy or torch value (``jnp.asarray`` may share a CPU buffer: later in-place changes
    to the source would change the parameter, as ``torch.Tensor.copy_`` never lets them).

    Raises:
        RuntimeError: ``value`` is an array a ``tg.jit`` step donated (deleted).
    """
    if isinstance(value, Tensor):
        value = value.data
    elif not isinstance(value, (jax.Array, np.ndarray)) and hasattr(value, "detach"):
        value = value.detach().cpu().numpy()  # a torch.Tensor, without importing torch
    if deleted(value):
        raise donated_error(f"load_state_dict: {name!r}")
    try:
        return jnp.array(value, dtype=dtype, copy=isinstance(value, np.ndarray))
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"load_state_dict: {name!r} is a {type(value).__name__}, not an array ({err}); "
            "pass tensors or arrays, e.g. from state_dict() or tg.load()."
        ) from None
