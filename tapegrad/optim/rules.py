"""The built-in update rules with PyTorch's semantics on optax: SGD, Adam, AdamW, RMSprop.

Every rule takes PyTorch's ``maximize`` (the gradients are negated first, before weight decay,
as PyTorch does); Adam and AdamW take ``amsgrad``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from tapegrad._tensor import Tensor
from tapegrad.optim.optimizer import Optimizer, sgd_options, torch_options

__all__ = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"]

_Params = Iterable[Tensor] | Iterable[Mapping[str, Any]]
_LR = float | Callable[[Any], Any]  # a number or an optax schedule of the step count


def _sign(maximize: bool) -> tuple[optax.GradientTransformation, ...]:
    """PyTorch's ``maximize``: the gradient is negated before anything else reads it."""
    return (optax.scale(-1.0),) if maximize else ()


def _sgd(
    learning_rate: Any,
    momentum: Any,
    weight_decay: Any,
    *,
    nesterov: bool,
    has_momentum: bool,
    maximize: bool,
) -> optax.GradientTransformation:
    """PyTorch's SGD: ``g += wd * p``; ``b = momentum * b + g`` (``b = g`` at the first
    step); ``p -= lr * b`` (Nesterov: ``p -= lr * (g + momentum * b)``)."""
    return optax.chain(
        *_sign(maximize),
        optax.add_decayed_weights(weight_decay),
        optax.trace(decay=momentum, nesterov=nesterov) if has_momentum else optax.identity(),
        optax.scale_by_learning_rate(learning_rate),
    )


def _scale_by_adam(b1: Any, b2: Any, eps: Any, amsgrad: bool) -> optax.GradientTransformation:
    """PyTorch's Adam scaling: ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, step
    ``(m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``, with ``t`` counted **per parameter**
    (PyTorch's ``state[p]["step"]``): a parameter skipped on a step (no ``.grad``; the
    optimizer passes ``skip``, one flag per parameter, as an optax extra argument) keeps its
    count, so its first real step is a full bias-corrected step. optax's ``scale_by_adam``
    keeps one count for all parameters. AMSGrad (``amsgrad``): ``v_max = max(v_max, v)``
    of the *uncorrected* ``v``, bias-corrected after the maximum, as PyTorch does
    (``optax.scale_by_amsgrad`` takes the maximum of the corrected ``v``: other steps).

    The state is optax's type (``ScaleByAdamState``, or ``ScaleByAmsgradState`` with
    ``nu_max``) whose ``count`` is a tuple of int32 counts, one per parameter.
    """

    def init(params: Any) -> Any:
        def zeros() -> Any:  # separate buffers: tg.jit donates each state array once
            return jax.tree.map(jnp.zeros_like, params)

        count = tuple(jnp.zeros([], jnp.int32) for _ in params)
        if amsgrad:
            return optax.ScaleByAmsgradState(count=count, mu=zeros(), nu=zeros(), nu_max=zeros())
        return optax.ScaleByAdamState(count=count, mu=zeros(), nu=zeros())

    def update(
        g: Any, state: Any, params: Any = None, skip: tuple[bool, ...] | None = None, **_: Any
    ) -> tuple[Any, Any]:
        del params
        skip = skip or (False,) * len(g)
        tick = optax.safe_int32_increment
        count = tuple(c if s else tick(c) for c, s in zip(state.count, skip, strict=True))
        mu = tuple(b1 * m + (1 - b1) * x for m, x in zip(state.mu, g, strict=True))
        nu = tuple(b2 * v + (1 - b2) * x * x for v, x in zip(state.nu, g, strict=True))
        denom = tuple(map(jnp.maximum, state.nu_max, nu)) if amsgrad else nu
        step = tuple(
            (m / (1 - b1**t)) / (jnp.sqrt(v / (1 - b2**t)) + eps)
            for m, v, t in zip(mu, denom, count, strict=True)
        )
        if amsgrad:
            return step, optax.ScaleByAmsgradState(count=count, mu=mu, nu=nu, nu_max=denom)
        return step, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

    return optax.GradientTransformationExtraArgs(init, update)


def _adam(
    learning_rate: Any,
    b1: Any,
    b2: Any,
    eps: Any,
    weight_decay: Any,
    *,
    decoupled: bool,
    amsgrad: bool,
    maximize: bool,
) -> optax.GradientTransformation:
    """Adam (L2 penalty ``g += wd * p`` first) or AdamW (``p -= lr * wd * p`` beside the Adam
    step: optax adds ``wd * p`` to the update before the learning rate scales it); AMSGrad
    as PyTorch's."""
    decay = optax.add_decayed_weights(weight_decay)
    scale = _scale_by_adam(b1, b2, eps, amsgrad)
    steps = (scale, decay) if decoupled else (decay, scale)
    return optax.chain(*_sign(maximize), *steps, optax.scale_by_learning_rate(learning_rate))


def _rmsprop(
    learning_rate: Any,
    alpha: Any,
    eps: Any,
    weight_decay: Any,
    momentum: Any,
    *,
    centered: bool,
    has_momentum: bool,
    maximize: bool,
) -> optax.GradientTransformation:
    """PyTorch's RMSprop: ``v = alpha v + (1 - alpha) g^2``; ``g / (sqrt(v) + eps)`` (eps
    outside the root; centered: ``sqrt(v - mean(g)^2)``); optional momentum buffer."""
    scale = optax.scale_by_stddev if centered else optax.scale_by_rms
    return optax.chain(
        *_sign(maximize),
        optax.add_decayed_weights(weight_decay),
        scale(decay=alpha, eps=eps, eps_in_sqrt=False),
        optax.trace(decay=momentum) if has_momentum else optax.identity(),
        optax.scale_by_learning_rate(learning_rate),
    )


class ScaleByAdagradState(NamedTuple):
    """Adagrad's state: each parameter's step count and running sum of squared gradients."""

    steps: tuple[jax.Array, ...]
    sum_of_squares: Any


def _scale_by_adagrad(lr_decay: Any, eps: Any, initial: Any) -> optax.GradientTransformation:
    """PyTorch's Adagrad scaling: ``s += g^2`` (``s`` starts at ``initial``), step
    ``g / (sqrt(s) + eps) / (1 + (t - 1) * lr_decay)`` with ``t`` counted per parameter (a
    skipped parameter keeps its count, as in ``_scale_by_adam``). optax's ``scale_by_rss``
    puts ``eps`` inside the root and has no ``lr_decay``: other steps where ``s`` is small."""

    def init(params: Any) -> ScaleByAdagradState:
        count = tuple(jnp.zeros([], jnp.int32) for _ in params)
        return ScaleByAdagradState(count, tuple(jnp.full_like(p, initial) for p in params))

    def update(
        g: Any, state: Any, params: Any = None, skip: tuple[bool, ...] | None = None, **_: Any
    ) -> tuple[Any, Any]:
        del params
        skip = skip or (False,) * len(g)
        tick = optax.safe_int32_increment
        count = tuple(c if s else tick(c) for c, s in zip(state.steps, skip, strict=True))
        sums = tuple(v + x * x for v, x in zip(state.sum_of_squares, g, strict=True))
        step = tuple(
            x / (jnp.sqrt(v) + eps) / (1 + (t - 1) * lr_decay)
            for x, v, t in zip(g, sums, count, strict=True)
        )
        return step, ScaleByAdagradState(count, sums)

    return optax.GradientTransformationExtraArgs(init, update)


def _adagrad(
    learning_rate: Any,
    lr_decay: Any,
    weight_decay: Any,
    initial_accumulator_value: Any,
    eps: Any,
    *,
    maximize: bool,
) -> optax.GradientTransformation:
    """PyTorch's Adagrad: ``g += wd * p``, then ``_scale_by_adagrad`` and the learning rate."""
    return optax.chain(
        *_sign(maximize),
        optax.add_decayed_weights(weight_decay),
        _scale_by_adagrad(lr_decay, eps, initial_accumulator_value),
        optax.scale_by_learning_rate(learning_rate),
    )


def _injected(
    rule: Callable[..., optax.GradientTransformation],
    numbers: dict[str, Any],
    params: Iterable[Tensor],
    **statics: bool,
) -> optax.GradientTransformation:
    """``rule`` with ``numbers`` as injected hyperparameters (a loop or a schedule changes them
    between steps without retracing) and ``statics`` fixed (they choose the chain's shape).

    The hyperparameters are float64 when a parameter is (x64 on), else float32 whatever the
    parameters' dtype: optax casts them to the parameters' dtype otherwise, and in bfloat16
    Adam's ``b2=0.999`` rounds to 1, so its bias correction ``1 - b2**t`` is 0 and every
    update NaN. Moments of low-precision parameters are then kept in float32 from the first
    step on (updates are cast back to each parameter's dtype)."""
    wide = any(p.dtype == jnp.float64 for p in params)
    dtype = jnp.float64 if wide else jnp.float32
    make = optax.inject_hyperparams(rule, static_args=tuple(statics), hyperparam_dtype=dtype)
    return make(**numbers, **statics)


def _nonneg(group: Mapping[str, Any], *names: str) -> None:
    for name in names:
        if not group[name] >= 0:  # NaN too, as PyTorch
            raise ValueError(f"{name} must be a non-negative number, got {group[name]}.")


def _positive(momentum: Any) -> bool:
    """Whether the update has a momentum buffer: ``momentum > 0``. A traced momentum (a
    ``tg.jit`` step's input) is one that was above 0 when the step was compiled (a momentum
    of 0 stays a constant of the step: ``_discover.rate``)."""
    return isinstance(momentum, jax.core.Tracer) or momentum > 0


def _betas(value: Any) -> tuple[Any, Any]:
    """Adam's ``betas`` as a pair.

    Raises:
        TypeError: not a pair of numbers (one number, three, ...).
    """
    try:
        b1, b2 = value
    except (TypeError, ValueError):
        raise TypeError(
            f"betas must be a pair (beta1, beta2), e.g. betas=(0.9, 0.999); got {value!r}."
        ) from None
    return b1, b2


class _Builtin(Optimizer):
    """A rule function of this module (``_make``) with the group's numbers injected and its
    flags (``_flags``: the function's keyword-only arguments) fixed."""

    _make: Callable[..., optax.GradientTransformation]

    def _flags(self, group: Mapping[str, Any]) -> dict[str, bool]:
        """The rule function's keyword-only arguments for ``group`` (``maximize`` for all)."""
        return {"maximize": bool(group["maximize"])}

    def _structure(self, group: Mapping[str, Any]) -> tuple[Any, ...]:
        """an option shaping the update (nesterov, centered, amsgrad, maximize, momentum > 0)"""
        return tuple(self._flags(group).items())

    def _numbers(self, group: Mapping[str, Any]) -> dict[str, Any]:
        """The group's numbers under the rule function's names (``_inputs``: ``lr`` as
        ``learning_rate``, ``betas`` as ``b1``, ``b2``): the arguments that
        ``optax.inject_hyperparams`` makes settable, and ``tg.jit`` takes as inputs."""
        numbers = {}
        for key in self._inputs:
            if key == "betas":
                numbers["b1"], numbers["b2"] = _betas(group["betas"])
            else:
                numbers["learning_rate" if key == "lr" else key] = group[key]
        return numbers

    def _rule(self, group: Mapping[str, Any]) -> optax.GradientTransformation:
        numbers, params = self._numbers(group), group["params"]
        return _injected(type(self)._make, numbers, params, **self._flags(group))


class SGD(_Builtin):
    """Stochastic gradient descent with PyTorch's momentum, Nesterov and weight decay.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule (a function of the step count).
        momentum: the momentum factor; 0 for plain SGD.
        weight_decay: L2 penalty added to the gradient. Keyword-only: PyTorch's fourth
            positional parameter is ``dampening``, so ``SGD(p, 0.1, 0.9, 1e-4)`` from PyTorch
            code raises instead of meaning something else here.
        nesterov: use Nesterov momentum (needs ``momentum > 0``).
        maximize: ascend: negate the gradients (before weight decay, as PyTorch does).

    Raises:
        ValueError: a negative learning rate, momentum or weight decay; ``nesterov`` without
            momentum; bad ``params`` (see :class:`Optimizer`).
        TypeError: a PyTorch option tapegrad does not take (``dampening=``, ``foreach=``, ...;
            the message says what to do instead).
    """

    _make = staticmethod(_sgd)
    _inputs = ("lr", "momentum", "weight_decay")

    @sgd_options
    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-3,
        momentum: float = 0.0,
        *,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        maximize: bool = False,
    ) -> None:
        defaults = {"lr": lr, "momentum": momentum, "weight_decay": weight_decay}
        super().__init__(params, defaults={**defaults, "nesterov": nesterov, "maximize": maximize})

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        super()._check_hyper(group)
        _nonneg(group, "momentum", "weight_decay")
        if group["nesterov"] and group["momentum"] <= 0:
            raise ValueError("SGD: nesterov needs momentum > 0.")

    def _flags(self, group: Mapping[str, Any]) -> dict[str, bool]:
        nesterov, has_momentum = bool(group["nesterov"]), _positive(group["momentum"])
        return {**super()._flags(group), "nesterov": nesterov, "has_momentum": has_momentum}


class Adam(_Builtin):
    """Adam (Kingma & Ba 2015) with PyTorch's defaults; ``eps`` outside the square root.

    ``weight_decay`` adds ``weight_decay * p`` to the gradient (an L2 penalty, PyTorch's
    Adam); use :class:`AdamW` for decoupled decay. ``amsgrad=True`` is PyTorch's AMSGrad
    (Reddi et al. 2018): the denominator uses the running maximum of the second moment,
    taken before bias correction as PyTorch does (``optax.scale_by_amsgrad`` takes it after,
    which gives other steps), kept in the state as ``nu_max``.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule.
        betas: decay rates of the first and second moment estimates.
        eps: added to the denominator.
        weight_decay: L2 penalty.
        amsgrad: use the running maximum of the second moment (AMSGrad).
        maximize: ascend: negate the gradients (before weight decay, as PyTorch does).

    Raises:
        ValueError: negative hyperparameters, betas outside ``[0, 1)``, bad ``params``.
        TypeError: ``betas`` not a pair; a PyTorch option tapegrad does not take
            (``foreach=``, ``fused=``, ...; the message says what to do instead).
    """

    _make = staticmethod(_adam)
    _decoupled = False
    _inputs = ("lr", "betas", "eps", "weight_decay")

    @torch_options
    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {"lr": lr, "betas": _betas(betas), "eps": eps, "weight_decay": weight_decay}
        flags = {"amsgrad": amsgrad, "maximize": maximize}
        super().__init__(params, defaults={**defaults, **flags})

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        super()._check_hyper(group)
        _nonneg(group, "eps", "weight_decay")
        if not all(0.0 <= b < 1.0 for b in group["betas"]):
            raise ValueError(f"betas must be in [0, 1), got {group['betas']}.")

    def _flags(self, group: Mapping[str, Any]) -> dict[str, bool]:
        amsgrad = bool(group["amsgrad"])
        return {**super()._flags(group), "decoupled": self._decoupled, "amsgrad": amsgrad}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), PyTorch's rule:
    ``p -= lr * (adam_step + weight_decay * p)``; PyTorch's default decay, 0.01.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule.
        betas: decay rates of the moment estimates.
        eps: added to the denominator, outside the square root.
        weight_decay: the decoupled decay factor.
        amsgrad: PyTorch's AMSGrad (see :class:`Adam`).
        maximize: ascend: negate the gradients.

    Raises:
        ValueError: negative hyperparameters, betas outside ``[0, 1)``, bad ``params``.
        TypeError: a PyTorch option tapegrad does not take (``foreach=``, ``fused=``, ...; the
            message says what to do instead).
    """

    _decoupled = True

    @torch_options
    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(_Builtin):
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
        maximize: ascend: negate the gradients (before weight decay, as PyTorch does).

    Raises:
        ValueError: negative hyperparameters, bad ``params``.
        TypeError: a PyTorch option tapegrad does not take (``foreach=``, ``capturable=``,
            ...; the message says what to do instead).
    """

    _make = staticmethod(_rmsprop)
    _inputs = ("lr", "alpha", "eps", "weight_decay", "momentum")

    @torch_options
    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "alpha": alpha,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "centered": centered,
            "maximize": maximize,
        }
        super().__init__(params, defaults=defaults)

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        super()._check_hyper(group)
        _nonneg(group, "alpha", "eps", "weight_decay", "momentum")

    def _flags(self, group: Mapping[str, Any]) -> dict[str, bool]:
        centered, has_momentum = bool(group["centered"]), _positive(group["momentum"])
        return {**super()._flags(group), "centered": centered, "has_momentum": has_momentum}


class Adagrad(_Builtin):
    """Adagrad (Duchi et al. 2011) with PyTorch's rule and defaults: ``s += g^2``,
    ``p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)`` (``eps`` outside the square
    root, as PyTorch; ``optax.adagrad`` puts it inside), ``t`` counted per parameter.

    Args:
        params: leaf tensors, or a list of group dicts (see :class:`Optimizer`).
        lr: the learning rate, or an optax schedule.
        lr_decay: the learning rate at step ``t`` is ``lr / (1 + (t - 1) * lr_decay)``.
        weight_decay: L2 penalty added to the gradient.
        initial_accumulator_value: the starting value of the sum of squared gradients.
        eps: added to the denominator.
        maximize: ascend: negate the gradients (before weight decay, as PyTorch does).

    Raises:
        ValueError: negative hyperparameters, bad ``params``.
        TypeError: a PyTorch option tapegrad does not take (``foreach=``, ``fused=``, ...;
            the message says what to do instead).
    """

    _make = staticmethod(_adagrad)
    _inputs = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    @torch_options
    def __init__(
        self,
        params: _Params,
        lr: _LR = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "eps": eps,
            "maximize": maximize,
        }
        super().__init__(params, defaults=defaults)

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        super()._check_hyper(group)
        _nonneg(group, "lr_decay", "weight_decay", "initial_accumulator_value", "eps")
