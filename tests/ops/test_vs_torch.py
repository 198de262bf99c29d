"""Differential tests against PyTorch (CPU): every op of docs/api.md "Building models" on the same
inputs gives the same output and the same input gradients for one random cotangent.

Each row is ``(id, tapegrad function, torch function, inputs)``; float inputs require grad on
both sides, integer and boolean inputs are passed as they are. Conventions that differ on
purpose (``var``/``std`` ``ddof``, ``pad`` pairs, NumPy's ``split``) are mapped in the torch
twin, so the row also documents the mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
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


MEAN = f32(3)
VAR = RNG.uniform(0.5, 2.0, 3).astype(np.float32)
MASK = RNG.uniform(size=(3, 5)) < 0.5
MASK[np.arange(3), np.arange(3)] = True  # every query attends to something
PADDED = ints(4, 3, 5)  # (N, d1) labels of 4 classes, -100 (PyTorch's padding) in places
PADDED[0, 3:] = PADDED[2, 1] = -100
WEIGHT = RNG.uniform(0.5, 2.0, 4).astype(np.float32)  # per-class weights


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
        "softplus-beta-threshold",
        lambda x: tg.softplus(x, beta=2.0, threshold=1.0),
        lambda x: F.softplus(x, beta=2.0, threshold=1.0),
        (f32(3, 4, scale=3),),
    ),
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
    ("softmax-0d", tg.softmax, lambda x: torch.softmax(x, -1), (f32(),)),
    ("log_softmax-0d", tg.log_softmax, lambda x: torch.log_softmax(x, -1), (f32(),)),
    (
        "gather-smaller-index",
        lambda x, i: x.gather(0, i),
        lambda x, i: torch.gather(x, 0, i),
        (f32(4, 5, 3), ints(4, 6, 2, 3)),
    ),
    (
        "gather-0d",
        lambda x, i: tg.gather(x, -1, i),
        lambda x, i: torch.gather(x, -1, i),
        (f32(), ints(1)),
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
        "norm rows, one of them zero",  # the gradient at 0 is 0 (JAX's derivative is NaN)
        lambda x: x.norm(axis=1),
        lambda x: x.norm(dim=1),
        (np.concatenate([np.zeros((1, 3), np.float32), f32(2, 3)]),),
    ),
    (
        "norm of a zero tensor (Frobenius)",
        lambda x: x.norm(),
        lambda x: x.norm(),
        (np.zeros((2, 3), np.float32),),
    ),
    (
        "einsum",
        lambda a, b: tg.einsum("bij,bkj->bik", a, b),
        lambda a, b: torch.einsum("bij,bkj->bik", a, b),
        (f32(2, 3, 4), f32(2, 5, 4)),
    ),
    ("square", lambda x: x.square(), torch.square, (f32(3, 4),)),
    ("rsqrt", lambda x: x.rsqrt(), torch.rsqrt, (np.abs(f32(3, 4)) + 0.5,)),
    ("erf", lambda x: x.erf(), torch.erf, (f32(3, 4, scale=2),)),
    (
        "prod with a zero in a row",  # the zero's gradient is the product of the others
        lambda x: x.prod(axis=1),
        lambda x: x.prod(dim=1),
        (np.concatenate([np.array([[0.0, 2.0, -1.5]], np.float32), f32(2, 3)]),),
    ),
    ("prod of all", lambda x: x.prod(), lambda x: x.prod(), (f32(2, 3),)),
    ("flip", lambda x: x.flip(0, 2), lambda x: x.flip(0, 2), (f32(2, 3, 4),)),
    ("flip tuple", lambda x: x.flip((1,)), lambda x: x.flip((1,)), (f32(2, 3, 4),)),
    ("roll", lambda x: x.roll(2, 1), lambda x: x.roll(2, 1), (f32(2, 5),)),
    ("roll flat", lambda x: x.roll(-3), lambda x: x.roll(-3), (f32(2, 5),)),
    (
        "roll two axes",
        lambda x: x.roll((1, -1), (0, 1)),
        lambda x: x.roll((1, -1), (0, 1)),
        (f32(3, 4),),
    ),
    ("tril", lambda x: x.tril(-1), lambda x: x.tril(-1), (f32(2, 4, 4),)),
    ("triu", lambda x: tg.triu(x, 1), lambda x: torch.triu(x, 1), (f32(3, 5),)),
    ("normalize", tg.normalize, lambda x: F.normalize(x, dim=-1), (f32(3, 5),)),
    (  # no zero entry: |x|'s subgradient at 0 is JAX's 1, PyTorch's 0 (docs/api.md)
        "normalize p=1 axis 0",
        lambda x: tg.normalize(x, p=1, axis=0),
        lambda x: F.normalize(x, p=1, dim=0),
        (f32(3, 4),),
    ),
    ("normalize a zero vector", tg.normalize, F.normalize, (np.zeros((1, 3), np.float32),)),
    (
        "cosine_similarity, broadcast, a zero vector",
        lambda a, b: tg.cosine_similarity(a, b, axis=1),
        lambda a, b: F.cosine_similarity(a, b, dim=1),
        (np.concatenate([np.zeros((1, 4), np.float32), f32(2, 4)]), f32(1, 4)),
    ),
    ("sort", lambda x: x.sort(), lambda x: torch.sort(x), (f32(3, 5),)),
    (
        "sort descending axis 0",
        lambda x: tg.sort(x, axis=0, descending=True),
        lambda x: torch.sort(x, dim=0, descending=True),
        (f32(4, 3),),
    ),
    ("topk", lambda x: x.topk(2), lambda x: torch.topk(x, 2), (f32(3, 5),)),
    (
        "topk smallest axis 0",
        lambda x: tg.topk(x, 3, axis=0, largest=False),
        lambda x: torch.topk(x, 3, dim=0, largest=False),
        (f32(4, 2),),
    ),
    ("outer", tg.outer, torch.outer, (f32(3), f32(4))),
    ("diag-build", lambda x: tg.diag(x, 1), lambda x: torch.diag(x, 1), (f32(3),)),
    ("diag-read", lambda x: tg.diag(x, -1), lambda x: torch.diag(x, -1), (f32(4, 3),)),
    (
        "diagonal",
        lambda x: x.diagonal(1, 2, 0),
        lambda x: torch.diagonal(x, 1, 2, 0),
        (f32(2, 3, 4),),
    ),
    ("trace", tg.trace, torch.trace, (f32(3, 4),)),
    ("arctan2", tg.arctan2, torch.atan2, (f32(3, 4), f32(4))),
    ("lerp", tg.lerp, torch.lerp, (f32(3, 4), f32(3, 4), f32(4))),
    (
        "lerp-number-weight",
        lambda a, b: tg.lerp(a, b, 0.7),
        lambda a, b: torch.lerp(a, b, 0.7),
        (f32(3, 4), f32(4)),
    ),
    (
        "index_add-repeats-alpha",
        lambda x, i, s: tg.index_add(x, 1, i, s, alpha=-1.5),
        lambda x, i, s: torch.index_add(x, 1, i, s, alpha=-1.5),
        (f32(2, 3, 4), np.array([2, 0, 2, 2, 1], np.int32), f32(2, 5, 4)),
    ),
    (
        "scatter_add-repeats",
        lambda x, i, s: tg.scatter_add(x, 0, i, s),
        lambda x, i, s: torch.scatter_add(x, 0, i, s),
        (f32(3, 4), ints(3, 5, 4), f32(5, 4)),
    ),
    (
        "scatter_add-method-axis1",
        lambda x, i, s: x.scatter_add(1, i, s),
        lambda x, i, s: x.scatter_add(1, i, s),
        (f32(3, 4), ints(4, 3, 6), f32(3, 6)),
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


MODEL_ROWS: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...]]] = [
    (
        "conv2d-stride-pad-dilation-groups",
        lambda x, w, b: tg.conv2d(
            x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2
        ),
        lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
        (f32(2, 4, 7, 6), f32(6, 2, 3, 3), f32(6)),
    ),
    (
        "conv2d-same-even-kernel",
        lambda x, w: tg.conv2d(x, w, padding="same"),
        lambda x, w: F.conv2d(x, w, padding="same"),
        (f32(1, 2, 5, 6), f32(3, 2, 2, 4)),
    ),
    (
        "conv1d-same-dilated",
        lambda x, w, b: tg.conv1d(x, w, b, padding="same", dilation=2),
        lambda x, w, b: F.conv1d(x, w, b, padding="same", dilation=2),
        (f32(2, 3, 9), f32(4, 3, 3), f32(4)),
    ),
    (
        "conv1d-unbatched",
        lambda x, w: tg.conv1d(x, w, stride=2),
        lambda x, w: F.conv1d(x, w, stride=2),
        (f32(3, 9), f32(4, 3, 3)),
    ),
    (
        "conv3d",
        lambda x, w, b: tg.conv(x, w, b, padding=1),
        lambda x, w, b: F.conv3d(x, w, b, padding=1),
        (f32(1, 2, 4, 3, 5), f32(3, 2, 2, 3, 2), f32(3)),
    ),
    (
        "max_pool2d",
        lambda x: tg.max_pool2d(x, 3, 2, 1),
        lambda x: F.max_pool2d(x, 3, 2, 1),
        (f32(2, 3, 7, 6),),
    ),
    (
        "max_pool2d-default-stride",
        lambda x: tg.max_pool2d(x, 2),
        lambda x: F.max_pool2d(x, 2),
        (f32(2, 2, 5, 4),),
    ),
    (
        "adaptive_avg_pool2d",
        lambda x: tg.adaptive_avg_pool2d(x, (3, None)),
        lambda x: F.adaptive_avg_pool2d(x, (3, None)),
        (f32(2, 3, 7, 5),),
    ),
    (
        "adaptive_avg_pool2d-global",
        lambda x: tg.adaptive_avg_pool2d(x, 1),
        lambda x: F.adaptive_avg_pool2d(x, 1),
        (f32(3, 6, 4),),
    ),
    (
        "adaptive_avg_pool1d-larger",
        lambda x: tg.adaptive_avg_pool1d(x, 7),
        lambda x: F.adaptive_avg_pool1d(x, 7),
        (f32(2, 3, 5),),
    ),
    (
        "avg_pool2d-padded",
        lambda x: tg.avg_pool2d(x, 3, 2, 1),
        lambda x: F.avg_pool2d(x, 3, 2, 1),
        (f32(2, 3, 7, 6),),
    ),
    (
        "avg_pool2d-padding-not-counted",
        lambda x: tg.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
        lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
        (f32(2, 3, 7, 6),),
    ),
    (
        "embedding-padding_idx",
        lambda i, w: tg.embedding(i, w, padding_idx=2),
        lambda i, w: F.embedding(i, w, padding_idx=2),
        (ints(5, 2, 6), f32(5, 3)),
    ),
    (
        "max_pool3d",
        lambda x: tg.max_pool3d(x, 3, (2, 1, 2), 1),
        lambda x: F.max_pool3d(x, 3, (2, 1, 2), 1),
        (f32(2, 2, 5, 4, 7),),
    ),
    (
        "avg_pool3d-not-counted",
        lambda x: tg.avg_pool3d(x, (2, 3, 3), 2, (1, 1, 0), count_include_pad=False),
        lambda x: F.avg_pool3d(x, (2, 3, 3), 2, (1, 1, 0), count_include_pad=False),
        (f32(3, 5, 6, 7),),
    ),
    (
        "adaptive_avg_pool3d",
        lambda x: tg.adaptive_avg_pool3d(x, (2, None, 4)),
        lambda x: F.adaptive_avg_pool3d(x, (2, None, 4)),
        (f32(1, 2, 5, 3, 7),),
    ),
    (
        "adaptive_max_pool1d",
        lambda x: tg.adaptive_max_pool1d(x, 4),
        lambda x: F.adaptive_max_pool1d(x, 4),
        (f32(2, 3, 9),),
    ),
    (
        "adaptive_max_pool2d",
        lambda x: tg.adaptive_max_pool2d(x, (3, 5)),
        lambda x: F.adaptive_max_pool2d(x, (3, 5)),
        (f32(2, 7, 4),),
    ),
    (
        "avg_pool2d-rect",
        lambda x: tg.avg_pool2d(x, (2, 3), (1, 2)),
        lambda x: F.avg_pool2d(x, (2, 3), (1, 2)),
        (f32(1, 2, 5, 7),),
    ),
    (
        "linear-1d-weight-0d-bias",  # PyTorch's one-output form: no feature axis
        lambda x, w, b: tg.linear(x, w, b),
        lambda x, w, b: F.linear(x, w, b),
        (f32(4, 2, 3), f32(3), f32()),
    ),
    ("linear-1d-weight-vector", tg.linear, F.linear, (f32(3), f32(3))),
    ("linear-1d-weight-matrix", tg.linear, F.linear, (f32(5, 3), f32(3))),
    (
        "layer_norm-affine",
        lambda x, w, b: tg.layer_norm(x, (3, 4), w, b),
        lambda x, w, b: F.layer_norm(x, (3, 4), w, b),
        (f32(2, 3, 4, scale=3), f32(3, 4), f32(3, 4)),
    ),
    (
        "layer_norm-plain",
        lambda x: tg.layer_norm(x, 5),
        lambda x: F.layer_norm(x, (5,)),
        (f32(4, 5),),
    ),
    (
        "batch_norm-eval",
        lambda x, w, b: tg.batch_norm(x, tg.tensor(MEAN), tg.tensor(VAR), w, b, training=False),
        lambda x, w, b: F.batch_norm(x, torch.tensor(MEAN), torch.tensor(VAR), w, b),
        (f32(2, 3, 4, 4), f32(3), f32(3)),
    ),
    (
        "attention-bool-mask",
        lambda q, k, v, m: tg.scaled_dot_product_attention(q, k, v, mask=m),
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        (f32(2, 2, 3, 4), f32(2, 2, 5, 4), f32(2, 2, 5, 6), MASK),
    ),
    (
        "attention-causal-scaled",
        lambda q, k, v: tg.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
        (f32(1, 2, 4, 8), f32(1, 2, 4, 8), f32(1, 2, 4, 8)),
    ),
    (
        "attention-float-mask",
        lambda q, k, v, m: tg.scaled_dot_product_attention(q, k, v, mask=m),
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        (f32(2, 1, 3, 4), f32(2, 1, 5, 4), f32(2, 1, 5, 4), f32(3, 5)),
    ),
    *(
        (
            f"cross_entropy-smoothing-{r}",
            lambda x, y, r=r: tg.cross_entropy(x, y, label_smoothing=0.1, reduction=r),
            lambda x, y, r=r: F.cross_entropy(x, y, label_smoothing=0.1, reduction=r),
            (f32(6, 4), ints(4, 6)),
        )
        for r in ("mean", "sum", "none")
    ),
    *(
        (
            f"cross_entropy-ignore_index-axis1-{r}",
            lambda x, y, r=r: tg.cross_entropy(x, y, axis=1, reduction=r),
            lambda x, y, r=r: F.cross_entropy(x, y, reduction=r),
            (f32(3, 4, 5), PADDED),
        )
        for r in ("mean", "sum", "none")
    ),
    (
        "cross_entropy-smoothing-ignore_index-0",
        lambda x, y: tg.cross_entropy(x, y, label_smoothing=0.2, ignore_index=0),
        lambda x, y: F.cross_entropy(x, y, label_smoothing=0.2, ignore_index=0),
        (f32(6, 4), np.array([0, 1, 3, 0, 2, 2], np.int32)),
    ),
    *(
        (
            f"cross_entropy-weight-ignore_index-axis1-{r}-smoothing{s}",
            lambda x, y, r=r, s=s: tg.cross_entropy(
                x, y, WEIGHT, axis=1, reduction=r, label_smoothing=s
            ),
            lambda x, y, r=r, s=s: F.cross_entropy(
                x, y, torch.tensor(WEIGHT), reduction=r, label_smoothing=s
            ),
            (f32(3, 4, 5), PADDED),
        )
        for r, s in (("mean", 0.0), ("sum", 0.0), ("none", 0.0), ("mean", 0.2))
    ),
    (
        "nll_loss-weight",
        lambda x, y: tg.nll_loss(x, y, WEIGHT),
        lambda x, y: F.nll_loss(x, y, torch.tensor(WEIGHT)),
        (f32(6, 4), np.array([0, 1, 3, -100, 2, 2], np.int32)),
    ),
    (
        "nll_loss-ignore_index-axis1",
        lambda x, y: tg.nll_loss(x, y, axis=1),
        lambda x, y: F.nll_loss(x, y),
        (f32(3, 4, 5), PADDED),
    ),
    (
        "nll_loss",
        lambda x, y: tg.nll_loss(tg.log_softmax(x), y),
        lambda x, y: F.nll_loss(F.log_softmax(x, -1), y),
        (f32(5, 3), ints(3, 5)),
    ),
    (
        "nll_loss-sum",
        lambda x, y: tg.nll_loss(x, y, reduction="sum"),
        lambda x, y: F.nll_loss(x, y, reduction="sum"),
        (f32(5, 3), ints(3, 5)),
    ),
    *(
        (
            f"bce_with_logits-{r}",
            lambda x, t, r=r: tg.binary_cross_entropy_with_logits(x, t, reduction=r),
            lambda x, t, r=r: F.binary_cross_entropy_with_logits(x, t, reduction=r),
            (f32(4, 3, scale=5), RNG.uniform(0, 1, (4, 3)).astype(np.float32)),
        )
        for r in ("mean", "sum", "none")
    ),
    *(
        (
            f"mse_loss-{r}",
            lambda a, b, r=r: tg.mse_loss(a, b, reduction=r),
            lambda a, b, r=r: F.mse_loss(a, b, reduction=r),
            (f32(4, 3), f32(4, 3)),
        )
        for r in ("sum", "none")
    ),
]


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's own note
@pytest.mark.parametrize(
    ("tg_fn", "torch_fn", "arrays"), [r[1:] for r in MODEL_ROWS], ids=[r[0] for r in MODEL_ROWS]
)
def test_model_ops_match_torch(
    tg_fn: Callable[..., Any], torch_fn: Callable[..., Any], arrays: tuple[np.ndarray, ...]
) -> None:
    compare(tg_fn, torch_fn, arrays, rtol=1e-4, atol=1e-5)


def test_batch_norm_training_matches_torch_with_running_statistics() -> None:
    """Batch statistics normalize; running mean and the unbiased running variance update as
    in PyTorch, for several steps; gradients of x, weight and bias agree."""
    x, w, b = f32(4, 3, 2, 2, scale=2), f32(3), f32(3)
    rm, rv = tg.zeros(3), tg.ones(3)
    trm, trv = torch.zeros(3), torch.ones(3)
    for _ in range(3):
        compare(
            lambda x, w, b: tg.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2),
            lambda x, w, b: F.batch_norm(x, trm, trv, w, b, training=True, momentum=0.2),
            (x, w, b),
            rtol=1e-4,
        )
        np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)
    compare(
        lambda x: tg.batch_norm(x, None, None, training=True),
        lambda x: F.batch_norm(x, None, None, training=True),
        (f32(5, 4),),
        rtol=1e-4,
    )


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_host_padding_labels_match_torch(loss: str) -> None:
    """NumPy labels padded with -100 (PyTorch's ignore_index) pass the host range check and
    give PyTorch's mean over the other labels; their rows get no gradient."""
    x = f32(6, 4)
    y = np.array([1, -100, 3, 0, -100, 2])
    t = tg.tensor(x, requires_grad=True)
    got = getattr(tg, loss)(t, y)
    (g,) = tg.grad(got, t)
    p = torch.tensor(x, requires_grad=True)
    want = getattr(F, loss)(p, torch.tensor(y))
    (pg,) = torch.autograd.grad(want, p)
    np.testing.assert_allclose(float(got), want.item(), rtol=1e-6)
    np.testing.assert_allclose(g.numpy(), pg.numpy(), rtol=1e-5, atol=1e-7)
    assert not g.numpy()[[1, 4]].any()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_every_label_ignored_matches_torch(reduction: str) -> None:
    """All labels ignored: the mean is NaN (0/0), sum 0, none zeros; gradients are zeros."""
    x = f32(3, 4)
    y = np.full(3, -100)
    t = tg.tensor(x, requires_grad=True)
    got = tg.cross_entropy(t, jnp.asarray(y), reduction=reduction)
    (g,) = tg.grad(got.sum(), t)
    p = torch.tensor(x, requires_grad=True)
    want = F.cross_entropy(p, torch.tensor(y), reduction=reduction)
    (pg,) = torch.autograd.grad(want.sum(), p)
    np.testing.assert_array_equal(got.numpy(), want.detach().numpy())  # NaN equals NaN here
    np.testing.assert_array_equal(g.numpy(), pg.numpy())


def test_loss_layers_take_ignore_index_and_axis_as_torch() -> None:
    x = f32(2, 3, 4)
    y = np.array([[0, 2, -1, 1], [-1, -1, 2, 0]])
    t = tg.tensor(x, requires_grad=True)
    ours = tg.nn.CrossEntropyLoss(weight=WEIGHT[:3], ignore_index=-1, axis=1)
    got = ours(t, y)
    logp = tg.log_softmax(t, axis=1)
    got_nll = tg.nn.NLLLoss(reduction="sum", ignore_index=-1, axis=1)(logp, y)
    p = torch.tensor(x)
    theirs = torch.nn.CrossEntropyLoss(weight=torch.tensor(WEIGHT[:3]), ignore_index=-1)
    want = theirs(p, torch.tensor(y))
    want_nll = torch.nn.NLLLoss(reduction="sum", ignore_index=-1)(
        F.log_softmax(p, 1), torch.tensor(y)
    )
    assert ours.state_dict().keys() == theirs.state_dict().keys() == {"weight"}
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)
    np.testing.assert_allclose(float(got_nll), float(want_nll), rtol=1e-6)


def test_float_tests_match_torch() -> None:
    a = np.array([0.0, np.nan, np.inf, -np.inf, -2.5], np.float32)
    x = tg.tensor(a).require_grad()
    for name in ("isnan", "isfinite", "isinf"):
        got = getattr(x, name)()
        assert got.dtype == tg.bool_ and not got.requires_grad
        assert got.tolist() == getattr(torch, name)(torch.tensor(a)).tolist()
        assert getattr(tg, name)(x).tolist() == got.tolist()


def test_sort_and_topk_keep_the_order_of_ties_and_take_0_d() -> None:
    """Stable: equal values keep their order (torch's ``stable=True``); the gradient of a
    value goes to the position it came from."""
    a = np.array([2.0, 1.0, 2.0, 1.0], np.float32)
    x = tg.tensor(a).require_grad()
    values, indices = x.sort()
    assert indices.tolist() == torch.sort(torch.tensor(a), stable=True).indices.tolist()
    assert x.sort(descending=True).indices.tolist() == [0, 2, 1, 3]
    assert x.topk(3).indices.tolist() == [0, 2, 1]
    (g,) = tg.grad((values * tg.tensor([1.0, 2.0, 3.0, 4.0])).sum(), x)
    assert g.tolist() == [3.0, 1.0, 4.0, 2.0]
    s = tg.tensor(5.0)
    assert s.sort().values.item() == 5.0 and s.sort().indices.item() == 0
    assert s.topk(1).values.item() == 5.0 and tg.argsort(s).item() == 0
