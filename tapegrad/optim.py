"""Optimizers whose update rule is an optax ``GradientTransformation``, applied in one jit call.

``step()`` reads every parameter's ``.grad``, runs the transformation's ``update`` and
``optax.apply_updates`` over all parameters in **one** compiled call, and writes each new
value back with ``p.data = new``: the parameter keeps its leaf node, nothing is recorded on
the tape and nothing is left hanging.

Parameters whose ``.grad`` is ``None`` are skipped, as PyTorch's optimizers skip them: their
value does not change, and neither do their entries in the optimizer state that are shaped
like the parameters (momentum, Adam's moments). The transformation sees a zero gradient in
their place, so statistics over all gradients (``optax.clip_by_global_norm``) are those of
the gradients that exist. Unlike PyTorch, whose state is kept per parameter, optax keeps some
state for the whole set (Adam's step count), and that advances on every step that updates
anything. When no parameter has a gradient, ``step()`` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
import optax

from tapegrad._tensor import Tensor
from tapegrad.grad_mode import enable_grad

__all__ = ["Optimizer", "SGD", "Adam"]

_Grads = tuple[jax.Array | None, ...]
_StepFn = Callable[[tuple[jax.Array, ...], _Grads, Any], tuple[tuple[jax.Array | None, ...], Any]]


def _keep_skipped(
    new_state: Any, old_state: Any, params: tuple[jax.Array, ...], skip: tuple[bool, ...]
) -> Any:
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


def _make_step(transform: optax.GradientTransformation) -> _StepFn:
    """One compiled function: optax update + apply_updates over all parameters.

    ``grads`` holds ``None`` for skipped parameters; since ``None`` is part of the pytree
    structure, each pattern of skipped parameters compiles once.
    """

    def step(params: tuple[jax.Array, ...], grads: _Grads, state: Any) -> tuple[Any, Any]:
        skip = tuple(g is None for g in grads)
        full = tuple(
            jnp.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
        )
        updates, new_state = transform.update(full, state, params)
        new_params = optax.apply_updates(params, updates)
        if any(skip):
            new_state = _keep_skipped(new_state, state, params, skip)
            new_params = tuple(None if s else q for q, s in zip(new_params, skip, strict=True))
        return tuple(new_params), new_state

    return jax.jit(step)


class Optimizer:
    """Apply any ``optax.GradientTransformation`` to tapegrad parameters, PyTorch-style.

    Example:
        >>> opt = Optimizer(model.parameters(),
        ...                 optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3)))
        >>> opt.zero_grad(); loss.backward(); opt.step()

    Args:
        params: leaf tensors that require grad (e.g. ``model.parameters()``); a tensor
            listed twice is kept once.
        transform: the update rule; ``update`` receives the gradients, the state and the
            current values (so ``optax.adamw`` and other rules that read them work), each
            as a tuple of arrays in ``params`` order.

    Attributes:
        params: the parameters, a tuple in the order given.
        transform: the ``GradientTransformation``.
        state: the optax state (a pytree of arrays), replaced by each ``step()``.

    Raises:
        ValueError: ``params`` is empty, or holds a tensor that is not a leaf requiring grad.
        TypeError: ``params`` holds something other than a ``Tensor``.
    """

    params: tuple[Tensor, ...]
    transform: optax.GradientTransformation
    state: Any

    def __init__(self, params: Iterable[Tensor], transform: optax.GradientTransformation) -> None:
        unique: dict[int, Tensor] = {}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(
                    f"optimizer parameter {i} is a {type(p).__name__}, not a tapegrad Tensor; "
                    "pass model.parameters()."
                )
            if not (p.requires_grad and p.is_leaf):
                raise ValueError(
                    f"optimizer parameter {i} (shape {p.shape}) is not a leaf that requires "
                    "grad; make it with .require_grad() (an op's output cannot be optimized)."
                )
            unique.setdefault(id(p), p)
        if not unique:
            raise ValueError("optimizer got an empty parameter list.")
        self.params = tuple(unique.values())
        self.transform = transform
        self.state = transform.init(tuple(p.data for p in self.params))
        self._step: _StepFn = _make_step(transform)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter.

        Args:
            set_to_none: set ``.grad`` to ``None`` (PyTorch's default: the next ``step()``
                skips a parameter no backward reached); with ``False``, existing gradients
                become zeros instead.
        """
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = Tensor(jnp.zeros_like(p.data))

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient, in one compiled call.

        Args:
            closure: optional; called under grad mode before the update (it should zero the
                gradients, compute the loss and call ``backward()``), as in PyTorch.

        Returns:
            What ``closure`` returned, or ``None``.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        params = self.params
        grads: _Grads = tuple(None if p.grad is None else p.grad.data for p in params)
        if all(g is None for g in grads):
            return loss
        new_params, self.state = self._step(tuple(p.data for p in params), grads, self.state)
        for p, new in zip(params, new_params, strict=True):
            if new is not None:
                p.data = new
        return loss

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.params)} parameters)"


def _check_lr(lr: float | optax.Schedule) -> None:
    if not callable(lr) and lr < 0:
        raise ValueError(f"learning rate must be non-negative, got {lr}.")


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum: ``optax.sgd``.

    With momentum ``m`` this is PyTorch's rule (no dampening): ``b = m * b + g``,
    ``p -= lr * b``.

    Args:
        params: leaf tensors that require grad.
        lr: the learning rate, or an optax schedule (a function of the step count).
        momentum: the momentum factor; 0 for plain SGD.
        nesterov: use Nesterov momentum.

    Raises:
        ValueError: a negative learning rate or momentum, or bad ``params`` (see
            :class:`Optimizer`).
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | optax.Schedule,
        momentum: float = 0.0,
        *,
        nesterov: bool = False,
    ) -> None:
        _check_lr(lr)
        if momentum < 0:
            raise ValueError(f"momentum must be non-negative, got {momentum}.")
        super().__init__(params, optax.sgd(lr, momentum=momentum or None, nesterov=nesterov))


class Adam(Optimizer):
    """Adam (Kingma & Ba): ``optax.adam``, with PyTorch's defaults.

    Args:
        params: leaf tensors that require grad.
        lr: the learning rate, or an optax schedule (a function of the step count).
        betas: decay rates of the first and second moment estimates.
        eps: added to the denominator, outside the square root (as PyTorch).

    Raises:
        ValueError: a negative learning rate, or bad ``params`` (see :class:`Optimizer`).
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float | optax.Schedule = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        _check_lr(lr)
        super().__init__(params, optax.adam(lr, b1=betas[0], b2=betas[1], eps=eps))
