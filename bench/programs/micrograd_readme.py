"""micrograd's README example: a scalar expression of two leaves, built and differentiated."""

from __future__ import annotations

from typing import Any

SOURCE = "micrograd README example (scalar expression)"
STEPS = 20


def data() -> dict[str, Any]:
    """The README's inputs a = -4, b = 2."""
    return {"a": -4.0, "b": 2.0}


def _expression(a: Any, b: Any) -> Any:
    """The README's expression, the same code for both systems."""
    c = a + b
    d = a * b + b**3
    c = c + (c + 1)  # the README's c += c + 1 (written out: the same in both systems)
    c = c + (1 + c + (-a))
    d = d + (d * 2 + (b + a).relu())
    d = d + (3 * d + (b - a).relu())
    e = c - d
    f = e**2
    g = f / 2.0
    g = g + 10.0 / f
    return g


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    def step() -> Any:
        a = tg.tensor(d["a"]).require_grad()
        b = tg.tensor(d["b"]).require_grad()
        g = _expression(a, b)
        g.backward()
        return g

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    def step() -> Any:
        a = torch.tensor(d["a"], dtype=dtype, requires_grad=True)
        b = torch.tensor(d["b"], dtype=dtype, requires_grad=True)
        g = _expression(a, b)
        g.backward()
        return g

    return step
