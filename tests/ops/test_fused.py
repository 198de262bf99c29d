"""The fused ops (layer_norm, batch_norm, attention, losses): one node each, running statistics,
and clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg

RNG = np.random.default_rng(1)
X = RNG.standard_normal((4, 3, 2)).astype(np.float32)


def test_each_fused_op_is_one_node() -> None:
    x = tg.tensor(X, requires_grad=True)
    w, b = tg.ones(2, requires_grad=True), tg.zeros(2, requires_grad=True)
    q = tg.tensor(RNG.standard_normal((1, 2, 3, 4)).astype(np.float32), requires_grad=True)
    logits = tg.tensor(X.reshape(12, 2), requires_grad=True)
    for make in (
        lambda: tg.layer_norm(x, 2, w, b),
        lambda: tg.batch_norm(x, None, None, training=True),
        lambda: tg.scaled_dot_product_attention(q, q, q, is_causal=True),
        lambda: tg.cross_entropy(logits, [0, 1] * 6, label_smoothing=0.2),
    ):
        before = tg.graph_stats().nodes
        y = make()
        assert tg.graph_stats().nodes == before + 1
        del y


def test_layer_norm_output_is_normalized() -> None:
    y = tg.layer_norm(X, (3, 2)).numpy()
    np.testing.assert_allclose(y.reshape(4, 6).mean(1), 0, atol=1e-6)
    np.testing.assert_allclose(y.reshape(4, 6).var(1), 1, rtol=1e-3)


def test_batch_norm_updates_running_statistics_unbiased_and_eval_uses_them() -> None:
    rm, rv = tg.zeros(3), tg.ones(3)
    tg.batch_norm(X, rm, rv, training=True, momentum=0.5)
    flat = X.transpose(1, 0, 2).reshape(3, -1)
    np.testing.assert_allclose(rm.numpy(), 0.5 * flat.mean(1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * flat.var(1, ddof=1), rtol=1e-5)
    y = tg.batch_norm(X, rm, rv, training=False).numpy()
    want = (X - rm.numpy()[:, None]) / np.sqrt(rv.numpy()[:, None] + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("call", "kind", "match"),
    [
        (lambda: tg.layer_norm(X, 3), ValueError, r"does not end with the normalized shape \(3,\)"),
        (lambda: tg.layer_norm(X, 2, tg.ones(3)), ValueError, r"weight of shape \(3,\)"),
        (lambda: tg.batch_norm(X, tg.zeros(2), tg.ones(2), training=True), ValueError, r"\(3,\)"),
        (
            lambda: tg.batch_norm(X[:1, :, :1], None, None, training=True),
            ValueError,
            "more than one",
        ),
        (lambda: tg.batch_norm(X, None, None, training=False), ValueError, "running_mean"),
        (lambda: tg.batch_norm(X, np.zeros(3), np.ones(3), training=True), TypeError, "tensors"),
        (  # regression: AttributeError 'list' object has no attribute 'shape'
            lambda: tg.batch_norm(X, [0.0] * 3, [1.0] * 3, training=True),
            TypeError,
            r"must be tensors \(tg.zeros\(C\), tg.ones\(C\)\), not list and list",
        ),
        (
            lambda: tg.batch_norm(X, [0.0] * 3, [1.0] * 3, training=False),
            TypeError,
            r"unsupported operand type list.*tg.tensor",
        ),
        (
            lambda: tg.batch_norm(X, None, None, [1.0] * 3, training=True),
            TypeError,
            r"unsupported operand type list.*tg.tensor",
        ),
        (
            lambda: tg.scaled_dot_product_attention(X, X, X[..., :1, :]),
            ValueError,
            r"q \(4, 3, 2\)",
        ),
        (
            lambda: tg.scaled_dot_product_attention(X, X, X, mask=np.ones((2, 2), bool)),
            ValueError,
            "does not broadcast",
        ),
        (lambda: tg.cross_entropy(X[:, :, 0], [0, 1, 2, 3]), ValueError, r"outside \[0, 3\)"),
        (lambda: tg.cross_entropy(X[:, :, 0], [0] * 4, reduction="avg"), ValueError, "'mean'"),
        (lambda: tg.nll_loss(X[:, :, 0], [0, 1]), ValueError, "labels of shape"),
        (lambda: tg.binary_cross_entropy_with_logits(X, X[:1]), ValueError, "targets of shape"),
    ],
)
def test_bad_inputs_raise_and_leave_the_tape(
    call: object, kind: type[Exception], match: str
) -> None:
    x = tg.tensor(X, requires_grad=True)
    before = tg.graph_stats()
    with pytest.raises(kind, match=match):
        call()  # type: ignore[operator]
    assert tg.graph_stats() == before
    del x


def test_attention_row_with_nothing_to_attend_is_zero_with_finite_gradients() -> None:
    # PyTorch's behaviour (a safe softmax): the row's output is 0 and no gradient flows
    # through it; a plain softmax of only -inf made it NaN, and every gradient with it
    torch = pytest.importorskip("torch")
    q0, k0, v0 = (RNG.standard_normal((2, 3, 5, 4)).astype(np.float32) for _ in range(3))
    mask = np.ones((5, 5), bool)
    mask[2] = False
    q, k, v = (tg.tensor(a, requires_grad=True) for a in (q0, k0, v0))
    y = tg.scaled_dot_product_attention(q, k, v, mask=mask)
    (y * y).sum().backward()
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q0, k0, v0))
    ty = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(mask))
    (ty * ty).sum().backward()
    assert not y.numpy()[..., 2, :].any()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=1e-5)
    for mine, theirs in ((q, tq), (k, tk), (v, tv)):
        assert mine.grad is not None and theirs.grad is not None
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), atol=1e-5)


def test_attention_over_zero_keys_is_zero_as_in_torch() -> None:
    """No keys: every row has nothing to attend; PyTorch returns zeros and zero gradients
    (it raised inside JAX: a max over an empty axis)."""
    torch = pytest.importorskip("torch")
    q0 = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
    q = tg.tensor(q0, requires_grad=True)
    k, v = (tg.zeros((1, 2, 0, 4)).require_grad() for _ in range(2))
    y = tg.scaled_dot_product_attention(q, k, v)
    (y * 2.0).sum().backward()
    tq = torch.tensor(q0, requires_grad=True)
    ty = torch.nn.functional.scaled_dot_product_attention(
        tq, torch.zeros(1, 2, 0, 4), torch.zeros(1, 2, 0, 4)
    )
    (ty * 2.0).sum().backward()
    assert y.shape == tuple(ty.shape) and not y.numpy().any()
    assert q.grad is not None and tq.grad is not None and not q.grad.numpy().any()
    assert k.grad is not None and k.grad.shape == (1, 2, 0, 4)


def test_attention_refuses_heads_that_do_not_broadcast_and_an_integer_mask() -> None:
    q = tg.tensor(RNG.standard_normal((2, 6, 3, 4)).astype(np.float32))
    kv = tg.tensor(RNG.standard_normal((2, 3, 3, 4)).astype(np.float32))
    with pytest.raises(tg.ShapeError, match="do not broadcast.*grouped-query"):
        tg.scaled_dot_product_attention(q, kv, kv)
    with pytest.raises(TypeError, match="dtype int32.*astype\\(bool\\)"):
        tg.scaled_dot_product_attention(q, q, q, mask=np.ones((3, 3), np.int32))
    with pytest.raises(TypeError, match="convert lists with tg.tensor"):
        tg.scaled_dot_product_attention(q, q, q, mask=[[True] * 3] * 3)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="a PyTorch tensor"):
        tg.scaled_dot_product_attention(q, q, q, mask=torch.ones(3, 3, dtype=torch.bool))
    everything = tg.scaled_dot_product_attention(q, q, q)
    for scalar in (True, 0.0):  # a 0-d mask broadcasts to every score
        np.testing.assert_allclose(
            tg.scaled_dot_product_attention(q, q, q, mask=scalar).numpy(), everything.numpy()
        )


def test_attention_with_an_empty_head_dimension_averages_v_as_torch() -> None:
    """D = 0: every score is an empty sum, 0; the default scale 1/sqrt(D) raised a Python
    ZeroDivisionError."""
    torch = pytest.importorskip("torch")
    v = RNG.standard_normal((1, 1, 4, 2)).astype(np.float32)
    q, k = np.zeros((1, 1, 3, 0), np.float32), np.zeros((1, 1, 4, 0), np.float32)
    ours = tg.scaled_dot_product_attention(tg.tensor(q), tg.tensor(k), tg.tensor(v))
    theirs = torch.nn.functional.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_bce_with_logits_gradient_at_zero_is_sigmoid_minus_target() -> None:
    x = tg.zeros(3, requires_grad=True)
    t = np.array([0.0, 0.25, 1.0], np.float32)
    loss = tg.binary_cross_entropy_with_logits(x, t, reduction="sum")
    np.testing.assert_allclose(loss.item(), 3 * np.log(2.0), rtol=1e-6)
    (g,) = tg.grad(loss, x)
    np.testing.assert_allclose(g.numpy(), 0.5 - t)


@pytest.mark.parametrize("size", [4.0, 40.0])
def test_float16_attention_scores_are_summed_in_float32_as_torch(size: float) -> None:
    """q k^T of |q|, |k| ~ 40 over D = 64 exceeds float16's 65,504: the scores were inf and
    every output NaN; PyTorch's float16 result equals its float32 one. The gradients (an
    additive float16 mask broadcast over batch and heads included) follow torch's float16 ones
    and the float32 derivative."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    q, k = ((np.abs(rng.normal(size=(2, 2, 6, 64))) * size).astype(np.float16) for _ in "qk")
    v, up = (rng.normal(size=(2, 2, 6, 64)).astype(np.float16) for _ in "vg")
    mask = rng.normal(size=(6, 6)).astype(np.float16)
    ours = [tg.tensor(a).require_grad() for a in (q, k, v, mask)]
    y = tg.scaled_dot_product_attention(*ours[:3], mask=ours[3])
    y.backward(tg.tensor(up * 1000))
    results: dict[object, list[np.ndarray]] = {}
    for dt in (torch.float16, torch.float32):
        ts = [torch.tensor(a).to(dt).requires_grad_() for a in (q, k, v, mask)]
        ty = torch.nn.functional.scaled_dot_product_attention(*ts[:3], attn_mask=ts[3])
        ty.backward(torch.tensor(up * 1000).to(dt))
        results[dt] = [t.float().detach().numpy() for t in (ty, *(t.grad for t in ts))]
    assert y.dtype == np.float16
    mine = [np.asarray(t.astype(tg.float32).numpy()) for t in (y, *(t.grad for t in ours))]
    for i, got in enumerate(mine):
        assert np.isfinite(got).all()
        for dt in results:
            want = results[dt][i]
            # float16 products: a few ulps apart from torch's, by CPU (one element of 1536 was
            # 7 float16 ulps off on one machine); inf/NaN (the bug) would be far outside
            np.testing.assert_allclose(got, want, rtol=5e-3, atol=2e-3 * np.abs(want).max())
