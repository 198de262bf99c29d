"""PyTorch hands find their way (issue 16, item 10): PyTorch's spellings give PyTorch's values
(checked against torch itself), ``transpose(a, b)`` swaps on any ndim, freezing a leaf works
with optimizers, and refused spellings name tapegrad's (also in ``test_args.py``; optimizer
options in ``tests/optim``): attention's keywords, ``tg.nn.functional``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _support import error_of

import tapegrad as tg

torch = pytest.importorskip("torch")

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7.0 - 1.05  # no 0: abs'(0) differs
IDX = torch.tensor([2, 0, 2, 1])
SCATTER = np.random.default_rng(2).integers(0, 4, (2, 3, 4)).astype(np.int32)


def _both(tg_fn: Callable[[tg.Tensor], tg.Tensor], torch_fn: Callable[[Any], Any]) -> None:
    """Same values and same gradient (of a weighted sum) in tapegrad and torch."""
    t = tg.tensor(X, requires_grad=True)
    p = torch.tensor(X, requires_grad=True)
    y, q = tg_fn(t), torch_fn(p)
    np.testing.assert_allclose(np.asarray(y.data), q.detach().numpy(), rtol=1e-6, atol=1e-6)
    w = np.cos(np.arange(q.numel(), dtype=np.float32)).reshape(tuple(q.shape))
    (g,) = tg.grad((y * w).sum(), t)
    (q * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(g.data), p.grad.numpy(), rtol=1e-5, atol=1e-6)


SPELLINGS: list[tuple[str, Callable[[tg.Tensor], tg.Tensor], Callable[[Any], Any]]] = [
    ("unsqueeze", lambda t: t.unsqueeze(1), lambda p: p.unsqueeze(1)),
    ("unsqueeze-neg", lambda t: t.unsqueeze(-1), lambda p: p.unsqueeze(-1)),
    ("permute", lambda t: t.permute(2, 0, 1), lambda p: p.permute(2, 0, 1)),
    ("permute-tuple", lambda t: t.permute((1, 2, 0)), lambda p: p.permute((1, 2, 0))),
    ("swapaxes", lambda t: t.swapaxes(0, 2), lambda p: p.swapaxes(0, 2)),
    ("transpose-3d", lambda t: t.transpose(0, 1), lambda p: p.transpose(0, 1)),
    ("transpose-neg", lambda t: t.transpose(-1, 0), lambda p: p.transpose(-1, 0)),
    ("transpose-2d", lambda t: t[0].transpose(0, 1), lambda p: p[0].transpose(0, 1)),
    ("transpose-2d-rev", lambda t: t[0].transpose(1, 0), lambda p: p[0].transpose(1, 0)),
    ("transpose-same", lambda t: t.transpose(1, 1), lambda p: p.transpose(1, 1)),
    ("tg.transpose", lambda t: tg.transpose(t, 0, 2), lambda p: torch.transpose(p, 0, 2)),
    ("cat", lambda t: tg.cat([t, t * 2.0], 1), lambda p: torch.cat([p, p * 2.0], 1)),
    ("norm", lambda t: t.norm(), lambda p: p.norm()),
    ("norm-axis", lambda t: t.norm(axis=-1), lambda p: p.norm(dim=-1)),
    ("norm-1", lambda t: t.norm(1, axis=1), lambda p: p.norm(p=1, dim=1)),
    (
        "masked_fill",
        lambda t: t.masked_fill(t < 0, 0.5),
        lambda p: p.masked_fill(p < 0, 0.5),
    ),
    ("tg.sum", lambda t: tg.sum(t, 1), lambda p: torch.sum(p, 1)),
    ("tg.mean", lambda t: tg.mean(t, (0, 2)), lambda p: torch.mean(p, (0, 2))),
    ("tg.reshape", lambda t: tg.reshape(t, (4, 6)), lambda p: torch.reshape(p, (4, 6))),
    ("range-index", lambda t: t[:, range(1, 3)], lambda p: p[:, range(1, 3)]),
    # what the index_select hint says to write
    (
        "index_select-0",
        lambda t: t[[1, 1, 0]],
        lambda p: p.index_select(0, torch.tensor([1, 1, 0])),
    ),
    ("index_select-1", lambda t: t[:, [2, 0, 2, 1]], lambda p: p.index_select(1, IDX)),
    ("diagonal", lambda t: t.diagonal(1, 1, 2), lambda p: p.diagonal(1, 1, 2)),
    ("trace", lambda t: t[1].trace(), lambda p: p[1].trace()),
    ("diag", lambda t: tg.diag(t[0, 0]), lambda p: torch.diag(p[0, 0])),
    ("outer", lambda t: tg.outer(t[0, 0], t[1, 2]), lambda p: torch.outer(p[0, 0], p[1, 2])),
    ("arctan2", lambda t: tg.arctan2(t, t[1]), lambda p: torch.atan2(p, p[1])),
    ("lerp", lambda t: tg.lerp(t[0], t[1], t[0, 0]), lambda p: torch.lerp(p[0], p[1], p[0, 0])),
    (
        "index_add",
        lambda t: t.index_add(1, [2, 0, 2], t[:, :3] * 2.0, alpha=0.5),
        lambda p: p.index_add(1, torch.tensor([2, 0, 2]), p[:, :3] * 2.0, alpha=0.5),
    ),
    (
        "scatter_add",
        lambda t: t.scatter_add(2, SCATTER, t),
        lambda p: p.scatter_add(2, torch.tensor(SCATTER, dtype=torch.int64), p),
    ),
]


@pytest.mark.parametrize(("name", "ours", "theirs"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_pytorch_spellings_give_pytorchs_values_and_gradients(
    name: str, ours: Callable[[tg.Tensor], tg.Tensor], theirs: Callable[[Any], Any]
) -> None:
    _both(ours, theirs)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_transpose_of_two_axes_swaps_them_on_any_ndim(ndim: int) -> None:
    shape = (2, 3, 4, 5)[:ndim]
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    for a in range(-ndim, ndim):
        for b in range(-ndim, ndim):
            want = torch.tensor(x).transpose(a, b).numpy()
            np.testing.assert_array_equal(tg.tensor(x).transpose(a, b).numpy(), want)
            np.testing.assert_array_equal(np.swapaxes(x, a, b), want)


def test_numpys_forms_of_transpose_still_permute() -> None:
    x = tg.tensor(X)
    assert x.transpose().shape == x.T.shape == (4, 3, 2)
    assert x.transpose(2, 0, 1).shape == (4, 2, 3)  # three or more axes: a permutation
    assert x.transpose((1, 0, 2)).shape == (3, 2, 4)  # one tuple: a permutation
    assert x[0].transpose((0, 1)).shape == (3, 4)  # NumPy's identity permutation, as a tuple
    assert tg.tensor(X[0, 0]).transpose(0).shape == (4,)
    with pytest.raises(tg.ShapeError):
        x.transpose(0, 3)
    with pytest.raises(tg.ShapeError):
        x.permute(0, 1)  # permute needs every axis


def test_one_hot_gives_pytorchs_encoding_as_floats() -> None:
    labels = [2, 0, 1]
    want = torch.nn.functional.one_hot(torch.tensor(labels), 4).numpy()
    got = tg.one_hot(labels, 4)
    np.testing.assert_array_equal(got.numpy(), want)
    assert got.dtype == np.float32 and not got.requires_grad
    assert tg.one_hot(tg.tensor(labels), 4, dtype=tg.int32).dtype == np.int32
    assert error_of(ValueError, tg.one_hot, [4], 4)
    assert error_of(TypeError, tg.one_hot, [0.5], 4)


def test_requires_grad_setter_freezes_and_unfreezes_a_leaf() -> None:
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    w.requires_grad = False
    assert not w.requires_grad and w.is_leaf
    assert not (w * 2.0).requires_grad  # frozen: nothing is recorded
    w.requires_grad = True
    (w * w).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [2.0, 4.0]
    y = w * 1.0
    err = error_of(RuntimeError, setattr, y, "requires_grad", False)
    assert ".detach()" in str(err)  # only leaves can be frozen, as in PyTorch
    with pytest.raises(TypeError):
        tg.tensor([1, 2]).requires_grad = True


def test_frozen_parameters_are_skipped_by_optimizers() -> None:
    model = tg.nn.Sequential(tg.nn.Linear(3, 2, key=0), tg.nn.Linear(2, 1, key=1))
    model[0].requires_grad_(False)
    frozen = [p.data for p in model[0].parameters()]
    assert all(not p.requires_grad for p in model[0].parameters())
    assert all(p.requires_grad for p in model[1].parameters())
    opt = tg.optim.SGD(model.parameters(), lr=0.1)  # frozen ones are accepted, as in PyTorch
    model(tg.ones((4, 3))).sum().backward()
    before = [p.data for p in model[1].parameters()]
    opt.step()
    for p, old in zip(model[0].parameters(), frozen, strict=True):
        assert p.data is old  # untouched
    assert all(
        not np.array_equal(np.asarray(p.data), np.asarray(old))
        for p, old in zip(model[1].parameters(), before, strict=True)
    )
    w = tg.tensor([1.0], requires_grad=True)
    w.requires_grad = False
    tg.optim.Adam([w, tg.tensor([2.0], requires_grad=True)], lr=0.1).step()  # no grad: skipped
    assert w.tolist() == [1.0]


def _qkv(hq: int, hkv: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    shapes = ((2, hq, 3, 4), (2, hkv, 5, 4), (2, hkv, 5, 4))
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    return q, k, v


@pytest.mark.parametrize(
    ("keyword", "says"),
    [
        ("attn_mask", ["mask=", "True where a query may attend", "added to the scores"]),
        ("dropout_p", ["does not support", "MultiheadAttention(..., dropout=p)"]),
        ("enable_gqa", ["does not support", "tg.expand_dims(k, 2)"]),
    ],
)
def test_attentions_pytorch_keywords_say_what_to_write(keyword: str, says: list[str]) -> None:
    q, k, v = _qkv(2, 2)
    message = str(error_of(TypeError, tg.scaled_dot_product_attention, q, k, v, **{keyword: 0}))
    assert message.startswith(f"scaled_dot_product_attention() got {keyword}=")
    assert all(s in message for s in says), message


def test_attentions_mask_in_pytorchs_fourth_position_says_to_pass_it_by_keyword() -> None:
    q, k, v = _qkv(2, 2)
    mask = tg.ones((3, 5)) > 0
    message = str(error_of(TypeError, tg.scaled_dot_product_attention, q, k, v, mask))
    assert message.startswith(
        "scaled_dot_product_attention() takes at most 3 positional argument(s) (q, k, v), got "
        "4. Pass the others by keyword (mask=, is_causal=, scale=)"
    ), message
    assert (tg.scaled_dot_product_attention(q, k, v, mask=mask).shape) == q.shape


def test_grouped_query_attention_as_the_message_says_equals_torchs_enable_gqa() -> None:
    q, k, v = _qkv(6, 2)
    b, hq, lq, d = q.shape
    hkv, r = k.shape[1], hq // k.shape[1]
    tq = tg.tensor(q, requires_grad=True)
    grouped = tq.reshape(b, hkv, r, lq, d)
    kk, vv = tg.expand_dims(tg.tensor(k), 2), tg.expand_dims(tg.tensor(v), 2)
    y = tg.scaled_dot_product_attention(grouped, kk, vv).reshape(b, hq, lq, d)
    pq = torch.tensor(q, requires_grad=True)
    want = torch.nn.functional.scaled_dot_product_attention(
        pq, torch.tensor(k), torch.tensor(v), enable_gqa=True
    )
    np.testing.assert_allclose(y.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    (y * y).sum().backward()
    (want * want).sum().backward()
    assert tq.grad is not None
    np.testing.assert_allclose(tq.grad.numpy(), pq.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_nn_functional_says_where_the_functions_are() -> None:
    assert not hasattr(tg.nn, "functional")
    message = str(error_of(AttributeError, getattr, tg.nn, "functional"))
    assert "tg.relu" in message and "tg.scaled_dot_product_attention" in message
    assert callable(tg.relu) and callable(tg.scaled_dot_product_attention)
    with pytest.raises(AttributeError, match="has no attribute 'Linnear'"):
        tg.nn.Linnear  # noqa: B018 - any other missing name: Python's own message


def test_a_torch_tensor_operand_says_to_convert_it() -> None:
    x = tg.ones(4)
    for call in (
        lambda: x + torch.ones(4),
        lambda: torch.ones(4) * x,
        lambda: tg.exp(torch.ones(2)),
        lambda: tg.cross_entropy(tg.ones((4, 3)), torch.tensor([0, 1, 2, 2])),  # from a loader
        lambda: tg.nn.CrossEntropyLoss()(tg.ones((4, 3)), torch.ones(4, 3)),
        lambda: x.masked_fill(torch.ones(4) > 0, 0.0),
        lambda: x[torch.tensor([0, 1])],
    ):
        message = str(error_of(TypeError, call))
        assert "a PyTorch tensor (torch.Tensor) cannot be an operand" in message, message
        assert "convert it first: tg.tensor(t) (a copy)" in message


def test_first_hour_functions_and_methods_match_torch() -> None:
    a = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    a[0, 0, 0] = 0.0
    x, t = tg.tensor(a).require_grad(), torch.tensor(a, requires_grad=True)
    np.testing.assert_array_equal(x.all(axis=1).numpy(), t.all(dim=1).numpy())
    np.testing.assert_array_equal(x.any(axis=(0, 2)).numpy(), t.any(dim=(0, 2)).numpy())
    assert bool((x > -10).all()) and not bool((x > 10).any())
    np.testing.assert_array_equal(x.mT.numpy(), t.mT.detach().numpy())
    np.testing.assert_array_equal(tg.max(x, axis=1).numpy(), t.amax(dim=1).detach().numpy())
    np.testing.assert_array_equal(tg.min(x).numpy(), t.min().detach().numpy())
    np.testing.assert_array_equal(tg.squeeze(x[None]).numpy(), a)
    np.testing.assert_array_equal(tg.clip(x, -0.5, 0.5).numpy(), t.clamp(-0.5, 0.5).detach())
    p = np.abs(a)
    xp, tp = tg.tensor(p).require_grad(), torch.tensor(p, requires_grad=True)
    xp.log1p().sum().backward()
    tp.log1p().sum().backward()
    np.testing.assert_allclose(xp.grad.numpy(), tp.grad.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"bool\(\(t > 0\).all\(\)\)"):
        bool(x)


@pytest.mark.parametrize(("keyword", "says"), [("unbiased", "ddof=1"), ("correction", "ddof=")])
def test_std_and_var_name_ddof_for_pytorchs_keywords(keyword: str, says: str) -> None:
    for call in (tg.ones(3).std, tg.ones(3).var, lambda **kw: tg.std(tg.ones(3), **kw)):
        message = str(error_of(TypeError, call, **{keyword: 1}))
        assert f"got {keyword}=, PyTorch's spelling" in message and says in message, message


SHAPE_KEYWORDS: list[tuple[str, Callable[..., Any], dict[str, Any], str]] = [
    ("flatten", lambda t, **kw: t.flatten(**kw), {"start_dim": 1}, "start="),
    ("flatten-end", lambda t, **kw: t.flatten(**kw), {"end_dim": 1}, "end="),
    ("tg.flatten", lambda t, **kw: tg.flatten(t, **kw), {"start_dim": 1}, "start="),
    ("transpose", lambda t, **kw: t.transpose(**kw), {"dim0": 0, "dim1": 1}, "by position"),
    ("tg.transpose", lambda t, **kw: tg.transpose(t, **kw), {"dim0": 0, "dim1": 1}, "position"),
    ("permute", lambda t, **kw: t.permute(**kw), {"dims": (2, 0, 1)}, "by position"),
    ("transpose-dim", lambda t, **kw: t.transpose(**kw), {"dim": 0}, "axes by position"),
    ("flatten-dim", lambda t, **kw: t.flatten(**kw), {"dim": 0}, "axes by position"),
]


@pytest.mark.parametrize(
    ("name", "call", "kwargs", "says"), SHAPE_KEYWORDS, ids=[s[0] for s in SHAPE_KEYWORDS]
)
def test_shape_methods_name_tapegrads_spelling_of_pytorchs_keywords(
    name: str, call: Callable[..., Any], kwargs: dict[str, Any], says: str
) -> None:
    """``x.flatten(start_dim=1)``, ``x.transpose(dim0=0, dim1=1)``, ``x.permute(dims=...)``:
    PyTorch's keywords raise a ``TypeError`` that says what to write, not Python's bare
    "unexpected keyword argument"."""
    message = str(error_of(TypeError, call, tg.ones((2, 3, 4)), **kwargs))
    keyword = next(iter(kwargs))
    assert f"got {keyword}=, a PyTorch keyword" in message and says in message, message


@pytest.mark.parametrize(
    "call",
    [
        lambda v: v.repeat(2, 3, 1),
        lambda v: v.repeat((2, 1, 2, 1)),
        lambda v: v.expand(2, 4, 3),
        lambda v: v.expand(5, -1, 4, -1),
        lambda v: v.expand_as(v.repeat(1, 2, 1)),
    ],
    ids=["repeat", "repeat-lead", "expand", "expand-keep", "expand_as"],
)
def test_repeat_and_expand_are_pytorchs(call: Callable[[Any], Any]) -> None:
    """``x.repeat`` (NumPy's tile), ``x.expand`` (-1 keeps an axis), ``x.expand_as``: values
    and gradients equal PyTorch's (``tg.tile`` / ``tg.broadcast_to`` underneath)."""
    a = np.random.default_rng(0).standard_normal((2, 1, 3)).astype(np.float32)
    x, t = tg.tensor(a).require_grad(), torch.tensor(a, requires_grad=True)
    y, u = call(x), call(t)
    w = np.random.default_rng(1).standard_normal(tuple(u.shape)).astype(np.float32)
    (y * tg.tensor(w)).sum().backward()
    (u * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(y.numpy(), u.detach().numpy())
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_repeat_and_expand_refuse_what_pytorch_refuses() -> None:
    x = tg.ones((2, 1, 3))
    with pytest.raises(tg.ShapeError, match="repeat: 1 count.* one per axis"):
        x.repeat(2)
    with pytest.raises(tg.ShapeError, match="expand: sizes \\(3, 3\\) do not fit"):
        x.expand(3, 3)
    with pytest.raises(tg.ShapeError, match="expand: sizes \\(-1, 2, 4, 3\\)"):
        x.expand(-1, 2, 4, 3)
    with pytest.raises(tg.ShapeError, match="cannot be broadcast to \\(2, 2, 2\\)"):
        x.expand(2, 2, 2)  # a length-3 axis to 2
    with pytest.raises(ValueError, match="tile: negative counts"):
        tg.tile(x, (1, -1))
    with pytest.raises(TypeError, match="tile: reps must be an integer, got float"):
        tg.tile(x, 2.0)
    with pytest.raises(TypeError, match="expand_as: expected a tensor or an array, got tuple"):
        x.expand_as((5,))
    with pytest.raises(tg.ShapeError, match="broadcast_to: negative sizes"):
        tg.broadcast_to(x, (2, -1, 3))
    assert tg.broadcast_to(tg.ones(()), 5).shape == (5,)


FUNCTION_KEYWORDS: list[tuple[str, Callable[..., Any], str]] = [
    ("flip", lambda x: tg.flip(x, dims=[0]), "got dims=, PyTorch's spelling; .* use axis="),
    ("normalize", lambda x: tg.normalize(x, dim=1), "got dim=, PyTorch's spelling"),
    ("cross_entropy", lambda x: tg.cross_entropy(x, tg.zeros(2, dtype=tg.int32), dim=1), "axis="),
    ("layer_norm", lambda x: tg.layer_norm(x, normalized_shape=(4,)), "pass it as shape="),
    ("dropout", lambda x: tg.dropout(x, 0.5, False), r"at most 2 positional .*\(training=, key="),
    ("dropout2d", lambda x: tg.dropout2d(x[None], 0.5, False), r"at most 2 positional .*\(train"),
    ("conv2d", lambda x: tg.conv2d(x[None, None], tg.ones((1, 1, 1, 1)), None, 1, 0), "stride,"),
    ("max_pool2d", lambda x: tg.max_pool2d(x[None], kernel_size=2), "kernel= "),
    ("avg_pool2d", lambda x: tg.avg_pool2d(x[None], 2, 2, 0, True), "fifth parameter is ceil"),
    ("max_pool2d ceil_mode", lambda x: tg.max_pool2d(x[None], 2, ceil_mode=True), "floor mode"),
    ("max_pool1d", lambda x: tg.max_pool1d(x, kernel_size=2), "kernel= "),
    ("avg_pool1d", lambda x: tg.avg_pool1d(x, 2, 2, 0, True), "fifth parameter is ceil"),
    ("max_pool1d dilation", lambda x: tg.max_pool1d(x, 2, dilation=2), "dilated pooling"),
    ("max_pool3d", lambda x: tg.max_pool3d(x[None, None], kernel_size=2), "kernel= "),
    ("max_pool3d dil", lambda x: tg.max_pool3d(x[None, None], 2, 2, 0, 1), "fifth .* dilation"),
    ("avg_pool3d", lambda x: tg.avg_pool3d(x[None, None], 2, 2, 0, True), "fifth .* ceil"),
    ("avg_pool3d div", lambda x: tg.avg_pool3d(x[None, None], 2, divisor_override=3), "kd \\*"),
    ("adaptive_max_pool1d", lambda x: tg.adaptive_max_pool1d(x, 2, True), "no indices"),
    ("adaptive_max_pool2d", lambda x: tg.adaptive_max_pool2d(x, 2, return_indices=True), "no ind"),
    ("dropout3d", lambda x: tg.dropout3d(x[None, None], 0.5, False), r"at most 2 positional"),
    ("batch_norm", lambda x: tg.batch_norm(x, None, None, None, None, True), "sixth .* training"),
    ("cosine_similarity", lambda x: tg.cosine_similarity(x, x, dim=1), "got dim=, .* axis="),
    ("mse_loss", lambda x: tg.mse_loss(x, x, "sum"), r"at most 2 positional .*\(reduction="),
    ("l1_loss", lambda x: tg.l1_loss(x, x, size_average=True), "reduction='mean'"),
    ("nll_loss", lambda x: tg.nll_loss(x, tg.zeros(2, dtype=tg.int32), None, True), "size_av"),
    ("pad mode", lambda x: tg.pad(x, 1, mode="reflect"), "constant only .* tg.concatenate"),
    ("pad positional reflect", lambda x: tg.pad(x, 1, "reflect"), "constant only .* tg.conc"),
]


def test_pad_takes_pytorchs_positional_constant_mode_and_value() -> None:
    """``F.pad(x, (1, 2), "constant", 0.5)``: the mode and value in PyTorch's (and NumPy's)
    places give PyTorch's values; a number in the mode's place is still the fill value."""
    x = np.arange(3.0, dtype=np.float32)
    want = torch.nn.functional.pad(torch.tensor(x), (1, 2), "constant", 0.5).numpy()
    np.testing.assert_array_equal(tg.pad(tg.tensor(x), (1, 2), "constant", 0.5).numpy(), want)
    np.testing.assert_array_equal(tg.pad(tg.tensor(x), (1, 2), 0.5).numpy(), want)
    assert tg.pad(tg.ones((2, 3)), 1, "constant").numpy().sum() == 6
    assert tg.pad(tg.ones(2), 1, "constant", None).numpy().tolist() == [0, 1, 1, 0]
    with pytest.raises(TypeError, match="in mode's place and value="):
        tg.pad(tg.ones(2), 1, 0.5, 0.5)


@pytest.mark.parametrize(
    ("name", "call", "says"), FUNCTION_KEYWORDS, ids=[c[0] for c in FUNCTION_KEYWORDS]
)
def test_functions_name_tapegrads_spelling_of_pytorchs_keywords(
    name: str, call: Callable[..., Any], says: str
) -> None:
    """``F.dropout(x, 0.5, False)``, ``torch.flip(x, dims=...)``, ``F.normalize(x, dim=1)``,
    ``F.layer_norm(x, normalized_shape=...)``: a TypeError that says what to write."""
    message = str(error_of(TypeError, call, tg.ones((2, 4))))
    assert re.search(says, message), message


@pytest.mark.parametrize("bad", [1.5, True], ids=repr)
def test_flatten_refuses_float_and_boolean_axes(bad: Any) -> None:
    """Axes accept any integer and refuse floats and booleans (docs/api.md), also flatten's:
    ``flatten(True)`` flattened from axis 1, ``flatten(1.5)`` failed inside tuple slicing."""
    x = tg.ones((2, 3, 4))
    assert x.flatten(np.int64(1)).shape == (2, 12)
    message = str(error_of(TypeError, x.flatten, bad))
    assert "flatten: start must be an integer" in message, message
    message = str(error_of(TypeError, x.flatten, 0, bad))
    assert "flatten: end must be an integer" in message, message


def test_torch_max_of_two_tensors_points_to_maximum() -> None:
    a, b = tg.ones(3), tg.zeros(3)
    assert "use tg.maximum(a, b)" in str(error_of(TypeError, tg.max, a, b))
    assert "use tg.minimum(a, b)" in str(error_of(TypeError, a.min, b))


def test_an_integer_jax_cannot_hold_says_what_to_write() -> None:
    for call in (lambda: tg.ones(2) * 2**40, lambda: tg.tensor([1, 2]) + np.int64(2**40)):
        message = str(error_of(OverflowError, call))
        assert "does not fit JAX's int32 (x64 is off); write it as a float" in message, message


def test_bfloat16_torch_tensors_and_checkpoints_convert() -> None:
    t = torch.tensor([1.5, -2.25], dtype=torch.bfloat16)
    x = tg.tensor(t)
    assert x.dtype == tg.bfloat16
    np.testing.assert_array_equal(x.astype(tg.float32).numpy(), [1.5, -2.25])
    twin = torch.nn.Linear(2, 3).bfloat16()
    layer = tg.nn.Linear(2, 3)
    layer.load_state_dict(twin.state_dict())  # torch's .numpy() refuses bfloat16
    assert layer.weight.dtype == np.float32  # copied into the module's dtype, as copy_ does
    np.testing.assert_array_equal(layer.weight.numpy(), twin.weight.float().detach().numpy())


def test_load_state_dict_copies_a_jax_array_from_another_module() -> None:
    src, dst = tg.nn.Linear(2, 2), tg.nn.Linear(2, 2)
    dst.load_state_dict(src.state_dict())
    assert dst.weight.data is not src.weight.data  # as torch's copy_: no shared buffer
    src.weight.data.delete()  # what a tg.jit step donating src's arrays does
    assert dst(tg.ones((1, 2))).shape == (1, 2)


def test_pytorch_names_tapegrad_spells_otherwise_say_what_to_write() -> None:
    with pytest.raises(AttributeError, match=r"no Parameter: .*require_grad\(\)"):
        _ = tg.nn.Parameter
    with pytest.raises(AttributeError, match=r"has no attribute 'Missing'"):
        _ = tg.nn.Missing
    x = tg.arange(6)
    for method in ("split", "chunk"):
        with pytest.raises(AttributeError, match=r"tg\.split\(x, "):
            getattr(x, method)

    class Layer(tg.nn.Module):  # what the Parameter message says to write
        def __init__(self) -> None:
            super().__init__()
            self.w = tg.randn((3, 4), key=0).require_grad()

    assert [name for name, _ in Layer().named_parameters()] == ["w"]


def test_pytorch_module_names_name_what_exists() -> None:
    """Every ``tg.`` function and ``x.`` method a module-level hint names exists, and no hinted
    name is one tapegrad has (its hint would never show)."""
    for name, hint in tg._TORCH_NAMES.items():
        assert name not in dir(tg), name
        for mentioned in re.findall(r"\btg\.(\w+)", hint):
            assert hasattr(tg, mentioned), (name, mentioned)
        for mentioned in re.findall(r"\bx\.(\w+)", hint):
            assert hasattr(tg.Tensor, mentioned), (name, mentioned)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("atan2", "tg.arctan2(y, x)"),
        ("index_select", "is x[idx]"),
        ("masked_select", "x[mask]"),
        ("add", "a + b"),
        ("amax", "tg.max(x, axis=...)"),
        ("concat", "tg.concatenate(ts, axis=0)"),
        ("logical_and", "a & b"),
    ],
)
def test_pytorchs_new_module_names_say_what_to_write(name: str, says: str) -> None:
    message = str(error_of(AttributeError, getattr, tg, name))
    assert f"(PyTorch's torch.{name}); " in message and says in message, message


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("new_zeros", "tg.zeros(shape, dtype=x.dtype)"),
        ("new_full", "tg.full(shape, value, dtype=x.dtype)"),
        ("type_as", "x.astype(other.dtype)"),
        ("index_select", "tg.take_along_axis"),
        ("atan2", "tg.arctan2(x, other)"),
        ("outer", "tg.outer(x, y)"),
        ("lerp", "tg.lerp(x, end, weight)"),
        ("allclose", "tg.allclose(x, other"),
        ("is_floating_point", "jnp.issubdtype(x.dtype, jnp.floating)"),
    ],
)
def test_pytorchs_new_method_names_say_what_to_write(name: str, says: str) -> None:
    message = str(error_of(AttributeError, getattr, tg.ones(2), name))
    assert says in message, message


def test_what_the_new_method_hints_say_gives_pytorchs_values() -> None:
    a = np.arange(6, dtype=np.float16).reshape(2, 3)
    x, p = tg.tensor(a), torch.tensor(a)
    assert tg.zeros((4, 1), dtype=x.dtype).dtype == tg.float16 == p.new_zeros(4, 1).numpy().dtype
    assert tg.full((2,), 7.0, dtype=x.dtype).tolist() == p.new_full((2,), 7.0).tolist()
    other = tg.ones(1, dtype=tg.int32)
    assert x.astype(other.dtype).tolist() == p.type_as(torch.ones(1, dtype=torch.int32)).tolist()


@pytest.mark.parametrize(
    "p", [np.float32(0.5), np.array([0.5]), tg.tensor(0.5)], ids=["numpy scalar", "array", "tensor"]
)
def test_a_dropout_probability_given_as_a_one_element_array_is_its_number(p: Any) -> None:
    x = tg.ones((64,))
    np.testing.assert_array_equal(
        tg.dropout(x, p, key=0).numpy(), tg.dropout(x, 0.5, key=0).numpy()
    )
    assert tg.nn.Dropout(p).p == 0.5
