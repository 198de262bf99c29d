"""Autograd mechanics notes: requires_grad propagation, locally disabled grad, small tensors.

The notes' examples on (5, 5) tensors: ``a = x + y`` records nothing (no input requires
grad), ``b = a + z`` does; a value computed under ``no_grad`` joins as a constant; a saved
output (``tanh``) feeds the backward; the parameter ``z`` is updated under ``no_grad``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SOURCE = "Autograd mechanics notes (requires_grad, no_grad, saved tensors)"
STEPS = 20
LR = 1e-2


def data() -> dict[str, Any]:
    """Three random (5, 5) matrices."""
    rng = np.random.default_rng(4)
    return {k: rng.standard_normal((5, 5)) for k in ("x", "y", "z")}


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    x, y = tg.tensor(d["x"], dtype=tg.float32), tg.tensor(d["y"], dtype=tg.float32)
    z = tg.tensor(d["z"], dtype=tg.float32).require_grad()

    def step() -> Any:
        nonlocal z
        a = x + y
        b = a + z
        with tg.no_grad():
            c = b * 2
        loss = (b * b.tanh()).sum() + (c * z).mean()
        loss.backward()
        with tg.no_grad():
            z -= LR * z.grad
        z.grad = None
        return loss

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    x, y = torch.tensor(d["x"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    z = torch.tensor(d["z"], dtype=dtype, requires_grad=True)

    def step() -> Any:
        a = x + y
        b = a + z
        with torch.no_grad():
            c = b * 2
        loss = (b * b.tanh()).sum() + (c * z).mean()
        loss.backward()
        with torch.no_grad():
            z.sub_(LR * z.grad)
        z.grad = None
        return loss

    return step
