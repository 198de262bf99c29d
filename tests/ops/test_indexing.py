"""Indexing edge cases: basic slices, integer arrays with repeats (accumulate), lists, masks;
the scatter-adds index_add and scatter_add."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import error_of, grad_of

import tapegrad as tg
from tapegrad.errors import ShapeError
from tapegrad.testing import check_program

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def _index_grad(index: Any) -> np.ndarray:
    t = tg.tensor(X, requires_grad=True)
    (g,) = tg.grad(t[index].sum(), t)
    return np.asarray(g.data)


def _jax_index_grad(index: Any) -> np.ndarray:
    return np.asarray(jax.grad(lambda a: a[index].sum())(jnp.asarray(X)))


@pytest.mark.parametrize(
    "index",
    [
        1,
        -1,
        (1, 2),
        (slice(1, None), slice(None, None, 2)),
        (slice(None, None, -1), 0),
        (Ellipsis, 1),
        (None, slice(0, 2)),
        (slice(5, 9),),  # empty
    ],
    ids=["int", "negative", "two-ints", "slices", "reverse", "ellipsis", "newaxis", "empty"],
)
def test_basic_indexing_matches_numpy_and_jax(index: Any) -> None:
    t = tg.tensor(X)
    np.testing.assert_array_equal(np.asarray(t[index].data), X[index])
    np.testing.assert_array_equal(_index_grad(index), _jax_index_grad(index))


def test_repeated_integer_indices_accumulate() -> None:
    g = _index_grad(np.array([0, 2, 0, 0]))
    np.testing.assert_array_equal(g[:, 0], [3.0, 0.0, 1.0])
    np.testing.assert_array_equal(g, _jax_index_grad(np.array([0, 2, 0, 0])))


def test_pairs_of_integer_arrays_with_repeats() -> None:
    rows, cols = np.array([0, 2, 2, 0]), np.array([1, 3, 3, 1])
    g = _index_grad((rows, cols))
    want = np.zeros_like(X)
    want[0, 1], want[2, 3] = 2.0, 2.0
    np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize(
    "make",
    [list, np.array, jnp.array, lambda v: tg.tensor(np.array(v, np.int32))],
    ids=["list", "numpy", "jax", "tensor"],
)
def test_integer_index_containers_agree(make: Any) -> None:
    index = make([2, -1, 2])
    t = tg.tensor(X, requires_grad=True)
    np.testing.assert_array_equal(np.asarray(t[index].data), X[[2, -1, 2]])
    (g,) = tg.grad(t[index].sum(), t)
    np.testing.assert_array_equal(np.asarray(g.data), _jax_index_grad(np.array([2, -1, 2])))


def test_integer_array_with_slices_matches_jax() -> None:
    index = (slice(None), np.array([3, 3, 0]))
    np.testing.assert_array_equal(_index_grad(index), _jax_index_grad(index))


def test_boolean_masks() -> None:
    mask = X % 3 == 0
    t = tg.tensor(X, requires_grad=True)
    np.testing.assert_array_equal(np.asarray(t[mask].data), X[mask])
    np.testing.assert_array_equal(_index_grad(mask), mask.astype(np.float32))
    row_mask = np.array([True, False, True])
    np.testing.assert_array_equal(np.asarray(t[row_mask].data), X[row_mask])
    np.testing.assert_array_equal(_index_grad(row_mask), np.repeat(row_mask[:, None], 4, 1))


def test_mask_from_a_comparison_tensor() -> None:
    x = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
    mask = x > 0  # jnp needs the mask concretely (a traced one has no static size)
    check_program(lambda t: t[t > 0] * 3.0, lambda a: a[mask] * 3.0, x)


def test_all_false_mask_gives_an_empty_result_and_zero_gradient() -> None:
    np.testing.assert_array_equal(_index_grad(np.zeros(3, bool)), np.zeros_like(X))


def test_float_index_arrays_are_rejected() -> None:
    t = tg.tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match="integer or boolean"):
        t[np.array([0.0, 1.0])]


def test_iteration_and_gather_in_a_program() -> None:
    def tg_fn(t: tg.Tensor) -> tg.Tensor:
        rows = list(t)
        return rows[0] * rows[2] + t[[1, 1]].sum(axis=0)

    def jnp_fn(a: jax.Array) -> jax.Array:
        return a[0] * a[2] + a[jnp.array([1, 1])].sum(axis=0)

    check_program(tg_fn, jnp_fn, X)


TABLE = np.arange(15, dtype=np.float32).reshape(5, 3)


@pytest.mark.parametrize("bad", [[0, 5], np.array([[1], [-1]])], ids=["past-end", "negative"])
def test_embedding_host_indices_out_of_range_raise_index_error(bad: Any) -> None:
    w = tg.tensor(TABLE, requires_grad=True)
    before = tg.graph_stats().nodes
    with pytest.raises(IndexError, match=r"outside \[0, 5\).*\(5, 3\)"):
        tg.embedding(bad, w)
    assert tg.graph_stats().nodes == before
    out = tg.embedding([4, 0, 4], w)  # the tape still works
    (g,) = tg.grad(out.sum(), w)
    np.testing.assert_array_equal(g.numpy()[:, 0], [1, 0, 0, 0, 2])


def test_embedding_device_indices_out_of_range_give_nan_rows() -> None:
    w = tg.tensor(TABLE, requires_grad=True)
    out = tg.embedding(jnp.array([1, 7]), w)
    assert np.isnan(out.numpy()[1]).all() and not np.isnan(out.numpy()[0]).any()
    (g,) = tg.grad(out[0].sum(), w)
    assert g.numpy().sum() == 3.0


def test_embedding_and_take_along_axis_reject_bad_inputs() -> None:
    w = tg.tensor(TABLE, requires_grad=True)
    with pytest.raises(TypeError, match="integers"):
        tg.embedding(np.array([0.5]), w)
    with pytest.raises(ValueError, match="embedding_dim"):
        tg.embedding([0], tg.ones(3, requires_grad=True))
    with pytest.raises(IndexError, match="axis 1"):
        tg.take_along_axis(w, [[3], [0], [0], [0], [0]], axis=1)
    with pytest.raises(ValueError, match="same number of dimensions"):
        tg.take_along_axis(w, jnp.array([0]), axis=1)


def test_gather_refuses_what_pytorch_refuses() -> None:
    x = tg.ones((4, 5), requires_grad=True)
    with pytest.raises(ShapeError, match="larger than the tensor of shape"):
        x.gather(0, [[0, 1, 2, 3, 0, 1]])  # six columns for five
    with pytest.raises(ShapeError, match="same number of dimensions"):
        x.gather(1, [0, 1])
    with pytest.raises(ShapeError, match=r"axis 2 is out of range .* \[-2, 2\)"):
        x.gather(2, [[0]])
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="gather: a PyTorch tensor"):
        x.gather(0, torch.zeros((1, 1), dtype=torch.int64))
    with pytest.raises(IndexError, match=r"gather: 1 indices .*axis 0 of \(4, 5\)"):
        x.gather(0, [[4]])
    with pytest.raises(TypeError, match="integers"):
        x.gather(0, [[0.5]])
    with pytest.raises(TypeError, match="dim=.*axis="):
        x.gather(dim=0, indices=[[0]])
    with pytest.raises(TypeError, match="index=.*indices="):
        x.gather(0, index=[[0]])
    (x.gather(1, [[4], [4]]).sum() * 2).backward()  # the tape is fine after the refusals
    assert x.grad.numpy()[:2, 4].tolist() == [2.0, 2.0] and x.grad.numpy().sum() == 4.0


def test_a_big_endian_index_array_works_as_a_native_one() -> None:
    """An index read from a big-endian file (dtype '>i8'): JAX refuses it with an error about
    abstract arrays; it is read in native order (found by a review)."""
    x = tg.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2)).require_grad()
    y = x[np.array([2, 0, 2], dtype=">i8")]
    np.testing.assert_array_equal(y.numpy(), [[4.0, 5.0], [0.0, 1.0], [4.0, 5.0]])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]])


@pytest.mark.parametrize(
    "index",
    [
        np.array(True),
        np.array(False),
        np.True_,
        (0, np.array(True)),
        (Ellipsis, np.False_),
        (slice(None), np.True_, [0, 2]),
    ],
    ids=repr,
)
def test_a_0d_boolean_mask_adds_an_axis_as_numpy(index: object) -> None:
    """x[True] has shape (1, *x.shape), x[False] (0, *x.shape); NumPy's nonzero refused it."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = tg.tensor(a, requires_grad=True)
    y = x[index]
    np.testing.assert_array_equal(y.numpy(), a[index])
    (g,) = tg.grad(y.sum(), x)
    items = index if isinstance(index, tuple) else (index,)
    jax_index = tuple(
        bool(i) if np.ndim(i) == 0 and isinstance(i, np.generic | np.ndarray) else i for i in items
    )
    np.testing.assert_array_equal(g.numpy(), jax.grad(lambda z: z[jax_index].sum())(jnp.asarray(a)))


def test_index_add_accumulates_repeats_and_its_gradients_are_gathers() -> None:
    x, src = np.zeros((3, 2), np.float32), np.arange(8, dtype=np.float32).reshape(4, 2)
    index = np.array([2, 0, 2, 2])
    check_program(
        lambda a, s: tg.index_add(a, 0, index, s, alpha=0.5) ** 2,
        lambda a, s: a.at[index].add(0.5 * s) ** 2,
        x + 1.0,
        src,
    )
    got = tg.tensor(x).index_add(0, tg.tensor(index), tg.tensor(src))
    np.testing.assert_array_equal(got.numpy(), [[2, 3], [0, 0], [10, 13]])
    t = tg.tensor(np.ones((2, 3), np.float32))
    assert tg.index_add(t, -1, [0], tg.ones((2, 1))).tolist() == [[2, 1, 1], [2, 1, 1]]


def test_scatter_add_uses_indexs_extent_of_src_and_gives_the_rest_no_gradient() -> None:
    index = np.array([[0, 1, 1], [1, 1, 0]])
    x = tg.tensor(np.zeros((2, 4), np.float32), requires_grad=True)
    src = tg.tensor(np.arange(8, dtype=np.float32).reshape(2, 4), requires_grad=True)
    y = x.scatter_add(1, index, src)
    assert y.tolist() == [[0, 3, 0, 0], [6, 9, 0, 0]]
    (y * tg.tensor(np.arange(8, dtype=np.float32).reshape(2, 4))).sum().backward()
    assert grad_of(src).tolist() == [[0, 1, 1, 0], [5, 5, 4, 0]]  # column 3: never added
    np.testing.assert_array_equal(grad_of(x), np.arange(8).reshape(2, 4))


@pytest.mark.parametrize("name", ["index_add", "scatter_add"])
def test_device_indices_out_of_range_add_nothing_and_get_no_gradient(name: str) -> None:
    """Device indices are not read back: out of range (negative ones too, which PyTorch
    refuses) they are dropped, not clamped or counted from the end."""
    index = tg.tensor([1, 5, -1], dtype=tg.int32)
    x = tg.ones((3, 2))
    src = tg.tensor(np.ones((3, 2), np.float32), requires_grad=True)
    if name == "scatter_add":
        index = tg.tensor([[1, 5], [-1, 0], [7, 2]], dtype=tg.int32)
    y = getattr(tg, name)(x, 0, index, src)
    want = [[1, 1], [2, 2], [1, 1]] if name == "index_add" else [[1, 2], [2, 1], [1, 2]]
    assert y.tolist() == want
    y.sum().backward()
    got = grad_of(src).tolist()
    assert got == ([[1, 1], [0, 0], [0, 0]] if name == "index_add" else [[1, 0], [0, 1], [0, 1]])


INDEX_ADD_ERRORS: list[tuple[str, Any, type[Exception], str]] = [
    (
        "float-index",
        lambda x: tg.index_add(x, 0, tg.tensor([0.0]), tg.ones((1, 3))),
        TypeError,
        "indices must be integers",
    ),
    (
        "host-float-index",
        lambda x: tg.index_add(x, 0, [0.5], tg.ones((1, 3))),
        TypeError,
        "indices must be integers",
    ),
    (
        "2-d-index",
        lambda x: tg.index_add(x, 0, [[0]], tg.ones((1, 3))),
        ShapeError,
        "index must be 1-D",
    ),
    (
        "source-shape",
        lambda x: tg.index_add(x, 0, [0, 1], tg.ones((2, 2))),
        ShapeError,
        "source the tensor's shape with axis 0 of length len(index)",
    ),
    (
        "dtype",
        lambda x: tg.index_add(x, 0, [0], tg.ones((1, 3), dtype=tg.float16)),
        TypeError,
        "cast with source.astype(x.dtype)",
    ),
    (
        "host-range",
        lambda x: tg.index_add(x, 0, [2], tg.ones((1, 3))),
        IndexError,
        "outside [0, 2)",
    ),
    (
        "host-negative",
        lambda x: tg.index_add(x, 0, [-1], tg.ones((1, 3))),
        IndexError,
        "outside [0, 2)",
    ),
    (
        "axis",
        lambda x: tg.index_add(x, 2, [0], tg.ones((1, 3))),
        ShapeError,
        "axis 2 is out of range",
    ),
    ("0-d", lambda x: tg.index_add(x[0, 0], 0, [0], tg.ones(1)), ShapeError, "reshape a 0-d"),
    (
        "dim",
        lambda x: tg.index_add(x, dim=0, index=[0], source=tg.ones((1, 3))),
        TypeError,
        "use axis=",
    ),
    (
        "alpha",
        lambda x: tg.index_add(x, 0, [0], tg.ones((1, 3)), alpha="2"),
        TypeError,
        "alpha must be a number",
    ),
    (
        "scatter-float-index",
        lambda x: tg.scatter_add(x, 0, tg.zeros((1, 3)), x),
        TypeError,
        "indices must be integers",
    ),
    (
        "scatter-rank",
        lambda x: tg.scatter_add(x, 0, [0, 1], x),
        ShapeError,
        "the same number of dimensions",
    ),
    (
        "scatter-larger-than-src",
        lambda x: tg.scatter_add(x, 1, [[0, 1, 0]], x[:, :2]),
        ShapeError,
        "may not be larger than src",
    ),
    (
        "scatter-larger-than-x",
        lambda x: tg.scatter_add(x, 1, [[0], [0], [1]], tg.ones((3, 1))),
        ShapeError,
        "nor than the tensor along axes other than 1",
    ),
    (
        "scatter-dtype",
        lambda x: tg.scatter_add(x, 0, [[0]], tg.ones((1, 1), dtype=tg.int32)),
        TypeError,
        "cast with src.astype(x.dtype)",
    ),
    ("scatter-host-range", lambda x: tg.scatter_add(x, 1, [[3]], x), IndexError, "outside [0, 3)"),
    (
        "index-add-int-alpha",
        lambda x: tg.index_add(
            x.astype(tg.int32), 0, [0], tg.ones((1, 3), dtype=tg.int32), alpha=0.5
        ),
        TypeError,
        "not a whole number, for an integer tensor",
    ),
    (
        "scatter-axis",
        lambda x: tg.scatter_add(x, -3, [[0]], x),
        ShapeError,
        "axis -3 is out of range",
    ),
    (
        "scatter-torch-index",
        lambda x: tg.scatter_add(x, 0, torch_index(), x),
        TypeError,
        "a PyTorch tensor",
    ),
]


def torch_index() -> Any:
    torch = pytest.importorskip("torch")
    return torch.zeros((1, 1), dtype=torch.int64)


@pytest.mark.parametrize(
    ("name", "call", "kind", "says"), INDEX_ADD_ERRORS, ids=[e[0] for e in INDEX_ADD_ERRORS]
)
def test_scatter_adds_refuse_what_does_not_fit_saying_what_to_do(
    name: str, call: Any, kind: type[Exception], says: str
) -> None:
    x = tg.ones((2, 3), requires_grad=True)
    message = str(error_of(kind, call, x))
    assert says in message, message
