"""The ``Module`` protocol: registration, traversal, modes, state dicts, devices.

A :class:`Module` registers what is assigned to its attributes, as PyTorch's does:

- a ``Tensor`` that is a leaf requiring grad is a **parameter** (``parameters()``,
  ``named_parameters()``, ``state_dict()``); there is no separate ``Parameter`` class;
- another ``Tensor`` that does not require grad is a **buffer** (in ``state_dict()``, not
  in ``parameters()``), persistent unless ``register_buffer(name, t, persistent=False)``
  declared the name; assigning a tensor that does not require grad, or ``None``, to a name
  already registered as a buffer keeps it that buffer (persistent or not), as in PyTorch;
- a ``Module`` is a **sub-module** (its parameters are listed under ``"name."``);
- anything else, including the output of a recorded op, is a plain attribute.

Unlike PyTorch, a tensor that does not require grad assigned to a new name is a (persistent)
buffer without ``register_buffer``: running statistics and masks are saved with the model. A
tensor a model only caches (``self.last_out = y.detach()`` in ``forward``) is declared once
in ``__init__`` with ``self.register_buffer("last_out", None, persistent=False)``: it stays
out of ``state_dict()``, so checkpoints load into a fresh model.

Parameters are ordinary tape leaves: an optimizer step replaces their value with
``p.data = new`` and keeps their node (``tapegrad.optim``).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from tapegrad._dtypes import is_float
from tapegrad._placement import check_fits, resolve
from tapegrad._tensor import Tensor, zero_grads
from tapegrad.nn._cast import cast_in_place, float_dtype, is_dtype
from tapegrad.nn._state import plan_load, state_entries

__all__ = ["Module", "LoadResult", "RemovableHandle"]

_REGISTRIES = ("_parameters", "_buffers", "_modules")

_PARAMETERS: dict[int, weakref.ref[Tensor]] = {}
"""Tensors that have been a module's parameter, by ``id``, held weakly: a frozen one
(``requires_grad_(False)``) is still a parameter where it is assigned next, as PyTorch's
``nn.Parameter`` keeps its type (``head.weight = frozen_embedding.weight``), while a tensor
that never was one is refused at a parameter's name (``fc.weight = tg.tensor(w)``)."""


def _remember(t: Tensor) -> None:
    """Note ``t`` as a parameter (``_PARAMETERS``); its entry goes when ``t`` does."""
    key = id(t)
    ref = _PARAMETERS.get(key)
    if ref is None or ref() is not t:

        def forget(dead: weakref.ref[Tensor]) -> None:
            if _PARAMETERS.get(key) is dead:
                del _PARAMETERS[key]

        _PARAMETERS[key] = weakref.ref(t, forget)


def _was_parameter(value: Any) -> bool:
    """Whether ``value`` is a tensor that has been a module's parameter."""
    ref = _PARAMETERS.get(id(value))
    return ref is not None and ref() is value


class LoadResult(NamedTuple):
    """What ``load_state_dict(strict=False)`` did not match (PyTorch's ``_IncompatibleKeys``).

    Attributes:
        missing_keys: names of the module's entries the state dict lacks.
        unexpected_keys: names in the state dict the module does not have.
    """

    missing_keys: list[str]
    unexpected_keys: list[str]


class RemovableHandle:
    """What ``register_forward_hook`` / ``register_forward_pre_hook`` return (PyTorch's):
    ``remove()`` unregisters the hook (again: nothing); also a context manager that removes
    it on exit."""

    def __init__(self, module: Module, kind: str, key: int) -> None:
        self._module = weakref.ref(module)  # a handle kept past its module holds nothing
        self._kind = kind
        self.id = key

    def remove(self) -> None:
        """Unregister the hook."""
        module = self._module()
        hooks = None if module is None else module.__dict__.get(self._kind)
        if module is not None and hooks is not None and hooks.pop(self.id, None) is not None:
            if not hooks:  # the last one: calls take the plain path again
                object.__setattr__(module, self._kind, None)
            _hooks_changed(module)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


_HOOK_IDS = itertools.count()  # keys of registered hooks, unique in the process


def _hooks_changed(module: Module) -> None:
    """Count a change of ``module``'s hooks in ``_hooks_version``: a number of the module's,
    which a ``tg.jit`` step compares between calls, so that it traces again with the hooks
    as they are now."""
    object.__setattr__(module, "_hooks_version", module.__dict__.get("_hooks_version", 0) + 1)


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
    # made on first registration (modules without hooks pay two class lookups per call)
    _forward_hooks: dict[int, Callable[..., Any]] | None = None
    _forward_pre_hooks: dict[int, Callable[..., Any]] | None = None
    _parameters: dict[str, Tensor]
    _buffers: dict[str, Tensor | None]
    _modules: dict[str, Module]
    _non_persistent: set[str]

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_hooks_version", 0)  # changes of the hooks (``tg.jit``)

    # ------------------------------------------------------------------ registration

    def __setattr__(self, name: str, value: Any) -> None:
        if "_modules" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() ran; call "
                "super().__init__() first in your module's __init__."
            )
        buffers = self._buffers
        if name in buffers and (value is None or _is_buffer_value(value)):
            buffers[name] = value  # a registered buffer stays one, in its place (PyTorch's)
            return
        if isinstance(value, Module):
            target: str | None = "_modules"
        elif (
            isinstance(value, Tensor)
            and value.is_leaf
            and (value.requires_grad or _was_parameter(value))
        ):
            target = "_parameters"
            _remember(value)
        elif _is_buffer_value(value):
            target = "_buffers"
        else:
            target = None
        if name in self._parameters and target != "_parameters" and value is not None:
            raise TypeError(  # PyTorch's rule: a tensor would silently become a frozen buffer
                f"cannot assign a {type(value).__name__} that is not a leaf tensor requiring "
                f"grad as parameter {name!r} of {type(self).__name__}: it would stop training. "
                "Assign a parameter "
                f"(self.{name} = t.detach().require_grad()), set its value in place "
                f"(self.{name}.data = t), or del self.{name} first to store a buffer there."
            )
        # A name already in its registry is replaced where it is (PyTorch's dict assignment):
        # ``model.fc = new_head`` and ``layers[1] = m`` keep the order of ``state_dict()``,
        # ``named_parameters()`` and iteration.
        for registry in _REGISTRIES:
            if registry != target:
                self.__dict__[registry].pop(name, None)
        if target is None:
            object.__setattr__(self, name, value)
        else:
            self.__dict__.pop(name, None)
            self.__dict__[target][name] = value

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy's or an unpickled module's state (``copy.deepcopy``, ``pickle``): its
        parameters are parameters where they are assigned next (``_PARAMETERS``)."""
        self.__dict__.update(state)
        for param in state.get("_parameters", {}).values():
            if param is not None:
                _remember(param)

    def __getattr__(self, name: str) -> Any:
        # Called only when normal lookup fails: registered entries live in the registries.
        d = self.__dict__
        for registry in _REGISTRIES:
            entries = d.get(registry)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        self._non_persistent.discard(name)
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

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register ``tensor`` (or ``None``, a slot filled later) as the buffer ``name``
        (PyTorch's method): listed by ``buffers()``, moved by ``to()``, carried by ``tg.jit``
        steps, and saved by ``state_dict()`` unless ``persistent`` is ``False``.

        A non-persistent buffer is what a model caches, e.g. ``self.last_out = y.detach()``
        in ``forward``: ``state_dict()`` leaves it out and ``load_state_dict`` does not expect
        it. The name stays non-persistent for every later assignment until it is deleted
        (``del module.name``) or registered again; a ``None`` buffer is in no listing.

        Args:
            name: the attribute name (no ``"."``).
            tensor: a tensor that does not require grad, or ``None``.
            persistent: include it in ``state_dict()``.

        Raises:
            AttributeError: called before ``Module.__init__()`` ran.
            KeyError: ``name`` is empty, contains ``"."`` or is already an attribute that is
                not a buffer (delete it first).
            TypeError: ``tensor`` is not a ``Tensor`` or ``None``, or requires grad (assign a
                parameter as an attribute; ``.detach()`` a value to keep it as a buffer).
        """
        if "_modules" not in self.__dict__:
            raise AttributeError(
                "cannot register a buffer before Module.__init__() ran; call "
                "super().__init__() first in your module's __init__."
            )
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(
                f"register_buffer: buffer names are non-empty and have no '.', got {name!r}."
            )
        if name not in self._buffers and (
            name in self.__dict__ or name in self._parameters or name in self._modules
        ):
            raise KeyError(
                f"register_buffer: {type(self).__name__} already has an attribute {name!r} that "
                f"is not a buffer; delete it first (del module.{name}) or pick another name."
            )
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"register_buffer({name!r}): a Tensor or None is needed, got "
                f"{type(tensor).__name__}; wrap arrays with tg.tensor(...)."
            )
        if tensor is not None and tensor.requires_grad:
            raise TypeError(
                f"register_buffer({name!r}): the tensor requires grad; a leaf that requires grad "
                f"is a parameter (assign it: self.{name} = t), and a value to keep as a buffer "
                "is detached first (t.detach())."
            )
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register ``module`` as the sub-module ``name`` (PyTorch's method, for names made
        at run time: ``self.add_module(f"conv{i}", ...)``); ``setattr`` does the same.

        Raises:
            KeyError: ``name`` is empty, not a string or contains ``"."``, or is already an
                attribute of another kind (a buffer, a plain attribute, ``training``, a
                method: PyTorch's "attribute already exists"; a ``None`` slot is filled).
            TypeError: ``module`` is neither a ``Module`` nor ``None``.
        """
        _check_name(name, "add_module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(
                f"add_module({name!r}): a Module or None is needed, got {type(module).__name__}."
            )
        self._check_free(name, "_modules", "add_module")
        setattr(self, name, module)

    register_module = add_module

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Register ``param`` as the parameter ``name`` (PyTorch's method; ``setattr`` of a
        leaf that requires grad does the same). A leaf that does not require grad is
        registered as a frozen parameter; ``None`` sets a plain ``None`` attribute (no entry
        in ``state_dict()``, as PyTorch's).

        Raises:
            KeyError: ``name`` is empty, not a string or contains ``"."``, or is already an
                attribute of another kind (a buffer, a plain attribute, ``training``, a
                method: PyTorch's "attribute already exists"; a ``None`` slot is filled).
            TypeError: ``param`` is not a ``Tensor`` or ``None``, is not a leaf (the output of
                a recorded op: ``.detach().require_grad()`` it first), or is not floating.
        """
        _check_name(name, "register_parameter")
        self._check_free(name, "_parameters", "register_parameter")
        if param is None:
            setattr(self, name, None)
            return
        if not isinstance(param, Tensor) or not param.is_leaf or not is_float(param.dtype):
            what = type(param).__name__ if not isinstance(param, Tensor) else "a non-leaf Tensor"
            if isinstance(param, Tensor) and param.is_leaf:
                what = f"a Tensor of dtype {param.dtype}"
            raise TypeError(
                f"register_parameter({name!r}): a floating leaf Tensor (or None) is needed, got "
                f"{what}; make one with tg.tensor(...).require_grad() or t.detach().require_grad()."
            )
        for registry in ("_buffers", "_modules"):
            self.__dict__[registry].pop(name, None)
        self.__dict__.pop(name, None)
        self._parameters[name] = param
        _remember(param)

    def _check_free(self, name: str, registry: str, method: str) -> None:
        """``KeyError`` unless ``name`` is free for ``registry`` (PyTorch's "attribute already
        exists"): already in it, unset, or a ``None`` slot (a ``None`` parameter or module is
        a plain attribute here). Else registering would silently replace a buffer, a plain
        attribute, ``training`` or a method (``forward``)."""
        if name in self.__dict__[registry]:
            return
        if not any(name in self.__dict__[other] for other in _REGISTRIES):
            if name not in self.__dict__ and not hasattr(type(self), name):
                return
            if name in self.__dict__ and self.__dict__[name] is None:
                return
        kind = {"_modules": "sub-module", "_parameters": "parameter"}[registry]
        raise KeyError(
            f"{method}({name!r}): {type(self).__name__} already has an attribute {name!r} that "
            f"is not a {kind}; delete it first (del module.{name}) or pick another name."
        )

    def get_submodule(self, target: str) -> Module:
        """The sub-module at the dotted path ``target`` (``""`` is this module), PyTorch's.

        Raises:
            AttributeError: a step of the path names no sub-module (the message says which).
        """
        module: Module = self
        if target == "":
            return module
        walked: list[str] = []
        for part in target.split("."):
            child = module._modules.get(part)
            if child is None:
                where = ".".join(walked) or type(self).__name__
                raise AttributeError(
                    f"get_submodule({target!r}): {where} has no sub-module {part!r}; its "
                    f"sub-modules are {list(module._modules)}."
                )
            module = child
            walked.append(part)
        return module

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
            entries: dict[str, Tensor | None] = module.__dict__[registry]
            for name, tensor in entries.items():
                if tensor is None or id(tensor) in seen:
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
        """Buffers (tensor attributes that do not require grad, persistent or not; a ``None``
        buffer is left out) with dotted names, each shared tensor once."""
        return self._named_tensors("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Buffers (tensor attributes that do not require grad, persistent or not)."""
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

    def to(self, device: Any = None, dtype: Any = None) -> Module:
        """Move every parameter and buffer to ``device`` and/or cast the floating ones to
        ``dtype``, in place, as PyTorch's ``Module.to`` does: ``model.to("cpu:1")``,
        ``model.to(tg.bfloat16)``, ``model.to(device, dtype=tg.float16)``.

        A move keeps each tensor object and its tape node, as ``t.data = ...`` does; a
        ``.grad`` moves with its parameter, and gradients of a later backward land on the
        same device. A cast keeps each tensor object too, but a parameter gets a new leaf
        node (a leaf's dtype is part of it; a graph recorded before the cast no longer
        reaches the parameter); the old one is released as ``requires_grad_(False)``
        releases it (off the tape at once, unless a graph not yet backwarded uses it); its
        ``.grad`` is cast with it. Integer and complex tensors
        keep their dtype (``num_batches_tracked`` stays int32). Make optimizers after moving
        or casting the model: their state stays where, and in the dtype, it was made.

        Args:
            device: a ``jax.Device``, a sharding, an index into ``jax.devices()`` or a string
                such as ``"cpu:2"`` or ``"gpu:0"``; a dtype here is taken as ``dtype``.
            dtype: a floating dtype (``tg.float16``, ``tg.bfloat16``, ``tg.float32``,
                ``tg.float64`` with ``jax_enable_x64`` on).

        Returns:
            ``self``.

        Raises:
            DeviceError: the device does not exist, or a sharding does not divide the shape
                of a parameter (checked for all of them before any moves).
            TypeError: ``dtype`` is not a floating dtype, or is 64-bit while JAX's x64 mode
                is off (checked before anything changes).
        """
        if dtype is None and is_dtype(device):
            device, dtype = None, device
        tensors = (*self.parameters(), *self.buffers())
        cast = None if dtype is None else float_dtype(dtype)
        dest = None if device is None else resolve(device, "Module.to")
        if dest is not None:
            for t in tensors:
                check_fits(dest, t.shape, "Module.to")
        for t in tensors:
            if cast is not None and is_float(t.dtype) and t.dtype != cast:
                cast_in_place(t, cast)
            if dest is not None:
                t.data = jax.device_put(t.data, dest)
                if t.grad is not None:  # the gradient moves with its parameter, as in PyTorch
                    t.grad = Tensor(jax.device_put(t.grad.data, dest))
        return self

    def cuda(self, device: int | None = None) -> Module:
        """PyTorch's spelling of ``to("gpu:N")``: move to GPU ``device`` (0 by default).

        Raises:
            DeviceError: this process has no such GPU (the message lists its devices).
        """
        return self.to(f"gpu:{device or 0}")

    def cpu(self) -> Module:
        """PyTorch's spelling of ``to("cpu:0")``: move to the first CPU device."""
        return self.to("cpu:0")

    def half(self) -> Module:
        """Cast floating parameters and buffers to float16 in place (``to(tg.float16)``)."""
        return self.to(dtype=jnp.float16)

    def bfloat16(self) -> Module:
        """Cast floating parameters and buffers to bfloat16 in place (``to(tg.bfloat16)``)."""
        return self.to(dtype=jnp.bfloat16)

    def double(self) -> Module:
        """Cast floating parameters and buffers to float64 in place (``to(tg.float64)``;
        needs ``jax.config.update("jax_enable_x64", True)``, else ``TypeError``)."""
        return self.to(dtype=jnp.float64)

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

    def state_dict(self) -> dict[str, Tensor]:
        """A snapshot of every parameter and persistent buffer by dotted name (PyTorch's names
        and order), as tensors that do not require grad.

        A tensor reachable under several names (tied weights: ``head.weight = emb.weight``;
        a module assigned twice) is listed under each, sharing one array, as PyTorch lists
        it; ``parameters()`` still lists it once. Non-persistent buffers
        (``register_buffer(..., persistent=False)``) are left out.

        JAX arrays are immutable and an eager optimizer step replaces a parameter's array
        rather than writing into it, so the snapshot keeps the values of this moment (no copy
        is made, and none is needed). A ``tg.jit`` step with ``donate=True`` (the default)
        donates those arrays, as ``jax.jit`` does: to keep a snapshot across such steps, save
        it (``tg.save``) or copy it to the host (``{k: v.numpy() for k, v in ...}``) first.
        """
        return {name: t.detach() for name, t in state_entries(self)}

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> LoadResult:
        """Replace parameter and buffer values from ``state_dict``: name -> a Tensor, a JAX
        or NumPy array, or a ``torch.Tensor`` (a PyTorch ``state_dict()`` loads unchanged).

        Everything is checked before anything is written: on an error the module is left
        exactly as it was. Parameters keep their tape nodes (``p.data = value``); values are
        cast to each entry's dtype and put on its devices (its sharding, when it was placed
        with ``to()``, ``device=``/``sharding=`` or ``jax.device_put``), as PyTorch's
        ``copy_`` does. Non-persistent buffers are
        not expected.

        A tied tensor (one tensor under several names, see ``state_dict()``) is loaded once:
        from any one of its names, so a checkpoint that keeps only one of them (tapegrad's
        before ties were listed, or one trimmed of duplicates) loads too, and its other
        names are not reported missing (PyTorch reports them); when several of its names
        are given, their values must be equal.

        Args:
            state_dict: values by dotted name, e.g. from ``state_dict()`` or ``tg.load``.
            strict: raise when names are missing or unexpected.

        Returns:
            The missing and unexpected names (both empty when ``strict``).

        Raises:
            KeyError: ``strict`` and names are missing or unexpected (all are listed).
            ShapeError: values whose shapes differ from their entries' (all are listed).
            ValueError: two names of one tied tensor hold different values (both named).
            TypeError: a value that is not an array or a tensor.
        """
        missing, unexpected, writes = plan_load(state_entries(self), state_dict, strict)
        for target, array in writes:
            target.data = array
        return LoadResult(missing, unexpected)

    # ------------------------------------------------------------------ calling

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; subclasses override it. Call the module, not ``forward``."""
        raise NotImplementedError(f"{type(self).__name__} must define forward().")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._forward_pre_hooks is None and self._forward_hooks is None:
            return self.forward(*args, **kwargs)
        for hook in list((self._forward_pre_hooks or {}).values()):
            changed = hook(self, args)
            if changed is not None:
                args = changed if isinstance(changed, tuple) else (changed,)
        out = self.forward(*args, **kwargs)
        for hook in list((self._forward_hooks or {}).values()):
            changed = hook(self, args, out)
            if changed is not None:
                out = changed
        return out

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Run ``hook(module, args)`` before each ``forward`` (PyTorch's): ``args`` is the
        tuple of positional arguments; a result other than ``None`` replaces them (a tuple,
        or one value). Hooks run in registration order, inside ``tg.jit`` steps too.

        Returns:
            a ``RemovableHandle``: ``handle.remove()`` unregisters the hook.

        Raises:
            TypeError: ``hook`` is not callable.
        """
        return self._register("_forward_pre_hooks", hook, "register_forward_pre_hook")

    def register_forward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Run ``hook(module, args, output)`` after each ``forward`` (PyTorch's): a result
        other than ``None`` replaces the output. Reading activations (``out.detach()``) or
        changing them (recorded like any op) works as in PyTorch; hooks run in registration
        order, inside ``tg.jit`` steps too.

        Returns:
            a ``RemovableHandle``: ``handle.remove()`` unregisters the hook.

        Raises:
            TypeError: ``hook`` is not callable.
        """
        return self._register("_forward_hooks", hook, "register_forward_hook")

    def _register(self, kind: str, hook: Callable[..., Any], method: str) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"{method}: the hook must be callable, got {type(hook).__name__}.")
        hooks = self.__dict__.get(kind)
        if hooks is None:
            hooks = {}
            object.__setattr__(self, kind, hooks)
        key = next(_HOOK_IDS)
        hooks[key] = hook
        _hooks_changed(self)
        return RemovableHandle(self, kind, key)

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

    def float(self) -> Module:  # last: the name shadows the builtin below it
        """Cast floating parameters and buffers to float32 in place (``to(tg.float32)``)."""
        return self.to(dtype=jnp.float32)


def _check_name(name: Any, method: str) -> None:
    if not isinstance(name, str) or not name or "." in name:
        raise KeyError(f"{method}: names are non-empty strings without '.', got {name!r}.")


def _is_buffer_value(value: Any) -> bool:
    """What an assignment registers as a buffer: a tensor that does not require grad."""
    return isinstance(value, Tensor) and not value.requires_grad
