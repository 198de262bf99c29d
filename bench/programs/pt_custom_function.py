"""Learning PyTorch with Examples, "custom autograd Function": y = a + b * P3(c + d x)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.programs._steps import sgd_step

SOURCE = "Learning PyTorch with Examples: custom Function (LegendrePolynomial3)"
STEPS = 20
LR = 5e-6


def data() -> dict[str, Any]:
    """sin on 2,000 points; the tutorial's starting coefficients (0, -1, 0, 0.3)."""
    x = np.linspace(-np.pi, np.pi, 2000)
    return {"x": x, "y": np.sin(x), "coef": np.array([0.0, -1.0, 0.0, 0.3])}


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    @tg.jax_op
    def legendre3(x: Any) -> Any:
        """P3(x) = (5 x^3 - 3 x) / 2; its VJP is JAX's."""
        return 0.5 * (5 * x**3 - 3 * x)

    x, y = tg.tensor(d["x"], dtype=tg.float32), tg.tensor(d["y"], dtype=tg.float32)
    a, b, c, e = (tg.tensor(float(v)).require_grad() for v in d["coef"])

    def loss_of() -> Any:
        y_pred = a + b * legendre3(c + e * x)
        loss = ((y_pred - y) ** 2).sum()
        return loss

    return sgd_step(loss_of, (a, b, c, e), LR, tg.no_grad)


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return 0.5 * (5 * x**3 - 3 * x)

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            (x,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * x**2 - 1)

    x, y = torch.tensor(d["x"], dtype=dtype), torch.tensor(d["y"], dtype=dtype)
    a, b, c, e = (torch.tensor(float(v), dtype=dtype, requires_grad=True) for v in d["coef"])

    def loss_of() -> Any:
        y_pred = a + b * LegendrePolynomial3.apply(c + e * x)
        loss = (y_pred - y).pow(2).sum()
        return loss

    return sgd_step(loss_of, (a, b, c, e), LR, torch.no_grad)
