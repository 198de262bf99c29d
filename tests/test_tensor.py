"""Tensor: construction, dtypes, attributes, methods, Python protocols and operators (docs/api.md
"Tensors"). Every value and gradient is compared with jnp / jax.vjp as the oracle."""

from __future__ import annotations

import contextlib
import copy
import functools
import pickle
import re
import subprocess
import sys
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import assert_close, compiles, error_of

import tapegrad as tg
from tapegrad._tensor import _TORCH_METHODS, _torch_hint

# ----------------------------------------------------------------------------- helpers


Case = tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...]]
"""(tapegrad function of tensors, jnp twin of arrays, input arrays)."""


def arr(shape: tuple[int, ...], seed: int = 0, positive: bool = False) -> jax.Array:
    """A deterministic float32 array (drawn with NumPy: no compile); positive when asked."""
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return jnp.asarray(np.abs(x) + 0.5 if positive else x)


def cotangent(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
    """A non-uniform cotangent (NumPy: no compile), so a gradient summed wrongly shows."""
    n = int(np.prod(shape))
    return (np.cos(np.arange(n)) + 1.5).astype(dtype).reshape(shape)


def tapegrad_run(
    tg_fn: Callable[..., tg.Tensor], arrays: Sequence[Any]
) -> tuple[np.ndarray, np.ndarray, list[tuple[Any, ...]]]:
    """Run ``tg_fn`` on fresh leaves and backward a fixed cotangent. Returns plain values only
    (value, cotangent, per input (grad shape, dtype, requires_grad, input shape, dtype, grad)),
    so a failing comparison keeps no tensor alive in its traceback."""
    xs = [tg.tensor(a).require_grad() for a in arrays]
    out = tg_fn(*xs)
    assert isinstance(out, tg.Tensor)
    assert out.requires_grad
    cot = cotangent(out.shape, out.dtype)
    out.backward(cot)
    meta = []
    for x in xs:
        g = x.grad
        assert g is not None
        meta.append((g.shape, g.dtype, g.requires_grad, x.shape, x.dtype, g.numpy()))
    return out.numpy(), cot, meta


def check_all(cases: Sequence[Case], rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """For every case, tapegrad's value and input gradients equal jax.vjp of the jnp twin.

    The oracle for all cases is one jitted function: one compile instead of one per
    primitive (eager jax.vjp compiles every primitive for every new shape).
    """
    runs = [tapegrad_run(tg_fn, arrays) for tg_fn, _, arrays in cases]
    twins = [jnp_fn for _, jnp_fn, _ in cases]

    def oracle(all_xs: list[tuple[Any, ...]], cots: list[Any]) -> list[Any]:
        out = []
        for fn, xs, g in zip(twins, all_xs, cots, strict=True):
            y, pullback = jax.vjp(fn, *xs)
            out.append((y, pullback(g)))
        return out

    refs = jax.jit(oracle)([tuple(c[2]) for c in cases], [r[1] for r in runs])
    for i, ((value, _, meta), (ref, ref_grads)) in enumerate(zip(runs, refs, strict=True)):
        assert (value.shape, value.dtype) == (ref.shape, ref.dtype), f"case {i}"
        np.testing.assert_allclose(value, ref, rtol=rtol, atol=atol, err_msg=f"case {i} value")
        for j, (m, rg) in enumerate(zip(meta, ref_grads, strict=True)):
            gshape, gdtype, g_requires, xshape, xdtype, g = m
            assert (gshape, gdtype, g_requires) == (xshape, xdtype, False), f"case {i} input {j}"
            np.testing.assert_allclose(g, rg, rtol=rtol, atol=atol, err_msg=f"case {i} grad {j}")


def check(
    tg_fn: Callable[..., tg.Tensor],
    jnp_fn: Callable[..., jax.Array],
    *arrays: jax.Array,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> None:
    """One case of ``check_all``."""
    check_all([(tg_fn, jnp_fn, arrays)], rtol, atol)


# ----------------------------------------------------------------------------- construction


def test_tensor_from_jax_array_wraps_without_copy() -> None:
    a = jnp.arange(3.0)
    t = tg.tensor(a)
    assert t.data is a
    assert tg.tensor(a, dtype=tg.float32).data is a  # same dtype: still no copy
    assert t.requires_grad is False


def test_tensor_from_jax_array_with_other_dtype_casts() -> None:
    t = tg.tensor(jnp.arange(3.0), dtype=tg.float16)
    assert t.dtype == jnp.float16
    assert t.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    ("data", "dtype", "values"),
    [
        (2.5, np.float32, 2.5),
        (3, np.int32, 3),
        (True, np.bool_, True),
        ([[1, 2], [3, 4]], np.int32, [[1, 2], [3, 4]]),
        ([1.0, 2], np.float32, [1.0, 2.0]),
        (np.array([1.5, 2.5]), np.float32, [1.5, 2.5]),  # float64 NumPy, x64 off: float32
        (np.array([1, 2], dtype=np.int64), np.int32, [1, 2]),
        (np.float32(4.0), np.float32, 4.0),
    ],
)
def test_tensor_from_python_and_numpy_follows_jax_dtypes(
    data: Any, dtype: Any, values: Any
) -> None:
    t = tg.tensor(data)
    assert t.dtype == dtype
    assert t.dtype == jnp.asarray(data).dtype
    assert t.tolist() == values


def test_tensor_from_numpy_copies_without_compiling() -> None:
    """NumPy data is copied to the device with no XLA compile, however often its shape is met
    (``jnp.asarray`` compiles a copy or cast kernel per shape: issue 17's cold start), with
    JAX's dtypes and values, uncommitted on the default device as ``jnp.asarray`` places it."""
    cases: list[tuple[Any, Any]] = [
        (np.linspace(0.0, 1.0, 35).reshape(7, 5), None),  # float64, x64 off: float32
        (np.arange(13), tg.float32),
        (np.array([1.7, -1.7, 0.0]), tg.int32),
        (np.array([0.0, 2.0]), tg.bool_),
        (np.float32(2.5), None),
        (np.arange(6, dtype=np.int64).reshape(2, 3), None),  # int64, x64 off: int32
    ]
    with compiles() as seen:
        made = [[tg.tensor(data, dtype=dtype) for data, dtype in cases] for _ in range(6)]
    assert seen == []
    for ts in made:
        for t, (data, dtype) in zip(ts, cases, strict=True):
            want = jnp.asarray(data, dtype=dtype)
            assert (t.dtype, t.data.weak_type, t.data.committed) == (want.dtype, False, False)
            assert t.data.sharding == want.sharding
            np.testing.assert_array_equal(np.asarray(t.data), np.asarray(want))
    with jax.default_device(jax.devices()[-1]):  # JAX's own placement there
        t = tg.tensor(np.arange(3.0))
    assert t.data.devices() == {jax.devices()[-1]} and not t.data.committed


def test_tensor_from_numpy_does_what_jax_does_beyond_placing() -> None:
    """Where ``jnp.asarray`` does more than place NumPy data, ``tg.tensor`` does it too: NaN
    checks under ``jax_debug_nans``, replication over ``jax.set_mesh``'s mesh; it refuses
    a masked array (``jnp.array`` would use the values under the mask) and int64 data
    beyond int32 when x64 is off (a cast would wrap it around), and takes a non-native byte
    order, which JAX refuses."""
    with jax.debug_nans(True), pytest.raises(FloatingPointError):
        tg.tensor(np.array([1.0, np.nan]))
    mesh = jax.make_mesh((len(jax.devices()),), ("x",))
    with jax.set_mesh(mesh):
        assert tg.tensor(np.ones((4, 2))).data.sharding == jnp.asarray(np.ones((4, 2))).sharding
    abstract = jax.make_mesh((len(jax.devices()),), ("x",)).abstract_mesh
    placed = tg.zeros(3).data.sharding  # outside: a first compile under an abstract mesh fails
    with jax.sharding.use_abstract_mesh(abstract):  # no devices to replicate over: placed
        assert tg.tensor(np.arange(3.0)).data.sharding == placed
    masked = np.ma.masked_array([1.0, 999.0], mask=[False, True])
    for holding in (masked, [masked, masked], ([masked],)):
        with pytest.raises(TypeError, match=r"masked array.*filled"):
            tg.tensor(holding)
    if not jax.config.jax_enable_x64:
        for asked in (None, tg.int64, np.int64, np.uint64):
            with pytest.raises(OverflowError, match=r"1099511627776 is out of range .*x64"):
                tg.tensor(np.array([5, 2**40]), dtype=asked)
        assert tg.tensor(np.array([5, -(2**31)])).tolist() == [5, -(2**31)]
        assert tg.tensor(np.array([2**40]), dtype=tg.int32).tolist() == [0]  # asked: a cast
        with pytest.raises(OverflowError, match=r"uint32.*integers are 32-bit"):
            tg.tensor(np.array([2**33], np.uint64))
    for big in (np.arange(3, dtype=">f4"), np.arange(3, dtype=">i8")):
        want = jnp.asarray(big.astype(big.dtype.newbyteorder("=")))
        for context in (contextlib.nullcontext(), jax.debug_nans(True), jax.set_mesh(mesh)):
            with context:
                t = tg.tensor(big)
            assert t.dtype == want.dtype and t.tolist() == [0, 1, 2]
        traced = tg.jit(lambda x, big=big: x + tg.tensor(big))(tg.zeros(3, dtype=want.dtype))
        assert traced.tolist() == [0, 1, 2]
    # a copy: the tensor keeps the values it was made from (on CPU, ``device_put`` shares
    # a NumPy buffer that happens to be aligned: ~40% of them here, so try several sizes)
    sources = [np.zeros(n, np.float32) for n in range(3, 23)]
    made = [tg.tensor(source) for source in sources]
    for source in sources:
        source[0] = 5.0
    assert all(t.tolist() == [0.0] * len(source) for t, source in zip(made, sources, strict=True))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "bfloat16", "float16"])
def test_tensor_copies_numpy_and_torch_data_on_every_path(dtype: str) -> None:
    """Converted again and again, with or without an explicit ``dtype``, NumPy data and a
    torch tensor (whose ``.numpy()`` shares its memory) are copied: writing to the source
    afterwards leaves the tensor as it was made."""
    torch = pytest.importorskip("torch")
    want = jnp.dtype(dtype)
    made = []
    for _ in range(8):  # one shape converted again and again
        source = np.zeros(4096, want)
        made.append((source, tg.tensor(source, dtype=want)))
        source = np.zeros(4096, want)
        made.append((source, tg.tensor(source)))
    for source, t in made:
        source[0] = 1
        assert not bool(t.data[0]), "the tensor shares the NumPy buffer"
    if dtype != "bfloat16":  # torch's bfloat16 goes through float32: always a new array
        shared = []
        for _ in range(8):
            source_t = torch.zeros(4096, dtype=getattr(torch, dtype))
            shared.append((source_t, tg.tensor(source_t, dtype=want)))
        for source_t, t in shared:
            source_t[0] = 1
            assert not bool(t.data[0]), "the tensor shares the torch tensor's memory"


def test_first_fills_and_scalar_constants_compile_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small fill met for the first time (``tg.zeros``/``ones``/``full``) is made on the
    host and copied, and a Python scalar operand becomes a device constant without a copy
    kernel: issue 17's cold start. Met again, a fill takes the compiled constructor; values,
    dtypes and weak types are the same either way."""
    monkeypatch.setattr(tg._arrays, "_FILLS", tg._arrays.Meetings(1))  # as in a fresh process
    monkeypatch.setattr(tg.op, "_constant", functools.lru_cache(maxsize=8)(_new_constant))
    x = tg.tensor(np.arange(3.0, dtype=np.float32))
    with compiles() as seen:
        made = [tg.zeros((7, 3)), tg.ones(5, dtype=tg.int32), tg.full((2, 2), 1.5)]
        scalars = [tg.op.as_operand(v, "test") for v in (2.5, 3, -4.0)]
    assert seen == []
    again = [tg.zeros((7, 3)), tg.ones(5, dtype=tg.int32), tg.full((2, 2), 1.5)]
    for t, u, want in zip(
        made, again, [jnp.zeros((7, 3)), jnp.ones(5, jnp.int32), jnp.full((2, 2), 1.5)], strict=True
    ):
        assert t.dtype == u.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(t.data), np.asarray(want))
        np.testing.assert_array_equal(np.asarray(u.data), np.asarray(want))
    assert [(s.dtype, s.weak_type) for s in scalars] == [
        (jnp.float32, True),
        (jnp.int32, True),
        (jnp.float32, True),
    ]
    assert (x * 2.5).tolist() == [0.0, 2.5, 5.0]


@pytest.mark.parametrize(
    ("value", "dtype"),
    [(float("inf"), "int32"), (float("nan"), "int32"), (-2.7, "uint8"), (-1, "uint8"),
     (300, "int8"), (2.5, "int32"), (1e10, "float16"), (True, "float32"), (3, "bool")],
)  # fmt: skip
def test_first_fills_convert_as_jax_does(
    monkeypatch: pytest.MonkeyPatch, value: object, dtype: str
) -> None:
    # a first fill made on the host must equal XLA's convert (NumPy rounds and wraps
    # out-of-range values differently: those take the compiled path), first and second time
    monkeypatch.setattr(tg._arrays, "_FILLS", tg._arrays.Meetings(1))
    with np.errstate(over="ignore"):  # jnp.full casts a float16 literal with NumPy
        want = np.asarray(jnp.full((3,), value, dtype))
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(tg.full((3,), value, dtype=dtype).data), want)


_new_constant = tg.op._constant.__wrapped__


def test_tensor_dtype_and_requires_grad_arguments() -> None:
    t = tg.tensor([1, 2], dtype=tg.float32, requires_grad=True)
    assert t.dtype == jnp.float32
    assert t.requires_grad and t.is_leaf
    with pytest.warns(tg.TapegradWarning, match=r"without its graph.*t\.detach\(\)") as seen:
        u = tg.tensor(t)  # from a Tensor: the value, not the node, as torch.tensor warns
    assert seen[0].filename == __file__  # points at this line, not inside tapegrad
    assert u.data is t.data
    assert u.requires_grad is False
    assert tg.tensor(t.detach()).data is t.data  # said so: no warning (warnings are errors)
    assert tg.tensor(tg.tensor([1.0])).requires_grad is False


def test_tensor_rejects_unconvertible_data() -> None:
    err = error_of(TypeError, tg.tensor, {"a": 1})
    assert "tg.tensor" in str(err)


@pytest.mark.parametrize(
    ("make", "shape", "dtype", "fill"),
    [
        (lambda: tg.zeros((2, 3)), (2, 3), np.float32, 0),
        (lambda: tg.zeros(4), (4,), np.float32, 0),
        (lambda: tg.zeros([2, 2], dtype=tg.int32), (2, 2), np.int32, 0),
        (lambda: tg.ones(()), (), np.float32, 1),
        (lambda: tg.ones((3,), dtype=tg.float16), (3,), np.float16, 1),
        (lambda: tg.full((2,), 3.5), (2,), np.float32, 3.5),
        (lambda: tg.full((2, 1), 7), (2, 1), np.int32, 7),
        (lambda: tg.full(3, True), (3,), np.bool_, True),
        (lambda: tg.full((2,), 2.0, dtype=tg.float16), (2,), np.float16, 2.0),
    ],
)
def test_filled_constructors(
    make: Callable[[], tg.Tensor], shape: Any, dtype: Any, fill: Any
) -> None:
    t = make()
    assert t.shape == shape
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), np.full(shape, fill, dtype))
    assert t.requires_grad is False


def test_constructors_with_requires_grad_make_leaves() -> None:
    for t in (
        tg.zeros(2, requires_grad=True),
        tg.ones(2, requires_grad=True),
        tg.full(2, 1.5, requires_grad=True),
        tg.arange(0.0, 2.0, requires_grad=True),
        tg.randn(2, key=0, requires_grad=True),
        tg.rand(2, key=0, requires_grad=True),
        tg.zeros_like(tg.ones(2), requires_grad=True),
        tg.ones_like(tg.ones(2), requires_grad=True),
    ):
        assert t.requires_grad and t.is_leaf
    with pytest.raises(TypeError):
        tg.zeros(2, dtype=tg.int32, requires_grad=True)


def test_arange_like_jnp() -> None:
    """As ``jnp.arange``: values, dtype, weak type and placement; int bounds without a dtype
    are counted on the host, so no length compiles anything."""
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((5,), {}),
        ((0.0, 1.0, 0.25), {}),
        ((1, 7, 2), {"dtype": tg.float32}),
        ((10, -7, -3), {}),
        ((-4, 29), {}),
        ((3, 3), {}),
        ((2**31 - 3, 2**31 - 1), {}),
        ((5,), {"step": 1.0}),  # a typed step of 1 keeps its dtype
        ((5,), {"step": np.int16(1)}),
        ((2.5,), {"step": np.float32(1)}),
    ]
    for args, kw in cases:
        t = tg.arange(*args, **kw)
        ref = jnp.arange(args[0], None, kw["step"]) if "step" in kw else jnp.arange(*args, **kw)
        assert (t.dtype, t.shape, t.data.weak_type) == (ref.dtype, ref.shape, ref.weak_type)
        assert (t.data.sharding, t.data.committed) == (ref.sharding, ref.committed)
        np.testing.assert_array_equal(t.numpy(), np.asarray(ref))
    with compiles() as seen:
        made = [tg.arange(n) for n in range(1000, 1010)] + [tg.arange(3, 1000 + 3, 7)]
    assert seen == [] and made[3].tolist() == list(range(1003))
    with jax.transfer_guard("disallow"):  # JAX's arange transfers nothing: neither does this
        assert tg.arange(4).tolist() == [0, 1, 2, 3]


def test_zeros_like_and_ones_like_keep_shape_and_dtype() -> None:
    src = tg.tensor([[1, 2, 3]])
    z, o = tg.zeros_like(src), tg.ones_like(src)
    assert (z.shape, z.dtype, o.shape, o.dtype) == ((1, 3), np.int32, (1, 3), np.int32)
    assert z.tolist() == [[0, 0, 0]] and o.tolist() == [[1, 1, 1]]
    assert tg.zeros_like(src, dtype=tg.float16).dtype == np.float16
    assert tg.ones_like(tg.ones(2, dtype=tg.float16)).dtype == np.float16


def test_tensor_of_a_list_of_tensors_takes_their_arrays() -> None:
    # NumPy read each element through the host: bfloat16 0-d tensors were "expected number,
    # got Tensor", and traced ones under tg.jit a TracerError pointing into JAX's code
    halves = [tg.tensor(1.5, dtype=tg.bfloat16), tg.tensor(2.0, dtype=tg.bfloat16)]
    t = tg.tensor(halves)
    assert t.dtype == tg.bfloat16 and t.tolist() == [1.5, 2.0]
    assert tg.tensor([[tg.tensor(1.0), 2], (3, tg.tensor(4))]).tolist() == [[1, 2], [3, 4]]

    @tg.jit
    def stats(x: tg.Tensor) -> tg.Tensor:
        return tg.tensor([x.sum(), x.mean(), 0.5])

    assert stats(tg.ones(4)).tolist() == [4.0, 1.0, 0.5]


def test_integers_beyond_the_dtype_say_what_to_do() -> None:
    # x64 off, no dtype given: int32. tg.tensor and tg.full raised JAX's bare overflow
    # (full's naming a "jitted computation"); tg.arange wrapped around silently to -2**31.
    # With a dtype, values convert as XLA does (test_first_fills_convert_as_jax_does)
    for make in (
        lambda: tg.tensor(2**31),
        lambda: tg.tensor([1, 2**40]),
        lambda: tg.full((2,), 2**31),
        lambda: tg.arange(2**70),  # was a TypeError from MLIR
        lambda: tg.arange(2**31, 2**31 + 2),
    ):
        err = error_of(OverflowError, make)
        assert "dtype=tg.float32" in str(err) and "jax_enable_x64" in str(err)
    assert tg.tensor(2**40, dtype=tg.float32).item() == 2.0**40
    assert tg.arange(2**31, 2**31 + 512, 256, dtype=tg.float32).tolist() == [2.0**31, 2**31 + 256]


@pytest.mark.parametrize("args", [(0, 5, 0), (0.0, 1.0, 0.0), (float("nan"),), (0, float("inf"))])
def test_arange_refuses_a_zero_step_and_infinite_bounds(args: tuple[float, ...]) -> None:
    # were ZeroDivisionError: division by zero, and NumPy's float-to-int conversion errors
    err = error_of(ValueError, tg.arange, *args)
    assert "tg.arange" in str(err) and "nonzero" in str(err)


def test_full_takes_a_tensor_value_that_does_not_require_grad() -> None:
    # as torch.full((2,), torch.tensor(1.5)); was JAX's "full requires ndarray or scalar"
    assert tg.full((2,), tg.tensor(1.5)).tolist() == [1.5, 1.5]
    assert tg.full(2, tg.tensor(3, dtype=tg.int8)).dtype == tg.int8

    @tg.jit
    def filled(x: tg.Tensor) -> tg.Tensor:
        return tg.full(x.shape, x.sum())

    assert filled(tg.ones(3)).tolist() == [3.0, 3.0, 3.0]
    err = error_of(TypeError, tg.full, (2,), tg.tensor(1.5, requires_grad=True))
    assert "tg.ones(shape)" in str(err) and "detach" in str(err)


@pytest.mark.parametrize(
    "make",
    [
        lambda d: tg.tensor([1.0], dtype=d),
        lambda d: tg.zeros(2, dtype=d),
        lambda d: tg.ones(2, dtype=d),
        lambda d: tg.full(2, 1.0, dtype=d),
        lambda d: tg.arange(3, dtype=d),
        lambda d: tg.randn(2, key=0, dtype=d),
        lambda d: tg.rand_like(tg.ones(2), key=0, dtype=d),
        lambda d: tg.ones(2).astype(d),
    ],
)
def test_a_dtype_that_is_not_one_is_named_with_what_to_write(make: Callable[[Any], Any]) -> None:
    # tg.tensor blamed the data ("cannot convert list"), the others raised NumPy's bare
    # "Cannot interpret 'torch.float32' as a data type"
    class TorchLike:  # torch.float32's repr, without importing torch
        def __repr__(self) -> str:
            return "torch.float32"

    err = error_of(TypeError, make, TorchLike())
    assert "torch.float32 is not a dtype" in str(err) and "tg.float32" in str(err)
    err = error_of(TypeError, make, "flaot32")
    assert "'flaot32' is not a dtype" in str(err) and "'float32'" in str(err)


def test_like_constructors_take_jax_and_numpy_arrays() -> None:
    # tg.zeros_like(jnp.ones(3)) was AttributeError: 'ArrayImpl' object has no attribute 'data'
    z = tg.zeros_like(jnp.ones((2, 3), jnp.float16))
    assert (z.shape, z.dtype) == ((2, 3), np.float16) and not z.data.committed
    placed = jax.device_put(jnp.ones(2), jax.devices()[-1])
    assert tg.rand_like(placed, key=0).data.sharding == placed.sharding
    assert tg.ones_like(np.zeros(2, np.int8)).tolist() == [1, 1]


@pytest.mark.parametrize("key", [3, np.int64(3), jax.random.PRNGKey(3), jax.random.key(3)])
def test_random_constructors_accept_int_seeds_and_jax_keys(key: Any) -> None:
    raw = jax.random.PRNGKey(3)
    n, u = tg.randn((2, 3), key=key), tg.rand((4,), key=key)
    np.testing.assert_array_equal(n.numpy(), np.asarray(jax.random.normal(raw, (2, 3))))
    np.testing.assert_array_equal(u.numpy(), np.asarray(jax.random.uniform(raw, (4,))))
    assert n.dtype == u.dtype == np.float32
    assert tg.randn(2, key=key, dtype=tg.float16).dtype == np.float16


def test_sizes_may_be_given_one_by_one_as_in_torch() -> None:
    """``tg.zeros(2, 3)`` is ``tg.zeros((2, 3))``, for zeros, ones, randn and rand."""
    for make in (tg.zeros, tg.ones):
        assert make(2, 3).shape == make((2, 3)).shape == (2, 3)
        assert make(2, 3, dtype=tg.int32).dtype == np.int32
        assert make(shape=(2, 3)).shape == (2, 3)
    for make in (tg.randn, tg.rand):
        np.testing.assert_array_equal(make(2, 3, key=1).numpy(), make((2, 3), key=1).numpy())
    err = error_of(TypeError, lambda: tg.zeros((2, 3), 4))
    assert "shape given twice" in str(err) and "(2, 3, 4)" in str(err)
    error_of(TypeError, lambda: tg.ones(2, 3.5))  # sizes are ints, as in a tuple shape
    error_of(ValueError, lambda: tg.randn(2, -1))


def test_pytorch_methods_and_item_assignment_name_tapegrad_spelling() -> None:
    """A PyTorch method tapegrad spells otherwise is an AttributeError naming tapegrad's
    spelling (every name a hint mentions exists); other missing names stay plain."""
    x = tg.ones((2, 3))
    for name in [*_TORCH_METHODS, "add_", "exp_", "clamp_", "relu_"]:
        err = error_of(AttributeError, lambda n=name: getattr(x, n))
        hint = _torch_hint(name)
        assert hint is not None and f"{name!r} (PyTorch's); {hint}" in str(err)
        for mentioned in re.findall(r"\btg\.(\w+)", hint):
            assert hasattr(tg, mentioned), (name, mentioned)
        for mentioned in re.findall(r"\bx\.(\w+)", hint):
            assert hasattr(tg.Tensor, mentioned), (name, mentioned)
    for plain in ("foo", "foo_", "__jax_array__"):
        err = error_of(AttributeError, lambda n=plain: getattr(x, n))
        assert "PyTorch" not in str(err)
    assert not hasattr(x, "view") and getattr(x, "view", None) is None
    err = error_of(TypeError, lambda: x.__setitem__(0, 1.0))
    assert "tg.where" in str(err) and "masked_fill" in str(err)


def test_dir_lists_what_resolves_and_hides_pytorch_spellings() -> None:
    """``dir(x)`` leaves out PyTorch's spellings (they raise), but lists a name a subclass or
    the user defined since: what ``dir`` shows is what ``getattr`` finds."""

    class Mine(tg.Tensor):
        __slots__ = ()

        def view(self, *shape: int) -> tg.Tensor:
            return self.reshape(*shape)

    x = tg.ones((4,))
    mine = Mine(x.data)
    assert "view" not in dir(x) and "add_" not in dir(x) and "reshape" in dir(x)
    assert "view" in dir(mine) and mine.view(2, 2).shape == (2, 2)
    assert "view" not in dir(x)  # the subclass's method is its own


def test_an_op_called_from_c_with_no_python_frame_above_it_records() -> None:
    """An op run straight from C (``atexit.register(operator.mul, w, w)``: no Python frame
    above it) records with an unknown origin instead of failing in the origin lookup."""
    script = (
        "import atexit, operator, tapegrad as tg\n"
        "w = tg.ones((3,)).require_grad()\n"
        "def report():\n"
        "    print('origins', sorted({n.origin for n in tg.snapshot().nodes}))\n"
        "atexit.register(report)\n"
        "atexit.register(operator.mul, w, w)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr[-2000:]
    assert "<unknown>:0" in proc.stdout, proc.stdout


def test_random_constructors_reject_bad_keys() -> None:
    # key=None is not bad: it draws from the process random state (tests/test_random.py)
    for bad in (1.5, True, "0"):
        err = error_of(TypeError, lambda k=bad: tg.randn(2, key=k))
        assert "int seed or a jax.random key" in str(err)


# ----------------------------------------------------------------------------- dtypes


WEAK = [
    lambda t: t * 2.0,
    lambda t: 2.0 * t,
    lambda t: t + 1,
    lambda t: 1 - t,
    lambda t: t / 3,
    lambda t: 3.0 / t,
    lambda t: t**2,
    lambda t: 2.0**t,
    lambda t: -t,
]


def test_python_scalars_are_weakly_typed_and_never_upcast() -> None:
    t16 = tg.ones(3, dtype=tg.float16)
    assert (t16 * 2.0).dtype == np.float16  # the case docs/api.md spells out
    for fn in WEAK:  # abstract evaluation: the same promotion rules, without a compile each
        assert jax.eval_shape(fn, t16).dtype == np.float16
        assert jax.eval_shape(fn, jnp.ones(3, jnp.float16)).dtype == np.float16
    assert (tg.ones(3, dtype=tg.bfloat16) * 2.0).dtype == jnp.bfloat16
    assert (2 * tg.tensor([1, 2])).dtype == np.int32


def test_numpy_scalars_act_as_python_scalars_as_in_pytorch() -> None:
    """``q / np.sqrt(d)`` keeps a bfloat16 model in bfloat16 (JAX alone would make the result
    float32: NumPy scalars are strongly typed there; PyTorch treats them as Python numbers)."""
    torch = pytest.importorskip("torch")
    b16 = tg.ones(3, dtype=tg.bfloat16)
    tb16 = torch.ones(3, dtype=torch.bfloat16)
    for scalar in (np.sqrt(8.0), np.float32(2), np.int64(3), np.float16(0.5)):
        assert (b16 / scalar).dtype == jnp.bfloat16
        assert (scalar * b16).dtype == jnp.bfloat16
        assert str((tb16 / scalar).dtype) == "torch.bfloat16"  # the oracle agrees
    i32 = tg.tensor([1, 2])
    assert (i32 * np.float64(0.5)).dtype == np.float32  # a float scalar still makes floats
    assert (i32 + np.int64(2)).dtype == np.int32
    np.testing.assert_allclose((tg.ones(2) * np.float64(1.5)).numpy(), [1.5, 1.5])


def test_binary_promotion_follows_jax() -> None:
    i32, f16, f32 = tg.tensor([1, 2, 3]), tg.ones(3, dtype=tg.float16), tg.ones(3)
    cases = [(i32, 2.5), (i32, 2), (i32, f32), (f16, f32), (f16, i32)]
    for a, b in cases:
        bb = b.data if isinstance(b, tg.Tensor) else b
        ours = jax.eval_shape(lambda x, y: x * y, a, b).dtype
        assert ours == jax.eval_shape(lambda x, y: x * y, a.data, bb).dtype
    assert jax.eval_shape(lambda x: x / 2, i32).dtype == np.float32
    assert (f16 * f32).dtype == np.float32  # and eagerly


def test_promoted_result_gives_gradient_in_leaf_dtype() -> None:
    w16 = tg.ones(3, dtype=tg.float16).require_grad()
    y = (w16 * tg.tensor([1.0, 2.0, 3.0])).sum()
    assert y.dtype == np.float32
    y.backward()
    assert w16.grad is not None
    assert w16.grad.dtype == np.float16
    assert w16.grad.tolist() == [1.0, 2.0, 3.0]


# ----------------------------------------------------------------------------- attributes


def test_shape_ndim_dtype_device_sharding() -> None:
    a = jnp.ones((2, 3, 4), jnp.float16)
    t = tg.tensor(a)
    assert t.shape == (2, 3, 4) and type(t.shape) is tuple
    assert t.ndim == 3
    assert t.dtype == np.float16
    assert t.device == a.device
    assert t.sharding == a.sharding
    assert tg.tensor(1.0).shape == ()


def test_data_setter_same_shape_and_dtype_keeps_the_node() -> None:
    w = tg.tensor([1.0, 2.0]).require_grad()
    node = w._node
    nodes = tg.graph_stats().nodes
    new = jnp.array([3.0, 5.0])
    w.data = new
    assert w.data is new
    assert w._node is node
    assert tg.graph_stats().nodes == nodes
    (w * w).sum().backward()
    assert w.grad is not None
    assert w.grad.tolist() == [6.0, 10.0]  # the gradient sees the new value


def test_data_setter_accepts_numpy_and_tensor() -> None:
    w = tg.zeros(2).require_grad()
    w.data = np.array([1.0, 2.0], dtype=np.float32)
    assert w.tolist() == [1.0, 2.0]
    w.data = tg.tensor([4.0, 5.0])
    assert w.tolist() == [4.0, 5.0]
    assert w.requires_grad


def test_data_setter_rejects_other_shape_and_dtype() -> None:
    w = tg.ones(3).require_grad()
    err = error_of(ValueError, setattr, w, "data", jnp.ones(4))
    assert "(4,)" in str(err) and "(3,)" in str(err)
    err = error_of(TypeError, setattr, w, "data", jnp.ones(3, jnp.int32))
    assert "astype" in str(err)
    err = error_of(TypeError, setattr, w, "data", [1.0, 2.0, 3.0])
    assert "jax.Array" in str(err)
    assert w.tolist() == [1.0, 1.0, 1.0]


def test_data_setter_refusing_a_torch_tensor_or_list_says_how_to_convert_it() -> None:
    """``p.data = torch_tensor`` named the refused type only as "Tensor", beside "must be set
    to a ... Tensor": the message names torch.Tensor and says how to convert."""
    torch = pytest.importorskip("torch")
    w = tg.ones(3).require_grad()
    err = error_of(TypeError, setattr, w, "data", torch.ones(3))
    assert "torch.Tensor" in str(err) and "tg.tensor(value" in str(err)
    err = error_of(TypeError, setattr, w, "data", [1.0, 2.0, 3.0])
    assert "list" in str(err) and "tg.tensor(value" in str(err)
    assert w.tolist() == [1.0, 1.0, 1.0]


def test_is_leaf_follows_pytorch() -> None:
    plain = tg.ones(2)
    w = tg.ones(2).require_grad()
    y = w * 2
    assert plain.is_leaf and not plain.requires_grad
    assert w.is_leaf and w.requires_grad
    assert not y.is_leaf and y.requires_grad
    assert (plain * 2).is_leaf  # a result that does not require grad


def test_grad_setter() -> None:
    w = tg.ones(2).require_grad()
    assert w.grad is None
    g = tg.tensor([1.0, 2.0])
    w.grad = g
    assert w.grad is g
    w.grad = None
    assert w.grad is None
    err = error_of(ValueError, setattr, w, "grad", tg.ones(3))
    assert "(2,)" in str(err)
    error_of(TypeError, setattr, w, "grad", np.ones(2))
    err = error_of(TypeError, setattr, w, "grad", tg.ones(2, dtype=tg.int32))
    assert "dtype float32" in str(err) and "astype" in str(err)
    tracked = tg.tensor([3.0, 4.0]).require_grad()
    w.grad = tracked
    assert w.grad is not None
    assert w.grad.requires_grad is False
    assert w.grad.tolist() == [3.0, 4.0]


def test_grad_set_by_user_accumulates() -> None:
    w = tg.ones(2).require_grad()
    w.grad = tg.tensor([10.0, 20.0])
    (w * 3).sum().backward()
    assert w.grad is not None
    assert w.grad.tolist() == [13.0, 23.0]


# ----------------------------------------------------------------------------- grad state


def test_require_grad_returns_self_and_is_a_no_op_when_already_required() -> None:
    t = tg.ones(2)
    assert t.require_grad() is t
    node = t._node
    nodes = tg.graph_stats().nodes
    assert t.require_grad() is t
    assert t.requires_grad_() is t
    assert t.requires_grad_(True) is t
    assert t._node is node
    assert tg.graph_stats().nodes == nodes
    u = t * 2
    assert u.require_grad() is u  # an op output already requires grad: no new leaf
    assert not u.is_leaf
    assert tg.graph_stats().nodes == nodes + 1


@pytest.mark.parametrize("data", [[1, 2], [True, False], 3])
def test_require_grad_on_integer_or_bool_raises_type_error(data: Any) -> None:
    t = tg.tensor(data)
    nodes = tg.graph_stats().nodes
    for call in (t.require_grad, t.requires_grad_):
        err = error_of(TypeError, call)
        assert "astype" in str(err)
    err = error_of(TypeError, lambda: tg.tensor(data, requires_grad=True))
    assert "floating-point" in str(err)
    assert t.requires_grad is False
    assert tg.graph_stats().nodes == nodes


def test_consumed_tensor_still_reports_requires_grad() -> None:
    w = tg.ones(2).require_grad()
    y = (w * 2).sum()
    y.backward()
    assert y.requires_grad
    assert y.require_grad() is y
    assert not y.is_leaf


def test_requires_grad_false_on_leaf_detaches_it_in_place() -> None:
    w = tg.ones(2).require_grad()
    assert w.requires_grad_(False) is w
    assert w.requires_grad is False
    assert (w * 2).requires_grad is False
    y = tg.ones(2).require_grad() * 2
    err = error_of(RuntimeError, y.requires_grad_, False)
    assert "detach" in str(err)


def test_detach_shares_the_value_and_does_not_require_grad() -> None:
    w = tg.tensor([1.0, 2.0]).require_grad()
    d = (w * 2).detach()
    assert d.requires_grad is False and d.is_leaf
    assert d.tolist() == [2.0, 4.0]
    assert w.detach().data is w.data
    nodes = tg.graph_stats().nodes
    _ = d * 3
    assert tg.graph_stats().nodes == nodes


def test_clone_is_differentiable() -> None:
    w = tg.tensor([1.0, -2.0]).require_grad()
    c = w.clone()
    assert c.requires_grad and not c.is_leaf
    assert c.tolist() == [1.0, -2.0]
    (c * c).sum().backward()
    assert w.grad is not None
    assert w.grad.tolist() == [2.0, -4.0]
    assert tg.tensor([1.0]).clone().requires_grad is False


def test_astype_between_floats_is_differentiable() -> None:
    check(
        lambda x: x.astype(tg.float16).astype(tg.float32) * 3.0,
        # float16's rounding spelled out: a GPU's XLA drops a fused f32 -> f16 -> f32 round
        # trip (excess precision), tapegrad's eager casts keep it
        lambda x: jax.lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10) * 3.0,
        jnp.array([0.5, 1.25, -2.0]),
    )
    check(lambda x: x.astype(tg.float16), lambda x: x.astype(jnp.float16), jnp.array([0.5, 2.0]))
    w16 = tg.tensor([1.0, 2.0], dtype=tg.float16).require_grad()
    (w16.astype(tg.float32) ** 2).sum().backward()
    assert w16.grad is not None
    assert w16.grad.dtype == np.float16
    assert w16.grad.tolist() == [2.0, 4.0]


def test_astype_to_integer_does_not_require_grad() -> None:
    w = tg.tensor([1.5, 2.5]).require_grad()
    nodes = tg.graph_stats().nodes
    i = w.astype(tg.int32)
    assert i.dtype == np.int32
    assert i.tolist() == [1, 2]
    assert i.requires_grad is False
    assert tg.graph_stats().nodes == nodes


# ----------------------------------------------------------------------------- conversion


def test_item_numpy_tolist() -> None:
    t = tg.tensor([[1.5, 2.0]])
    assert tg.tensor([[2.5]]).item() == 2.5
    assert tg.tensor(3).item() == 3 and type(tg.tensor(3).item()) is int
    assert type(tg.tensor(2.5).item()) is float
    n = t.numpy()
    assert isinstance(n, np.ndarray)
    np.testing.assert_array_equal(n, np.array([[1.5, 2.0]], np.float32))
    assert t.tolist() == [[1.5, 2.0]]
    err = error_of(ValueError, t.item)
    assert ".sum()" in str(err)


def test_item_of_tensor_requiring_grad_records_nothing() -> None:
    w = tg.tensor([2.0]).require_grad()
    nodes = tg.graph_stats().nodes
    assert w.item() == 2.0
    assert float(w) == 2.0
    assert tg.graph_stats().nodes == nodes


# ----------------------------------------------------------------------------- methods


REDUCTIONS = [
    ("sum", None, False),
    ("sum", 1, False),
    ("sum", (0, 2), True),
    ("mean", -1, False),
    ("mean", (2, -3), True),
    ("max", 1, False),
    ("max", None, False),
    ("min", (0, 2), False),
    ("min", -1, True),
]


def test_reductions_with_int_negative_tuple_axes_and_keepdims_match_jnp() -> None:
    x = arr((2, 3, 4), seed=1)
    check_all(
        [
            (
                lambda t, n=name, ax=axis, kd=kd: getattr(t, n)(axis=ax, keepdims=kd),
                lambda a, n=name, ax=axis, kd=kd: getattr(jnp, n)(a, axis=ax, keepdims=kd),
                (x,),
            )
            for name, axis, kd in REDUCTIONS
        ]
    )


def test_max_min_ties_share_the_gradient_like_jax() -> None:
    x = jnp.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    check_all(
        [
            (lambda t: t.max(axis=1), lambda a: jnp.max(a, axis=1), (x,)),
            (lambda t: t.min(axis=1), lambda a: jnp.min(a, axis=1), (x,)),
        ]
    )


def test_reductions_positional_axis_and_list_axis() -> None:
    x = tg.tensor(arr((2, 3, 4), seed=1))
    np.testing.assert_array_equal(x.sum(1).numpy(), np.asarray(jnp.sum(x.data, 1)))
    # a reduction over two axes may sum in another order than jnp's own call (XLA's CPU
    # emitters differ by machine): the last bit is not compared
    np.testing.assert_allclose(
        x.mean([0, 2]).numpy(), np.asarray(jnp.mean(x.data, (0, 2))), rtol=1e-6
    )


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_refuse_a_positional_axis(name: str) -> None:
    """PyTorch's ``_, pred = out.max(1)`` (values and indices) must not unpack the rows of
    NumPy's values: with two rows it would silently give a value as the index."""
    x = tg.tensor(arr((2, 10), seed=1)).require_grad()
    stats = tg.graph_stats()
    for call in (lambda: getattr(x, name)(1), lambda: getattr(tg, name)(x, 1)):
        with pytest.raises(TypeError, match=rf"x\.arg{name}\(axis=1\)"):
            call()
    assert tg.graph_stats() == stats
    np.testing.assert_array_equal(
        getattr(x, name)(axis=-1, keepdims=True).numpy(),
        np.asarray(getattr(jnp, name)(x.data, -1, keepdims=True)),
    )


def test_shape_methods_match_jnp() -> None:
    x = (arr((2, 3, 4), seed=2),)
    check_all(
        [
            # the call forms of one result share a compile: (*shape), (shape), [shape with -1]
            (lambda t: t.reshape(4, 6), lambda a: a.reshape(4, 6), x),
            (lambda t: t.reshape((4, 6)), lambda a: a.reshape(4, 6), x),
            (lambda t: t.reshape([4, -1]), lambda a: a.reshape(4, 6), x),
            (lambda t: t.transpose(), lambda a: a.transpose(), x),
            (lambda t: t.T, lambda a: a.transpose(), x),
            (lambda t: t.transpose(2, 0, 1), lambda a: a.transpose(2, 0, 1), x),
            (lambda t: t.transpose((2, 0, 1)), lambda a: a.transpose(2, 0, 1), x),
            (lambda t: t.transpose([-1, 0, 1]), lambda a: a.transpose(2, 0, 1), x),
            (lambda t: t.reshape(2, 1, 12, 1).squeeze(), lambda a: a.reshape(2, 12), x),
            (lambda t: t.reshape(2, 1, 12, 1).squeeze((1, -1)), lambda a: a.reshape(2, 12), x),
            (lambda t: t.reshape(2, 1, 12, 1).squeeze(1), lambda a: a.reshape(2, 12, 1), x),
            (lambda t: t.reshape(24)[:1].reshape(()), lambda a: a.reshape(24)[0], x),
        ]
    )
    assert tg.ones(1).reshape().shape == ()


def test_clip_matches_jax_including_ties() -> None:
    x = (jnp.array([-2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 3.0]),)
    check_all(
        [
            (lambda t, lo=lo, hi=hi: t.clip(lo, hi), lambda a, lo=lo, hi=hi: jnp.clip(a, lo, hi), x)
            for lo, hi in [(-0.5, 0.5), (None, 0.0), (0.0, None), (-1.0, -1.0)]
        ]
    )


UNARY = [
    ("exp", jnp.exp, False),
    ("log", jnp.log, True),
    ("tanh", jnp.tanh, False),
    ("relu", jax.nn.relu, False),
    ("sigmoid", jax.nn.sigmoid, False),
    ("sqrt", jnp.sqrt, True),
    ("abs", jnp.abs, False),
    ("sin", jnp.sin, False),
    ("cos", jnp.cos, False),
]


def test_unary_methods_match_jax() -> None:
    check_all(
        [
            (lambda t, n=name: getattr(t, n)(), fn, (arr((2, 3), seed=3, positive=pos),))
            for name, fn, pos in UNARY
        ],
        rtol=2e-6,
    )
    x = tg.tensor(arr((2, 3), seed=3, positive=True))
    for name, _, _ in UNARY:  # the module-level function is the same op
        np.testing.assert_array_equal(getattr(tg, name)(x).numpy(), getattr(x, name)().numpy())


def test_relu_subgradient_at_zero_follows_jax() -> None:
    check(lambda t: t.relu(), jax.nn.relu, jnp.array([-1.0, 0.0, 2.0]))


def test_abs_subgradient_at_zero_follows_jax() -> None:
    check(lambda t: t.abs(), jnp.abs, jnp.array([-1.0, 0.0, -0.0, 2.0]))


# ----------------------------------------------------------------------------- indexing


def test_basic_indexing() -> None:
    x = (arr((3, 4), seed=5),)
    check_all(
        [
            (lambda t, i=index: t[i], lambda a, i=index: a[i], x)
            for index in [
                -1,
                (1, 2),
                (slice(None, None, -1), slice(1, None)),
                (None, Ellipsis, np.int64(2)),
            ]
        ]
    )


def test_integer_array_indexing_accumulates_repeated_indices() -> None:
    x = (arr((3, 2), seed=6),)
    idx = jnp.array([2, 0, 2, 2])
    sources = [np.array([2, 0, 2, 2]), idx, [2, 0, 2, 2], tg.tensor([2, 0, 2, 2])]
    rows, cols = jnp.array([0, -1, 0]), jnp.array([1, 1, 0])
    check_all(
        [(lambda t, i=i: t[i], lambda a: a[idx], x) for i in sources]
        + [
            (lambda t: t[[0, -1, 0], [1, 1, 0]], lambda a: a[rows, cols], x),
            (lambda t: t[:, np.array([1, 1])], lambda a: a[:, jnp.array([1, 1])], x),
        ]
    )
    # row 2 was taken three times: its gradient is the sum of three cotangent rows, row 1 none
    _, cot, meta = tapegrad_run(lambda t: t[[2, 0, 2, 2]], x)
    g = meta[0][-1]
    np.testing.assert_array_equal(g[2], cot[0] + cot[2] + cot[3])
    np.testing.assert_array_equal(g[0], cot[1])
    np.testing.assert_array_equal(g[1], np.zeros(2, np.float32))


def test_boolean_mask_indexing() -> None:
    x = jnp.array([[1.0, -2.0, 3.0], [-4.0, 5.0, 6.0], [7.0, 8.0, -9.0]])
    np_mask = np.asarray(x) > 0
    masks: list[Callable[[tg.Tensor], Any]] = [
        lambda t: t > 0,
        lambda t: np.asarray(t.data > 0),
        lambda t: t.data > 0,
        lambda t: np_mask.tolist(),
    ]
    rows = np.array([True, False, True])
    check_all(
        [(lambda t, m=m: t[m(t)], lambda a: a[np_mask], (x,)) for m in masks]
        + [(lambda t: t[rows.tolist()], lambda a: a[rows], (x,))]
    )


def test_index_errors() -> None:
    t = tg.ones((2, 3))
    err = error_of(TypeError, lambda: t[np.array([0.5])])
    assert "astype" in str(err)
    err = error_of(TypeError, lambda: t["a"])
    assert "integer arrays" in str(err)


def test_out_of_range_integer_index_raises_index_error() -> None:
    t = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(IndexError):
        t[5]


def test_index_errors_explain_only_what_applies() -> None:
    """Every host index error said "JAX would clamp it silently", also where JAX clamps
    nothing (two ellipses, too many indices, a mask of the wrong shape)."""
    t = tg.ones((4, 3))
    assert "clamp" in str(error_of(IndexError, lambda: t[[0, 4]]))
    assert "clamp" in str(error_of(IndexError, lambda: t[np.array([True, False, True, True]), 5]))
    for index in [(..., ...), (0, 0, 0), np.ones(4, np.bool_)[:3]]:
        message = str(error_of(IndexError, lambda i=index: t[i]))
        assert "clamp" not in message and "(4, 3)" in message, message
    message = str(error_of(IndexError, lambda: t[np.array([True, False, True])]))
    assert "wrong elements" in message, message


# ----------------------------------------------------------------------------- protocols


def test_repr_shows_shape_dtype_values_and_op() -> None:
    assert repr(tg.tensor([1.0, 2.0])) == "tensor([1., 2.], shape=(2,), dtype=float32)"
    assert repr(tg.tensor(3)) == "tensor(3, shape=(), dtype=int32)"
    w = tg.tensor([1.0, 2.0]).require_grad()
    assert repr(w) == "tensor([1., 2.], shape=(2,), dtype=float32, requires_grad=True)"
    assert repr(w * 2) == "tensor([2., 4.], shape=(2,), dtype=float32, op=multiply)"
    assert repr((w * 2).sum()) == "tensor(6., shape=(), dtype=float32, op=sum)"
    assert "op=matmul" in repr(tg.ones((2, 2)).require_grad() @ tg.ones(2))
    # bfloat16 and float8 print as floats ("1.", not NumPy's "1" for ml_dtypes' types)
    assert repr(tg.tensor([1.0, 2.5]).astype(tg.bfloat16)).startswith("tensor([1. , 2.5]")
    assert repr(tg.tensor([1.0]).astype(jnp.float8_e4m3fn)).startswith("tensor([1.]")
    assert repr(tg.tensor([1, -3]).astype(jnp.int4)).startswith("tensor([1, -3]")


def test_format_one_element_tensor() -> None:
    assert f"{tg.tensor(2.0):.2f}" == "2.00"
    assert f"{tg.tensor([1.5])}" == repr(tg.tensor([1.5]))


def test_len_and_iteration_over_first_axis() -> None:
    x = arr((3, 2), seed=8)
    w = tg.tensor(x).require_grad()
    assert len(w) == 3
    rows = list(w)
    assert len(rows) == 3
    for i, r in enumerate(rows):
        assert isinstance(r, tg.Tensor) and r.shape == (2,)
        np.testing.assert_array_equal(r.numpy(), np.asarray(x[i]))
    (rows[0] * 1.0 + rows[2] * 3.0).sum().backward()
    assert w.grad is not None
    assert w.grad.tolist() == [[1.0, 1.0], [0.0, 0.0], [3.0, 3.0]]
    err = error_of(TypeError, len, tg.tensor(1.0))
    assert "0-d" in str(err)


def test_len_and_iteration_of_a_0d_tensor_say_what_to_do() -> None:
    """``for v in t`` on a 0-d tensor said "len() of a 0-d tensor", naming a call the user did
    not write, and only once iterated: ``iter(t)`` raises at once (as PyTorch does), naming
    iteration, and both say what to write instead."""
    t = tg.tensor(2.5)
    err = error_of(TypeError, iter, t)
    assert "iteration over a 0-d tensor" in str(err) and "t.item()" in str(err)
    err = error_of(TypeError, len, t)
    assert "len() of a 0-d tensor" in str(err) and "t.item()" in str(err)
    assert [r.tolist() for r in tg.tensor([1.0, 2.0])] == [1.0, 2.0]


def test_float_int_bool_on_one_element_tensors() -> None:
    assert float(tg.tensor([2.5])) == 2.5
    assert int(tg.tensor([[3.7]])) == 3
    assert int(tg.tensor(4)) == 4
    assert bool(tg.tensor(0.0)) is False and bool(tg.tensor([1])) is True
    error_of(TypeError, float, tg.ones(2))
    error_of(TypeError, int, tg.ones(2))
    err = error_of(ValueError, bool, tg.ones(2))
    assert "ambiguous" in str(err)


def test_numpy_asarray() -> None:
    t = tg.tensor([[1.0, 2.0]])
    a = np.asarray(t)
    assert isinstance(a, np.ndarray)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, [[1.0, 2.0]])
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(tg.ones(2).require_grad()), [1.0, 1.0])


def test_np_array_of_a_tensor_is_a_writable_copy() -> None:
    """``np.array(t)`` copies (NumPy's default ``copy=True``, as for a ``jax.Array``): a
    writable array, while ``np.asarray(t)`` and ``.numpy()`` may share the read-only buffer."""
    t = tg.tensor([1.0, 2.0])
    a = np.array(t)
    assert a.flags.writeable
    a[0] = 5.0
    assert t.tolist() == [1.0, 2.0]
    b = np.array(t, dtype=np.float64)
    assert b.flags.writeable and b.dtype == np.float64
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        assert np.asarray(t, copy=True).flags.writeable
        with pytest.raises(ValueError):  # NumPy 2's protocol: a cast needs a copy
            np.asarray(t, dtype=np.float64, copy=False)


def test_identity_hash_weakref_dict_and_set() -> None:
    a, b = tg.ones(2), tg.ones(2)
    assert hash(a) == object.__hash__(a) and hash(a) != hash(b)  # by identity, not value
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b"
    assert len({a, b, a}) == 2
    assert a in d and tg.ones(2) not in d
    w = tg.ones(2).require_grad()
    r = weakref.ref(w)
    assert r() is w
    params = {w: 0}
    assert params[w] == 0


def test_membership_in_a_list_says_how_to_find_a_tensor() -> None:
    """``t in a_list`` compares with ``==`` (as in PyTorch): with another tensor of several
    elements first, it raises, and the message says how to find a tensor by identity."""
    a, b = tg.ones(2), tg.ones(2)
    assert a in [a, b] and a in {a, b} and a in {b: 0, a: 1}  # identity first, then hashing
    err = error_of(ValueError, lambda: a in [b, a])
    assert "ambiguous" in str(err) and "any(t is u for u in a_list)" in str(err)


def test_deepcopy_of_a_leaf_is_a_new_leaf_that_receives_gradients() -> None:
    def attempt() -> tuple[Any, ...]:  # plain values: a failure keeps no tensor alive
        w = tg.tensor([1.0, 2.0]).require_grad()
        leaves = tg.graph_stats().leaves
        w2 = copy.deepcopy(w)
        (w2 * 3.0).sum().backward()
        g = None if w2.grad is None else w2.grad.tolist()
        return (w2._node is w._node, tg.graph_stats().leaves - leaves, g, w.grad)

    shared, new_leaves, g, original = attempt()
    assert (shared, new_leaves, g, original) == (False, 1, [3.0, 3.0], None)


@pytest.mark.parametrize("how", ["pickle.dumps", "copy.deepcopy", "copy.copy"], ids=str)
def test_copying_a_donated_tensor_says_it_was_donated(how: str) -> None:
    """Pickling or copying a tensor whose array a tg.jit step donated raised JAX's bare "Array
    has been deleted"; it says what happened and what to do, as ``.numpy()`` does."""
    copiers = {"pickle.dumps": pickle.dumps, "copy.deepcopy": copy.deepcopy, "copy.copy": copy.copy}
    t = tg.ones(3).require_grad()
    t.data.delete()  # what a tg.jit step donating t's array does
    err = error_of(RuntimeError, copiers[how], t)
    assert "donated to a tg.jit step" in str(err) and "donate=False" in str(err)


def test_weakref_dies_with_the_tensor() -> None:
    t = tg.ones(2)
    r = weakref.ref(t)
    del t
    assert r() is None


# ----------------------------------------------------------------------------- operators


BINARY = [
    (lambda a, b: a + b, jnp.add),
    (lambda a, b: a - b, jnp.subtract),
    (lambda a, b: a * b, jnp.multiply),
    (lambda a, b: a / b, jnp.divide),
    (lambda a, b: a**b, jnp.power),
]


@pytest.mark.parametrize(("sa", "sb"), [((2, 3), (3,)), ((2, 1), (1, 3))])
def test_binary_operators_broadcast_and_match_jax(sa: Any, sb: Any) -> None:
    a, b = arr(sa, seed=10, positive=True), arr(sb, seed=11, positive=True)
    check_all([(t, j, (a, b)) for t, j in BINARY] + [(t, j, (b, a)) for t, j in BINARY])


def test_zero_dim_tensor_broadcasts_against_a_matrix() -> None:
    a, b = arr((), seed=10), arr((2, 3), seed=11)
    check_all(
        [(lambda x, y: x * y, jnp.multiply, (a, b)), (lambda x, y: x - y, jnp.subtract, (b, a))]
    )


def test_unary_negative_and_positive() -> None:
    check(lambda t: -t, jnp.negative, arr((2, 3), seed=12))
    w = tg.ones(2).require_grad()
    assert +w is w


def test_power_edge_cases_follow_jax() -> None:
    x = (jnp.array([0.0, -1.5, 2.0]),)
    check_all(
        [
            (lambda t: t**2, lambda a: a**2, x),
            (lambda t: t**0, lambda a: a**0, x),
            (lambda t: t**3.0, lambda a: a**3.0, x),
            (lambda b: 0.0**b, lambda b: 0.0**b, (jnp.array([1.0, 2.0]),)),
            (lambda a, b: a**b, jnp.power, (jnp.array([0.0, 2.0]), jnp.array([2.0, 0.0]))),
        ]
    )


def test_matmul_follows_numpy_rules() -> None:
    shapes = [
        ((2, 3), (3, 4)),
        ((3,), (3,)),
        ((3,), (3, 4)),
        ((2, 3), (3,)),
        ((3,), (2, 3, 4)),
        ((2, 1, 2, 3), (4, 3, 2)),
    ]
    check_all(
        [
            (lambda x, y: x @ y, jnp.matmul, (arr(sa, seed=13), arr(sb, seed=14)))
            for sa, sb in shapes
        ]
    )
    a, b = tg.tensor(arr((2, 3), seed=13)), tg.tensor(arr((3, 4), seed=14))
    np.testing.assert_array_equal(tg.matmul(a, b).numpy(), (a @ b).numpy())


def constant(kind: str) -> Any:
    """A constant operand: a Python scalar, a NumPy array or a JAX array of shape (2, 3)."""
    c = arr((2, 3), seed=15, positive=True)
    return {"python": 1.5, "numpy": np.asarray(c), "jax": c}[kind]


@pytest.mark.parametrize("kind", ["python", "numpy", "jax"])
def test_reflected_operators_with_constant_on_the_left_track_the_gradient(kind: str) -> None:
    const = constant(kind)
    ops = BINARY + ([] if kind == "python" else [(lambda a, b: a @ b, jnp.matmul)])
    x = arr((3,), seed=16, positive=True)
    for tg_op, _ in ops:  # a Tensor comes back (not a NumPy / JAX array), and it is tracked
        y = tg_op(const, tg.tensor(x).require_grad())
        assert isinstance(y, tg.Tensor) and y.requires_grad
    del y
    check_all(
        [
            (lambda t, op=t_op: op(const, t), lambda a, op=j_op: op(jnp.asarray(const), a), (x,))
            for t_op, j_op in ops
        ]
    )


@pytest.mark.parametrize("kind", ["python", "numpy", "jax"])
def test_constants_on_the_right(kind: str) -> None:
    const = constant(kind)
    x = arr((3,), seed=18, positive=True)
    check_all(
        [
            (lambda t, op=t_op: op(t, const), lambda a, op=j_op: op(a, jnp.asarray(const)), (x,))
            for t_op, j_op in BINARY
        ]
    )


def test_operand_mixing_two_tensors_that_do_not_require_grad_records_nothing() -> None:
    nodes = tg.graph_stats().nodes
    y = tg.ones(3) * tg.tensor([1.0, 2.0, 3.0]) + 1.0
    assert y.requires_grad is False
    assert y.tolist() == [2.0, 3.0, 4.0]
    assert tg.graph_stats().nodes == nodes


@pytest.mark.parametrize(
    ("tg_cmp", "np_cmp"),
    [
        (lambda a, b: a < b, np.less),
        (lambda a, b: a <= b, np.less_equal),
        (lambda a, b: a > b, np.greater),
        (lambda a, b: a >= b, np.greater_equal),
        (lambda a, b: a == b, np.equal),
        (lambda a, b: a != b, np.not_equal),
    ],
)
def test_comparisons_return_bool_tensors_and_record_nothing(
    tg_cmp: Callable[..., Any], np_cmp: Callable[..., Any]
) -> None:
    x = np.array([1.0, 2.0, 3.0], np.float32)
    w = tg.tensor(x).require_grad()
    stats = tg.graph_stats()
    for other in (2.0, np.array([3.0, 2.0, 1.0], np.float32), tg.tensor([3.0, 2.0, 1.0])):
        o = np.asarray(other)
        y = tg_cmp(w, other)
        assert isinstance(y, tg.Tensor)
        assert y.dtype == np.bool_
        assert y.requires_grad is False
        np.testing.assert_array_equal(y.numpy(), np_cmp(x, o))
    # reflected: a NumPy / JAX array on the left defers to the Tensor
    for left in (np.array([3.0, 2.0, 1.0], np.float32), jnp.array([3.0, 2.0, 1.0])):
        y = tg_cmp(left, w)
        assert isinstance(y, tg.Tensor) and y.requires_grad is False
        np.testing.assert_array_equal(y.numpy(), np_cmp(np.asarray(left), x))
    assert tg.graph_stats() == stats


# ----------------------------------------------------------------------------- in place


@pytest.mark.parametrize(
    ("symbol", "apply"),
    [
        ("+=", lambda t, v: t.__iadd__(v)),
        ("-=", lambda t, v: t.__isub__(v)),
        ("*=", lambda t, v: t.__imul__(v)),
        ("/=", lambda t, v: t.__itruediv__(v)),
    ],
)
def test_in_place_on_requires_grad_leaf_raises_under_grad_mode(
    symbol: str, apply: Callable[..., Any]
) -> None:
    w = tg.tensor([1.0, 2.0]).require_grad()
    stats = tg.graph_stats()
    err = error_of(RuntimeError, apply, w, 2.0)
    assert symbol in str(err) and "tg.no_grad()" in str(err)
    assert str(err).index(".item()") < str(err).index("tg.no_grad()")  # the advice, in order
    assert ".detach()" in str(err)
    assert w.tolist() == [1.0, 2.0]
    assert tg.graph_stats() == stats


def test_in_place_under_no_grad_replaces_the_value_and_keeps_the_node() -> None:
    w = tg.tensor([1.0, 2.0]).require_grad()
    node = w._node
    nodes = tg.graph_stats().nodes
    with tg.no_grad():
        w += 1.0
        w -= tg.tensor([0.5, 0.5])
        w *= np.array([2.0, 4.0], np.float32)
        w /= jnp.array([3.0, 5.0])
    assert w._node is node
    assert w.requires_grad and w.is_leaf
    assert tg.graph_stats().nodes == nodes
    assert_close(
        w.data,
        ((jnp.array([1.0, 2.0]) + 1.0 - 0.5) * jnp.array([2.0, 4.0])) / jnp.array([3.0, 5.0]),
    )
    (w * w).sum().backward()  # the graph after the update uses the new value
    assert w.grad is not None
    assert_close(w.grad.data, 2 * w.data)


def test_in_place_parameter_update_with_gradient() -> None:
    w = tg.tensor([1.0, -1.0]).require_grad()
    (w * w).sum().backward()
    with tg.no_grad():
        assert w.grad is not None
        w -= 0.25 * w.grad
    assert w.tolist() == [0.5, -0.5]
    assert w.dtype == np.float32


def test_in_place_shape_change_raises_value_error() -> None:
    w = tg.ones(3).require_grad()
    with tg.no_grad():
        err = error_of(ValueError, w.__iadd__, tg.ones((2, 3)))
    assert "(2, 3)" in str(err)
    assert w.shape == (3,)
    t = tg.ones(3)
    error_of(ValueError, t.__imul__, np.ones((2, 3), np.float32))


def test_in_place_shape_change_raises_even_when_other_requires_grad() -> None:
    def attempt() -> str:  # returns plain text: a failure keeps no tensor alive
        t = tg.ones(3)
        w = tg.ones((2, 3)).require_grad()
        try:
            t += w
        except ValueError as err:
            return f"ValueError: {err}"
        return f"no error, t rebound to shape {t.shape}"

    outcome = attempt()
    assert outcome.startswith("ValueError") and "In-place +=" in outcome, outcome


def test_in_place_on_tensor_not_requiring_grad_works_under_grad_mode() -> None:
    t = tg.tensor([1.0, 2.0])
    before = t
    t += 1.0
    assert t is before
    assert t.tolist() == [2.0, 3.0]
    assert t.requires_grad is False


def test_in_place_float_into_integer_tensor_raises() -> None:
    t = tg.tensor([1, 2, 3])
    with pytest.raises(TypeError):
        t += 1.5


def test_abs_protocol_is_the_abs_op() -> None:
    x = tg.tensor([-1.5, 0.0, 2.0], requires_grad=True)
    y = abs(x)
    np.testing.assert_array_equal(y.numpy(), [1.5, 0.0, 2.0])
    (g,) = tg.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), jax.grad(lambda a: jnp.abs(a).sum())(x.data))


def test_index_protocol_takes_0d_integer_tensors() -> None:
    """range(t) and lst[t], as in PyTorch and NumPy."""
    t = tg.tensor(3)
    assert range(t) == range(3)
    assert [10, 11, 12, 13][t] == 13
    assert [10, 11][tg.tensor(np.uint8(1))] == 11


@pytest.mark.parametrize("value", [2.0, [2], True], ids=repr)
def test_index_protocol_refuses_floats_bools_and_non_0d(value: object) -> None:
    with pytest.raises(TypeError, match="only a 0-d integer tensor converts to an index"):
        range(tg.tensor(value))


def test_index_protocol_under_jit_raises_tracer_error() -> None:
    step = tg.jit(lambda t: t * len(range(t)))
    with pytest.raises(tg.TracerError, match=r"__index__\(\)"):
        step(tg.tensor(3))


def test_logical_operators_combine_masks_as_torch_does() -> None:
    """``& | ^ ~`` on boolean tensors are logical (masks), on integers bitwise, with Python
    and NumPy operands on either side, as in PyTorch; on floats a TypeError says what to do."""
    import torch

    values = [-1.0, 0.5, 2.0, 0.0]
    x, t = tg.tensor(values, requires_grad=True), torch.tensor(values)
    cases = [
        ((x > 0) & (x < 1), (t > 0) & (t < 1)),
        ((x > 0) | (x < 0), (t > 0) | (t < 0)),
        ((x > 0) ^ (x < 1), (t > 0) ^ (t < 1)),
        (~(x > 0), ~(t > 0)),
        (True & (x > 0), True & (t > 0)),
        ((x > 0) | np.array([1, 0, 0, 0], bool), (t > 0) | torch.tensor([1, 0, 0, 0]).bool()),
        (tg.tensor([3, 5, 6]) & 1, torch.tensor([3, 5, 6]) & 1),
        (~tg.tensor([1, 2]), ~torch.tensor([1, 2])),
    ]
    for got, want in cases:
        assert not got.requires_grad
        np.testing.assert_array_equal(np.asarray(got), want.numpy())
    before = tg.graph_stats()
    for bad in (lambda: x & x, lambda: ~x):
        err = error_of(TypeError, bad)
        assert "compare first" in str(err)
    assert tg.graph_stats() == before


def test_a_float64_asked_for_with_x64_off_warns_on_every_path() -> None:
    """``dtype=tg.float64`` with JAX's x64 off gives float32: ``tg.tensor`` of a list warned
    through JAX, of a NumPy array and ``tg.zeros`` said nothing. Each now warns with how to
    turn x64 on; int64 (PyTorch's label dtype) stays quiet (its values are checked)."""
    if jax.config.jax_enable_x64:
        pytest.skip("x64 is on: float64 is float64")
    for make in (
        lambda: tg.tensor([1.0, 2.0], dtype=tg.float64),
        lambda: tg.tensor(np.ones(3), dtype=np.float64),
        lambda: tg.zeros(3, dtype=tg.float64),
        lambda: tg.ones(3).astype(tg.float64),
        lambda: tg.randn(2, dtype=tg.float64),
    ):
        with pytest.warns(tg.TapegradWarning, match=r"float64 needs JAX's 64-bit mode.*x64"):
            assert make().dtype == np.float32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # JAX's own, for a list's conversion
        warnings.simplefilter("error", tg.TapegradWarning)
        assert tg.tensor([1, 2], dtype=tg.int64).dtype == np.int32
        assert tg.tensor(np.arange(2), dtype=np.int64).dtype == np.int32
