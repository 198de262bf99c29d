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
0 (PyTorch's scales it from the moment it was added).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optax

from tapegrad.optim.optimizer import Optimizer

__all__ = ["LRScheduler", "StepLR", "CosineAnnealingLR", "LambdaLR", "LinearWarmup"]


class LRScheduler:
    """Base class: a schedule per group, a function of ``last_epoch`` and the group's
    initial learning rate; construction applies the value at count 0, as PyTorch's does.

    Attributes:
        optimizer: the optimizer whose groups it sets.
        base_lrs: each group's learning rate when the scheduler was made
            (``group["initial_lr"]``).
        last_epoch: how many times ``step()`` ran.

    Raises:
        TypeError: a group whose ``"lr"`` is itself an optax schedule (use one or the other).
    """

    optimizer: Optimizer
    base_lrs: list[float]
    last_epoch: int

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.base_lrs = []
        self._schedules: list[Callable[[int], Any]] = []
        self.last_epoch = -1
        self.step()

    def _adopt(self) -> None:
        """Make the schedules of the groups not met yet: every group at construction, later
        those added with ``add_param_group`` (each from its own rate, ``group["initial_lr"]``).

        Raises:
            TypeError: one of them has an optax schedule as ``"lr"`` (checked for all before
                any is changed).
        """
        start = len(self._schedules)
        new = self.optimizer.param_groups[start:]
        for i, g in enumerate(new, start):
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
        """
        if len(self._schedules) < len(self.optimizer.param_groups):
            self._adopt()
        self.last_epoch += 1
        for g, schedule in zip(self.optimizer.param_groups, self._schedules, strict=True):
            g["lr"] = float(schedule(self.last_epoch))

    def get_last_lr(self) -> list[float]:
        """The learning rate of each group set by the last ``step()``."""
        return [float(g["lr"]) for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """``last_epoch`` and ``base_lrs`` (numbers; ``tg.save``-able)."""
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``'s count and base rates and set the groups' rates.

        Raises:
            ValueError: the number of groups differs.
        """
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

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}.")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        schedule: Callable[[int], Any] = optax.exponential_decay(
            base_lr, transition_steps=self.step_size, decay_rate=self.gamma, staircase=True
        )
        return schedule


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

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803 - PyTorch's name
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}.")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        down: Callable[[int], Any]
        if base_lr == 0.0:
            down = optax.constant_schedule(self.eta_min)
            return down
        down = optax.cosine_decay_schedule(base_lr, self.T_max, alpha=self.eta_min / base_lr)
        period = 2 * self.T_max

        def schedule(epoch: int) -> Any:
            t = epoch % period
            return down(min(t, period - t))  # cos(pi t / T) is symmetric about T

        return schedule


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)``.

    Args:
        optimizer: the optimizer.
        lr_lambda: a function of the epoch count, or one per group.

    Raises:
        ValueError: a list whose length is not the number of groups.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
    ) -> None:
        n = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, Sequence) else [lr_lambda] * n
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


class LinearWarmup(LRScheduler):
    """Ramp the rate linearly from ``start_factor * base_lr`` to ``base_lr`` over
    ``warmup_steps`` steps, then hold it (``optax.linear_schedule``; PyTorch's
    ``LinearLR(optimizer, start_factor, 1.0, total_iters=warmup_steps)``). Call ``step()``
    once per iteration.

    Args:
        optimizer: the optimizer.
        warmup_steps: steps to reach ``base_lr``.
        start_factor: the fraction of ``base_lr`` at step 0, in ``[0, 1]``.

    Raises:
        ValueError: a non-positive ``warmup_steps`` or ``start_factor`` outside ``[0, 1]``.
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int, start_factor: float = 0.1) -> None:
        if warmup_steps <= 0 or not 0.0 <= start_factor <= 1.0:
            raise ValueError(
                "LinearWarmup: warmup_steps must be positive and start_factor in [0, 1], got "
                f"{warmup_steps}, {start_factor}."
            )
        self.warmup_steps, self.start_factor = int(warmup_steps), float(start_factor)
        super().__init__(optimizer)

    def _schedule(self, base_lr: float, group: int) -> Callable[[int], Any]:
        schedule: Callable[[int], Any] = optax.linear_schedule(
            base_lr * self.start_factor, base_lr, self.warmup_steps
        )
        return schedule
