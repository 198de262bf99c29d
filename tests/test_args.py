"""Arguments validated as NumPy validates them (issue 16, item 7): every entry point that takes an
axis or a dimension accepts any integer (NumPy and JAX integer scalars too) and refuses floats
and booleans; indices are checked against the tensor's shape (a boolean mask of the wrong length
raises ``IndexError``); PyTorch's keyword spellings get a message naming tapegrad's."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of

import tapegrad as tg
from tapegrad._args import CHECKS, axis, dims, integer

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

# Every entry point that takes an axis or dimensions: (id, call with the integer ``a`` = 1).
AXIS_CALLS: list[tuple[str, Callable[[tg.Tensor, Any], tg.Tensor]]] = [
    ("Tensor.sum", lambda t, a: t.sum(axis=a)),
    ("Tensor.sum-tuple", lambda t, a: t.sum(axis=(0, a))),
    ("Tensor.mean", lambda t, a: t.mean(a)),
    ("Tensor.max", lambda t, a: t.max(axis=a, keepdims=True)),
    ("Tensor.min", lambda t, a: t.min(axis=a)),
    ("Tensor.squeeze", lambda t, a: t[:, :1].squeeze(a)),
    ("Tensor.unsqueeze", lambda t, a: t.unsqueeze(a)),
    ("Tensor.swapaxes", lambda t, a: t.swapaxes(a, 2)),
    ("Tensor.transpose-swap", lambda t, a: t.transpose(0, a)),
    ("Tensor.transpose-perm", lambda t, a: t.transpose(2, a, 0)),
    ("Tensor.permute", lambda t, a: t.permute((2, 0, a))),
    ("Tensor.reshape", lambda t, a: t.reshape(4, a, -1)),
    ("tg.sum", lambda t, a: tg.sum(t, a)),
    ("tg.mean", lambda t, a: tg.mean(t, axis=a)),
    ("tg.reshape", lambda t, a: tg.reshape(t, (a, -1))),
    ("tg.transpose", lambda t, a: tg.transpose(t, a, 0)),
    ("tg.expand_dims", lambda t, a: tg.expand_dims(t, a)),
    ("tg.concatenate", lambda t, a: tg.concatenate([t, t], axis=a)),
    ("tg.cat", lambda t, a: tg.cat([t, t], a)),
    ("tg.stack", lambda t, a: tg.stack([t, t], axis=a)),
    ("tg.softmax", lambda t, a: tg.softmax(t, axis=a)),
    ("tg.log_softmax", lambda t, a: tg.log_softmax(t, a)),
    ("tg.zeros", lambda t, a: tg.zeros((a, 2))),
    ("tg.one_hot", lambda t, a: tg.one_hot(tg.tensor([0, 0]), a)),
]
INTEGERS = [np.int64(1), np.int32(1), np.uint8(1), jnp.int32(1), np.array(1)]
NOT_INTEGERS = [1.0, np.float32(1.0), True, "1"]


@pytest.mark.parametrize(("name", "call"), AXIS_CALLS, ids=[n for n, _ in AXIS_CALLS])
def test_any_integer_is_accepted_where_an_axis_or_a_dimension_is(
    name: str, call: Callable[[tg.Tensor, Any], tg.Tensor]
) -> None:
    t = tg.tensor(X)
    want = np.asarray(call(t, 1).data)
    for a in INTEGERS:
        np.testing.assert_array_equal(np.asarray(call(t, a).data), want, err_msg=repr(a))


@pytest.mark.parametrize(("name", "call"), AXIS_CALLS, ids=[n for n, _ in AXIS_CALLS])
def test_floats_and_booleans_are_refused_where_an_axis_or_a_dimension_is(
    name: str, call: Callable[[tg.Tensor, Any], tg.Tensor]
) -> None:
    t = tg.tensor(X)
    for a in NOT_INTEGERS:
        err = error_of(TypeError, call, t, a)
        assert "integer" in str(err), (a, str(err))


def test_reshape_refuses_a_float_instead_of_truncating() -> None:
    t = tg.ones(4)
    err = error_of(TypeError, t.reshape, 2.5, 2)
    assert "2.5" in str(err) and "not truncated" in str(err)
    assert error_of(TypeError, tg.ones, (2.0, 2))


def test_the_checks_are_numpys() -> None:
    assert integer(np.int16(-3), "x") == -3 and type(integer(np.int16(-3), "x")) is int
    assert axis(None) is None and axis([np.int8(0), 1]) == (0, 1)
    assert dims(np.int64(5)) == (5,) and dims(np.array([2, 3])) == (2, 3)
    for bad in NOT_INTEGERS:
        with pytest.raises(TypeError):
            np.sum(X, axis=bad)  # NumPy refuses each of them too
        error_of(TypeError, integer, bad, "x")


def test_every_op_parameter_named_like_an_axis_or_a_shape_is_checked() -> None:
    for op in tg.registry().values():
        names = {n for n, _ in op.checks}
        assert names == set(op.param_names) & set(CHECKS), op.name


# ----------------------------------------------------------------------------- indexing

M = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize(
    "index",
    [
        np.array([True, False]),  # too short
        np.array([True, False, True, False]),  # too long
        (slice(None), np.array([True] * 3)),  # wrong length on axis 1
        np.ones((2, 4), bool),  # 2-D mask of the wrong shape
        [True, False],  # a list of booleans is a mask
        tg.tensor([True, True, True, True]),  # a boolean tensor
        5,
        (0, -5),
        np.array([0, 3]),
        [1, 7],
    ],
    ids=["short", "long", "axis1", "2d", "list", "tensor", "int", "negative", "array", "list-int"],
)
def test_indices_that_do_not_fit_raise_index_error_as_numpy(index: Any) -> None:
    host = index.numpy() if isinstance(index, tg.Tensor) else index
    with pytest.raises(IndexError):
        M[host]  # NumPy refuses it
    t = tg.tensor(M, requires_grad=True)
    stats = tg.graph_stats()
    err = error_of(IndexError, t.__getitem__, index)
    assert "(3, 4)" in str(err)
    assert tg.graph_stats() == stats  # nothing recorded


@pytest.mark.parametrize(
    "index",
    [range(2), range(2, -1, -2), (range(1, 3), 0), (slice(None), range(4)), []],
    ids=["range", "reverse", "range-int", "slice-range", "empty-list"],
)
def test_a_range_indexes_as_the_integer_array_it_spells(index: Any) -> None:
    t = tg.tensor(M, requires_grad=True)
    y = t[index]
    np.testing.assert_array_equal(np.asarray(y.data), M[index])
    (g,) = tg.grad(y.sum(), t)
    want = np.zeros_like(M)
    np.add.at(want, index, 1.0)
    np.testing.assert_array_equal(np.asarray(g.data), want)


def test_numpy_integer_scalars_index() -> None:
    t = tg.tensor(M)
    np.testing.assert_array_equal(np.asarray(t[np.int64(2), np.int32(-1)].data), M[2, -1])


# ----------------------------------------------------------------------------- PyTorch keywords


def _axis_methods() -> list[str]:
    return sorted(
        name
        for name, fn in vars(tg.Tensor).items()
        if callable(fn) and "axis" in inspect.signature(fn).parameters
    )


@pytest.mark.parametrize("method", _axis_methods())
def test_every_method_taking_axis_names_it_when_given_dim(method: str) -> None:
    t = tg.tensor(X)
    err = error_of(TypeError, lambda: getattr(t, method)(dim=1))
    assert "dim=" in str(err) and "axis=" in str(err)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: tg.sum(t, dim=0),
        lambda t: tg.softmax(t, dim=-1),
        lambda t: tg.cat([t, t], dim=0),
        lambda t: tg.stack([t, t], dim=0),
        lambda t: t.sum(axis=0, keepdim=True),
    ],
    ids=["tg.sum", "tg.softmax", "tg.cat", "tg.stack", "keepdim"],
)
def test_functions_name_the_numpy_keyword(call: Callable[[tg.Tensor], Any]) -> None:
    err = error_of(TypeError, call, tg.tensor(X))
    assert "PyTorch's spelling" in str(err)
    assert "axis=" in str(err) or "keepdims=" in str(err)


def test_size_is_numpys_attribute_and_calling_it_names_shape() -> None:
    t = tg.tensor(X)
    assert t.size == 24 and t.size + 1 == 25 and isinstance(t.size, int)
    assert "x.shape" in str(error_of(TypeError, t.size))
    assert "x.shape[1]" in str(error_of(TypeError, t.size, 1))


@pytest.mark.parametrize(
    ("make", "shown", "keywords"),
    [
        (
            lambda: tg.nn.AvgPool2d(2, 2, 0, True),
            "(kernel_size, stride, padding), got 4",
            " (count_include_pad=)",
        ),
        (lambda: tg.nn.MaxPool2d(2, 2, 0, 1), "(kernel_size, stride, padding), got 4", ""),
        (
            lambda: tg.nn.Embedding(5, 3, None, 2.0),
            "padding_idx), got 4",
            " (key=, dtype=, device=)",
        ),
        (
            lambda: tg.nn.LSTM(3, 4, 1, True, False, 0.0, False, 0, "cpu"),
            "proj_size), got 9",
            " (key=, dtype=, device=)",
        ),
        (
            lambda: tg.nn.Conv2d(1, 2, 3, 1, 0, 1, 1, True, "zeros"),
            "bias), got 9",
            " (key=, dtype=, device=)",
        ),
        (lambda: tg.nn.MSELoss(None, None, "mean"), "(reduction), got 3", ""),
    ],
    ids=["AvgPool2d", "MaxPool2d", "Embedding", "LSTM", "Conv2d", "MSELoss"],
)
def test_too_many_positional_arguments_name_the_keywords_not_sgds_dampening(
    make: Callable[[], Any], shown: str, keywords: str
) -> None:
    """Regression: every class's message said "(its SGD's fourth parameter is dampening)"."""
    message = str(error_of(TypeError, make))
    assert (
        shown
        + ". Pass the others by keyword"
        + keywords
        + ": tapegrad takes only these by position"
        in message
    ), message
    assert "SGD" not in message and "dampening" not in message


def test_sgds_too_many_positional_arguments_still_name_dampening() -> None:
    x = tg.ones(3).require_grad()
    message = str(error_of(TypeError, tg.optim.SGD, [x], 0.1, 0.9, 1e-4))
    assert message.endswith(
        "PyTorch's positional order differs for some of them (its SGD's fourth parameter is "
        "dampening), so tapegrad takes them only by keyword."
    ), message


def test_probabilities_and_momenta_are_numbers_in_the_unit_interval() -> None:
    """One check (``_args.fraction``) for tg.dropout's p, nn.Dropout's and the RNNs' dropout
    and a batch norm's momentum: a string or a bool is a TypeError naming the argument, a
    number outside [0, 1] a ValueError."""
    x = tg.ones(3)
    with pytest.raises(TypeError, match=r"dropout: p must be a number in \[0, 1\], got '0.5'"):
        tg.dropout(x, "0.5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"dropout: p must be in \[0, 1\], got 1.5"):
        tg.dropout(x, 1.5)
    with pytest.raises(TypeError, match="Dropout: dropout probability must be a number"):
        tg.nn.Dropout(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"BatchNorm1d: momentum must be in \[0, 1\]"):
        tg.nn.BatchNorm1d(3, momentum=2.0)
    assert tg.dropout(x, 0, training=True).tolist() == [1.0, 1.0, 1.0]
