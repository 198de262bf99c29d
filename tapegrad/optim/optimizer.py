"""The optimizer machinery: parameter groups, one compiled optax update per step, state dicts.

``step()`` reads every parameter's ``.grad``, runs each group's optax transformation
(``update`` then ``optax.apply_updates``) over all groups in **one** compiled call, and
writes each new value back with ``p.data = new``: the parameter keeps its leaf node, nothing
is recorded on the tape and nothing is left hanging.

Hyperparameters live in ``param_groups`` (a list of dicts, PyTorch's protocol): a loop or a
scheduler may set ``group["lr"]`` (or any other numeric hyperparameter) between steps. The
rule of a built-in optimizer is wrapped in ``optax.inject_hyperparams``, so the numbers are
inputs of the compiled update, not constants in it: changing them never recompiles.

The update of a built-in optimizer (``SGD``, ``Adam``, ...) with numeric hyperparameters and
at most 64 parameters starts compiling when the optimizer is made, on a background thread
where the process may use two cores or more (``tapegrad.kernels``), for the first ``step()``
to take: it compiles while the first forward and backward run. A step compiled whole by
``tg.jit`` does not use it (it only took a spare core meanwhile).

Parameters whose ``.grad`` is ``None`` (or that do not require grad: frozen) are skipped, as
PyTorch's optimizers skip them: their value does not change, and neither do their entries in
the optimizer state that are shaped like the parameters (momentum, Adam's moments). The
transformation sees a zero gradient in their place, so statistics over all gradients
(``optax.clip_by_global_norm``) are those of the gradients that exist. The built-in Adam and
AdamW count steps per parameter, as PyTorch does (a skipped parameter's count stands still);
a transform of the user's own keeps whatever state optax keeps, which may be per group (the
step count of ``optax.adam``), advancing on every step that updates anything in the group
(a group none of whose parameters has a gradient keeps all its state).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from tapegrad._args import torch_keywords
from tapegrad._arrays import deleted
from tapegrad._placement import (
    committed,
    device_groups,
    loaded_like,
    placement_key,
    replicated_like,
)
from tapegrad._tensor import Tensor, zero_grads
from tapegrad.current import current_tape
from tapegrad.errors import DeviceError, TracerError, donated_error
from tapegrad.grad_mode import enable_grad
from tapegrad.kernels import host_to_device, kernel
from tapegrad.origin import format_origin, user_frame

__all__ = ["Optimizer"]

_Arrays = tuple[jax.Array, ...]
_Grads = tuple[jax.Array | None, ...]

_NOT_NEEDED = (
    "tapegrad does not support it and does not need it: step() already updates all parameters "
    "in one fused, compiled XLA call"
)

_AHEAD_PARAMS = 64


class _GroupStates(list):  # type: ignore[type-arg]
    """``Optimizer.state``: the optax state of each parameter group, indexed by the group's
    position (a list, and a JAX pytree as one). PyTorch's ``opt.state`` is a dict keyed by
    parameter; indexing this one with a tensor raises a ``KeyError`` that says where the
    per-parameter arrays are (``in`` a ``TypeError``)."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, Tensor):
            raise KeyError(_BY_GROUP)
        return super().__getitem__(key)

    def __contains__(self, key: Any) -> bool:
        if isinstance(key, Tensor):  # list's test would compare it with each state
            raise TypeError(_BY_GROUP)
        return super().__contains__(key)


_BY_GROUP = (
    "opt.state is indexed by parameter group (opt.state[0] is the optax state of group 0, for "
    "all its parameters), not by tensor as PyTorch's; a parameter's arrays are in that state "
    "at the parameter's position in the group (jax.tree_util.tree_flatten_with_path("
    "opt.state[0]) names them: mu, nu, ...), or in opt.state_dict()['state']."
)


jax.tree_util.register_pytree_node(
    _GroupStates, lambda s: (list(s), None), lambda _, children: _GroupStates(children)
)
"""The most parameters whose update compiles ahead (~15 ms of compile each on a CPU)."""

_TORCH_ADVICE = {
    "foreach": _NOT_NEEDED + ". Remove it.",
    "fused": _NOT_NEEDED + ". Remove it.",
    "capturable": _NOT_NEEDED + " on the parameters' device; to compile a whole training "
    "step (forward, backward and update), decorate it with tg.jit. Remove it.",
    "differentiable": "tapegrad does not support it: step() replaces p.data and records "
    "nothing on the tape. To differentiate through an update, write it with tensor ops "
    "(p - lr * g, with g from tg.grad(loss, p, create_graph=True)).",
    "maximize": "tapegrad does not support it with a transform of your own (the built-in "
    "optimizers take it): put optax.scale(-1.0) first in the chain, or negate the loss.",
    "amsgrad": "tapegrad does not support it here: only tg.optim.Adam and tg.optim.AdamW "
    "have AMSGrad (as in PyTorch). Remove it.",
    "dampening": "tapegrad does not support it: SGD's momentum buffer adds the whole "
    "gradient (PyTorch's default, dampening=0). Remove it, or pass your own optax rule to "
    "tg.optim.Optimizer.",
    "decoupled_weight_decay": "tapegrad does not support it: use tg.optim.AdamW for "
    "decoupled weight decay (decoupled_weight_decay=True), tg.optim.Adam for the L2 penalty.",
}
_TORCH_DEFAULTS = {
    "foreach": None,
    "fused": None,
    "capturable": False,
    "differentiable": False,
    "maximize": False,
    "amsgrad": False,
    "dampening": 0,
    "decoupled_weight_decay": False,
}
"""PyTorch's default value of each of those options: given that value, it asks for what
tapegrad does, so it is accepted (as layers accept ``bias=True``)."""

torch_options = torch_keywords(_TORCH_ADVICE, defaults=_TORCH_DEFAULTS)
"""Decorate an optimizer's ``__init__``: a PyTorch option it does not take (``foreach=``,
``fused=``, ...) raises a ``TypeError`` naming it and what to do instead, unless it has
PyTorch's default value (``dampening=0``, ``foreach=None``: code copied from PyTorch runs)."""

sgd_options = torch_keywords(
    _TORCH_ADVICE, defaults=_TORCH_DEFAULTS, order="its SGD's fourth parameter is dampening"
)
"""``torch_options`` for ``SGD``, whose message for too many positional arguments also says
where PyTorch's order differs: the ``1e-4`` of ``SGD(p, 0.1, 0.9, 1e-4)`` is dampening there."""


def _keep_skipped(new_state: Any, old_state: Any, params: _Arrays, skip: tuple[bool, ...]) -> Any:
    """In every state subtree shaped like ``params`` (a tuple of arrays of the parameters'
    shapes: momentum, moments), keep the old entries of skipped parameters."""
    shapes = tuple(p.shape for p in params)

    def param_like(x: Any) -> bool:
        return (
            type(x) is tuple
            and len(x) == len(shapes)
            and all(getattr(a, "shape", None) == s for a, s in zip(x, shapes, strict=True))
        )

    def pick(new: Any, old: Any) -> Any:
        if param_like(new):
            return tuple(o if s else n for n, o, s in zip(new, old, skip, strict=True))
        return new

    return jax.tree.map(pick, new_state, old_state, is_leaf=param_like)


def _group_update(
    transform: optax.GradientTransformation,
    params: _Arrays,
    grads: _Grads,
    state: Any,
    hyper: dict[str, jax.Array],
) -> tuple[tuple[jax.Array | None, ...], Any]:
    """One group's update (traced inside the step): new values (``None`` where skipped). A
    group with no gradient at all is skipped whole: its state (step counts included) stays."""
    skip = tuple(g is None for g in grads)
    if all(skip):
        return (None,) * len(params), state
    full = tuple(jnp.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True))
    if hyper:
        state = state._replace(hyperparams={**state.hyperparams, **hyper})
    # ``skip`` reaches the rules that keep per-parameter counts (Adam); others ignore it
    update = optax.with_extra_args_support(transform).update
    updates, new_state = update(full, state, params, skip=skip)
    new_params = optax.apply_updates(params, updates)
    if any(skip):
        new_state = _keep_skipped(new_state, state, params, skip)
    return tuple(None if s else q for q, s in zip(new_params, skip, strict=True)), new_state


class Optimizer:
    """Apply optax ``GradientTransformation``\\ s to tapegrad parameters, PyTorch-style.

    Use a subclass (:class:`SGD`, :class:`Adam`, ...) or pass any transformation:

    Example:
        >>> opt = Optimizer(model.parameters(),
        ...                 optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)))
        >>> opt.zero_grad(); loss.backward(); opt.step()

    Args:
        params: leaf tensors (e.g. ``model.parameters()``; a tensor listed twice is kept
            once), or a list of dicts each with ``"params"`` and hyperparameters that
            override the defaults for that group (PyTorch's per-group options).
        transform: the update rule of every group; ``update`` receives the gradients, the
            state and the current values (so ``optax.adamw`` and other rules that read them
            work), each as a tuple of arrays in the group's order. Subclasses build it from
            each group's hyperparameters instead.

    Attributes:
        param_groups: one dict per group: ``"params"`` (a list of tensors) and the
            hyperparameters (``"lr"``, ...), which a loop may change between steps.
        state: the optax state of each group, a list of pytrees of arrays,
            indexed by group (not by tensor, as PyTorch's dict), replaced by each ``step()``.

    Raises:
        ValueError: no parameters, a tensor that is an op's output (not a leaf), a tensor in
            two groups, a group dict without ``"params"``, a negative (or NaN) learning rate.
        TypeError: something other than a ``Tensor`` among the parameters, one tensor or
            a module instead of an iterable, a set (its order changes from run to run); a
            hyperparameter that is not a number; ``"lr"`` in a group of a ``transform`` of
            one's own (it would be ignored); a PyTorch option tapegrad does not take
            (``foreach=``, ``fused=``, ``capturable=``, ``differentiable=``, ...: the message
            says what to do instead).
    """

    param_groups: list[dict[str, Any]]
    state: _GroupStates
    defaults: dict[str, Any]
    _inputs: tuple[str, ...] = ("lr",)
    """The group keys a ``tg.jit`` step takes as inputs where they hold numbers (traced, so
    that a new value compiles nothing): those the update reads as injected hyperparameters."""

    @torch_options
    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[Mapping[str, Any]],
        transform: optax.GradientTransformation | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.defaults = dict(defaults or {})
        self._transform = transform
        self.param_groups = []
        seen: set[int] = set()
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params must be an iterable of tensors or group dicts, "
                f"got one Tensor of shape {params.shape}; pass [tensor] or model.parameters()."
            )
        raw = _listed(params, type(self).__name__)
        groups = raw if raw and isinstance(raw[0], Mapping) else [{"params": raw}]
        for g in groups:
            if not isinstance(g, Mapping):
                raise TypeError("optimizer: mix of tensors and group dicts; pass one or the other.")
            self.add_param_group(dict(g), _seen=seen)
        if not any(group["params"] for group in self.param_groups):
            raise ValueError("optimizer got an empty parameter list.")
        self._compile_ahead()

    # ------------------------------------------------------------------ groups

    def add_param_group(self, group: dict[str, Any], *, _seen: set[int] | None = None) -> None:
        """Add a group of parameters with its own hyperparameters (missing ones: defaults).

        Raises:
            ValueError: a parameter already in another group, a group without ``"params"``, or
                a bad hyperparameter.
            TypeError: ``group`` is not a dict; its ``"params"`` is a set (its order changes
                from run to run) or not an iterable of tensors; a PyTorch option the optimizer
                does not take (``dampening``, ...).
        """
        if not isinstance(group, Mapping):
            raise TypeError(
                f"add_param_group takes a dict, got a {type(group).__name__}: write "
                "add_param_group({'params': [w, b], 'lr': 0.01}) (hyperparameters optional)."
            )
        if "params" not in group:
            raise ValueError(
                f"param group {len(self.param_groups)} has no 'params' (its keys: "
                f"{sorted(map(str, group))}); give each group its tensors: "
                "{'params': model.fc.parameters(), 'lr': 0.01}."
            )
        seen = (
            _seen if _seen is not None else {id(p) for g in self.param_groups for p in g["params"]}
        )
        raw = group["params"]
        params = [raw] if isinstance(raw, Tensor) else _listed(raw, "add_param_group")
        unique: dict[int, Tensor] = {}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer parameter {i} is a {type(p).__name__}, not a tapegrad Tensor; "
                    "pass model.parameters()."
                )
            if not p.is_leaf:
                raise ValueError(
                    f"optimizer parameter {i} (shape {p.shape}) is the output of an op, not a "
                    "leaf; optimize the leaves it was computed from (.require_grad() tensors)."
                )
            if id(p) in seen and id(p) not in unique:
                raise ValueError(
                    f"optimizer parameter {i} (shape {p.shape}) is already in another group."
                )
            seen.add(id(p))
            unique.setdefault(id(p), p)
        for key in group:
            if key not in self.defaults and key in _TORCH_ADVICE:  # silently ignored else
                raise TypeError(
                    f"param group {len(self.param_groups)} has {key!r}, a PyTorch option "
                    f"{type(self).__name__} does not take; {_TORCH_ADVICE[key]}"
                )
        full = {**self.defaults, **group, "params": list(unique.values())}
        for key, value in full.items():  # a tensor hyperparameter (PyTorch takes one): a number
            if key != "params" and isinstance(value, Tensor) and value.size == 1:
                full[key] = float(value)
        self._check_hyper(full)
        self.param_groups.append(full)
        if not hasattr(self, "state"):
            self.state = _GroupStates()
            self._rules: list[optax.GradientTransformation] = []
            self._statics: list[tuple[Any, ...]] = []
            self._compiled: Callable[..., Any] | None = None
        rule = self._rule(full)
        self._rules.append(rule)
        self._statics.append(self._structure(full))
        self.state.append(_init(rule, tuple(p.data for p in full["params"])))
        self._compiled = None
        if _seen is None:  # the user's call, after construction: the update changed
            self._compile_ahead()

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` for a bad hyperparameter (subclasses add their checks), and
        ``TypeError`` for one that is not a number."""
        for name, value in self._numbers(group).items():
            _number(name, value)
        lr = group.get("lr", 0.0)
        if not callable(lr) and not lr >= 0:  # NaN too, as PyTorch
            raise ValueError(f"learning rate must be a non-negative number, got {lr}.")

    def _rule(self, group: Mapping[str, Any]) -> optax.GradientTransformation:
        """The group's transformation (the one given to the constructor by default)."""
        if self._transform is None:
            raise TypeError("Optimizer needs a transform (or use SGD, Adam, AdamW, RMSprop).")
        return self._transform

    def _structure(self, group: Mapping[str, Any]) -> tuple[Any, ...]:
        """What in the group shapes the rule (not a number fed to it): fixed per group."""
        return ()

    def _numbers(self, group: Mapping[str, Any]) -> dict[str, Any]:
        """The group's numeric hyperparameters under the names of the rule's optax factory
        (subclasses map PyTorch's names; a generic transform has none).

        Raises:
            TypeError: the group has ``"lr"``, which a transform of the user's own does not
                read (checked at construction and at every step: a loop may set it).
        """
        if "lr" in group:
            raise TypeError(
                f"{type(self).__name__}: a param group has 'lr' ({group['lr']!r}), which an "
                "optimizer over your own optax transform does not read: the learning rate is "
                "fixed inside the transform. Give the transform an optax schedule as its "
                "learning rate (optax.adam(optax.cosine_decay_schedule(1e-3, 1000))), or use "
                "tg.optim.SGD, Adam, AdamW or RMSprop, whose 'lr' a loop or a scheduler sets; "
                "and remove 'lr' from the group."
            )
        return {}

    def _hyper(self, group: Mapping[str, Any], state: Any) -> dict[str, Any]:
        """The group's numbers as arrays of the dtypes ``inject_hyperparams`` keeps in
        ``state`` (a schedule, i.e. a callable, stays with optax)."""
        injected = getattr(state, "hyperparams", None) or {}
        numbers = self._numbers(group)
        for name, value in numbers.items():
            if isinstance(value, Tensor):  # a tensor hyperparameter (PyTorch takes one): its value
                value = numbers[name] = value.data
            _number(name, value)
            if isinstance(value, jax.core.Tracer) and not current_tape().allow_tracers:
                # a tg.jit step's own inputs are traced on its private tape (jit.py)
                raise TracerError(
                    f"{type(self).__name__}.step(): a hyperparameter in param_groups ({name!r} "
                    "in optax's terms) is a traced value, set inside a JAX transformation. "
                    "Hyperparameters are Python numbers set between steps: set it outside the "
                    "step (opt.param_groups[0]['lr'] = lr before the call; a tg.jit step takes "
                    "the optimizer's numbers as inputs, with no new compile)."
                )
        return {  # a traced number: a tg.jit step's input (``_discover.Found.rates``)
            name: (jnp if isinstance(value, jax.core.Tracer) else np).asarray(
                value, dtype=injected[name].dtype
            )
            for name, value in numbers.items()
            if name in injected and not callable(value)
        }

    # ------------------------------------------------------------------ stepping

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter.

        Args:
            set_to_none: set ``.grad`` to ``None`` (PyTorch's default: the next ``step()``
                skips a parameter no backward reached); with ``False``, existing gradients
                become zeros instead.
        """
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def _step_fn(self) -> Any:
        if self._compiled is None:
            rules = tuple(self._rules)

            def step(params: Any, grads: Any, states: Any, hypers: Any) -> Any:
                results = [
                    _group_update(rule, p, g, s, h)
                    for rule, p, g, s, h in zip(rules, params, grads, states, hypers, strict=True)
                ]
                return [r[0] for r in results], [r[1] for r in results]

            self._compiled = kernel(step)
        return self._compiled

    def _compile_ahead(self) -> None:
        """Start compiling the update for the call ``step()`` will most likely make (every
        parameter that requires grad has a gradient of its own shape and dtype) on a
        background thread (``kernels.kernel``'s ``compile_ahead``), so that it compiles
        while the first forward and backward run. Left to the first ``step()``: a transform
        of the user's own or a schedule as a hyperparameter (tracing them may read Python
        state that changes before the step), parameters placed by the user, and more than
        ``_AHEAD_PARAMS`` parameters (a compile of seconds, which a process that never
        steps would wait for at its exit)."""
        groups = self.param_groups
        if (
            self._transform is not None
            or sum(len(g["params"]) for g in groups) > _AHEAD_PARAMS
            or any(callable(v) for g in groups for k, v in g.items() if k != "params")
        ):
            return
        params = [tuple(p.data for p in g["params"]) for g in groups]
        if any(committed(a) for arrays in params for a in arrays):
            return
        grads = [
            tuple(
                jax.ShapeDtypeStruct(p.shape, p.dtype) if p.requires_grad else None  # type: ignore[no-untyped-call]
                for p in g["params"]
            )
            for g in groups
        ]
        hypers = [self._hyper(g, s) for g, s in zip(groups, self.state, strict=True)]
        self._step_fn().compile_ahead(params, grads, self.state, hypers)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient, in one compiled call.

        Args:
            closure: optional; called under grad mode before the update (it should zero the
                gradients, compute the loss and call ``backward()``), as in PyTorch.

        Returns:
            What ``closure`` returned, or ``None``.

        Raises:
            ValueError: a hyperparameter that shapes the rule (``nesterov``, ``centered``,
                whether there is momentum) was changed after construction.
            DeviceError: the parameters and the optimizer's state live on unrelated devices
                (the model was moved after the optimizer was made).
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        groups = self.param_groups
        grads = [
            tuple(
                None if p.grad is None or not p.requires_grad else p.grad.data for p in g["params"]
            )
            for g in groups
        ]
        if all(x is None for gs in grads for x in gs):
            return loss
        for i, g in enumerate(groups):
            if self._structure(g) != self._statics[i]:
                raise ValueError(
                    f"param_groups[{i}]: {self._structure.__doc__} changed after the optimizer "
                    "was made; make a new optimizer for that."
                )
        params = [tuple(p.data for p in g["params"]) for g in groups]
        hypers = [self._hyper(g, s) for g, s in zip(groups, self.state, strict=True)]
        try:
            new_params, new_states = self._step_fn()(params, grads, self.state, hypers)
            self.state = _GroupStates(new_states)
        except ValueError:
            self._check_devices(params, grads)
            raise
        for g, news in zip(groups, new_params, strict=True):
            for p, new in zip(g["params"], news, strict=True):
                if new is not None:
                    p.data = new
        return loss

    def _check_devices(self, params: Any, grads: Any) -> None:
        """After a failed update: raise ``DeviceError`` when the parameters, gradients and
        state live on devices no sharding relates (the usual cause: the model was moved after
        the optimizer was made, so its state stayed behind)."""
        if len(device_groups(jax.tree_util.tree_leaves(params))) > 1:
            raise DeviceError(
                f"{type(self).__name__}.step at {format_origin(*user_frame(3))}: the "
                "parameters live on devices no sharding relates (a model split layer by layer "
                "over devices); an optimizer updates all its parameters in one compiled call, "
                "on one set of devices. Make one optimizer per device: e.g. "
                "optim.SGD(stage0.parameters()) and optim.SGD(stage1.parameters())."
            ) from None
        arrays = jax.tree_util.tree_leaves((params, grads, self.state))
        where = {key for a in arrays if (key := placement_key(a)) is not None}
        if len(where) > 1:
            names = sorted({", ".join(str(d) for d in s) for s in where})
            raise DeviceError(
                f"{type(self).__name__}.step at {format_origin(*user_frame(3))}: the parameters, "
                f"gradients and optimizer state live on different devices ({'; '.join(names)}). "
                "Move the model before making the optimizer (model.to(device), then "
                "optim.X(model.parameters())), or make a new optimizer after moving it."
            ) from None

    # ------------------------------------------------------------------ state dicts

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state as a nested dict of tensors and numbers (``tg.save``-able).

        ``"state"`` maps each group's index (a string) to its optax state leaves by path;
        ``"param_groups"`` holds each group's hyperparameters and ``"params"``: the
        positions of its parameters in the order of all groups (PyTorch's layout).
        """
        state = {
            str(i): {
                jax.tree_util.keystr(path): Tensor(leaf)
                for path, leaf in jax.tree_util.tree_flatten_with_path(s)[0]
            }
            for i, s in enumerate(self.state)
        }
        groups = []
        start = 0
        for g in self.param_groups:
            n = len(g["params"])
            entry = {k: v for k, v in g.items() if k != "params" and not callable(v)}
            groups.append({**entry, "params": list(range(start, start + n))})
            start += n
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what ``state_dict()`` returned (possibly through ``tg.save``/``tg.load``).

        Everything is checked before anything changes.

        Raises:
            ValueError: not an optimizer's state dict (no ``"state"`` and ``"param_groups"``);
                the number of groups or of parameters per group differs, or the state's
                entries or shapes differ from this optimizer's (all named); a saved
                hyperparameter is out of range (as in the constructor).
            TypeError: a saved hyperparameter is not a number.
        """
        if not isinstance(state_dict, Mapping) or not {"state", "param_groups"} <= set(state_dict):
            keys = sorted(map(str, state_dict)) if isinstance(state_dict, Mapping) else None
            raise ValueError(
                "optimizer load_state_dict: not an optimizer's state dict (it needs 'state' "
                f"and 'param_groups'; got {keys if keys is not None else type(state_dict)}). "
                "Pass what opt.state_dict() returned; a model's state dict goes to "
                "model.load_state_dict, a scheduler's to sched.load_state_dict."
            )
        groups = list(state_dict["param_groups"])
        states = state_dict["state"]
        if len(groups) != len(self.param_groups):
            raise ValueError(
                f"optimizer load_state_dict: {len(groups)} parameter groups given, this "
                f"optimizer has {len(self.param_groups)}."
            )
        new_states, new_rules, new_statics = [], [], []
        for i, (given, mine) in enumerate(zip(groups, self.param_groups, strict=True)):
            if len(given.get("params", [])) != len(mine["params"]):
                raise ValueError(
                    f"optimizer load_state_dict: group {i} has {len(given.get('params', []))} "
                    f"parameters in the state dict, {len(mine['params'])} here."
                )
            # the saved options (amsgrad, maximize, ...) decide the state's layout, as in
            # PyTorch, where loading restores them with the state
            merged = {**mine, **{k: v for k, v in given.items() if k != "params"}}
            self._check_hyper(merged)
            rule, current = self._rules[i], self.state[i]
            if self._structure(merged) != self._statics[i]:
                rule = self._rule(merged)
                current = _init(rule, tuple(p.data for p in mine["params"]))
            new_states.append(_restore(i, current, states.get(str(i), {})))
            new_rules.append(rule)
            new_statics.append(self._structure(merged))
        for given, mine in zip(groups, self.param_groups, strict=True):
            mine.update({k: v for k, v in given.items() if k != "params"})
        if any(a is not b for a, b in zip(new_rules, self._rules, strict=True)):
            self._compiled = None  # another rule: another update (else the one compiled stays)
        self.state, self._rules, self._statics = _GroupStates(new_states), new_rules, new_statics

    def __repr__(self) -> str:
        n = sum(len(g["params"]) for g in self.param_groups)
        extra = f", {len(self.param_groups)} groups" if len(self.param_groups) > 1 else ""
        return f"{type(self).__name__}({n} parameters{extra})"


def _listed(params: Any, where: str) -> list[Any]:
    """``params`` as a list: an optimizer's parameters, or a group's.

    Raises:
        TypeError: a set (its order, and with it which saved state goes to which parameter,
            changes from run to run; PyTorch refuses it too) or not an iterable.
    """
    if isinstance(params, (set, frozenset)):
        raise TypeError(
            f"{where}: params is a set, whose order changes from run to run (and with it "
            "which saved optimizer state goes to which parameter); pass a list or "
            "model.parameters()."
        )
    try:
        return list(params)
    except TypeError:
        raise TypeError(
            f"{where}: params must be an iterable of tensors or of group dicts, got a "
            f"{type(params).__name__}; pass model.parameters()."
        ) from None


def _number(name: str, value: Any) -> None:
    """Raise ``TypeError`` unless the hyperparameter ``name`` (optax's name) is a number, an
    array, a tensor or (a learning rate) a schedule: a string ``"0.1"`` would be parsed by
    NumPy silently."""
    if isinstance(value, (str, bytes)) or value is None:
        shown = {"learning_rate": "lr", "b1": "betas[0]", "b2": "betas[1]"}.get(name, name)
        raise TypeError(
            f"optimizer hyperparameter {shown!r} is {value!r}, not a number; set a number, "
            "e.g. param_groups[0]['lr'] = 0.01."
        )


def _restore(i: int, current: Any, given: Mapping[str, Any]) -> Any:
    """``current``'s pytree with its leaves replaced by ``given`` (leaf path -> value)."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(current)
    names = [jax.tree_util.keystr(path) for path, _ in leaves]
    missing = [n for n in names if n not in given]
    unexpected = [n for n in given if n not in names]
    if missing or unexpected:
        raise ValueError(
            f"optimizer load_state_dict: group {i}: missing state entries {missing}, "
            f"unexpected {unexpected}; was it saved by the same optimizer class and options?"
        )
    out = []
    for name, (_, leaf) in zip(names, leaves, strict=True):
        value = given[name]
        value = value.data if isinstance(value, Tensor) else value
        if deleted(value):
            raise donated_error(f"optimizer load_state_dict: group {i}: {name}")
        array = jnp.array(value, leaf.dtype, copy=isinstance(value, np.ndarray))
        if array.shape != leaf.shape:
            raise ValueError(
                f"optimizer load_state_dict: group {i}: {name} has shape {array.shape}, "
                f"expected {leaf.shape}."
            )
        out.append(loaded_like(array, leaf))  # where the state lives: its parameter's sharding
    return jax.tree_util.tree_unflatten(treedef, out)


def _init(rule: optax.GradientTransformation, arrays: tuple[jax.Array, ...]) -> Any:
    """``rule.init(arrays)``, compiled as one computation when no array was placed by the
    user (all on the default device): optax's eager ``init`` runs a ``zeros_like`` per
    parameter, one kernel compile per parameter shape on a first run (issue 17). Placed or
    sharded parameters keep the eager ``init``, whose states are placed like them; its
    counts (made uncommitted on the default device) are replicated on the devices of the
    parameters, where every step's update puts them (else the second step, eager or
    ``tg.jit``, compiled again for their new placement).

    With a low-precision parameter (bfloat16, float16), whose moments the update keeps in
    float32 (``rules._injected``), the state starts in the dtypes the update gives it, so that
    the step's state keeps one signature from the first call on (a compiled step compiles
    once). A state of constants (Adam's moments and count, RMSprop's, momentum's: zeros) on
    a CPU is filled on the host without a compile (``_filled_state``)."""
    where = replicated_like(arrays)
    if where is not None:  # counts made on the default device: replicated where a step puts them
        state = jax.tree_util.tree_map(
            lambda s: s if committed(s) else jax.device_put(s, where), rule.init(arrays)
        )
    else:
        state = _filled_state(rule, arrays)
        if state is None:
            state = jax.jit(rule.init)(arrays)
    if any(jnp.issubdtype(a.dtype, jnp.floating) and a.dtype.itemsize < 4 for a in arrays):
        after = jax.eval_shape(lambda s, a: rule.update(a, s, a)[1], state, arrays)
        state = jax.tree_util.tree_map(
            lambda s, o: s if s.dtype == o.dtype else s.astype(o.dtype), state, after
        )
    return state


_Literal: Any
try:  # what a constant in a jaxpr is (``jax.extend.core.Literal``, whose import costs ~17 ms)
    from jax._src.core import Literal as _Literal
except ImportError:  # pragma: no cover - another JAX: states compile as before
    _Literal = None


def _filled_state(rule: optax.GradientTransformation, arrays: tuple[jax.Array, ...]) -> Any:
    """``rule.init(arrays)`` made on the host, where every leaf of it is a constant (a literal,
    or a literal broadcast to a shape: optax's ``zeros_like`` moments and counts) and JAX's
    default device is a CPU: filled with NumPy and moved by ``kernels.host_to_device``, the
    same values, dtypes and placement as the compiled ``init`` gives, with no compile (~50 ms
    per parameter group in a first run). ``None`` for any other state (a copy of the
    parameters, a computed value), for traced parameters, on another device (a large state
    filled on the host would cross to it), or where ``host_to_device`` leaves it to JAX."""
    if (
        _Literal is None
        or not arrays
        or any(isinstance(a, jax.core.Tracer) for a in arrays)  # made inside a step
        or next(iter(arrays[0].devices())).platform != "cpu"  # uncommitted: the default's
    ):
        return None
    closed, shapes = jax.make_jaxpr(rule.init, return_shape=True)(arrays)
    jaxpr = closed.jaxpr
    if jaxpr.effects:
        return None
    used = {v for v in jaxpr.outvars if not isinstance(v, _Literal)}
    used.update(v for eqn in jaxpr.eqns for v in eqn.invars if not isinstance(v, _Literal))
    filled: dict[Any, Any] = {}
    for eqn in jaxpr.eqns:
        if not used.intersection(eqn.outvars):
            continue  # a value nothing reads (optax computes a sign it drops)
        (operand,) = eqn.invars if len(eqn.invars) == 1 else (None,)
        if eqn.primitive.name != "broadcast_in_dim" or not isinstance(operand, _Literal):
            return None
        filled[eqn.outvars[0]] = operand.val
    leaves = []
    for var in jaxpr.outvars:
        aval = var.aval
        if getattr(aval, "weak_type", True):
            return None
        if isinstance(var, _Literal):
            value = var.val
        elif var in filled:
            value = filled[var]
        else:
            return None  # an input passed on, or computed
        array = host_to_device(np.full(aval.shape, value, dtype=aval.dtype))
        if array is None:
            return None
        leaves.append(array)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(shapes), leaves)
