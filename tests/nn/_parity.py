"""Differential checks of a tapegrad layer against its PyTorch twin (same state dict)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tapegrad as tg
from tapegrad import nn

torch: Any
try:
    import torch
except ModuleNotFoundError:  # pragma: no cover - the dev extra installs it
    torch = None


def first(out: Any) -> Any:
    """The tensor output of a layer that may return a tuple (RNNs, attention)."""
    return out[0] if isinstance(out, tuple) else out


def check_against_torch(
    ours: nn.Module,
    theirs: Any,
    inputs: Sequence[np.ndarray],
    *,
    call: Callable[[Any, list[Any]], Any] = lambda m, xs: first(m(*xs)),
    rtol: float = 1e-5,
    atol: float = 1e-5,
    grad_inputs: bool = True,
) -> None:
    """Load ``theirs.state_dict()`` into ``ours`` unchanged, run both on ``inputs``, and
    compare the output, the parameter gradients and the float inputs' gradients of
    ``sum(out * v)`` for a random cotangent ``v``; also the buffers after the call."""
    result = ours.load_state_dict(theirs.state_dict())
    assert result == nn.LoadResult([], [])
    tg_in = [tg.tensor(x, requires_grad=grad_inputs and x.dtype.kind == "f") for x in inputs]
    th_in = [torch.tensor(x, requires_grad=grad_inputs and x.dtype.kind == "f") for x in inputs]
    out = call(ours, tg_in)
    want = call(theirs, th_in)
    np.testing.assert_allclose(np.asarray(out), want.detach().numpy(), rtol=rtol, atol=atol)
    v = np.random.default_rng(1).standard_normal(want.shape).astype(np.float32)
    (out * tg.tensor(v)).sum().backward()
    (want * torch.tensor(v)).sum().backward()
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        tp = theirs_params[name]
        if tp.grad is None:
            assert p.grad is None or not np.any(np.asarray(p.grad)), name
            continue
        assert p.grad is not None, name
        np.testing.assert_allclose(
            np.asarray(p.grad), tp.grad.numpy(), rtol=rtol, atol=atol, err_msg=name
        )
    for t, th in zip(tg_in, th_in, strict=True):
        if th.requires_grad:
            np.testing.assert_allclose(np.asarray(t.grad), th.grad.numpy(), rtol=rtol, atol=atol)
    theirs_buffers = dict(theirs.named_buffers())
    for name, b in ours.named_buffers():
        np.testing.assert_allclose(
            np.asarray(b), theirs_buffers[name].numpy(), rtol=rtol, atol=atol, err_msg=name
        )
