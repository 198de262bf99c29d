"""d2l.ai 2.5 Automatic Differentiation: every example of the section, once per step.

``y = 2 x.x`` and its gradient, resetting the gradient, ``x.sum()``, a non-scalar ``x * x``
summed, detaching (``u = y.detach(); z = u * x``), and Python control flow whose loop and
branch read tensor values (``while b.norm() < 1000``, ``if b.sum() > 0``) on a fresh random
scalar that requires grad.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SOURCE = "d2l.ai Automatic Differentiation"
STEPS = 20


def data() -> dict[str, Any]:
    """The random scalars ``a`` of the control-flow example, one per step."""
    return {"a": np.random.default_rng(6).standard_normal(64)}


def _f(a: Any) -> Any:
    """d2l's ``f``: the same code for both systems."""
    b = a * 2
    while (b * b).sum().sqrt() < 1000:  # b.norm() for a scalar
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    x = tg.arange(4.0).require_grad()
    i = 0

    def step() -> Any:
        nonlocal i
        y = 2 * (x @ x)
        y.backward()
        x.grad = None  # x.grad.zero_()
        y = x.sum()
        y.backward()
        x.grad = None
        y = x * x
        y.sum().backward()
        x.grad = None
        y = x * x
        u = y.detach()
        z = u * x
        z.sum().backward()
        x.grad = None
        a = tg.tensor(float(d["a"][i % len(d["a"])])).require_grad()
        i += 1
        out = _f(a)
        out.backward()
        return out

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    x = torch.arange(4.0, dtype=dtype, requires_grad=True)
    i = 0

    def step() -> Any:
        nonlocal i
        y = 2 * torch.dot(x, x)
        y.backward()
        x.grad.zero_()
        y = x.sum()
        y.backward()
        x.grad.zero_()
        y = x * x
        y.sum().backward()
        x.grad.zero_()
        y = x * x
        u = y.detach()
        z = u * x
        z.sum().backward()
        x.grad.zero_()
        a = torch.tensor(float(d["a"][i % len(d["a"])]), dtype=dtype, requires_grad=True)
        i += 1
        out = _f(a)
        out.backward()
        return out

    return step
