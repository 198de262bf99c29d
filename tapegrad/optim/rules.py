"""The built-in update rules with PyTorch's semantics on optax: SGD, Adam, AdamW, RMSprop."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import optax

from tapegrad._tensor import Tensor
from tapegrad.optim.optimizer import Optimizer

__all__ = ["SGD", "Adam", "AdamW", "RMSprop"]

_Params = Iterable[Tensor] | Iterable[Mapping[str, Any]]
_LR = float | Callable[[Any], Any]  # a number or an optax schedule of the step count


def _sgd(
    learning_rate: Any, momentum: Any, weight_decay: Any, *, nesterov: bool, has_momentum: bool
) -> optax.GradientTransformation:
    """PyTorch's SGD: ``g += wd * p``; ``b = momentum * b + g`` (``b = g`` at the first
    step); ``p -= lr * b`` (Nesterov: ``p -= lr * (g + momentum * b)``)."""
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        optax.trace(decay=momentum, nesterov=nesterov) if has_momentum else optax.identity(),
        optax.scale_by_learning_rate(learning_rate),
    )


def _adam(
    learning_rate: Any, b1: Any, b2: Any, eps: Any, weight_decay: Any, *, decoupled: bool
) -> optax.GradientTransformation:
    """Adam (L2 penalty ``g += wd * p`` first) or AdamW (``p -= lr * wd * p`` beside the Adam
    step: optax adds ``wd * p`` to the update before the learning rate scales it)."""
    decay = optax.add_decayed_weights(weight_decay)
    adam = optax.scale_by_adam(b1=b1, b2=b2, eps=eps)
    steps = (adam, decay) if decoupled else (decay, adam)
    return optax.chain(*steps, optax.scale_by_learning_rate(learning_rate))


def _rmsprop(
    learning_rate: Any,
    alpha: Any,
    eps: Any,
    weight_decay: Any,
    momentum: Any,
    *,
    centered: bool,
    has_momentum: bool,
) -> optax.GradientTransformation:
    """PyTorch's RMSprop: ``v = alpha v + (1 - alpha) g^2``; ``g / (sqrt(v) + eps)`` (eps
    outside the root; centered: ``sqrt(v - mean(g)^2)``); optional momentum buffer."""
    scale = optax.scale_by_stddev if centered else optax.scale_by_rms
    return optax.chain(
        optax.add_decayed_weights(weight_decay),
        scale(decay=alpha, eps=eps, eps_in_sqrt=False),
        optax.trace(decay=momentum) if has_momentum else optax.identity(),
        optax.scale_by_learning_rate(learning_rate),
    )


def _numbers_of(group: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """The group's numeric hyperparameters ``names``, and ``lr`` as ``learning_rate``: the
    arguments of the rule functions above that ``optax.inject_hyperparams`` makes settable."""
    return {"learning_rate": group["lr"], **{name: group[name] for name in names}}


def _injected(
    rule: Callable[..., optax.GradientTransformation], numbers: dict[str, Any], **statics: bool
) -> optax.GradientTransformation:
    """``rule`` with ``numbers`` as injected hyperparameters (a loop or a schedule changes them
    between steps without retracing) and ``statics`` fixed (they choose the chain's shape)."""
    make = optax.inject_hyperparams(rule, static_args=tuple(statics))
    return make(**numbers, **statics)


def _nonneg(group: Mapping[str, Any], *names: str) -> None:
    for name in names:
        if group[name] < 0:
            raise ValueError(f"{name} must be non-negative, got {group[name]}.")


class SGD(Optimizer):
    """Stochastic gradient descent with PyTorch's momentum, Nesterov and weight decay.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule (a function of the step count).
        momentum: the momentum factor; 0 for plain SGD.
        weight_decay: L2 penalty added to the gradient.
        nesterov: use Nesterov momentum (needs ``momentum > 0``).

    Raises:
        ValueError: a negative learning rate, momentum or weight decay; ``nesterov`` without
            momentum; bad ``params`` (see :class:`Optimizer`).
    """

    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-3,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        *,
        nesterov: bool = False,
    ) -> None:
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay}
        super().__init__(params, defaults={**defaults, "nesterov": nesterov})

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        super()._check_hyper(group)
        _nonneg(group, "momentum", "weight_decay")
        if group["nesterov"] and group["momentum"] <= 0:
            raise ValueError("SGD: nesterov needs momentum > 0.")

    def _numbers(self, group: Mapping[str, Any]) -> dict[str, Any]:
        return _numbers_of(group, "momentum", "weight_decay")

    def _structure(self, group: Mapping[str, Any]) -> tuple[Any, ...]:
        """nesterov, and whether momentum is 0"""
        return (bool(group["nesterov"]), group["momentum"] > 0)

    def _rule(self, group: Mapping[str, Any]) -> optax.GradientTransformation:
        nesterov, has_momentum = self._structure(group)
        return _injected(_sgd, self._numbers(group), nesterov=nesterov, has_momentum=has_momentum)


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015) with PyTorch's defaults; ``eps`` outside the square root.

    ``weight_decay`` adds ``weight_decay * p`` to the gradient (an L2 penalty, PyTorch's
    Adam); use :class:`AdamW` for decoupled decay.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule.
        betas: decay rates of the first and second moment estimates.
        eps: added to the denominator.
        weight_decay: L2 penalty.

    Raises:
        ValueError: negative hyperparameters, betas outside ``[0, 1)``, bad ``params``.
    """

    _decoupled = False

    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults=defaults)

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        super()._check_hyper(group)
        _nonneg(group, "eps", "weight_decay")
        if not all(0.0 <= b < 1.0 for b in group["betas"]):
            raise ValueError(f"betas must be in [0, 1), got {group['betas']}.")

    def _numbers(self, group: Mapping[str, Any]) -> dict[str, Any]:
        b1, b2 = group["betas"]
        return {**_numbers_of(group, "eps", "weight_decay"), "b1": b1, "b2": b2}

    def _rule(self, group: Mapping[str, Any]) -> optax.GradientTransformation:
        return _injected(_adam, self._numbers(group), decoupled=self._decoupled)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), PyTorch's rule:
    ``p -= lr * (adam_step + weight_decay * p)``; PyTorch's default decay, 0.01.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule.
        betas: decay rates of the moment estimates.
        eps: added to the denominator, outside the square root.
        weight_decay: the decoupled decay factor.

    Raises:
        ValueError: negative hyperparameters, betas outside ``[0, 1)``, bad ``params``.
    """

    _decoupled = True

    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture 6e) with PyTorch's semantics: ``eps`` is added **outside**
    the square root (optax's default puts it inside), optional centring and momentum.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule.
        alpha: decay of the running average of squared gradients.
        eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient.
        momentum: momentum factor on the scaled step.
        centered: divide by the estimated standard deviation instead of the RMS.

    Raises:
        ValueError: negative hyperparameters, bad ``params``.
    """

    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
        }
        super().__init__(params, defaults=defaults)

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        super()._check_hyper(group)
        _nonneg(group, "alpha", "eps", "weight_decay", "momentum")

    def _numbers(self, group: Mapping[str, Any]) -> dict[str, Any]:
        return _numbers_of(group, "alpha", "eps", "weight_decay", "momentum")

    def _structure(self, group: Mapping[str, Any]) -> tuple[Any, ...]:
        """centered, and whether momentum is 0"""
        return (bool(group["centered"]), group["momentum"] > 0)

    def _rule(self, group: Mapping[str, Any]) -> optax.GradientTransformation:
        centered, has_momentum = self._structure(group)
        return _injected(
            _rmsprop, self._numbers(group), centered=centered, has_momentum=has_momentum
        )
