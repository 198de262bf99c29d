"""``tapegrad.kernels.kernel``: ``jax.jit`` in every respect a caller sees (the store's
cross-process behaviour is tested in ``test_compilation_cache.py``, in fresh processes)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tapegrad.kernels import kernel


@partial(kernel, static_argnames=("axis", "keepdims"))
def _sum_scaled(x: jax.Array, scale: jax.Array, *, axis: int, keepdims: bool) -> jax.Array:
    return jnp.sum(x * scale, axis=axis, keepdims=keepdims)


@partial(kernel, static_argnums=1)
def _power(x: jax.Array, n: int) -> jax.Array:
    return x**n


def test_a_kernel_is_a_jit_function() -> None:
    """The same C++ dispatch object as ``jax.jit``'s (so the same cost per call), with
    ``lower`` and ``eval_shape``."""
    add = kernel(jnp.add)
    assert type(add) is type(jax.jit(jnp.add))
    x = jnp.arange(3.0)
    assert add.lower(x, x).as_text()
    assert add.eval_shape(x, x).shape == (3,)
    np.testing.assert_array_equal(add(x, x), 2 * np.arange(3.0))


@pytest.mark.parametrize("keepdims", [False, True])
def test_static_arguments_dtypes_and_weak_types_get_their_own_programs(keepdims: bool) -> None:
    x = jnp.arange(6.0).reshape(2, 3)
    for axis in (0, 1):
        want = np.sum(np.arange(6.0).reshape(2, 3) * 2.0, axis=axis, keepdims=keepdims)
        got = _sum_scaled(x, jnp.float32(2.0), axis=axis, keepdims=keepdims)
        np.testing.assert_allclose(got, want)
    weak = _sum_scaled(x.astype(jnp.bfloat16), jax.device_put(2.0), axis=0, keepdims=keepdims)
    assert weak.dtype == jnp.bfloat16  # a weakly typed scale keeps bfloat16
    strong = _sum_scaled(x.astype(jnp.bfloat16), jnp.float32(2.0), axis=0, keepdims=keepdims)
    assert strong.dtype == jnp.float32
    assert _power(jnp.arange(3), 3).tolist() == [0, 1, 8]
    assert _power(jnp.arange(3.0), 2).tolist() == [0.0, 1.0, 4.0]


def test_a_kernel_nests_in_transformations() -> None:
    """Inside ``jax.jit``, ``grad`` and ``vmap`` a kernel is traced as ``jax.jit`` is."""
    f = jax.jit(jax.grad(lambda x: _sum_scaled(x, x, axis=0, keepdims=False).sum()))
    np.testing.assert_allclose(f(jnp.arange(3.0)), 2 * np.arange(3.0))
    rows = jax.vmap(lambda r: _power(r, 2))(jnp.arange(6.0).reshape(2, 3))
    np.testing.assert_allclose(rows, np.arange(6.0).reshape(2, 3) ** 2)


def test_a_lambda_or_closure_gets_plain_jit() -> None:
    """No stable name, no store: the store could not tell two such functions apart."""
    from tapegrad.kernels import _stable_name

    assert _stable_name(lambda x: x) is None
    assert _stable_name(_power.__wrapped__) == f"{__name__}._power"
    assert _stable_name(jnp.add) == "jax.numpy.add"
    np.testing.assert_allclose(kernel(lambda x: x + 1)(jnp.zeros(2)), [1.0, 1.0])


def test_errors_are_jaxs() -> None:
    """A call JAX refuses raises what ``jax.jit`` raises (shapes that do not broadcast)."""
    with pytest.raises(TypeError) as mine:
        kernel(jnp.add)(jnp.zeros(2), jnp.zeros(3))
    with pytest.raises(TypeError) as plain:
        jax.jit(jnp.add)(jnp.zeros(2), jnp.zeros(3))
    assert str(mine.value) == str(plain.value)


def test_small_kernels_take_the_classic_emitters_with_the_same_values() -> None:
    """Kernels whose arrays all have at most ``SMALL`` elements (``MEDIUM`` without a
    reduction), in dtypes the classic CPU emitters compute alike, compile with them
    (faster); each primitive's values equal plain ``jax.jit``'s bit for bit, and a fused
    float32 expression's within a few units in the last place (float64: bit for bit).
    Half-precision kernels keep XLA's default (``log1p`` and ``rsqrt`` differ there)."""
    from tapegrad.kernels import MEDIUM, SMALL, _classic

    def jaxpr(fn: Any, *args: Any) -> Any:
        return jax.jit(fn).trace(*args).jaxpr

    side = int(np.sqrt(SMALL))
    assert _classic(jaxpr(jnp.tanh, jnp.ones((side, SMALL // side))), False)
    assert _classic(jaxpr(jnp.tanh, jnp.ones((2, MEDIUM // 2))), False)
    assert not _classic(jaxpr(jnp.tanh, jnp.ones((2, MEDIUM // 2 + 1))), False)
    assert _classic(jaxpr(jnp.tanh, jnp.ones((2, MEDIUM // 2 + 1))), True)
    assert _classic(jaxpr(jnp.matmul, jnp.ones((100, 100)), jnp.ones((100, 1))), False)
    assert _classic(jaxpr(lambda x: jnp.clip(x, -5, 5).T, jnp.ones((100, 100))), False)
    for reducing in (jax.nn.softmax, jnp.sum, jnp.argmax, jnp.cumsum, jnp.sort):
        assert _classic(jaxpr(reducing, jnp.ones((side, SMALL // side))), False)
        assert not _classic(jaxpr(reducing, jnp.ones((side, SMALL // side + 1))), False)
    assert not _classic(jaxpr(jnp.multiply, jnp.ones((MEDIUM, 1)), jnp.ones((1, 2))), False)
    for half in (jnp.float16, jnp.bfloat16):
        assert not _classic(jaxpr(jnp.log1p, jnp.ones(8, half)), True)
        inside = jaxpr(lambda x, h=half: jnp.log1p(x.astype(h)).astype(jnp.float32), jnp.ones(8))
        assert not _classic(inside, True)  # float16 inside a float32 kernel counts too
    for inexact in (jnp.tan, jnp.arctan, jnp.cbrt):  # last bits differ in some elements
        assert not _classic(jaxpr(inexact, jnp.ones(8)), True)
    for key in (jax.random.PRNGKey(0), jax.random.key(0)):  # keys are uint32 words
        assert _classic(jaxpr(lambda k: jax.random.normal(k, (256,)), key), True)
    assert not _classic(jaxpr(jnp.sum, jnp.ones(8, jnp.float16)), False)  # the input counts
    rng = np.random.default_rng(0)
    for shape in ((40, 50), (100, 150)):  # SMALL, MEDIUM
        x = jnp.asarray(rng.standard_normal(shape).astype(np.float32) * 4)
        for fn in (jnp.exp, jnp.tanh, jnp.sin, jax.nn.gelu, jax.nn.softplus, jax.nn.sigmoid):
            np.testing.assert_array_equal(kernel(fn)(x), jax.jit(fn)(x))
        for fn in (jnp.log1p, jax.lax.rsqrt, jnp.log, jnp.sqrt):
            np.testing.assert_array_equal(kernel(fn)(jnp.abs(x)), jax.jit(fn)(jnp.abs(x)))
        y = x[:, :1]
        np.testing.assert_array_equal(kernel(jnp.matmul)(x.T, y), jax.jit(jnp.matmul)(x.T, y))

    def fused(v: jax.Array) -> jax.Array:  # rounds differently in float32 (a review's case)
        q = v / (jnp.abs(v) + 0.5)
        return v * jax.nn.relu(jnp.where(q > v, q, 2 * v)) - jnp.tanh(v) + jax.lax.erf(v * 0.7)

    for dtype in (np.float32, np.float64):
        with jax.enable_x64(dtype == np.float64):
            x = jnp.asarray(rng.standard_normal(4096).astype(dtype) * 3)
            assert _classic(jaxpr(fused, x), False)
            mine, plain = np.asarray(kernel(fused)(x)), np.asarray(jax.jit(fused)(x))
            if dtype == np.float64:
                np.testing.assert_array_equal(mine, plain)
            else:
                np.testing.assert_allclose(mine, plain, rtol=2e-6, atol=1e-6)


def test_the_store_lowers_in_a_shared_mlir_context_and_jax_in_its_own() -> None:
    """Inside ``_shared_ir_context`` lowerings share this thread's context (replaced after
    ``_IR_USES``); outside, and on another thread meanwhile, JAX makes its own each time."""
    import threading

    from jax._src.interpreters import mlir

    from tapegrad import kernels

    assert mlir.make_ir_context() is not mlir.make_ir_context()
    with kernels._shared_ir_context():
        first = mlir.make_ir_context()
        assert mlir.make_ir_context() is first
        other: list[Any] = []
        thread = threading.Thread(target=lambda: other.append(mlir.make_ir_context()))
        thread.start()
        thread.join()
        assert other[0] is not first
        for _ in range(kernels._IR_USES):
            last = mlir.make_ir_context()
        assert last is not first
    assert mlir.make_ir_context() is not last
    x = jnp.arange(5.0)
    with kernels._shared_ir_context():  # lowerings in one context give working programs
        programs = [jax.jit(lambda v, k=k: v * k).lower(x).compile() for k in range(3)]
    assert [float(p(x)[1]) for p in programs] == [0.0, 1.0, 2.0]


def test_debug_nans_raises_jaxs_floating_point_error() -> None:
    """With ``jax_debug_nans`` a kernel takes JAX's own path: its ``FloatingPointError``."""
    import tapegrad as tg

    with jax.debug_nans(True), pytest.raises(FloatingPointError):
        tg.tensor([-1.0, 1.0]).log()


def test_every_jax_setting_is_part_of_the_key() -> None:
    """A setting outside JAX's trace context (the PRNG, optimization levels) still keeps
    programs apart, as does one set for a context only; the classic-emitter choice too. The
    key's digest of the settings is remembered between calls (``_settings``): each change,
    and each change back, must still be seen."""
    from tapegrad.kernels import _key

    args = (jnp.ones(4, jnp.uint32),)
    plain = _key("k", False, frozenset(), frozenset(), args, {})
    assert plain is not None
    assert _key("k", True, frozenset(), frozenset(), args, {}) != plain
    for name, value in [
        ("jax_default_prng_impl", "unsafe_rbg"),
        ("jax_disable_most_optimizations", True),
    ]:
        before = jax.config.values[name]
        jax.config.update(name, value)
        try:
            assert _key("k", False, frozenset(), frozenset(), args, {}) != plain, name
        finally:
            jax.config.update(name, before)
    assert _key("k", False, frozenset(), frozenset(), args, {}) == plain
    with jax.numpy_rank_promotion("raise"):  # a setting of this context only (trace context)
        assert _key("k", False, frozenset(), frozenset(), args, {}) != plain
    assert _key("k", False, frozenset(), frozenset(), args, {}) == plain


def test_compiling_past_jaxs_cache_is_per_thread_and_nests() -> None:
    """A store compile skips JAX's persistent cache on its own thread only: a program the
    main thread compiles while the background thread compiles ahead still goes to JAX's
    cache. Nested uses restore the outer one's state."""
    import threading

    from jax._src import compilation_cache as jax_cache

    from tapegrad.kernels import _past_jax_cache

    backend = jax.devices()[0].client
    before = jax_cache.is_cache_used(backend)
    seen: list[bool] = []
    with _past_jax_cache():
        with _past_jax_cache():
            assert jax_cache.is_cache_used(backend) is False
        assert jax_cache.is_cache_used(backend) is False
        other = threading.Thread(target=lambda: seen.append(jax_cache.is_cache_used(backend)))
        other.start()
        other.join()
    assert seen == [before]
    assert jax_cache.is_cache_used(backend) is before


def test_a_callers_error_keeps_the_stored_program(tmp_path: Any) -> None:
    """A call that fails for the caller's reason (an int too large for int32) raises JAX's
    error and leaves the stored program of that signature in place."""
    import tapegrad as tg
    from tapegrad import kernels

    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    try:
        a = jnp.arange(3, dtype=jnp.int32)
        kernel(jnp.add)(a, 2)  # compiled and stored
        stored = list(kernels.store_dir().rglob("*.bin"))
        assert stored
        with pytest.raises(OverflowError):
            kernel(jnp.add)(a, 2**40)  # a new kernel object: loads the stored program
        assert all(p.exists() for p in stored)
    finally:
        tg.set_compilation_cache(folder)


def test_a_python_scalar_and_a_device_scalar_share_one_program(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A Python int and an uncommitted device scalar of its abstract value (a weak int32;
    ``op.int_arguments`` passes either, as it met the value before or not) are one program:
    the second form loads what the first compiled instead of lowering again. A strongly
    typed scalar, a float and a bool are other programs."""
    import tapegrad as tg
    from tapegrad import kernels

    lowered: list[Any] = []
    real = kernels._lower

    def spy(*args: Any) -> Any:
        lowered.append(args[1])
        return real(*args)

    monkeypatch.setattr(kernels, "_lower", spy)
    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    try:
        shift = kernel(jnp.add)
        x = jnp.arange(4, dtype=jnp.int32)
        assert shift(x, 3).tolist() == [3, 4, 5, 6]
        assert len(lowered) == 1
        weak = jnp.asarray(5)  # a weak int32 on the default device, uncommitted
        assert weak.aval.weak_type
        assert shift(x, weak).tolist() == [5, 6, 7, 8]
        assert len(lowered) == 1  # the program of ``shift(x, 3)``, loaded
        assert shift(x, jnp.int32(1)).dtype == jnp.int32  # strong: another signature
        assert shift(x, 1.5).dtype == jnp.float32  # a float: another program
        assert shift(x, True).tolist() == [1, 2, 3, 4]
        assert len(lowered) == 4
    finally:
        tg.set_compilation_cache(folder)


def test_a_named_closure_is_stored_and_can_be_forgotten(tmp_path: Any) -> None:
    """``kernel(fn, name=...)``: a closure the caller names is stored as a module-level
    kernel is; ``stored`` tells whether the store holds its program for some arguments (a
    file check), ``forget`` removes it. A closure without a name is never stored."""
    import tapegrad as tg

    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    try:
        scale = 3.0
        times = kernel(lambda x: x * scale, name=f"{__name__}.times_three")
        x = jnp.arange(3.0)
        assert not times.stored(x)
        np.testing.assert_allclose(times(x), [0.0, 3.0, 6.0])
        assert times.stored(x)
        assert not times.stored(jnp.arange(4.0))  # another shape: another program
        times.forget(x)
        assert not times.stored(x)
        unnamed = kernel(lambda x: x * scale)
        unnamed(x)
        assert not unnamed.stored(x)
    finally:
        tg.set_compilation_cache(folder)
    assert not times.stored(x)  # the store is another folder now


def test_a_store_that_cannot_be_written_forgets_and_looks_up_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A store the process may read but not change (a shared cache of another user, a
    read-only mount: ``_save`` skips its entries): ``forget`` leaves the program there and
    ``stored`` says no when the file cannot be looked at, instead of raising (a compiled
    backward pass found slower than eager forgets its program in the middle of a
    ``backward()``)."""
    import tapegrad as tg

    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    try:
        times = kernel(lambda x: x * 3.0, name=f"{__name__}.times_three_readonly")
        x = jnp.arange(3.0)
        times(x)
        assert times.stored(x)

        def refused(self: Path, *args: Any, **kwargs: Any) -> None:
            raise PermissionError(1, "Operation not permitted", str(self))

        monkeypatch.setattr(Path, "unlink", refused)
        times.forget(x)  # no PermissionError
        monkeypatch.setattr(Path, "stat", refused)
        assert not times.stored(x)
    finally:
        monkeypatch.undo()
        tg.set_compilation_cache(folder)


def test_the_store_is_on_only_for_tested_jax_releases() -> None:
    """The store uses JAX internals: a release outside ``TESTED_JAX`` gets plain jax.jit."""
    from tapegrad import kernels

    assert kernels.TESTED_JAX[0] <= jax.__version_info__[:2] <= kernels.TESTED_JAX[1], (
        f"JAX {jax.__version__} is not among the releases tapegrad.kernels was tested with: run "
        "tests/test_kernels.py and tests/test_compilation_cache.py with it forced on, then "
        "widen TESTED_JAX"
    )
    assert kernels._SUPPORTED  # this environment is a tested one: the store is exercised


def test_static_arguments_key_by_type_and_bits_and_refuse_partial_reprs() -> None:
    from tapegrad.kernels import _static

    nan = float("nan")
    assert _static(nan) != _static(-nan) and _static(0.0) != _static(-0.0)
    assert len({_static(1), _static(1.0), _static(True)}) == 3
    assert _static((1, slice(None, 2))) == _static((1, slice(None, 2)))
    with pytest.raises(TypeError):
        _static(object())  # its repr holds an address: another process could not match it
    with pytest.raises(TypeError):
        _static((1, np.int32(1)))  # a NumPy scalar is not among the keyed types


def _counting(fn: Any) -> tuple[Any, list[int]]:
    """``fn`` as a kernel that counts its traces."""
    traces: list[int] = []

    def traced(*args: Any) -> Any:
        traces.append(1)
        return fn(*args)

    return kernel(traced), traces


def _background_done() -> None:
    """Wait until the background thread has done what it was given so far."""
    from tapegrad import kernels

    pool = kernels._background()
    assert pool is not None
    pool.submit(int).result()


def test_compile_ahead_gives_the_first_call_its_program() -> None:
    """``compile_ahead`` traces and compiles on a background thread; the first call of that
    signature runs that program (no trace of its own), with the values of a plain call;
    NumPy arrays, JAX arrays and ``ShapeDtypeStruct`` values of one shape select one program."""
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    scaled, traces = _counting(lambda x, y: x * 2 + y)
    x = jnp.arange(6.0).reshape(2, 3)
    scaled.compile_ahead(jax.ShapeDtypeStruct((2, 3), jnp.float32), np.ones((2, 3), np.float32))
    scaled.compile_ahead(x, np.ones((2, 3), np.float32))  # the same signature: started once
    _background_done()
    assert len(traces) == 1  # traced on the background thread
    np.testing.assert_array_equal(scaled(x, jnp.ones((2, 3))), np.arange(6.0).reshape(2, 3) * 2 + 1)
    assert len(traces) == 1
    np.testing.assert_array_equal(scaled(x, x), np.arange(6.0).reshape(2, 3) * 3)
    assert len(traces) == 1  # JAX's own cache has the program now
    scaled(jnp.ones(4), jnp.ones(4))  # another shape: traced here
    assert len(traces) == 2


def test_a_signature_is_met_before_its_call_compiles(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A call that compiles marks its signature met before it compiles, so a ``trace_ahead``
    run on the other thread meeting the same signature meanwhile (a VJP rule traced ahead
    while the backward already needs it) does not compile it a second time."""
    import tapegrad as tg
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    negate = kernel(jnp.negative)
    x = jnp.ones((3, 5))
    queued: list[bool] = []
    real = kernels._from_store

    def spy(plain: Any, name: str, *rest: Any) -> Any:
        negate.compile_ahead(x)  # what the other thread would do meanwhile
        queued.append(negate.pending(x))
        return real(plain, name, *rest)

    monkeypatch.setattr(kernels, "_from_store", spy)
    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    try:
        np.testing.assert_allclose(negate(x), -np.ones((3, 5)))
    finally:
        tg.set_compilation_cache(folder)
    assert queued == [False]


def test_compile_ahead_leaves_other_settings_and_errors_to_the_call() -> None:
    """A caller under a thread-local JAX setting (``jax.enable_x64``) gets no program traced
    without it; a program that fails to trace ahead leaves the call to raise JAX's error;
    a committed array or a trace starts nothing."""
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    double, traces = _counting(lambda x: x * 2)
    with jax.enable_x64(True):
        double.compile_ahead(jax.ShapeDtypeStruct((3,), jnp.float64))
        _background_done()
        assert traces == []  # not traced without the caller's setting
        out = double(jnp.ones(3, jnp.float64))
    assert out.dtype == jnp.float64 and out.tolist() == [2.0, 2.0, 2.0]
    bad = kernel(lambda x, y: x + y)
    bad.compile_ahead(
        jax.ShapeDtypeStruct((2,), jnp.float32), jax.ShapeDtypeStruct((3,), jnp.float32)
    )
    _background_done()
    with pytest.raises(TypeError, match="add got incompatible shapes"):
        bad(jnp.ones(2), jnp.ones(3))
    placed, placed_traces = _counting(lambda x: x + 1)
    placed.compile_ahead(jax.device_put(jnp.ones(2), jax.devices()[0]))
    jax.jit(lambda x: placed.compile_ahead(x) or x)(jnp.ones(2))
    assert placed_traces == []  # nothing started ahead


def test_trace_ahead_compiles_the_kernels_a_function_calls() -> None:
    """``trace_ahead(fn, *args)`` runs ``fn`` on the background thread on its arguments'
    shapes: each kernel it calls compiles ahead (and gives back its result's shape), so the
    later concrete calls trace nothing; a run that computes outside kernels stops there and
    keeps what it started; under another JAX setting on the caller's thread nothing runs."""
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    first, first_traces = _counting(lambda x: x * 2)
    second, second_traces = _counting(lambda x, y: x + y)
    never, never_traces = _counting(lambda x: x - 1)

    def rule(x: Any, y: Any) -> Any:
        b = second(first(x), y)
        return never(jnp.sin(b))  # jnp on a shape: the run stops before ``never``

    x, y = jnp.ones((3, 5)), jnp.ones((1, 5))
    with jax.enable_x64(True):
        kernels.trace_ahead(rule, x, y)
        _background_done()
    assert first_traces == second_traces == never_traces == []
    kernels.trace_ahead(rule, x, y)
    _background_done()  # the run, which queued the compiles
    _background_done()  # the compiles
    traced = (len(first_traces), len(second_traces))
    assert traced[0] >= 1 and traced[1] >= 1 and never_traces == []
    assert second(first(x), y).tolist() == [[3.0] * 5] * 3
    assert (len(first_traces), len(second_traces)) == traced  # the programs compiled ahead
    kernels.trace_ahead(rule, x, y)  # met by a call already: nothing compiles again
    _background_done()
    _background_done()
    assert (len(first_traces), len(second_traces)) == traced


def test_a_sequence_repeating_at_other_shapes_compiles_ahead(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A kernel compiling for arguments of other shapes than it compiled for before starts
    what followed that compile compiling ahead at the new shapes (``_repeat_ahead``): an
    optimizer written in ops compiles per parameter shape, from the second parameter on
    partly on the background thread. Only arguments that differ in shapes, one shape to one
    shape, map; a kernel with a shape outside the map is not predicted."""
    import threading

    import tapegrad as tg
    from tapegrad import kernels

    pool = kernels._background()
    if pool is None:
        pytest.skip("one core: nothing compiles ahead")
    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)  # nothing stored: every first call compiles
    here: list[str] = []
    real = kernels._from_store

    def spy(plain: Any, name: str, *rest: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            here.append(name.rsplit(".", 1)[-1])
        return real(plain, name, *rest)

    monkeypatch.setattr(kernels, "_from_store", spy)
    try:
        sin, cos, mul, add = kernel(jnp.sin), kernel(jnp.cos), kernel(jnp.multiply), kernel(jnp.add)

        def rounds(x: jax.Array) -> jax.Array:
            return add(mul(cos(sin(x)), 0.5), x)

        first, second = jnp.ones((3, 4)), jnp.ones((5, 6))
        rounds(first)
        assert here == ["sin", "cos", "multiply", "add"]
        here.clear()
        sin(second)  # compiles here, and starts cos, multiply and add at (5, 6) ahead
        for _ in range(2):
            pool.submit(int).result()
        out = rounds(second)
        assert here == ["sin"]
        np.testing.assert_allclose(out, np.cos(np.sin(1.0)) * 0.5 + 1.0, rtol=1e-6)
    finally:
        tg.set_compilation_cache(folder)
    a, b, c = (jax.ShapeDtypeStruct(s, jnp.float32) for s in ((3, 4), (5, 6), (2, 9)))
    assert kernels._shape_map([a, 0.5], [b, 0.5]) == {(3, 4): (5, 6)}
    assert kernels._shape_map([a, 0.5], [b, 0.25]) is None  # another value
    assert kernels._shape_map([a, a], [b, c]) is None  # one shape to two
    assert kernels._shape_map([a], [a]) is None  # nothing changed
    half = jax.ShapeDtypeStruct((3, 4), jnp.float16)
    assert kernels._shape_map([a], [jax.ShapeDtypeStruct((5, 6), jnp.float16)]) is None
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    assert kernels._shape_map([a, scalar], [b, b]) is None  # ``x / s`` is no ``p / q``
    assert kernels._shape_map([scalar], [a]) is None
    shapes = {(3, 4): (5, 6)}
    assert kernels._remapped([a, jax.ShapeDtypeStruct((), jnp.float32), 2], shapes) == [
        b,
        jax.ShapeDtypeStruct((), jnp.float32),
        2,
    ]
    assert kernels._remapped([a, c], shapes) is None  # (2, 9): outside the map
    assert kernels._remapped([half.update(shape=(5, 6))], shapes) is None  # nothing to map


def test_a_sequence_met_under_other_jax_settings_is_not_repeated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Compiles made inside ``with jax.enable_x64(True)`` are not repeated ahead once the
    caller's thread is back at x64 off: a float64 kernel that followed there would be traced
    with float64 shapes and x64 off (JAX warns "Explicitly requested dtype float64" on the
    background thread, into whatever runs then) for a program no call can take. The same
    sequence met again under the same settings is still repeated."""
    import tapegrad as tg
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)  # nothing stored: every first call compiles
    started: list[tuple[bool, list[Any]]] = []
    real = kernels._compile_ahead

    def spy(*job: Any) -> None:
        args, kwargs = job[-2:]
        leaves = jax.tree_util.tree_leaves((args, kwargs))
        x64 = jnp.zeros((), float).dtype == np.float64  # this thread's setting
        started.append((x64, [np.dtype(a.dtype) for a in leaves if hasattr(a, "dtype")]))
        real(*job)

    monkeypatch.setattr(kernels, "_compile_ahead", spy)
    try:
        mul, add = kernel(jnp.multiply), kernel(jnp.subtract)
        with jax.enable_x64(True):
            mul(jnp.ones((3, 4), jnp.float32), 2.0)
            add(jnp.ones((3, 4), jnp.float64), 1.0)
        mul(jnp.ones((5, 6), jnp.float32), 2.0)  # the same kernel at another shape, x64 off
        assert started == []
        with jax.enable_x64(True):  # under the settings of the sequence: repeated
            mul(jnp.ones((7, 2), jnp.float32), 2.0)
        assert started == [(True, [np.dtype(np.float64)])]
    finally:
        _background_done()
        tg.set_compilation_cache(folder)


def test_a_setting_changed_while_tracing_stores_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Another thread turning a global JAX setting (``jax_enable_x64``) while a kernel is
    traced for the store: the program may be the other setting's, so it is neither stored
    under the key computed before nor used; the call gets ``jax.jit``'s own path."""
    import tapegrad as tg
    from tapegrad import kernels

    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    real = kernels._lower

    def toggling(*args: Any) -> Any:
        jax.config.update("jax_enable_x64", not jax.config.read("jax_enable_x64"))
        return real(*args)

    monkeypatch.setattr(kernels, "_lower", toggling)
    x64 = jax.config.read("jax_enable_x64")
    try:
        x = jnp.ones((3, 5), jnp.float32)
        plain = jax.jit(jnp.negative)
        found = kernels._from_store(plain, "tests.neg", frozenset(), frozenset(), False, (x,), {})
        assert found is None
        assert not list(Path(tmp_path).rglob("*.bin"))
    finally:
        jax.config.update("jax_enable_x64", x64)
        tg.set_compilation_cache(folder)


def _fused(x: jax.Array, y: jax.Array) -> jax.Array:
    """A kernel whose float32 result XLA's classic and default emitters round differently."""
    return (x @ y) * 0.37 + jnp.tanh(x @ y.T)


def test_numpy_arguments_never_take_a_program_compiled_otherwise(tmp_path: Any) -> None:
    """A call with NumPy arrays is one the store does not serve (plain ``jax.jit``, XLA's
    default options): it never takes a program compiled ahead for JAX arrays of its shapes
    (through the store), so its values do not depend on what compiled ahead."""
    import tapegrad as tg
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    try:
        rng = np.random.default_rng(0)
        x, y = (rng.standard_normal((32, 32)).astype(np.float32) for _ in range(2))
        plain = np.asarray(kernel(_fused)(x, y))
        for args in ((x, y), (jax.ShapeDtypeStruct(x.shape, x.dtype),) * 2):
            ahead = kernel(_fused)
            ahead.compile_ahead(*args)
            _background_done()
            np.testing.assert_array_equal(np.asarray(ahead(x, y)), plain)
    finally:
        tg.set_compilation_cache(folder)


def test_a_dropped_kernel_is_freed_and_trace_ahead_stops_when_nothing_is_taken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """What ``_repeat_ahead`` remembers holds no kernel: a kernel dropped after compiling
    at two shapes is freed at once. ``trace_ahead`` stops after ``_CREDIT`` runs no call
    took a program of (a forward under grad mode that no backward follows), and goes on
    once one is taken."""
    import gc
    import types
    import weakref

    import tapegrad as tg
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)
    try:
        module = types.ModuleType("tapegrad_test_dropped")
        exec("def scale(x):\n    return x * 3.0\n", module.__dict__)
        scale = kernel(module.scale)
        scale(jnp.ones((3, 4)))
        scale(jnp.ones((5, 6)))
        fn, k = weakref.ref(module.scale), weakref.ref(scale)
        del scale, module
        gc.collect()
        assert fn() is None and k() is None
    finally:
        tg.set_compilation_cache(folder)
    ran: list[int] = []
    monkeypatch.setattr(kernels, "_credit", 2)
    for _ in range(3):
        kernels.trace_ahead(lambda: ran.append(1))
    _background_done()
    assert ran == [1, 1]
    taken, _ = _counting(lambda x: x + 2)
    taken.compile_ahead(jnp.ones(7))
    _background_done()
    taken(jnp.ones(7))  # a program compiled ahead is taken: runs may go on
    kernels.trace_ahead(lambda: ran.append(1))
    _background_done()
    assert ran == [1, 1, 1]


def test_a_kernel_keeps_its_newest_programs_compiled_ahead() -> None:
    """A kernel keeps at most ``_AHEAD_MAX`` programs compiled ahead for calls that have not
    come: a new one drops the oldest (queued: never compiled)."""
    import threading

    from tapegrad import kernels

    pool = kernels._background()
    if pool is None:
        pytest.skip("one core: nothing compiles ahead")
    triple, traces = _counting(lambda x: x * 3)
    gate = threading.Event()
    pool.submit(gate.wait, 30)
    try:
        for n in range(1, kernels._AHEAD_MAX + 3):
            triple.compile_ahead(jnp.ones(n))
    finally:
        gate.set()
    _background_done()
    assert len(traces) == kernels._AHEAD_MAX
    assert triple(jnp.ones(kernels._AHEAD_MAX + 2)).tolist()[0] == 3.0
    assert len(traces) == kernels._AHEAD_MAX  # kept: taken
    triple(jnp.ones(1))
    assert len(traces) == kernels._AHEAD_MAX + 1  # dropped: traced by the call


def test_one_core_compiles_nothing_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the process may use one core only, a background compile would take its time
    from the caller: ``compile_ahead`` does nothing."""
    from tapegrad import kernels

    monkeypatch.setattr(kernels, "_pool", None)
    monkeypatch.setattr(kernels.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert kernels._background() is None
    one, traces = _counting(lambda x: x - 1)
    one.compile_ahead(jnp.ones(2))
    assert traces == []
    assert one(jnp.ones(2)).tolist() == [0.0, 0.0]


def test_a_program_started_before_a_fork_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forked child has no background thread (``os.register_at_fork`` forgets the pool):
    a program still queued there when the process forked never finishes in the child, so
    the call compiles it itself instead of waiting for ever."""
    import threading
    import time

    from tapegrad import kernels

    pool = kernels._background()
    if pool is None:
        pytest.skip("one core: nothing compiles ahead")
    gate = threading.Event()
    pool.submit(gate.wait, 30)  # the thread is busy: what is given to it next stays queued
    try:
        three, traces = _counting(lambda x: x + 3)
        three.compile_ahead(jnp.ones(2))
        monkeypatch.setattr(kernels, "_pool", pool)
        kernels._forget_pool()  # what the child of a fork runs
        assert kernels._pool is None
        start = time.monotonic()
        assert three(jnp.ones(2)).tolist() == [4.0, 4.0]
        assert time.monotonic() - start < 20  # it did not wait for the gate (30 s)
        assert traces == [1]
    finally:
        gate.set()


def test_a_queued_program_is_compiled_by_the_call_and_clearing_drops_programs() -> None:
    """A program still queued behind another compile (another optimizer's update) is not
    waited for: the call compiles it itself and the queued one never runs. ``clear_cache()``
    and ``jax.clear_caches()`` drop programs compiled ahead, as they drop JAX's: the next
    call traces again. A kernel traced into a compiled step drops its queued programs."""
    import threading

    from tapegrad import kernels

    pool = kernels._background()
    if pool is None:
        pytest.skip("one core: nothing compiles ahead")
    gate = threading.Event()
    pool.submit(gate.wait, 30)
    try:
        queued, traces = _counting(lambda x: x * 5)
        queued.compile_ahead(jnp.ones(2))
        assert queued(jnp.ones(2)).tolist() == [5.0, 5.0]
        traced_in_step, step_traces = _counting(lambda x: x - 5)
        traced_in_step.compile_ahead(jnp.ones(2))
        jax.jit(traced_in_step)(jnp.ones(2))
        dropped, dropped_traces = _counting(lambda x: x / 5)
        dropped.compile_ahead(jnp.ones(2))
        del dropped  # a kernel gone (an optimizer dropped): its program is not compiled
    finally:
        gate.set()
    _background_done()
    assert traces == [1] and step_traces == [1]  # neither queued program ran
    assert dropped_traces == []
    for clear in ("kernel", "jax"):
        cleared, cleared_traces = _counting(lambda x: x + 7)
        cleared.compile_ahead(jnp.ones(3))
        _background_done()
        cleared.clear_cache() if clear == "kernel" else jax.clear_caches()
        assert cleared(jnp.ones(3)).tolist() == [8.0, 8.0, 8.0]
        assert len(cleared_traces) == 2, clear  # traced again by the call


def test_an_exiting_process_drops_programs_still_queued(tmp_path: Any) -> None:
    """At exit the background thread finishes what it is compiling and drops what is
    queued, so a script that made an optimizer and never stepped does not wait for it."""
    import subprocess
    import sys
    import textwrap

    marker = tmp_path / "traced"
    script = textwrap.dedent(
        f"""
        import time
        import jax.numpy as jnp
        from tapegrad import kernels

        pool = kernels._background()
        if pool is not None:
            pool.submit(time.sleep, 1.0)  # busy: what comes next stays queued
            def traced(x):
                open({str(marker)!r}, "w").close()
                return x * 2
            held = kernels.kernel(traced)  # alive at exit: only the exit drops its program
            held.compile_ahead(jnp.ones(2))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert not marker.exists()


def test_a_thread_that_outlives_the_main_thread_still_makes_an_optimizer(tmp_path: Any) -> None:
    """Once the interpreter began exiting (the main thread returned, a worker still runs)
    Python refuses new exit callbacks: the background thread is not started then, and
    nothing compiles ahead, but an optimizer made there works (a review found it raised)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import threading, time
        import tapegrad as tg
        from tapegrad import optim

        def train():
            time.sleep(0.5)
            w = tg.ones((3,)).require_grad()
            opt = optim.SGD([w], lr=0.1)
            w.grad = tg.ones((3,))
            opt.step()
            print(w.tolist())

        threading.Thread(target=train).start()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, timeout=120, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[0.8999999761581421, 0.8999999761581421, 0.8999999761581421]"
