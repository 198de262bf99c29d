"""The loop bodies the programs share, written once for both systems (same method names)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["optimizer_step", "sgd_step"]


def optimizer_step(loss_of: Callable[[], Any], optimizer: Any) -> Callable[[], Any]:
    """The tutorials' step: ``loss = loss_of(); zero_grad(); backward(); step()``; returns loss."""

    def step() -> Any:
        loss = loss_of()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def sgd_step(
    loss_of: Callable[[], Any], params: Iterable[Any], lr: float, no_grad: Callable[[], Any]
) -> Callable[[], Any]:
    """A hand-written SGD step: backward, ``p -= lr * p.grad`` under ``no_grad``, grads reset.

    ``no_grad`` is the system's context manager (``tg.no_grad`` or ``torch.no_grad``).
    """
    params = list(params)

    def step() -> Any:
        loss = loss_of()
        loss.backward()
        with no_grad():
            for p in params:
                p -= lr * p.grad
                p.grad = None
        return loss

    return step
