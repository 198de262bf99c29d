"""Neural-network op edge cases: cross_entropy labels, softmax stability, mse broadcasting."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import tapegrad as tg
from tapegrad.testing import check_vjp

R = tg.registry()
LOGITS = np.array(
    [[2.0, -1.0, 0.5], [0.0, 0.0, 0.0], [1.0, 3.0, -2.0], [-1.0, 0.5, 0.5]], np.float32
)
LABELS = np.array([0, 2, 1, 1], np.int32)


def test_cross_entropy_gradient_is_softmax_minus_onehot_over_n() -> None:
    t = tg.tensor(LOGITS, requires_grad=True)
    loss = tg.cross_entropy(t, LABELS)
    want = optax.softmax_cross_entropy_with_integer_labels(LOGITS, LABELS).mean()
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-6)
    loss.backward()
    onehot = np.eye(3, dtype=np.float32)[LABELS]
    np.testing.assert_allclose(
        np.asarray(t.grad.data),  # type: ignore[union-attr]
        (np.asarray(jax.nn.softmax(LOGITS)) - onehot) / 4,
        rtol=1e-5,
        atol=1e-7,
    )


@pytest.mark.parametrize(
    "make",
    [np.array, jnp.array, lambda v: tg.tensor(np.array(v, np.int32))],
    ids=["numpy", "jax", "tensor"],
)
def test_cross_entropy_label_containers(make: object) -> None:
    labels = make([0, 2, 1, 1])  # type: ignore[operator]
    loss = tg.cross_entropy(tg.tensor(LOGITS, requires_grad=True), labels)
    want = optax.softmax_cross_entropy_with_integer_labels(LOGITS, LABELS).mean()
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-6)


def test_cross_entropy_with_extreme_logits_is_finite() -> None:
    logits = np.array([[1000.0, -1000.0], [-1000.0, 1000.0]], np.float32)
    check_vjp(R["cross_entropy"], logits, np.array([1, 1], np.int32), np.float32(1.0))
    t = tg.tensor(logits, requires_grad=True)
    loss = tg.cross_entropy(t, np.array([1, 1], np.int32))
    np.testing.assert_allclose(float(loss), 1000.0)
    (g,) = tg.grad(loss, t)
    assert np.isfinite(np.asarray(g.data)).all()


def test_cross_entropy_rejects_float_labels() -> None:
    with pytest.raises(TypeError, match="integer"):
        tg.cross_entropy(tg.tensor(LOGITS, requires_grad=True), LABELS.astype(np.float32))


@pytest.mark.parametrize("labels", [np.array([0, 1], np.int32), np.zeros((4, 1), np.int32)])
def test_cross_entropy_rejects_wrong_label_shapes(labels: np.ndarray) -> None:
    with pytest.raises(ValueError, match="labels of shape"):
        tg.cross_entropy(tg.tensor(LOGITS, requires_grad=True), labels)


@pytest.mark.parametrize("bad", [3, -1])
def test_cross_entropy_rejects_labels_out_of_range(bad: int) -> None:
    labels = LABELS.copy()
    labels[2] = bad
    with pytest.raises(ValueError, match=r"outside .*padding labels to skip must equal ignore_ind"):
        tg.cross_entropy(tg.tensor(LOGITS, requires_grad=True), labels)
    labels[2] = -100 if bad == 3 else bad  # PyTorch's padding label, or ignore_index=-1
    loss = tg.cross_entropy(tg.tensor(LOGITS), labels, ignore_index=-100 if bad == 3 else bad)
    keep = [0, 1, 3]
    want = optax.softmax_cross_entropy_with_integer_labels(LOGITS[keep], LABELS[keep]).mean()
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-6)


@pytest.mark.parametrize("bad", [3, -1])
def test_device_labels_out_of_range_give_nan_rows_not_a_host_sync(bad: int) -> None:
    """Labels already on the device are not read back; a bad one poisons its row with NaN
    (JAX's out-of-bounds fill), so the mistake shows in the loss instead of passing silently."""
    labels = LABELS.copy()
    labels[2] = bad
    t = tg.tensor(LOGITS, requires_grad=True)
    loss = tg.cross_entropy(t, jnp.asarray(labels))
    assert np.isnan(float(loss))
    (g,) = tg.grad(loss, t)
    rows = np.isnan(np.asarray(g.data)).all(axis=1)
    assert rows.tolist() == [False, False, True, False]


def test_device_labels_equal_to_ignore_index_count_for_nothing() -> None:
    """ignore_index may be a class: device labels equal to it lose 0 and get no gradient."""
    t = tg.tensor(LOGITS, requires_grad=True)
    loss = tg.nll_loss(tg.log_softmax(t), jnp.asarray(LABELS), ignore_index=1, reduction="none")
    assert loss.tolist()[2:] == [0.0, 0.0]
    (g,) = tg.grad(loss.sum(), t)
    assert not np.asarray(g.data)[2:].any() and np.asarray(g.data)[:2].any()


def test_class_axis_errors_name_the_pytorch_layout() -> None:
    logits = tg.tensor(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(
        ValueError, match=r"classes on the last axis .*\(N, C, d1, \.\.\.\) layout needs axis=1"
    ):
        tg.cross_entropy(logits, np.zeros((2, 4), np.int32))
    with pytest.raises(ValueError, match="class axis 3 is out of range"):
        tg.nll_loss(logits, np.zeros((2, 3), np.int32), axis=3)
    got = tg.cross_entropy(logits, np.zeros((2, 4), np.int32), axis=1)
    np.testing.assert_allclose(float(got), np.log(3), rtol=1e-6)


def test_weight_needs_one_entry_per_class() -> None:
    with pytest.raises(ValueError, match=r"weight of shape \(2,\) must have one entry per class"):
        tg.cross_entropy(tg.tensor(LOGITS), LABELS, np.ones(2, np.float32))
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        tg.nll_loss(tg.tensor(LOGITS), LABELS[:3], np.ones(3, np.float32), axis=0)


def test_weight_gradient_matches_jax_grad_of_the_weighted_mean() -> None:
    """The class weights may require grad (PyTorch refuses): their gradient is jax.grad's of
    PyTorch's weighted mean, with an ignored label."""
    w = np.array([0.5, 2.0, 1.5], np.float32)
    labels = np.array([0, 2, -100, 1], np.int32)
    tw = tg.tensor(w, requires_grad=True)
    (g,) = tg.grad(tg.cross_entropy(tg.tensor(LOGITS), labels, tw, label_smoothing=0.1), tw)

    def ref(w: jax.Array) -> jax.Array:
        keep = labels != -100
        y = np.where(keep, labels, 0)
        q = optax.smooth_labels(jax.nn.one_hot(y, 3), 0.1) * w * keep[:, None]
        return -jnp.sum(q * jax.nn.log_softmax(LOGITS)) / jnp.sum(w[y] * keep)

    np.testing.assert_allclose(g.numpy(), jax.grad(ref)(jnp.asarray(w)), rtol=1e-5, atol=1e-7)


def test_softmax_is_stable_and_sums_to_one() -> None:
    x = np.array([[1000.0, 1000.0, -1000.0]], np.float32)
    y = tg.softmax(tg.tensor(x, requires_grad=True))
    np.testing.assert_allclose(np.asarray(y.data), [[0.5, 0.5, 0.0]])
    check_vjp(R["softmax"], x, axis=-1)
    check_vjp(R["log_softmax"], x, axis=-1)


def test_softmax_gradient_of_the_sum_is_zero() -> None:
    t = tg.tensor(LOGITS, requires_grad=True)
    (g,) = tg.grad(tg.softmax(t, axis=0).sum(), t)
    np.testing.assert_allclose(np.asarray(g.data), np.zeros_like(LOGITS), atol=1e-6)


def test_mse_loss_broadcasts_with_a_warning_and_matches_jnp() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1.0, 0.0, -1.0], np.float32)
    ta, tb = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    with pytest.warns(UserWarning, match=r"\(2, 3\) and target shape \(3,\) differ") as seen:
        loss = tg.mse_loss(ta, tb)
    assert [w.filename for w in seen] == [__file__]  # it points at the caller's line
    np.testing.assert_allclose(float(loss), float(jnp.mean((a - b) ** 2)), rtol=1e-6)
    ga, gb = tg.grad(loss, [ta, tb])
    np.testing.assert_allclose(np.asarray(ga.data), 2 * (a - b) / 6, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gb.data), -(2 * (a - b) / 6).sum(axis=0), rtol=1e-6)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: tg.softmax(x, axis=2),
        lambda x: tg.log_softmax(x, axis=-3),
        lambda x: tg.softmax(x, 2),
        lambda x: tg.logsumexp(x, axis=2),  # the error the others now give
    ],
    ids=["softmax", "log_softmax", "softmax-positional", "logsumexp"],
)
def test_an_axis_out_of_range_is_the_reductions_shape_error(call: Any) -> None:
    """Regression: softmax and log_softmax raised JAX's ValueError."""
    x = tg.tensor(LOGITS, requires_grad=True)
    with pytest.raises(tg.ShapeError, match=r"out of range for a tensor with 2 dimensions"):
        call(x)


BOOLS = np.array([[True, False], [False, True]])


@pytest.mark.parametrize(
    ("call", "dtype"),
    [
        (lambda: tg.silu(tg.tensor(BOOLS)), "bool"),
        (lambda: tg.silu(tg.tensor([1, 2])), "int32"),
        (lambda: tg.cross_entropy(tg.tensor(BOOLS), [0, 1]), "bool"),
        (lambda: tg.nll_loss(tg.tensor(BOOLS), [0, 1]), "bool"),
        (lambda: tg.mse_loss(tg.tensor(BOOLS), tg.tensor(BOOLS)), "bool"),
        (lambda: tg.binary_cross_entropy_with_logits(tg.tensor(BOOLS), BOOLS * 1.0), "bool"),
        (lambda: tg.sigmoid(tg.tensor([1, 2])), "int32"),
        (lambda: tg.softmax(tg.tensor(BOOLS)), "bool"),
        (lambda: tg.log_softmax(tg.tensor(BOOLS)), "bool"),
    ],
    ids=[
        "silu",
        "silu-int",
        "cross_entropy",
        "nll_loss",
        "mse_loss",
        "bce",
        "sigmoid-int",
        "softmax",
        "log_softmax",
    ],
)
def test_boolean_inputs_say_to_cast_to_floats(call: Any, dtype: str) -> None:
    """Regression: JAX's TypeError ("logistic does not accept dtype bool", "sub does not
    accept dtype bool"); PyTorch refuses these too."""
    with pytest.raises(TypeError, match=rf"does not take {dtype} values.*astype"):
        call()


def test_negating_booleans_says_to_write_not() -> None:
    with pytest.raises(TypeError, match=r"negative does not take bool values.*~x"):
        -tg.tensor(BOOLS)


def test_mse_loss_still_promotes_integers_and_a_boolean_target() -> None:
    """Only booleans on both sides are refused: JAX (and PyTorch) promote the rest."""
    pred = tg.tensor([[0.5, 1.0], [0.0, 2.0]])
    assert tg.mse_loss(pred, tg.tensor(BOOLS)).item() == pytest.approx((0.25 + 1 + 0 + 1) / 4)
    assert tg.mse_loss(tg.tensor([[1, 2]]), tg.tensor([[0, 0]])).item() == pytest.approx(2.5)
