"""Differential tests against PyTorch (CPU): every op of API.md "Building models" on the same
inputs gives the same output and the same input gradients for one random cotangent.

Each row is ``(id, tapegrad function, torch function, inputs)``; float inputs require grad on
both sides, integer and boolean inputs are passed as they are. Conventions that differ on
purpose (``var``/``std`` ``ddof``, ``pad`` pairs, NumPy's ``split``) are mapped in the torch
twin, so the row also documents the mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(0)


def f32(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


def ints(high: int, *shape: int) -> np.ndarray:
    return RNG.integers(0, high, shape).astype(np.int32)


def _is_float(a: np.ndarray) -> bool:
    return bool(np.issubdtype(a.dtype, np.floating))


def _torch_input(a: np.ndarray) -> Any:
    if _is_float(a):
        return torch.tensor(a, requires_grad=True)
    return torch.tensor(a.astype(np.int64) if np.issubdtype(a.dtype, np.integer) else a)


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def compare(
    tg_fn: Callable[..., Any],
    torch_fn: Callable[..., Any],
    arrays: Sequence[np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> None:
    """Same outputs, and the same gradients of every float input along random cotangents."""
    ts = [tg.tensor(a, requires_grad=_is_float(a)) for a in arrays]
    outs = _outputs(tg_fn(*ts))
    vs = [RNG.standard_normal(o.shape).astype(np.float32) for o in outs]
    floats = [t for t in ts if t.requires_grad]
    total = sum(((o * v).sum() for o, v in zip(outs, vs, strict=True)), start=tg.tensor(0.0))
    grads = tg.grad(total, floats)

    pts = [_torch_input(a) for a in arrays]
    pouts = _outputs(torch_fn(*pts))
    for o, p in zip(outs, pouts, strict=True):
        np.testing.assert_allclose(o.numpy(), p.detach().numpy(), rtol=rtol, atol=atol)
    ptotal = sum((p * torch.tensor(v)).sum() for p, v in zip(pouts, vs, strict=True))
    pfloats = [p for p in pts if p.requires_grad]
    pgrads = torch.autograd.grad(ptotal, pfloats)
    for i, (g, pg) in enumerate(zip(grads, pgrads, strict=True)):
        np.testing.assert_allclose(
            g.numpy(), pg.numpy(), rtol=rtol, atol=atol, err_msg=f"gradient of float input {i}"
        )


ROWS: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...]]] = [
    ("gelu", tg.gelu, F.gelu, (f32(3, 4, scale=2),)),
    (
        "gelu-tanh",
        lambda x: tg.gelu(x, approximate="tanh"),
        lambda x: F.gelu(x, approximate="tanh"),
        (f32(3, 4, scale=2),),
    ),
    ("silu", tg.silu, F.silu, (f32(3, 4, scale=2),)),
    ("softplus", tg.softplus, F.softplus, (f32(3, 4, scale=3),)),
    (
        "logsumexp",
        lambda x: tg.logsumexp(x, axis=1),
        lambda x: torch.logsumexp(x, dim=1),
        (f32(3, 4, 2),),
    ),
    ("var", lambda x: tg.var(x, axis=0), lambda x: torch.var(x, dim=0, correction=0), (f32(5, 3),)),
    (
        "std-ddof1",
        lambda x: x.std(axis=(0, 2), ddof=1, keepdims=True),
        lambda x: torch.std(x, dim=(0, 2), correction=1, keepdim=True),
        (f32(3, 2, 4),),
    ),
    ("cumsum", lambda x: tg.cumsum(x, axis=1), lambda x: torch.cumsum(x, dim=1), (f32(2, 5),)),
    (
        "take_along_axis",
        lambda x, i: tg.take_along_axis(x, i, axis=1),
        lambda x, i: torch.gather(x, 1, i),
        (f32(3, 4), ints(4, 3, 6)),
    ),
    ("embedding", tg.embedding, F.embedding, (ints(5, 2, 6), f32(5, 3))),
    (
        "pad",
        lambda x: tg.pad(x, ((0, 0), (1, 2), (3, 0)), value=0.5),
        lambda x: F.pad(x, (3, 0, 1, 2), value=0.5),
        (f32(2, 3, 4),),
    ),
    (
        "flatten",
        lambda x: x.flatten(1, 2),
        lambda x: torch.flatten(x, 1, 2),
        (f32(2, 3, 4, 5),),
    ),
    (
        "split",
        lambda x: tg.split(x, [1, 3], axis=1),
        lambda x: torch.split(x, [1, 2, 2], dim=1),
        (f32(2, 5),),
    ),
    (
        "einsum",
        lambda a, b: tg.einsum("bij,bkj->bik", a, b),
        lambda a, b: torch.einsum("bij,bkj->bik", a, b),
        (f32(2, 3, 4), f32(2, 5, 4)),
    ),
]


@pytest.mark.parametrize(
    ("tg_fn", "torch_fn", "arrays"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_matches_torch(
    tg_fn: Callable[..., Any], torch_fn: Callable[..., Any], arrays: tuple[np.ndarray, ...]
) -> None:
    compare(tg_fn, torch_fn, arrays)


def test_argmax_argmin_match_torch() -> None:
    x = f32(4, 5)
    for axis in (0, 1):
        assert tg.argmax(x, axis=axis).tolist() == torch.argmax(torch.tensor(x), dim=axis).tolist()
        assert tg.argmin(x, axis=axis).tolist() == torch.argmin(torch.tensor(x), dim=axis).tolist()
    assert tg.tensor(x).argmax().item() == torch.argmax(torch.tensor(x)).item()
