"""Shape op edge cases: reshape with -1, transpose, squeeze, expand_dims, concatenate, stack."""

from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.testing import check_program

F32 = np.float32
X = np.arange(6, dtype=F32).reshape(2, 3)


def test_reshape_forms_and_minus_one() -> None:
    t = tg.tensor(X, requires_grad=True)
    assert t.reshape(3, 2).shape == (3, 2)
    assert t.reshape((3, 2)).shape == (3, 2)
    assert t.reshape(-1).shape == (6,)
    assert t.reshape(1, -1, 2).shape == (1, 3, 2)
    weights = np.arange(6, dtype=F32).reshape(3, 2)
    check_program(lambda a: a.reshape(3, -1) * weights, lambda a: a.reshape(3, -1) * weights, X)


@pytest.mark.parametrize("shape", [(4,), (2, -1, 4), (-1, -1)])
def test_reshape_with_a_wrong_size_raises_value_error(shape: tuple[int, ...]) -> None:
    t = tg.tensor(X, requires_grad=True)
    with pytest.raises(ValueError, match="reshape"):
        t.reshape(shape)


def test_transpose_forms() -> None:
    x3 = np.arange(24, dtype=F32).reshape(2, 3, 4)
    t = tg.tensor(x3, requires_grad=True)
    assert t.T.shape == (4, 3, 2)
    assert t.transpose(1, 2, 0).shape == (3, 4, 2)
    assert t.transpose((2, 0, 1)).shape == (4, 2, 3)
    check_program(lambda a: a.transpose(-1, 0, 1), lambda a: jnp.transpose(a, (-1, 0, 1)), x3)
    with pytest.raises(ValueError, match="permutation"):
        t.transpose(0, 0, 1)


def test_squeeze_and_expand_dims_round_trip() -> None:
    x = np.ones((1, 3, 1), F32)
    t = tg.tensor(x, requires_grad=True)
    assert t.squeeze().shape == (3,)
    assert t.squeeze(0).shape == (3, 1)
    assert t.squeeze((0, -1)).shape == (3,)
    assert tg.expand_dims(t.squeeze(), (0, -1)).shape == (1, 3, 1)
    with pytest.raises(ValueError, match="length one"):
        t.squeeze(1)
    check_program(
        lambda a: tg.expand_dims(a.squeeze(), 0) * a.squeeze(-1),
        lambda a: jnp.expand_dims(a.squeeze(), 0) * a.squeeze(-1),
        x,
    )


def test_concatenate_splits_the_gradient_back() -> None:
    a = tg.tensor(np.ones((2, 3), F32), requires_grad=True)
    b = tg.tensor(np.ones((1, 3), F32), requires_grad=True)
    y = tg.concatenate([a, b], axis=0)
    assert y.shape == (3, 3)
    ga, gb = tg.grad(y, [a, b], grad_outputs=jnp.arange(9.0).reshape(3, 3))
    np.testing.assert_array_equal(np.asarray(ga.data), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(gb.data), [[6.0, 7.0, 8.0]])


def test_concatenate_with_constants_and_negative_axis() -> None:
    c = np.full((2, 1), 5.0, F32)
    check_program(
        lambda a: tg.concatenate([a, c, a], axis=-1) ** 2,
        lambda a: jnp.concatenate([a, c, a], axis=-1) ** 2,
        X,
    )


def test_stack_routes_slices_to_inputs() -> None:
    check_program(
        lambda a, b: tg.stack([a, b * 2.0, a], axis=1).sum(axis=-1),
        lambda a, b: jnp.stack([a, b * 2.0, a], axis=1).sum(axis=-1),
        X,
        X + 1,
    )


@pytest.mark.parametrize("axis", [0, -1])
def test_joins_of_many_tensors_go_in_groups_and_split_back_per_input(axis: int) -> None:
    """150 operands: joined 64 at a time, then the groups (XLA compiles a join of thousands
    of operands, or a VJP of thousands of outputs, for seconds to minutes); more than four
    cotangents are taken one call each. Constants among them, unequal sizes, stacked on
    either axis."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((150, 2, 3)).astype(F32)
    sizes = [1 + i % 3 for i in range(150)]
    cut = np.cumsum(sizes)[:-1]
    long = rng.standard_normal((2, sum(sizes))).astype(F32)

    def stacked(stack, join, split, x, w):  # type: ignore[no-untyped-def]
        rows = [x[i] * (1.0 + i) if i % 7 else xs[i] for i in range(150)]
        parts = split(w, cut, axis=-1)
        flat = [parts[i] if i % 5 else long[:, :1] * 0 + 1 for i in range(150)]
        weights = np.arange(1.0, 271.0, dtype=F32)
        joined = (join(flat, axis=-1) * weights).sum()
        return (stack(rows, axis=axis).sum(axis=0) ** 2).sum() + joined

    check_program(
        lambda x, w: stacked(tg.stack, tg.concatenate, tg.split, x, w),
        lambda x, w: stacked(jnp.stack, jnp.concatenate, jnp.split, x, w),
        xs,
        long,
    )


def test_concatenate_of_many_distinct_lengths_splits_back_in_one_call() -> None:
    """Twelve sequences of twelve lengths (more distinct extents than the per-input path
    compiles kernels for): one compiled split, gradients equal JAX's."""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((n, 2)).astype(F32) for n in range(1, 13)]
    weights = rng.standard_normal((78, 2)).astype(F32)
    check_program(
        lambda *a: tg.concatenate(list(a), axis=0) * weights,
        lambda *a: jnp.concatenate(list(a), axis=0) * weights,
        *xs,
    )


def test_join_errors_are_value_errors() -> None:
    a = tg.ones((2, 3), requires_grad=True)
    with pytest.raises(ValueError, match="concatenate"):
        tg.concatenate([a, tg.ones((2, 2))], axis=0)
    with pytest.raises(ValueError, match="stack"):
        tg.stack([a, tg.ones((3, 2))])
    with pytest.raises(ValueError):
        tg.concatenate([])


def test_pad_widths_in_numpy_forms() -> None:
    x = tg.ones((2, 3), requires_grad=True)
    assert tg.pad(x, 1).shape == (4, 5)
    torch_pair = r"F.pad\(x, \(1, 2\)\) is tg.pad\(x, \(\(0, 0\), \(1, 2\)\)\)"
    with pytest.raises(ValueError, match=torch_pair):
        tg.pad(x, (1, 2))  # NumPy pads every axis, PyTorch the last: ambiguous, refused
    with pytest.raises(ValueError, match=r"tg.pad\(x, \(\(3, 4\), \(1, 2\)\)\)"):
        tg.pad(x, [1, 2, 3, 4])  # PyTorch's flat list, translated in the message
    assert tg.pad(tg.ones(3), (1, 2)).shape == (6,)  # one axis: both conventions agree
    assert tg.pad(x, (1,)).shape == (4, 5)  # NumPy's one width for every side
    with pytest.raises(ValueError, match="one \\(before, after\\) pair of ints per axis"):
        tg.pad(x, ((1,), (1, 2)))  # ragged: NumPy's own message before
    with pytest.raises(TypeError, match="widths must be ints"):
        tg.pad(x, ((0, 0), (1.9, 0)))  # truncated to 1 before
    assert tg.pad(x, ((0, 0), (2, 0)), value=-1.0).numpy()[0].tolist() == [-1, -1, 1, 1, 1]
    with pytest.raises(ValueError, match="one \\(before, after\\) pair per axis"):
        tg.pad(x, ((1, 1), (1, 1), (1, 1)))
    with pytest.raises(ValueError, match="negative"):
        tg.pad(x, -1)


def test_flatten_ranges_and_errors() -> None:
    x = tg.ones((2, 3, 4, 5))
    assert x.flatten().shape == (120,)
    assert x.flatten(1).shape == (2, 60)
    assert tg.flatten(x, 1, -2).shape == (2, 12, 5)
    assert tg.flatten(tg.tensor(1.0)).shape == (1,)
    with pytest.raises(ValueError, match="do not select"):
        x.flatten(3, 1)
    with pytest.raises(ValueError, match="do not select"):
        x.flatten(0, 4)


def test_split_sections_and_cuts_with_gradient() -> None:
    check_program(
        lambda x: tg.concatenate([p * (i + 1) for i, p in enumerate(tg.split(x, 3, axis=1))], 1),
        lambda x: jnp.concatenate([p * (i + 1) for i, p in enumerate(jnp.split(x, 3, 1))], 1),
        np.arange(12, dtype=np.float32).reshape(2, 6),
    )
    assert [p.shape for p in tg.split(tg.ones(5), [1, 4])] == [(1,), (3,), (1,)]
    with pytest.raises(ValueError, match="equally"):
        tg.split(tg.ones(5), 2)
    with pytest.raises(ValueError, match="out of range"):
        tg.split(tg.ones(5), 1, axis=1)


@pytest.mark.parametrize(("shape", "new"), [((0, 3), (0, -1)), ((3,), (-1, 0)), ((0,), (2, 0, -1))])
def test_reshape_minus_one_beside_a_zero_raises_shape_error(
    shape: tuple[int, ...], new: tuple[int, ...]
) -> None:
    """jnp divided by zero here (ZeroDivisionError); NumPy and PyTorch refuse it too."""
    want = re.escape(f"shape {shape}") + ".* into " + re.escape(f"{new}; -1 cannot be")
    with pytest.raises(tg.ShapeError, match=want):
        tg.zeros(shape).reshape(*new)


def test_flip_roll_and_triangles_refuse_bad_arguments_clearly() -> None:
    x = tg.ones((2, 3))
    with pytest.raises(tg.ShapeError, match="axis 2 is out of range"):
        x.flip(2)
    with pytest.raises(ValueError, match="one shift per axis"):
        x.roll((1, 2), 0)
    with pytest.raises(ValueError, match="one shift per axis"):
        x.roll((1, 2), (0, 1, 1))
    with pytest.raises(tg.ShapeError, match="axis -3 is out of range"):
        x.roll(1, -3)
    with pytest.raises(TypeError, match="roll: shift must be an integer"):
        x.roll(1.5, 0)
    with pytest.raises(TypeError, match="dims="):
        tg.roll(x, 1, dims=0)
    with pytest.raises(tg.ShapeError, match="tril: needs a tensor of 2 or more dimensions"):
        tg.ones(3).tril()
    with pytest.raises(TypeError, match="use k="):
        tg.triu(x, diagonal=1)
    with pytest.raises(TypeError, match="triu: k must be an integer"):
        x.triu(0.5)


def test_flip_of_a_0_d_tensor_is_itself_for_its_one_axis() -> None:
    """PyTorch counts a 0-d tensor as one axis (``flip(0)``), as the reductions here do."""
    x = tg.tensor(2.0).require_grad()
    y = x.flip(0)
    assert y.item() == 2.0 and tg.flip(x).item() == 2.0
    (g,) = tg.grad(y * 3.0, x)
    assert g.item() == 3.0
