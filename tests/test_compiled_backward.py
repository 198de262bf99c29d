"""Compiled backward passes (``tapegrad.compiled_backward``): a pass whose structure repeats
runs as one XLA computation, with the eager pass's gradients, consumption and errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import grad_of
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import compiled_backward, kernels
from tapegrad.op import Op

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 3)).astype(np.float32)
W = RNG.standard_normal((3, 5)).astype(np.float32)
B = RNG.standard_normal((5,)).astype(np.float32)


@pytest.fixture(autouse=True)
def no_stored_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """No structure here takes a compiled pass from the kernel store (``Pass.stored``: an
    earlier run of the suite on this machine stored these passes), nor stores one: the
    rent-or-buy rule is what these tests check. ``test_compilation_cache.py`` checks the
    store's passes across processes."""
    monkeypatch.setattr(compiled_backward, "_store_name", lambda structure: None)


@pytest.fixture
def compile_at_second_pass(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Compile every structure at its second pass (none is bought before its first: see
    ``Pass.buys_at_once``), from an empty cache, on this thread (nothing compiles ahead on
    the background thread, so which pass runs compiled does not depend on its timing);
    restore after."""
    monkeypatch.setattr(compiled_backward, "_KERNEL_SECONDS", 0.0)
    monkeypatch.setattr(kernels, "_background", lambda: None)
    before = compiled_backward.compile_after()
    compiled_backward.clear()
    compiled_backward.set_compile_after(0)
    yield
    compiled_backward.set_compile_after(before)
    compiled_backward.clear()


def passes() -> list[compiled_backward.Pass]:
    return compiled_backward.cached()


def mlp_loss(x: tg.Tensor, w: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
    """Matmul, broadcast add, activations, indexing, a reduction and a Python scalar."""
    h = (x @ w + b).tanh()
    y = h[:, 1:4] * 2.0 - h.sigmoid()[1:3, 1:4].sum(axis=0)
    return (y.exp() + 1.0).log().mean()


def jax_loss(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    h = jnp.tanh(x @ w + b)
    y = h[:, 1:4] * 2.0 - jax.nn.sigmoid(h)[1:3, 1:4].sum(axis=0)
    return jnp.log(jnp.exp(y) + 1.0).mean()


def grads(loss_fn: Callable[..., tg.Tensor], *values: np.ndarray) -> list[np.ndarray]:
    params = [tg.tensor(v).require_grad() for v in values]
    loss_fn(*params).backward()
    return [grad_of(p) for p in params]


@pytest.mark.usefixtures("compile_at_second_pass")
def test_the_second_pass_of_a_structure_runs_compiled_with_the_same_gradients() -> None:
    eager = grads(mlp_loss, X, W, B)
    (entry,) = passes()
    assert entry.compiled is not None  # compiled after its first (eager) pass
    oracle = jax.grad(jax_loss, argnums=(0, 1, 2))(X, W, B)
    for _ in range(3):
        compiled = grads(mlp_loss, X, W, B)
        for c, e, o in zip(compiled, eager, oracle, strict=True):
            np.testing.assert_allclose(c, e, rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(c, o, rtol=1e-5, atol=1e-6)
    assert entry.compiled._cache_size() == 1 and not entry.broken


@pytest.mark.usefixtures("compile_at_second_pass")
def test_new_values_reuse_the_compiled_pass_new_shapes_and_scalars_do_not() -> None:
    grads(mlp_loss, X, W, B)
    for scale in (1.0, -2.0, 0.5):
        got = grads(mlp_loss, X * scale, W, B)
        want = jax.grad(jax_loss, argnums=(0, 1, 2))(X * scale, W, B)
        for g, o in zip(got, want, strict=True):
            np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-6)
    (entry,) = passes()
    assert entry.compiled._cache_size() == 1  # three new values: no new trace

    grads(mlp_loss, X[:2], W, B)  # another batch size: shapes are part of the structure
    assert len(passes()) == 2

    x = tg.tensor(X).require_grad()
    (x * 3.0).tanh().sum().backward()
    (x * 4.0).tanh().sum().backward()  # a Python scalar is a constant array: one structure
    assert len(passes()) == 3
    want = 3.0 / np.cosh(3.0 * X) ** 2 + 4.0 / np.cosh(4.0 * X) ** 2
    np.testing.assert_allclose(grad_of(x), want, rtol=1e-4, atol=1e-6)


@pytest.mark.usefixtures("compile_at_second_pass")
def test_retained_and_wanted_cotangents_come_back_from_a_compiled_pass() -> None:
    def run() -> tuple[Any, ...]:
        x = tg.tensor(X).require_grad()
        h = x * 3.0
        h.retain_grad()
        k = h.exp()
        (gk,) = tg.grad(k.sum(), [h], retain_graph=True)
        k.sum().backward()
        return grad_of(h), gk.numpy(), grad_of(x)

    first = run()
    assert all(e.compiled is not None for e in passes())
    second = run()
    for a, b in zip(first, second, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(second[2], 3.0 * np.exp(3.0 * X), rtol=1e-5)


@pytest.mark.usefixtures("compile_at_second_pass")
def test_a_compiled_pass_consumes_its_graph_as_the_eager_pass_does() -> None:
    x = tg.tensor(X).require_grad()
    for _ in range(2):
        loss = (x * 2.0).tanh().sum()
        loss.backward()
    with pytest.raises(tg.GraphConsumedError):
        loss.backward()
    y = (x * 2.0).tanh().sum()
    y.backward(retain_graph=True)
    y.backward()  # retained: a second pass works, then the graph is consumed
    with pytest.raises(tg.GraphConsumedError):
        y.backward()
    np.testing.assert_allclose(grad_of(x), 4 * 2.0 / np.cosh(2.0 * X) ** 2, rtol=1e-5)


@pytest.mark.usefixtures("compile_at_second_pass")
def test_passes_that_stay_eager() -> None:
    x = tg.tensor(X).require_grad()
    custom = Op(lambda a: (a * 2.0, ()), name="twice")  # a user's op: never cached
    custom.defvjp(lambda res, g: (g * 2.0,))

    def recorded() -> None:
        tg.grad((x * x).tanh().sum(), [x], create_graph=True)

    def user_op() -> None:
        custom(x).tanh().sum().backward()

    def anomaly() -> None:
        with tg.detect_anomaly():
            (x * 5.0).tanh().sum().backward()

    def tiny() -> None:  # three nodes, two VJPs: a compiled call would save nothing
        (x * 5.0).sum().backward()

    for case in (recorded, user_op, anomaly, tiny):
        for _ in range(3):
            case()
        assert passes() == [], case.__name__

    @tg.jit
    def step() -> tg.Tensor:  # a compiled step traces its own backward
        loss = (x * 2.0).tanh().sum()
        loss.backward()
        return loss

    for _ in range(3):
        step()
    assert passes() == []
    for _ in range(2):
        (x * 5.0).tanh().sum().backward()  # four nodes: compiled at its second pass
    assert [e.nodes for e in passes()] == [4]


@pytest.mark.usefixtures("compile_at_second_pass")
def test_a_rule_that_cannot_be_traced_falls_back_to_the_eager_pass() -> None:
    host = Op(lambda a: (a + 0.0, ()), name="host_rule")
    host.defvjp(lambda res, g: (g * float(np.asarray(g).sum() != 0),))  # needs a concrete g
    host.jax_vjp = True  # as if its rule were pure JAX: the compiled pass traces it
    x = tg.tensor(X).require_grad()
    for _ in range(3):
        (host(x) * 2.0).sum().backward()
    (entry,) = passes()
    assert entry.broken and entry.compiled is None
    np.testing.assert_allclose(grad_of(x), np.full_like(X, 6.0))


@pytest.mark.usefixtures("compile_at_second_pass")
def test_a_pass_too_long_to_compile_stays_eager_without_a_lookup() -> None:
    """XLA's compile time grows faster than the program (a 12,000-node RNN pass took 5
    minutes): a structure estimated over MAX_COMPILE_SECONDS is never compiled nor looked
    up, even with compile_after() == 0; its gradient is the eager pass's."""
    nodes = 1 + next(  # the smallest chain (plus its leaf) estimated over the limit
        n
        for n in range(100, 10_000, 50)
        if compiled_backward.estimated_compile_seconds(n + 1)
        > compiled_backward.MAX_COMPILE_SECONDS
    )
    x = tg.tensor(np.float32(1.0)).require_grad()
    for _ in range(3):
        y = x
        for _ in range(nodes - 1):
            y = y * 1.0001
        y.backward()
    assert passes() == []
    np.testing.assert_allclose(grad_of(x), 3 * 1.0001 ** (nodes - 1), rtol=1e-4)


def mlp_loss_retained(x: tg.Tensor, w: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
    """``mlp_loss`` with an intermediate's gradient retained: the same ops, shapes and
    dtypes in a new structure."""
    h = (x @ w + b).tanh()
    h.retain_grad()
    y = h[:, 1:4] * 2.0 - h.sigmoid()[1:3, 1:4].sum(axis=0)
    return (y.exp() + 1.0).log().mean()


@pytest.mark.parametrize("background", [True, False], ids=["background", "one core"])
def test_a_new_structure_of_ops_never_met_is_bought_on_one_core(
    monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    """Buying at once (issue 17's cold start), on one core: a program's first backward would
    compile its VJP kernels one by one, each costing about what compiling the whole pass
    does, so a structure of ops this process never met compiles before its first pass. With
    a background thread its VJP kernels compiled while the forward ran (``op._vjp_ahead``),
    so the first pass is eager and the structure waits for the rent-or-buy rule, as a new
    structure of ops met already (their kernels compiled) always does."""
    if background and kernels._background() is None:
        pytest.skip("one core: nothing compiles on a background thread")
    if not background:
        monkeypatch.setattr(kernels, "_background", lambda: None)
    monkeypatch.setattr(compiled_backward, "_met", set())  # as in a fresh process
    compiled_backward.clear()
    try:
        got = grads(mlp_loss, X, W, B)
        (entry,) = passes()
        assert entry.fresh * compiled_backward._KERNEL_SECONDS >= (
            compiled_backward.estimated_compile_seconds(entry.nodes)
        )
        if background:
            assert entry.passes == 1 and entry.compiled is None
        else:
            assert entry.passes == 0 and entry.calls == 1 and entry.compiled is not None
        oracle = jax.grad(jax_loss, argnums=(0, 1, 2))(X, W, B)
        for g, o in zip(got, oracle, strict=True):
            np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-6)
        again = grads(mlp_loss_retained, X, W, B)
        (_, second) = passes()
        assert second.fresh == 0 and second.passes == 1 and second.compiled is None
        for g, o in zip(again, oracle, strict=True):
            np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-6)
    finally:
        compiled_backward.clear()


@pytest.mark.parametrize("after", [1e-9, 0.0], ids=["eager until ready", "compile_after 0"])
def test_a_pass_compiling_in_the_background_stays_eager_until_ready(
    monkeypatch: pytest.MonkeyPatch, after: float
) -> None:
    """With a background thread, a structure that earned its compile compiles there: passes
    stay eager until the program is ready, and the first pass after takes it, with the
    eager pass's gradients. With ``compile_after() == 0`` the second pass runs compiled
    whatever the background thread is doing (it waits for the program, or compiles it), so
    a program's gradients are the same in every run, as on one core."""
    import threading

    pool = kernels._background()
    if pool is None:
        pytest.skip("one core: nothing compiles on a background thread")
    monkeypatch.setattr(compiled_backward, "_after", after)
    compiled_backward.clear()
    gate = threading.Event()
    try:
        pool.submit(gate.wait, 30)  # the thread busy: the compile waits in its queue
        eager = grads(mlp_loss, X, W, B)
        if after:
            grads(mlp_loss, X, W, B)  # earns its compile (eager seconds count from here)
        (entry,) = passes()
        assert entry.compiled is not None and entry.ahead
        if after:
            grads(mlp_loss, X, W, B)
            assert entry.passes == 3 and entry.calls == 0  # eager while it waits
            gate.set()
            pool.submit(int).result()
        compiled = grads(mlp_loss, X, W, B)
        assert entry.passes == (3 if after else 1)
        assert entry.calls == 2 and not entry.ahead  # its compile, its call
        for c, e in zip(compiled, eager, strict=True):
            np.testing.assert_allclose(c, e, rtol=1e-6, atol=1e-7)
    finally:
        gate.set()
        compiled_backward.clear()


def test_a_recorded_forward_compiles_its_vjp_kernels_ahead(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A tracked op whose forward compiled a new shape (a first-ever run: an empty store)
    starts its VJP's kernels compiling on the background thread (``op._vjp_ahead``), a rule
    written in Python that calls kernels (layer norm's) as a rule that is one: the first
    backward compiles none of them here."""
    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    monkeypatch.setattr(compiled_backward, "_after", None)  # eager passes: each VJP is called
    folder = tg.compilation_cache_dir()
    tg.set_compilation_cache(tmp_path)  # nothing stored: the forward compiles
    try:
        _vjps_compiled_ahead(monkeypatch)
    finally:
        tg.set_compilation_cache(folder)


def _vjps_compiled_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """The body of the test above, with its store in place."""
    import threading

    xv = RNG.standard_normal((7, 11)).astype(np.float32)  # shapes no other test meets
    wv = RNG.standard_normal((11,)).astype(np.float32)
    x, w = tg.tensor(xv).require_grad(), tg.tensor(wv).require_grad()
    y = tg.layer_norm((x * w).tanh(), 11, w)
    seed = tg.ones_like(y)
    pool = kernels._background()
    assert pool is not None
    for _ in range(2):  # the rules' runs, then the compiles they queued
        pool.submit(int).result()  # as when the forward took long enough
    here: list[str] = []
    real = kernels._from_store

    def spy(plain: Any, name: str, *rest: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            here.append(name)
        return real(plain, name, *rest)

    monkeypatch.setattr(kernels, "_from_store", spy)
    y.backward(seed)
    assert not [name for name in here if "vjp" in name], here

    def jax_f(xa: jax.Array, wa: jax.Array) -> jax.Array:
        h = jnp.tanh(xa * wa)
        mean = h.mean(-1, keepdims=True)
        var = ((h - mean) ** 2).mean(-1, keepdims=True)
        return ((h - mean) / jnp.sqrt(var + 1e-5) * wa).sum()

    ox, ow = jax.grad(jax_f, argnums=(0, 1))(xv, wv)
    np.testing.assert_allclose(grad_of(x), ox, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grad_of(w), ow, rtol=1e-4, atol=1e-5)


def test_a_compiled_pass_no_faster_than_eager_goes_back_to_eager() -> None:
    """After the call that compiles, five calls are timed against the fastest eager pass;
    when none was faster, the structure stays eager for good, and its program leaves the
    kernel store (a later process would take it untried)."""

    class Program:
        forgotten = 0

        def forget(self, seeds: Any, arrays: Any) -> None:
            self.forgotten += 1

    for compiled_seconds, slower in ((0.002, True), (0.0005, False)):
        entry = compiled_backward.Pass((tuple(range(10)), ()))
        for seconds in (0.5, 0.001, 0.001):  # a first pass, then two at 1 ms
            entry.ran_eagerly(seconds, lambda *a: {})
        entry.compiled = marker = Program()
        entry._timed(0.2, (), [])  # the compile: folded into the estimate, not compared
        for _ in range(5):
            entry._timed(compiled_seconds, (), [])
        assert entry.slower is slower and (entry.compiled is None) is slower
        assert marker.forgotten == int(slower)
        entry.ran_eagerly(0.001, lambda *a: {})
        assert entry.compiled is (None if slower else marker)  # never compiled again
    compiled_backward.clear()


def test_the_threshold_is_the_estimated_compile_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rent or buy: a structure compiles once its eager passes took what compiling it is
    estimated to take (0.1 s + 1 ms per node + 1 us per node squared, scaled up by slower
    timed compiles), at most ``compile_after()`` seconds; the first pass does not count, later
    ones count at the fastest; a structure estimated over 10 s never compiles. (Compiled on
    this thread: its first call times the compile.)"""
    monkeypatch.setattr(kernels, "_background", lambda: None)
    monkeypatch.setattr(compiled_backward, "_KERNEL_SECONDS", 0.0)  # no structure bought early
    before = compiled_backward.compile_after()
    compiled_backward.clear()
    try:
        compiled_backward.set_compile_after(3600.0)
        for _ in range(3):
            grads(mlp_loss, X, W, B)
        (entry,) = passes()
        assert entry.compiled is None and 0 < entry.seconds < entry.threshold < 3600
        assert entry.threshold == pytest.approx(0.1 + 0.001 * entry.nodes + 1e-6 * entry.nodes**2)
        slow = compiled_backward.Pass((tuple(range(400)), ()))  # 400 nodes: 0.66 s
        compiled_backward.set_compile_after(1.0)
        assert slow.threshold == pytest.approx(0.66)
        slow.ran_eagerly(30.0, lambda *a: {})  # a first pass that compiled its kernels
        assert slow.seconds == 0 and slow.compiled is None
        for _ in range(3):
            slow.ran_eagerly(0.1, lambda *a: {})
        slow.ran_eagerly(5.0, lambda *a: {})  # a pass on a busy machine: counted at 0.1 s
        assert slow.seconds == pytest.approx(0.4) and slow.compiled is None
        slow.ran_eagerly(0.1, lambda *a: {})
        slow.ran_eagerly(0.12, lambda *a: {})
        assert slow.seconds == pytest.approx(0.6) and slow.compiled is None
        slow.ran_eagerly(0.12, lambda *a: {})
        assert slow.seconds == pytest.approx(0.7) and slow.compiled is not None
        big = compiled_backward.Pass((tuple(range(2000)), ()))  # estimated 6.1 s: waits 1 s
        assert big.threshold == 1.0
        huge = compiled_backward.Pass((tuple(range(3000)), ()))  # estimated 12.1 s: never
        assert huge.threshold is None and not huge.buys_at_once()
        for _ in range(5):
            huge.ran_eagerly(10.0, lambda *a: {})
        assert huge.compiled is None
        compiled_backward._timed_compile(0.25, 400)  # faster than estimated: no change
        assert compiled_backward.estimated_compile_seconds(400) == pytest.approx(0.66)
        compiled_backward._timed_compile(2.64, 400)  # 4x the estimate: the scale moves by half
        assert compiled_backward.estimated_compile_seconds(400) == pytest.approx(0.66 * 2.0)
        compiled_backward.clear()
        assert compiled_backward.estimated_compile_seconds(400) == pytest.approx(0.66)
        compiled_backward.set_compile_after(0)  # a real compile is timed
        for _ in range(3):
            grads(mlp_loss, X, W, B)
        (entry,) = passes()
        assert entry.compiled is not None and entry.calls >= 1
        compiled_backward.set_compile_after(None)
        assert compiled_backward.lookup([], [], frozenset()) is None
        for bad in (-1.0, "1", True):
            with pytest.raises(ValueError, match="seconds"):
                compiled_backward.set_compile_after(bad)  # type: ignore[arg-type]
        for text, want in (("off", None), ("0", 0.0), ("2.5", 2.5), ("", 1.0)):
            monkeypatch.setenv("TAPEGRAD_COMPILED_BACKWARD", text)
            assert compiled_backward._threshold_from_env() == want
        monkeypatch.setenv("TAPEGRAD_COMPILED_BACKWARD", "soon")
        with pytest.raises(ValueError, match="TAPEGRAD_COMPILED_BACKWARD"):
            compiled_backward._threshold_from_env()
    finally:
        compiled_backward.set_compile_after(before)
        compiled_backward.clear()


UNARY = ("tanh", "exp", "sigmoid", "sin", "neg")
program = st.lists(
    st.tuples(st.sampled_from(UNARY + ("add", "mul", "sum0")), st.integers(0, 9)),
    min_size=1,
    max_size=12,
)


def run_program(steps: list[tuple[str, int]], values: list[np.ndarray]) -> list[np.ndarray]:
    leaves = [tg.tensor(v).require_grad() for v in values]
    regs: list[tg.Tensor] = list(leaves)
    for name, i in steps:
        x = regs[i % len(regs)]
        if name == "add":
            regs.append(x + regs[(i + 1) % len(regs)])
        elif name == "mul":
            regs.append(x * regs[(i + 3) % len(regs)])
        elif name == "sum0":
            regs.append(x.sum(axis=0) if x.ndim else x * 0.5)
        elif name == "neg":
            regs.append(-x)
        else:
            regs.append(getattr(x, name)())
    total = regs[-1].sum() + sum(r.sum() * 0.25 for r in regs[len(leaves) :])
    total.backward()
    pairs = zip(leaves, values, strict=True)
    return [np.zeros_like(v) if t.grad is None else grad_of(t) for t, v in pairs]


@settings(max_examples=25, deadline=None)
@given(steps=program)
def test_random_programs_compiled_equal_eager(steps: list[tuple[str, int]]) -> None:
    values = [
        RNG.standard_normal((2, 3)).astype(np.float32) * 0.5,
        RNG.standard_normal((3,)).astype(np.float32) * 0.5,
    ]
    before = compiled_backward.compile_after()
    compiled_backward.clear()
    try:
        compiled_backward.set_compile_after(None)
        eager = run_program(steps, values)
        compiled_backward.set_compile_after(0)
        run_program(steps, values)  # eager, then compiled
        compiled = run_program(steps, values)
        assert any(e.compiled is not None for e in passes())
    finally:
        compiled_backward.set_compile_after(before)
        compiled_backward.clear()
    for c, e in zip(compiled, eager, strict=True):
        np.testing.assert_allclose(c, e, rtol=2e-6, atol=1e-6)


@pytest.mark.usefixtures("compile_at_second_pass")
def test_integer_indices_are_traced_so_each_new_index_reuses_the_pass() -> None:
    x = tg.tensor(X).require_grad()
    for i, j in ((0, 0), (3, 2), (-1, 1), (2, -3)):
        x.grad = None
        (x[i, j] * 2.0 + x[1:3, j].sum()).backward()
        want = np.zeros_like(X)
        want[i, j] += 2.0
        want[1:3, j] += 1.0
        np.testing.assert_array_equal(grad_of(x), want)
    (entry,) = passes()
    assert entry.compiled is not None and entry.compiled._cache_size() == 1


@pytest.mark.usefixtures("compile_at_second_pass")
def test_numpy_index_arrays_are_arguments_so_new_rows_reuse_the_pass() -> None:
    """``logp[rows, targets]`` with host index arrays (the "nn from scratch" loss): the arrays
    are arguments of the compiled pass, not static values (an unhashable static kept every
    such pass eager), so new targets reuse it and the gradients stay exact."""
    x = tg.tensor(X).require_grad()
    rows = np.arange(X.shape[0])
    rng = np.random.default_rng(0)
    for _ in range(4):
        targets = rng.integers(0, X.shape[1], X.shape[0])
        x.grad = None
        (-(x.tanh()[rows, targets] * 3.0).mean()).backward()
        want = jax.grad(lambda a, t=targets: -(jnp.tanh(a)[rows, t] * 3.0).mean())(X)
        np.testing.assert_allclose(grad_of(x), want, rtol=1e-6, atol=1e-7)
    (entry,) = passes()
    assert entry.compiled is not None and not entry.broken
    assert entry.compiled._cache_size() == 1  # four index values, one trace


@pytest.mark.usefixtures("compile_at_second_pass")
def test_a_jax_op_and_a_gradient_penalty_compile_with_the_rest() -> None:
    """A ``tg.jax_op``'s VJP (JAX's) and a create_graph pass's recorded VJP ops are traced
    into the compiled pass like tapegrad's own ops; a ``tg.Op``'s hand-written rule is not
    (``test_passes_that_stay_eager``)."""

    @tg.jax_op
    def softplus_mix(a: jax.Array, b: jax.Array) -> jax.Array:
        return jax.nn.softplus(a) * jnp.cos(b)

    def jax_loss2(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.tanh(jax.nn.softplus(x @ w) * jnp.cos(w.sum())).mean()

    for scale in (1.0, 0.5, -2.0):
        got = grads(lambda x, w: softplus_mix(x @ w, w.sum()).tanh().mean(), X * scale, W)
        want = jax.grad(jax_loss2, argnums=(0, 1))(X * scale, W)
        for g, o in zip(got, want, strict=True):
            np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-6)
    (entry,) = passes()
    assert entry.compiled is not None and not entry.broken

    def penalty(w: jax.Array) -> jax.Array:
        g = jax.grad(lambda v: jnp.tanh(X @ v).sum())(w)
        return (g * g).sum()

    compiled_backward.clear()
    for scale in (1.0, 0.5, 2.0):
        w = tg.tensor(W * scale).require_grad()
        (g,) = tg.grad((X @ w).tanh().sum(), [w], create_graph=True)
        (g * g).sum().backward()
        np.testing.assert_allclose(grad_of(w), jax.grad(penalty)(W * scale), rtol=1e-5, atol=1e-6)
    compiled = [e for e in passes() if e.compiled is not None]
    assert compiled and not any(e.broken for e in passes())


def test_a_structure_with_a_jax_op_is_rented_never_bought_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``tg.jax_op`` may be defined anew every step (a new op, so a new structure each
    step): buying its structure at once would compile a pass that never runs again. Such a
    structure counts no fresh kernels; it compiles only once its passes repeat (rent)."""
    monkeypatch.setattr(compiled_backward, "_met", set())  # as in a fresh process
    compiled_backward.clear()
    try:
        for scale in (1.0, 0.5, -2.0):

            @tg.jax_op
            def bump(a: jax.Array) -> jax.Array:  # a new function object every step
                return jnp.sin(a) * 2.0

            got = grads(lambda x, w: (bump(x @ w + 1.0).tanh() * 3.0).exp().mean(), X * scale, W)
            want = jax.grad(
                lambda x, w: jnp.exp(jnp.tanh(jnp.sin(x @ w + 1.0) * 2.0) * 3.0).mean(),
                argnums=(0, 1),
            )(X * scale, W)
            for g, o in zip(got, want, strict=True):
                np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-6)
        assert len(passes()) == 3
        assert all(e.fresh == 0 and e.compiled is None and e.passes == 1 for e in passes())
    finally:
        compiled_backward.clear()
