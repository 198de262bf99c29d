"""Learning-rate schedules with PyTorch's protocol, their curves from optax schedules.

Make the scheduler after the optimizer, then call ``sched.step()`` once per epoch (or per
iteration, for a warm-up) after ``opt.step()``. Each ``step()`` sets ``group["lr"]`` of every
parameter group to its schedule's value at the new count; the optimizer feeds it to its
compiled update as a number, so a schedule never recompiles anything.

Schedules are closed forms of the count and each group's initial rate (PyTorch's
``_get_closed_form_lr``), which differs from PyTorch's chainable schedulers in two cases:
a rate the loop set by hand between steps is replaced at the next ``step()`` (PyTorch's
``StepLR`` would scale the new value), and a group added with ``add_param_group`` after the
scheduler was made follows the schedule from its own rate as if it had been there from count
0 (PyTorch's scales it from the moment it was added). For the same reason two schedulers on
one optimizer do not chain (PyTorch's ``ChainedScheduler``, or two schedulers stepped in one
loop): each ``step()`` replaces the rate the other set, and a ``tg.TapegradWarning`` says
so; combine them in one ``LambdaLR`` or give the optimizer an optax schedule
(``optax.join_schedules``).
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import optax

from tapegrad._args import torch_keywords
from tapegrad._tensor import Tensor
from tapegrad.errors import TapegradWarning, TracerError
from tapegrad.optim.optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "LambdaLR",
    "LinearLR",
    "LinearWarmup",
    "OneCycleLR",
    "ReduceLROnPlateau",
]

_torch_options = torch_keywords(
    {
        "last_epoch": "tapegrad's schedulers do not take it: to resume, make the scheduler as "
        "at the start and load what sched.state_dict() saved (sched.load_state_dict(saved)). "
        "Remove it.",
        "verbose": "tapegrad's schedulers do not print: read sched.get_last_lr(). Remove it.",
    },
    defaults={"last_epoch": -1, "verbose": False},
)
"""Decorate a scheduler's ``__init__``: PyTorch's ``last_epoch=`` (other than its default) and
``verbose=`` raise a ``TypeError`` saying what to do instead."""

_DRIVING: weakref.WeakKeyDictionary[Optimizer, weakref.WeakSet[LRScheduler]] = (
    weakref.WeakKeyDictionary()
)
"""The live schedulers of each optimizer: a scheduler that replaces the rates another one set
warns that they do not chain."""


def _require_optimizer(optimizer: Any, name: str) -> None:
    """Raise ``TypeError`` unless ``optimizer`` is a tapegrad optimizer (scheduler ``name``)."""
    if not isinstance(optimizer, Optimizer):
        raise TypeError(
            f"{name}: got a {type(optimizer).__name__}, not an optimizer; make the optimizer "
            f"first and pass it: {name}(opt, ...) with "
            "opt = tg.optim.SGD(model.parameters(), lr=0.1)."
        )


def _scaled(base_lr: float, factor: Callable[[int], Any]) -> Callable[[int], float]:
    """``base_lr`` times an optax schedule of a factor, multiplied as Python floats: optax
    computes in float32, and ``0.1`` scaled inside it would read back as
    ``0.10000000149011612`` (the rate a loop compares or logs; the update sees float32
    anyway)."""
    return lambda epoch: base_lr * float(factor(epoch))


class LRScheduler:
    """Base class: a schedule per group, a function of ``last_epoch`` and the group's
    initial learning rate; construction applies the value at count 0, as PyTorch's does.

    Attributes:
        optimizer: the optimizer whose groups it sets.
        base_lrs: each group's learning rate when the scheduler was made
            (``group["initial_lr"]``).
        last_epoch: how many times ``step()`` ran.

    Raises:
        TypeError: ``optimizer`` is not a tapegrad optimizer; a group without ``"lr"`` (an
            ``Optimizer`` over a transform of one's own) or whose ``"lr"`` is itself an optax
            schedule (use one or the other).
    """

    optimizer: Optimizer
    base_lrs: list[float]
    last_epoch: int

    def __init__(self, optimizer: Optimizer) -> None:
        _require_optimizer(optimizer, type(self).__name__)
        self.optimizer = optimizer
        self.base_lrs = []
        self._schedules: list[Callable[[int], Any]] = []
        self._set: list[float] = []  # the rates the last step() set
        self._warned = False
        _DRIVING.setdefault(optimizer, weakref.WeakSet()).add(self)
        self.last_epoch = -1
        self.step()

    def _adopt(self) -> None:
        """Make the schedules of the groups not met yet: every group at construction, later
        those added with ``add_param_group`` (each from its own rate, ``group["initial_lr"]``).

        Raises:
            TypeError: one of them has no ``"lr"`` or an optax schedule as ``"lr"`` (checked
                for all before any is changed).
        """
        start = len(self._schedules)
        new = self.optimizer.param_groups[start:]
        for i, g in enumerate(new, start):
            if "lr" not in g:
                raise TypeError(
                    f"param_groups[{i}] has no 'lr' for {type(self).__name__} to set: a "
                    "tg.optim.Optimizer over your own optax transform has its learning rate "
                    "inside the transform. Give the transform an optax schedule instead "
                    "(optax.sgd(optax.exponential_decay(0.1, 1000, 0.5))), or use "
                    "tg.optim.SGD, Adam, AdamW or RMSprop with this scheduler."
                )
            if callable(g["lr"]):
                raise TypeError(
                    f"param_groups[{i}]['lr'] is a schedule already; give the optimizer a "
                    "number when a scheduler sets it."
                )
        for i, g in enumerate(new, start):
            base = float(g.setdefault("initial_lr", g["lr"]))
            self._schedules.append(self._schedule(base, i))
            self.base_lrs.append(base)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        """The learning rate of ``group`` as a function of the count (subclasses)."""
        raise NotImplementedError

    def step(self) -> None:
        """Advance the count by one and set every group's ``"lr"``.

        Raises:
            TypeError: a group added since (``add_param_group``) whose ``"lr"`` is an optax
                schedule.
            TracerError: called inside a ``tg.jit`` step (call it after the step).
        """
        groups = self.optimizer.param_groups
        if any(isinstance(g.get("lr"), jax.core.Tracer) for g in groups):  # a tg.jit trace
            raise TracerError(
                f"{type(self).__name__}.step() was called inside a tg.jit step: its count is "
                "Python state, which a compiled step cannot advance call by call. Call "
                "sched.step() after the compiled step returns (the step reads the new rate "
                "as an input: nothing compiles again), or give the optimizer an optax "
                "schedule as its lr."
            )
        if len(self._schedules) < len(self.optimizer.param_groups):
            self._adopt()
        self._check_chained()
        self.last_epoch += 1
        for g, schedule in zip(self.optimizer.param_groups, self._schedules, strict=True):
            g["lr"] = float(schedule(self.last_epoch))
        self._set = [g["lr"] for g in self.optimizer.param_groups]

    def _check_chained(self) -> None:
        """Warn (once) when the rates this step replaces are those another live scheduler of
        the optimizer set last: PyTorch's schedulers would chain there, tapegrad's do not."""
        if self._warned:
            return
        now = [g["lr"] for g in self.optimizer.param_groups]
        if now == self._set:
            return
        others = [
            s
            for s in _DRIVING.get(self.optimizer, ())
            if s is not self and s._set and s._set == now
        ]
        if others:
            self._warned = True
            warnings.warn(
                f"{type(self).__name__}.step() replaces the learning rates that "
                f"{type(others[0]).__name__} set on the same optimizer: tapegrad's schedulers "
                "are closed forms of their own count and do not chain as PyTorch's do (two "
                "schedulers stepped together, ChainedScheduler); the last one stepped decides "
                "the rate. Use one scheduler: a LambdaLR whose function combines both (lambda "
                "e: min(1.0, (e + 1) / 5) * 0.5 ** (e // 10)), or an optax schedule as the "
                "optimizer's lr (optax.join_schedules for one after the other). If this "
                "scheduler replaces the other, drop the other (del it).",
                TapegradWarning,
                stacklevel=3,
            )

    def get_last_lr(self) -> list[float]:
        """The learning rate of each group set by the last ``step()``."""
        return [float(g["lr"]) for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """``last_epoch`` and ``base_lrs`` (numbers; ``tg.save``-able)."""
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s count and base rates and set the groups' rates.

        Raises:
            ValueError: not a scheduler's state dict; the number of groups differs.
        """
        if not isinstance(state, Mapping) or not {"last_epoch", "base_lrs"} <= set(state):
            keys = sorted(map(str, state)) if isinstance(state, Mapping) else type(state)
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: not a scheduler's state dict (it needs "
                f"'last_epoch' and 'base_lrs'; got {keys}). Pass what sched.state_dict() "
                "returned; an optimizer's state dict goes to opt.load_state_dict."
            )
        base = [float(b) for b in state["base_lrs"]]
        if len(base) != len(self.base_lrs):
            raise ValueError(
                f"scheduler load_state_dict: {len(base)} groups saved, {len(self.base_lrs)} here."
            )
        self.base_lrs = base
        self._schedules = [self._schedule(lr, i) for i, lr in enumerate(base)]
        self.last_epoch = int(state["last_epoch"]) - 1
        self.step()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self.get_last_lr()})"


class StepLR(LRScheduler):
    """``lr = base_lr * gamma ** (epoch // step_size)`` (``optax.exponential_decay`` with
    ``staircase=True``).

    Args:
        optimizer: the optimizer.
        step_size: epochs between decays.
        gamma: the decay factor.

    Raises:
        ValueError: a non-positive ``step_size``.
    """

    @_torch_options
    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}.")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        factor = optax.exponential_decay(
            1.0, transition_steps=self.step_size, decay_rate=self.gamma, staircase=True
        )
        return _scaled(base_lr, factor)


class MultiStepLR(LRScheduler):
    """``lr = base_lr * gamma ** (number of milestones <= epoch)``
    (``optax.piecewise_constant_schedule``), PyTorch's ``MultiStepLR``.

    Args:
        optimizer: the optimizer.
        milestones: the epochs at which the rate is multiplied by ``gamma`` (increasing).
        gamma: the decay factor.

    Raises:
        ValueError: milestones that are not increasing non-negative integers.
    """

    @_torch_options
    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1) -> None:
        points = [int(m) for m in milestones]
        if any(m < 0 for m in points) or points != sorted(points):
            raise ValueError(
                f"MultiStepLR: milestones must be increasing epochs >= 0, got {list(milestones)}."
            )
        self.milestones, self.gamma = points, float(gamma)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        scales: dict[int, float] = {}
        for m in self.milestones:  # a milestone listed twice decays twice, as PyTorch's
            scales[m] = scales.get(m, 1.0) * self.gamma
        factor = optax.piecewise_constant_schedule(1.0, scales)
        return _scaled(base_lr, factor)


class ExponentialLR(LRScheduler):
    """``lr = base_lr * gamma ** epoch`` (``optax.exponential_decay``), PyTorch's
    ``ExponentialLR``.

    Args:
        optimizer: the optimizer.
        gamma: the factor applied every epoch.
    """

    @_torch_options
    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        self.gamma = float(gamma)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        factor = optax.exponential_decay(1.0, transition_steps=1, decay_rate=self.gamma)
        return _scaled(base_lr, factor)


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``
    (``optax.cosine_decay_schedule`` up to ``T_max``); after ``T_max`` the rate rises again
    along the same cosine, as PyTorch's does (period ``2 * T_max``).

    Args:
        optimizer: the optimizer.
        T_max: epochs from ``base_lr`` down to ``eta_min``.
        eta_min: the final learning rate.

    Raises:
        ValueError: a non-positive ``T_max``.
    """

    @_torch_options
    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803 - PyTorch's name
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}.")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        # from 1 to 0: any base rate (0 included) and eta_min (above it too), as PyTorch's
        unit = optax.cosine_decay_schedule(1.0, self.T_max)
        eta_min, period = self.eta_min, 2 * self.T_max

        def schedule(epoch: int) -> Any:
            t = epoch % period
            # cos(pi t / T) is symmetric about T
            return eta_min + (base_lr - eta_min) * float(unit(min(t, period - t)))

        return schedule


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``.

    Args:
        optimizer: the optimizer.
        lr_lambda: a function of the epoch count, or one per group.

    Raises:
        ValueError: a list whose length is not the number of groups.
        TypeError: ``lr_lambda`` (or an entry of the list) is not callable.
    """

    @_torch_options
    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
    ) -> None:
        _require_optimizer(optimizer, "LambdaLR")
        n = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, Sequence) else [lr_lambda] * n
        if not all(map(callable, lambdas)):
            raise TypeError(
                f"LambdaLR: lr_lambda must be a function of the epoch (or a list of one per "
                f"group), got {lr_lambda!r}; e.g. LambdaLR(opt, lambda epoch: 0.95 ** epoch)."
            )
        if len(lambdas) != n:
            raise ValueError(f"LambdaLR: {len(lambdas)} functions for {n} parameter groups.")
        self.lr_lambdas = lambdas
        self._shared = not isinstance(lr_lambda, Sequence)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        if group >= len(self.lr_lambdas):
            if not self._shared:
                raise ValueError(
                    f"LambdaLR: param group {group} was added after the scheduler was made "
                    f"with one function per group ({len(self.lr_lambdas)}); make a new "
                    "LambdaLR with a function for every group."
                )
            self.lr_lambdas.append(self.lr_lambdas[0])
        fn = self.lr_lambdas[group]
        return lambda epoch: base_lr * fn(epoch)


class LinearLR(LRScheduler):
    """PyTorch's ``LinearLR``: the factor of ``base_lr`` moves linearly from ``start_factor``
    to ``end_factor`` over ``total_iters`` steps, then holds (``optax.linear_schedule``; the
    closed form of PyTorch's recursive update). Call ``step()`` once per iteration (or epoch).

    Args:
        optimizer: the optimizer.
        start_factor: the fraction of ``base_lr`` at step 0, in ``[0, 1]``.
        end_factor: the fraction from step ``total_iters`` on, in ``[0, 1]``.
        total_iters: steps from one factor to the other (positive).

    Raises:
        ValueError: a factor outside ``[0, 1]`` or a non-positive ``total_iters``.
    """

    _STEPS = "total_iters"  # the steps' parameter, for messages

    @_torch_options
    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
    ) -> None:
        name = type(self).__name__
        if not (0.0 <= start_factor <= 1.0 and 0.0 <= end_factor <= 1.0) or total_iters <= 0:
            raise ValueError(
                f"{name}: the factors must be in [0, 1] and the steps positive, got "
                f"start_factor={start_factor}, end_factor={end_factor}, "
                f"{self._STEPS}={total_iters}."
            )
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        factor = optax.linear_schedule(self.start_factor, self.end_factor, self.total_iters)
        return _scaled(base_lr, factor)


class LinearWarmup(LinearLR):
    """Ramp the rate linearly from ``start_factor * base_lr`` to ``base_lr`` over
    ``warmup_steps`` steps, then hold it: ``LinearLR(optimizer, start_factor, 1.0,
    warmup_steps)``. Call ``step()`` once per iteration.

    Args:
        optimizer: the optimizer.
        warmup_steps: steps to reach ``base_lr``.
        start_factor: the fraction of ``base_lr`` at step 0, in ``[0, 1]``.

    Raises:
        ValueError: a non-positive ``warmup_steps`` or ``start_factor`` outside ``[0, 1]``.
    """

    _STEPS = "warmup_steps"

    @_torch_options
    def __init__(self, optimizer: Optimizer, warmup_steps: int, start_factor: float = 0.1) -> None:
        super().__init__(optimizer, start_factor, 1.0, warmup_steps)
        self.warmup_steps = self.total_iters


class OneCycleLR(LRScheduler):
    """PyTorch's ``OneCycleLR``: the rate rises from ``max_lr / div_factor`` to ``max_lr``
    over the first ``pct_start`` of ``total_steps`` and anneals to ``max_lr / div_factor /
    final_div_factor`` (``three_phase``: back to the start first), by cosine or linearly;
    with ``cycle_momentum`` the momentum (SGD's ``momentum``, Adam's first beta) moves the
    other way between ``max_momentum`` and ``base_momentum``. Call ``step()`` once per batch;
    stepping past ``total_steps`` raises, as PyTorch's does. A ``tg.jit`` step takes the rate
    and the momentum (or betas) as inputs: stepping the schedule compiles nothing again.

    Args:
        optimizer: the optimizer.
        max_lr: the peak rate (one for all groups, or one per group).
        total_steps: the steps of the cycle; or ``epochs * steps_per_epoch``.

    Raises:
        ValueError: no positive ``total_steps`` (nor epochs and steps_per_epoch),
            ``pct_start`` outside [0, 1], an unknown ``anneal_strategy``, a list of
            ``max_lr`` of another length than the groups, a step past ``total_steps``, or
            ``cycle_momentum`` on an optimizer with neither ``betas`` nor ``momentum > 0``.
    """

    @_torch_options
    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float = 0.85,
        max_momentum: float = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
    ) -> None:
        _require_optimizer(optimizer, "OneCycleLR")
        if total_steps is None and epochs is not None and steps_per_epoch is not None:
            total_steps = int(epochs) * int(steps_per_epoch)
        if total_steps is None or total_steps <= 0:
            raise ValueError(
                "OneCycleLR: give total_steps > 0, or epochs and steps_per_epoch; got "
                f"total_steps={total_steps}, epochs={epochs}, steps_per_epoch={steps_per_epoch}."
            )
        if not 0.0 <= pct_start <= 1.0 or anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"OneCycleLR: pct_start must be in [0, 1] and anneal_strategy 'cos' or "
                f"'linear', got {pct_start}, {anneal_strategy!r}."
            )
        groups = optimizer.param_groups
        peaks: list[Any] = (
            list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        )
        if len(peaks) != len(groups):
            raise ValueError(f"OneCycleLR: {len(peaks)} max_lr values for {len(groups)} groups.")
        if cycle_momentum and not all("betas" in g or g.get("momentum", 0) > 0 for g in groups):
            raise ValueError(
                "OneCycleLR: cycle_momentum=True needs an optimizer with betas (Adam, AdamW) "
                "or momentum > 0 (SGD, RMSprop: PyTorch's would switch momentum on, which "
                "changes the update's form here); make it with momentum=0.9, or pass "
                "cycle_momentum=False."
            )
        self.total_steps = int(total_steps)
        self.peaks = [float(p) for p in peaks]
        self.div_factor, self.final_div_factor = float(div_factor), float(final_div_factor)
        self.cycle_momentum = bool(cycle_momentum)
        self.momenta = (float(base_momentum), float(max_momentum))
        self.anneal_strategy = anneal_strategy
        rise = float(pct_start * self.total_steps) - 1
        last = self.total_steps - 1
        # (end step, start fraction key, end key): "initial", "max", "min" of each group
        self._phases = (
            [(rise, "initial", "max"), (2 * rise, "max", "initial"), (last, "initial", "min")]
            if three_phase
            else [(rise, "initial", "max"), (last, "max", "min")]
        )
        for g, peak in zip(groups, self.peaks, strict=True):
            g["lr"] = peak / self.div_factor  # the base rate each group's schedule reads
        super().__init__(optimizer)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _at(self, count: int, values: dict[str, float]) -> float:
        """The value at ``count`` moving between ``values`` (PyTorch's phases)."""
        if count > self.total_steps:
            raise ValueError(
                f"OneCycleLR: stepped {count} times, beyond total_steps={self.total_steps}; "
                "make it with the number of batches the loop runs (epochs * steps_per_epoch)."
            )
        start_step = 0.0
        for i, (end_step, start, end) in enumerate(self._phases):
            if count <= end_step or i == len(self._phases) - 1:
                pct = (count - start_step) / (end_step - start_step)
                return self._anneal(values[start], values[end], pct)
            start_step = end_step
        raise AssertionError  # pragma: no cover - the last phase returns

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        initial = base_lr
        values = {"initial": initial, "max": initial * self.div_factor}
        values["min"] = initial / self.final_div_factor
        return lambda count: self._at(count, values)

    def step(self) -> None:
        """Advance one batch: set every group's rate, and its momentum (``cycle_momentum``).

        Raises:
            ValueError: a step beyond ``total_steps``.
            TracerError: called inside a ``tg.jit`` step.
        """
        super().step()
        if not getattr(self, "cycle_momentum", False):
            return
        base, peak = self.momenta
        momentum = self._at(self.last_epoch, {"initial": peak, "max": base, "min": peak})
        for g in self.optimizer.param_groups:
            if "betas" in g:
                g["betas"] = (momentum, g["betas"][1])
            else:
                g["momentum"] = momentum


class ReduceLROnPlateau:
    """PyTorch's ``ReduceLROnPlateau``: multiply each group's rate by ``factor`` once the
    metric passed to ``step(metric)`` has not improved for more than ``patience`` steps
    (then wait ``cooldown`` steps), never below ``min_lr``; a reduction smaller than ``eps``
    is skipped. Improvement: ``metric < best * (1 - threshold)`` (``mode="min"``,
    ``threshold_mode="rel"``), ``< best - threshold`` (``"abs"``), mirrored for ``"max"``.
    The metric is read on the host (a tensor's ``.item()``): call ``step`` outside
    ``tg.jit`` steps, with the validation loss.

    Raises:
        ValueError: an unknown mode or threshold mode, ``factor >= 1``, or a ``min_lr`` list
            of another length than the groups.
        TypeError: ``optimizer`` is not a tapegrad optimizer.
    """

    @_torch_options
    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | list[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        _require_optimizer(optimizer, "ReduceLROnPlateau")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: mode must be 'min' or 'max' and threshold_mode 'rel' or "
                f"'abs', got {mode!r}, {threshold_mode!r}."
            )
        if not factor < 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be below 1, got {factor}.")
        groups = optimizer.param_groups
        mins = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * len(groups)
        if len(mins) != len(groups):
            raise ValueError(
                f"ReduceLROnPlateau: {len(mins)} min_lr values for {len(groups)} groups."
            )
        self.optimizer = optimizer
        self.mode, self.threshold_mode = mode, threshold_mode
        self.factor, self.patience, self.cooldown = float(factor), int(patience), int(cooldown)
        self.threshold, self.eps = float(threshold), float(eps)
        self.min_lrs = [float(m) for m in mins]
        # one min_lr for all groups also covers groups added later (add_param_group)
        self._min_lr = None if isinstance(min_lr, (list, tuple)) else float(min_lr)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0

    def _better(self, metric: float) -> bool:
        """PyTorch's ``is_better``: relative thresholds scale ``best`` itself."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return metric < (
                self.best * (1 - self.threshold) if rel else self.best - self.threshold
            )
        return metric > (self.best * (1 + self.threshold) if rel else self.best + self.threshold)

    def step(self, metrics: Any) -> None:
        """Count one epoch with this ``metrics`` value (a number or a one-element tensor)
        and reduce the rates if it has not improved for more than ``patience`` epochs.

        Raises:
            TracerError: ``metrics`` is a traced value (inside a ``tg.jit`` step).
            ValueError: ``metrics`` is not one number; groups were added since with a
                ``min_lr`` list (nothing changed).
        """
        value = metrics.data if isinstance(metrics, Tensor) else metrics
        if isinstance(value, jax.core.Tracer):
            raise TracerError(
                "ReduceLROnPlateau.step(metric) was called inside a tg.jit step: it reads the "
                "metric's value. Return the metric from the step and call sched.step(loss) "
                "after it."
            )
        host = np.asarray(value)
        if host.size != 1 or host.dtype.kind not in "biuf":
            raise ValueError(
                f"ReduceLROnPlateau.step: the metric must be one number, got "
                f"{type(metrics).__name__} of shape {host.shape} and dtype {host.dtype}."
            )
        metric = float(host.reshape(()))
        groups = self.optimizer.param_groups
        if len(self.min_lrs) < len(groups):  # groups added since (add_param_group)
            if self._min_lr is None:
                raise ValueError(
                    f"ReduceLROnPlateau: {len(groups)} groups now, {len(self.min_lrs)} min_lr "
                    "values given; make the scheduler after adding groups, or give one min_lr."
                )
            self.min_lrs += [self._min_lr] * (len(groups) - len(self.min_lrs))
        self.last_epoch += 1
        if self._better(metric):
            self.best = metric
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, low in zip(self.optimizer.param_groups, self.min_lrs, strict=True):
                old = float(g["lr"])
                new = max(old * self.factor, low)
                if old - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0

    def get_last_lr(self) -> list[float]:
        """The learning rate of each group now."""
        return [float(g["lr"]) for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """The counters, the best metric and the settings (numbers and strings)."""
        keys = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch")
        return {k: getattr(self, k) for k in keys}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s counters and best metric (the rates are the
        optimizer's: load them with ``opt.load_state_dict``).

        Raises:
            ValueError: not this scheduler's state dict.
        """
        keys = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch")
        if not isinstance(state, Mapping) or not set(keys) <= set(state):
            raise ValueError(
                f"ReduceLROnPlateau.load_state_dict: needs {', '.join(keys)}; pass what "
                "sched.state_dict() returned."
            )
        self.best = float(state["best"])
        self.num_bad_epochs, self.cooldown_counter, self.last_epoch = (
            int(state[k]) for k in keys[1:]
        )

    def __repr__(self) -> str:
        return f"ReduceLROnPlateau(best={self.best}, lr={self.get_last_lr()})"
