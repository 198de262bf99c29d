"""Higher-order gradients: ``create_graph=True``, ``tg.hvp`` and the worked scenarios against
JAX (WGAN-GP, MAML, Newton on least squares, a full MLP Hessian, a third derivative), graph
memory with the cycle collector off, origins of the recorded backward, bad input."""

from __future__ import annotations

import gc
import inspect
import weakref
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _recount import delta
from _support import error_of

import tapegrad as tg
from tapegrad.testing import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 3)).astype(np.float32)
W1 = RNG.standard_normal((3, 4)).astype(np.float32) * 0.5
B1 = RNG.standard_normal((4,)).astype(np.float32) * 0.1
W2 = RNG.standard_normal((4, 1)).astype(np.float32) * 0.5


def close(
    got: tg.Tensor | np.ndarray, want: object, rtol: float = 2e-5, atol: float = 2e-6
) -> None:
    g = got.numpy() if isinstance(got, tg.Tensor) else got
    np.testing.assert_allclose(g, np.asarray(want), rtol=rtol, atol=atol)


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# ----------------------------------------------------------------------------- basics


def test_third_derivative_of_a_scalar_function() -> None:
    def f(x):  # works on tensors and on jax arrays alike
        return x.sin() * x**3 if isinstance(x, tg.Tensor) else jnp.sin(x) * x**3

    x = tg.tensor(0.7).require_grad()
    (d1,) = tg.grad(f(x), x, create_graph=True)
    (d2,) = tg.grad(d1, x, create_graph=True)
    (d3,) = tg.grad(d2, x)
    for got, fn in (
        (d1, jax.grad(f)),
        (d2, jax.grad(jax.grad(f))),
        (d3, jax.grad(jax.grad(jax.grad(f)))),
    ):
        close(got, fn(jnp.float32(0.7)), rtol=1e-5)
    assert d1.requires_grad and d2.requires_grad and not d3.requires_grad


def test_backward_create_graph_accumulates_a_recorded_grad() -> None:
    """.grad requires grad; a second create_graph backward adds to it as a recorded op; the
    gradient of the gradient norm (a penalty) matches JAX."""
    w = tg.tensor(W1).require_grad()
    x = tg.tensor(X)
    loss = (x @ w).tanh().sum()
    loss.backward(create_graph=True)
    loss.backward(create_graph=True)
    assert w.grad is not None and w.grad.requires_grad
    penalty = (w.grad * w.grad).sum()
    (gw,) = tg.grad(penalty, w)

    def f(w):
        g = 2 * jax.grad(lambda w: jnp.tanh(X @ w).sum())(w)
        return (g * g).sum()

    close(gw, jax.grad(f)(W1), rtol=1e-4, atol=1e-5)


def test_jax_op_to_third_order() -> None:
    @tg.jax_op
    def softplus_cube(a, *, k=3.0):
        return jax.nn.softplus(a) ** k

    def f(a):
        return jnp.sum(jax.nn.softplus(a) ** 3.0)

    a = np.array([0.3, -1.2, 2.0], np.float32)
    x = tg.tensor(a).require_grad()
    (g,) = tg.grad(softplus_cube(x).sum(), x, create_graph=True)
    (h,) = tg.grad(g.sum(), x, create_graph=True)
    (t,) = tg.grad(h.sum(), x)
    close(g, jax.grad(f)(a))
    close(h, jax.grad(lambda a: jax.grad(f)(a).sum())(a), rtol=1e-5)
    close(t, jax.grad(lambda a: jax.grad(lambda a: jax.grad(f)(a).sum())(a).sum())(a), rtol=1e-4)


def test_a_cotangent_that_requires_grad_is_differentiated_through() -> None:
    """The double-backward trick: d/dv of <vjp(v), u> is the JVP."""
    x = tg.tensor(np.array([0.5, 1.5], np.float32)).require_grad()
    v = tg.tensor(np.array([1.0, -2.0], np.float32)).require_grad()
    y = x.exp() * x
    (gx,) = tg.grad(y, x, grad_outputs=v, create_graph=True)
    (gv,) = tg.grad(gx.sum(), v)
    close(gv, jnp.exp(x.data) * (1 + x.data))  # the diagonal Jacobian of x * exp(x)


def test_non_differentiable_ops_give_zero_higher_gradients_as_jax() -> None:
    """Comparisons and masks are constants of the derivative; a gradient that depends on
    nothing still requires grad, and its derivative is zeros (JAX's answer), not an error."""
    a = np.array([-1.0, 0.5, 2.0], np.float32)
    x = tg.tensor(a).require_grad()
    y = tg.where(x > 0.0, x, 0.0 * x).sum() + (x * (x < 1.0).astype(tg.float32)).sum()
    (g,) = tg.grad(y, x, create_graph=True)
    assert g.requires_grad
    (h,) = tg.grad(g.sum(), x)

    def f(x):
        return jnp.where(x > 0, x, 0.0 * x).sum() + (x * (x < 1.0)).sum()

    close(g, jax.grad(f)(a))
    close(h, jax.grad(lambda x: jax.grad(f)(x).sum())(a))
    assert h.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("p", "first", "second"),
    [  # PyTorch's values at x = 0 (nested jax.grad gives NaN for p = 1.0 and p = 0.0)
        (0.5, np.inf, -np.inf),
        (-1.0, -np.inf, np.inf),
        (1.0, 1.0, 0.0),
        (0.0, 0.0, 0.0),
        (2.5, 0.0, 0.0),
    ],
)
def test_second_derivative_of_a_float_power_at_zero(p: float, first: float, second: float) -> None:
    """A residual the rule for one input does not read (``y`` of ``x ** p`` for ``x``'s
    cotangent) is not linked, so no zero cotangent meets an infinite derivative (0 * inf)."""
    x = tg.tensor(np.float32(0.0)).require_grad()
    (g,) = tg.grad(x**p, x, create_graph=True)
    (h,) = tg.grad(g, x)
    assert g.item() == first
    assert h.item() == second
    z = tg.tensor(np.array([0.0, 1.5], np.float32)).require_grad()
    (gz,) = tg.grad((z**p).sum(), z, create_graph=True)
    (hz,) = tg.grad(gz.sum(), z)
    expected = jax.grad(lambda v: jax.grad(lambda u: jnp.sum(u**p))(v).sum())(z.data)
    close(hz[1], expected[1])  # away from 0: JAX's value


def test_an_exponent_that_requires_grad_keeps_its_second_derivative() -> None:
    """gb = g * log(a) * y reads the output: its link stays (d/db of gb goes through y)."""
    a = np.array([0.5, 2.0], np.float32)
    x = tg.tensor(a)
    b = tg.tensor(np.array([1.5, 0.5], np.float32)).require_grad()
    (g,) = tg.grad((x**b).sum(), b, create_graph=True)
    (h,) = tg.grad(g.sum(), b)

    def f(e):
        return jnp.sum(a**e)

    close(h, jax.grad(lambda e: jax.grad(f)(e).sum())(b.data))


def test_a_second_backward_through_a_consumed_create_graph_graph_raises() -> None:
    x = tg.tensor(np.array([0.5, 1.5], np.float32)).require_grad()
    y = x.tanh().sum()
    (g,) = tg.grad(y, x, create_graph=True, retain_graph=False)
    err = error_of(tg.GraphConsumedError, g.sum().backward)
    assert "retain_graph" in str(err) and "'tanh'" in str(err)
    assert x.grad is None


def test_a_residual_without_provenance_is_refused_with_the_fix() -> None:
    """An op keeping a new float array as residual cannot be differentiated twice: a clear
    RuntimeError, and the tape stays consistent."""
    op = tg.Op(lambda x: (x * x, (x * 2.0,)), name="square_saving_2x")
    op.defvjp(lambda res, g: (g * res[0],))
    x = tg.tensor(np.array([1.0, 2.0], np.float32)).require_grad()
    y = op(x).sum()
    err = error_of(RuntimeError, tg.grad, y, x, create_graph=True)
    assert "square_saving_2x" in str(err) and "save the inputs" in str(err)
    (g,) = tg.grad(y, x)  # first order still works
    close(g, 2 * x.data)


def test_a_failed_create_graph_pass_leaves_none_of_its_nodes_hanging(start: int) -> None:
    """The VJP nodes a create_graph pass recorded before it raised are freed with their
    tensors (held by the traceback until it is dropped), not left hanging for a sweep; what
    is left is what a failed plain backward leaves: the forward nodes whose VJP did not run."""
    op = tg.Op(lambda x: (x * x, (x * 2.0,)), name="square_saving_2x")
    op.defvjp(lambda res, g: (g * res[0],))
    x = tg.tensor(np.array([1.0, 2.0], np.float32)).require_grad()
    y = (op(x) ** 3).sum()  # vjp(sum) records nothing, vjp(integer_pow) a node, then op fails
    error_of(RuntimeError, tg.grad, y, x, create_graph=True)
    del y
    gc.collect()
    left = [(r.op, r.useful) for r in tg.snapshot().nodes if r.id > start]
    assert left == [("leaf", True), ("square_saving_2x", False)], left  # x; the hanging op


def test_inputs_sharing_one_array_keep_their_own_provenance() -> None:
    """One array can be two inputs of different nodes (``x.detach() * x``; two leaves made
    from one array; an op saving its output before its inputs): each residual links to its
    own input, so second derivatives match ``jax.grad`` (they linked to whichever input the
    array was last, silently giving 1 for 0)."""
    arr = jnp.array([1.0, 2.0, 3.0], jnp.float32)
    x = tg.tensor(arr).require_grad()
    (g,) = tg.grad((x.detach() * x).sum(), x, create_graph=True)
    (gg,) = tg.grad(g.sum(), x)
    want = jax.grad(lambda v: jax.grad(lambda u: (jax.lax.stop_gradient(u) * u).sum())(v).sum())
    close(gg, want(arr))

    a, b = tg.tensor(arr).require_grad(), tg.tensor(arr).require_grad()
    assert a.data is b.data  # the premise: one array, two leaves
    for first, other in ((a, b), (b, a)):
        (g1,) = tg.grad((a * b).sum(), first, create_graph=True)
        d_first, d_other = tg.grad(g1.sum(), [first, other])
        close(d_first, np.zeros(3, np.float32))
        close(d_other, np.ones(3, np.float32))

    def mul_saving_output_first(p: jax.Array, q: jax.Array) -> tuple[jax.Array, Any]:
        y = p * q
        return y, (y, p, q)

    op = tg.Op(mul_saving_output_first, name="mul_saving_output_first")
    op.defvjp(lambda res, g: (g * res[2], g * res[1]))
    a, b = tg.tensor(arr).require_grad(), tg.tensor(arr).require_grad()
    (ga,) = tg.grad(op(a, b).sum(), a, create_graph=True)
    d_a, d_b = tg.grad(ga.sum(), [a, b])
    close(d_a, np.zeros(3, np.float32))
    close(d_b, np.ones(3, np.float32))


def test_the_derived_vjp_is_compiled_once_per_kind() -> None:
    """Repeated create_graph steps reuse the cached vjp(<op>) ops and compiled pullbacks."""
    from tapegrad import derived, higher

    def step() -> None:
        w = tg.tensor(W1).require_grad()
        (g,) = tg.grad((tg.tensor(X) @ w).tanh().sum(), w, create_graph=True)
        (g * g).sum().backward()

    step()
    ops, pulls = len(higher._CACHE), derived.compiled_vjp.cache_info().misses
    for _ in range(3):
        step()
    assert len(higher._CACHE) == ops
    assert derived.compiled_vjp.cache_info().misses == pulls


def test_create_graph_records_the_pass_under_no_grad_as_pytorch_does() -> None:
    """PyTorch's engine sets grad mode to ``create_graph`` for the pass: under no_grad,
    ``backward(create_graph=True)`` and ``grad(..., create_graph=True)`` still return
    gradients that require grad. Here they silently did not (and the graph was retained)."""

    def second_derivatives() -> list[np.ndarray | None]:
        x = tg.tensor(X[0]).require_grad()
        y = (x**3).sum()
        with tg.no_grad():
            (g,) = tg.grad(y, x, create_graph=True)
            y.backward(create_graph=True)
        assert x.grad is not None
        return [tg.grad(t.sum(), x)[0].numpy() if t.requires_grad else None for t in (g, x.grad)]

    for got in second_derivatives():  # plain arrays: a failure keeps no tensor alive
        assert got is not None, "the gradient does not require grad"
        close(got, 6 * X[0])


def test_recorded_vjps_of_statics_equal_in_value_but_not_in_type_stay_apart() -> None:
    """The recorded ``vjp(getitem)`` of ``x[True]`` (a new axis) is not reused for ``x[1]``
    (a row), although ``True == 1``: first and second derivatives equal JAX's in either
    order."""
    m = np.arange(6, dtype=np.float32).reshape(3, 2) / 4

    def f(x: Any, i: Any) -> Any:
        return (x[i] ** 3).sum()

    for order in ((True, 1), (1, True)):
        for i in order:
            x = tg.tensor(m).require_grad()
            (g,) = tg.grad(f(x, i), x, create_graph=True)
            (h,) = tg.grad((g * g).sum(), x)
            first = jax.grad(f)(jnp.asarray(m), i)
            close(g, first)
            close(h, jax.grad(lambda a, i=i: (jax.grad(f)(a, i) ** 2).sum())(jnp.asarray(m)))


# ----------------------------------------------------------------------------- checkers


def test_gradcheck_and_gradgradcheck_pass_on_an_mlp_layer() -> None:
    def layer(x, w, b):
        return (x @ w + b).tanh().sum(axis=1)

    gradcheck(layer, X, W1, B1)
    gradgradcheck(layer, X, W1, B1, wrt=[1, 2])
    for check in (gradcheck, gradgradcheck):  # PyTorch's form: the inputs in one tuple
        message = str(error_of(TypeError, check, layer, (X, W1, B1)))
        assert "separate arguments" in message, message


def test_gradgradcheck_rejects_a_wrong_second_derivative() -> None:
    """A VJP rule that is right at first order only (a constant where x should be) fails."""
    op = tg.Op(lambda x: (x**3, (x,)), name="cube_wrong")
    op.defvjp(lambda res, g: (g * 3.0 * jax.lax.stop_gradient(res[0]) ** 2,))
    x = np.array([0.5, -1.0], np.float32)
    gradcheck(lambda t: op(t), x)
    with pytest.raises(AssertionError, match="second derivative"):
        gradgradcheck(lambda t: op(t), x)


# ----------------------------------------------------------------------------- memory


def test_no_cycle_between_a_leaf_and_its_create_graph_grad(no_cycle_collector: None) -> None:
    """PyTorch #7343: w.grad's graph reaches w's node, never w itself, so dropping w frees it
    with the cycle collector off."""
    base = tg.graph_stats().nodes  # what other test modules keep (module-level parameters)
    w = tg.tensor(W1).require_grad()
    loss = (tg.tensor(X) @ w).tanh().sum()
    loss.backward(create_graph=True)
    assert w.grad is not None and w.grad.requires_grad
    grad_ref, w_ref = weakref.ref(w.grad), weakref.ref(w)
    del loss, w
    assert w_ref() is None and grad_ref() is None
    assert tg.graph_cleanup().nodes_removed > 0  # the unconsumed graphs hang until a sweep
    assert tg.graph_stats().nodes == base


@pytest.mark.parametrize("policy", ["manual", "auto"])
def test_dropping_loss_and_grads_frees_everything(
    no_cycle_collector: None, policy: str, base: tg.GraphStats
) -> None:
    tg.set_cleanup_policy(policy)
    try:
        w = tg.tensor(W1).require_grad()
        b = tg.tensor(B1).require_grad()
        loss = ((tg.tensor(X) @ w + b).sigmoid() ** 2).mean()
        loss.backward(create_graph=True)
        assert w.grad is not None and b.grad is not None
        grad_ref = weakref.ref(w.grad)
        assert tg.graph_stats().saved_bytes > 0
        del loss
        w.grad = None
        b.grad = None
        assert grad_ref() is None
        if policy == "manual":  # retained (unconsumed) graphs wait for a sweep (rule 5)
            tg.graph_cleanup()
        got = delta(base)
        assert (got.nodes, got.leaves, got.saved_bytes) == (2, 2, 0)  # w and b
    finally:
        tg.set_cleanup_policy("manual")


@pytest.mark.parametrize("policy", ["manual", "threshold"])
def test_a_gradient_penalty_loop_leaves_only_its_parameters(
    no_cycle_collector: None, policy: str, base: tg.GraphStats
) -> None:
    """A correct gradient-penalty step (``tg.grad(..., create_graph=True)``, then a backward
    of the penalty) leaves nothing once its tensors are dropped, with no cleanup call: the
    first-order graph that create_graph retained, which the second backward never reaches
    (the sum above the critic), is freed with its tensors, as PyTorch frees it; no_leaks
    passes. A graph kept by an explicit retain_graph=True still hangs (rule 5, below)."""
    import diagnostics

    tg.set_cleanup_policy(policy, **({"threshold": 10_000} if policy == "threshold" else {}))
    try:
        params = [tg.tensor(a).require_grad() for a in (W1, B1, W2)]
        with diagnostics.no_leaks():
            for _ in range(3):
                xhat = tg.tensor(X).require_grad()
                (gx,) = tg.grad(_critic(xhat, *params).sum(), xhat, create_graph=True)
                penalty = (((gx * gx).sum(axis=1) - 1.0) ** 2).mean()
                penalty.backward()
                del xhat, gx, penalty
        got = delta(base)
        assert (got.nodes, got.leaves, got.hanging_nodes, got.saved_bytes) == (3, 3, 0, 0)
        loss = _critic(tg.tensor(X), *params).sum()
        loss.backward(retain_graph=True)
        del loss
        assert delta(base).hanging_nodes > 0  # kept for a second backward that never came
    finally:
        tg.graph_cleanup()
        tg.set_cleanup_policy("manual")


def test_recorded_backward_nodes_carry_the_backward_call_site_and_op() -> None:
    w = tg.tensor(W1).require_grad()
    loss = (tg.tensor(X) @ w).tanh().sum()
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    loss.backward(create_graph=True)
    records = [r for r in tg.snapshot().nodes if r.op.startswith("vjp(")]
    assert {r.op for r in records} >= {"vjp(tanh)", "vjp(matmul)"}
    assert {r.origin for r in records} == {f"tests/test_higher.py:{line}"}
    assert {r.function for r in records} == {inspect.currentframe().f_code.co_qualname}  # type: ignore[union-attr]
    del loss
    w.grad = None


def test_the_leak_report_names_what_a_create_graph_backward_left() -> None:
    """A create_graph backward whose gradients are dropped leaves its retained graph hanging:
    the leak report names the vjp(<op>) nodes by op and backward call site."""
    import diagnostics

    w = tg.tensor(W1).require_grad()
    loss = (tg.tensor(X) @ w).tanh().sum()
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    loss.backward(create_graph=True)
    del loss
    w.grad = None
    report = diagnostics.leak_report()  # rows on the tape now: earlier sweeps are in the ledger
    rows = [r for r in report.rows if r.op.startswith("vjp(") and r.count > r.swept]
    assert {r.op for r in rows} >= {"vjp(tanh)", "vjp(matmul)"}
    assert {(r.origin, r.kind) for r in rows} == {(f"tests/test_higher.py:{line}", "hanging")}
    assert tg.graph_cleanup().nodes_removed > 0


def test_cleanup_after_create_graph_steps_keeps_later_gradients() -> None:
    """graph_cleanup between create_graph steps never changes a later backward."""

    def run(clean: bool) -> np.ndarray:
        w = tg.tensor(W1).require_grad()
        x = tg.tensor(X)
        for _ in range(2):
            (g,) = tg.grad((x @ w).tanh().sum(), w, create_graph=True)
            junk = (x @ w).sum()  # a graph no backward reaches
            del junk
            if clean:
                tg.graph_cleanup()
            penalty = (g * g).sum()
            if clean:
                tg.graph_cleanup()
            penalty.backward()
        assert w.grad is not None
        return w.grad.numpy()

    close(run(True), run(False), rtol=0, atol=0)


# ----------------------------------------------------------------------------- hvp


def test_hvp_matches_jax_and_leaves_the_tape_as_it_was(base: tg.GraphStats) -> None:
    def f(w, b):
        return ((tg.tensor(X) @ w + b).tanh() ** 2).sum()

    def jf(w, b):
        return (jnp.tanh(X @ w + b) ** 2).sum()

    w, b = tg.tensor(W1), tg.tensor(B1)
    v = (tg.ones_like(w), tg.tensor(np.linspace(-1, 1, 4, dtype=np.float32)))
    value, (hw, hb) = tg.hvp(f, (w, b), v)
    want_value, (jw, jb) = jax.jvp(jax.grad(jf, argnums=(0, 1)), (W1, B1), (v[0].data, v[1].data))
    close(value, jf(W1, B1), rtol=1e-6)
    close(hw, jw, rtol=1e-4, atol=1e-5)
    close(hb, jb, rtol=1e-4, atol=1e-5)
    assert not (value.requires_grad or hw.requires_grad or hb.requires_grad)
    assert tg.graph_stats() == base  # nothing hangs, nothing was swept


def test_grad_records_only_the_paths_toward_its_inputs(base: tg.GraphStats) -> None:
    """tg.grad(y, x, create_graph=True) of a y that also depends on parameters: no VJP node is
    recorded for a parameter's gradient nobody asked for (PyTorch prunes them too); before,
    each step of a gradient penalty left such nodes hanging, with their saved arrays."""
    w1, b1, w2 = (tg.tensor(a).require_grad() for a in (W1, B1, W2))
    x = tg.tensor(X).require_grad()
    start = max((r.id for r in tg.snapshot().nodes), default=-1)
    (gx,) = tg.grad(_critic(x, w1, b1, w2).sum(), x, create_graph=True)
    recorded = [r for r in tg.snapshot().nodes if r.id > start and r.op.startswith("vjp(")]
    # matmul (toward tanh's output only, not w2), tanh, add (toward the matmul, not b1), matmul
    # (toward x, not w1); the sum's VJP of the constant seed records nothing
    assert sorted(r.op for r in recorded) == [
        "vjp(add)",
        "vjp(matmul)",
        "vjp(matmul)",
        "vjp(tanh)",
    ], [r.op for r in recorded]
    jx = jax.grad(lambda x: jnp.sum(jnp.tanh(x @ W1 + B1) @ W2))(X)
    close(gx, jx, rtol=1e-5, atol=1e-6)
    (gx * gx).sum().backward()  # the second derivative reaches the parameters
    want = jax.grad(
        lambda w1, b1, w2: jnp.sum(jax.grad(lambda x: jnp.sum(jnp.tanh(x @ w1 + b1) @ w2))(X) ** 2),
        argnums=(0, 1, 2),
    )(W1, B1, W2)
    for p, w in zip((w1, b1, w2), want, strict=True):
        assert p.grad is not None
        close(p.grad, w, rtol=1e-4, atol=1e-5)
    del gx, w1, b1, w2, x, p
    tg.graph_cleanup()
    assert tg.graph_stats() == base


def test_hvp_of_a_function_of_other_parameters_leaves_nothing(base: tg.GraphStats) -> None:
    other = tg.tensor(W1).require_grad()  # a model parameter the function closes over
    x = tg.tensor(X[:3, :3])
    for _ in range(3):
        tg.hvp(lambda a: ((a @ other).tanh() ** 2).sum(), x, tg.ones_like(x))
    assert delta(base) == tg.GraphStats(graphs=1, nodes=1, leaves=1, live_nodes=1)  # other


def test_hvp_of_a_function_ignoring_its_argument_is_zero(base: tg.GraphStats) -> None:
    """fn runs on a fresh leaf: a function that closes over the input instead of using its
    argument has exact zeros for H v (as JAX, and PyTorch with strict=False; the docstring
    says so), and leaves nothing behind."""
    w = tg.tensor(W1).require_grad()
    value, hv = tg.hvp(lambda a: ((tg.tensor(X) @ w).tanh() ** 2).sum(), w, tg.ones_like(w))
    close(value, jnp.sum(jnp.tanh(X @ W1) ** 2), rtol=1e-6)
    assert isinstance(hv, tg.Tensor) and not hv.numpy().any()
    assert delta(base) == tg.GraphStats(graphs=1, nodes=1, leaves=1, live_nodes=1)  # w


def test_hvp_of_a_function_whose_value_requires_no_grad_is_zero(base: tg.GraphStats) -> None:
    """A fn whose value requires no grad (a constant, a ``.detach()``-ed result) has H v = 0,
    as in JAX and PyTorch's hvp (``strict=False``); before, tg.hvp raised tg.grad's
    NoGradError ("tg.grad output 0 ...") and left its fresh leaves hanging. A fn that raises,
    or returns several elements, leaves no leaf of tg.hvp's hanging either."""
    w = tg.tensor(W1)
    for fn in (lambda a: tg.tensor(3.0), lambda a: (a.detach() ** 2).sum()):
        value, hv = tg.hvp(fn, w, tg.ones_like(w))
        close(value, fn(w))
        assert isinstance(hv, tg.Tensor) and hv.shape == w.shape and hv.dtype == w.dtype
        assert not hv.numpy().any() and not hv.requires_grad
    b = tg.tensor(B1)
    _, products = tg.hvp(lambda p, q: tg.tensor(1.0), (w, b), (tg.ones_like(w), tg.ones_like(b)))
    assert [p.shape for p in products] == [w.shape, b.shape]
    assert not any(p.numpy().any() for p in products)
    with pytest.raises(tg.NonScalarBackwardError, match="tg.hvp"):
        tg.hvp(lambda a: a.detach() * 2.0, w, tg.ones_like(w))

    def fails(a: tg.Tensor) -> tg.Tensor:
        raise KeyError("fn failed")

    with pytest.raises(KeyError, match="fn failed"):
        tg.hvp(fails, w, tg.ones_like(w))
    assert tg.graph_stats() == base


def test_hvp_single_input_and_bad_vectors() -> None:
    x = tg.tensor(np.array([0.5, 1.0], np.float32))
    _, h = tg.hvp(lambda x: (x**3).sum(), x, tg.tensor(np.array([1.0, 1.0], np.float32)))
    close(h, 6 * x.data)
    with pytest.raises(ValueError, match="one vector entry per input"):
        tg.hvp(lambda x: x.sum(), x, tg.ones(3))
    with pytest.raises(TypeError, match="Tensors"):
        tg.hvp(lambda x: x.sum(), x, np.ones(2))
    with pytest.raises(tg.NonScalarBackwardError, match=r"tg.hvp: fn must return a one-elem"):
        tg.hvp(lambda x: x * x, x, tg.ones(2))  # not a scalar function: nothing left behind


# ----------------------------------------------------------------------------- scenarios


def _critic(x, w1, b1, w2):
    return (x @ w1 + b1).tanh() @ w2


@pytest.mark.slow
def test_wgan_gp_penalty_step_matches_jax() -> None:
    """A critic loss with a gradient penalty, E[D(fake)] - E[D(real)] + 10 E[(|dD/dx| - 1)^2]
    at points between real and fake samples; the parameters' gradients against JAX."""
    real = RNG.standard_normal((6, 3)).astype(np.float32)
    fake = RNG.standard_normal((6, 3)).astype(np.float32)
    eps = RNG.uniform(size=(6, 1)).astype(np.float32)

    def jloss(w1, b1, w2):
        d = lambda x: jnp.tanh(x @ w1 + b1) @ w2  # noqa: E731
        xhat = eps * real + (1 - eps) * fake
        gx = jax.grad(lambda x: d(x).sum())(xhat)
        gp = ((jnp.sqrt((gx * gx).sum(axis=1)) - 1) ** 2).mean()
        return d(fake).mean() - d(real).mean() + 10 * gp

    params = [tg.tensor(a).require_grad() for a in (W1, B1, W2)]
    xhat = (tg.tensor(eps) * real + (1 - tg.tensor(eps)) * fake).require_grad()
    (gx,) = tg.grad(_critic(xhat, *params).sum(), xhat, create_graph=True)
    gp = (((gx * gx).sum(axis=1).sqrt() - 1) ** 2).mean()
    loss = _critic(tg.tensor(fake), *params).mean() - _critic(tg.tensor(real), *params).mean()
    loss = loss + 10 * gp
    loss.backward()
    want = jax.grad(jloss, argnums=(0, 1, 2))(W1, B1, W2)
    for p, w in zip(params, want, strict=True):
        assert p.grad is not None
        close(p.grad, w, rtol=1e-4, atol=1e-5)
    close(loss, jloss(W1, B1, W2), rtol=1e-5)


@pytest.mark.slow
def test_maml_inner_step_and_outer_loss_match_jax() -> None:
    xs, ys = X[:3], RNG.standard_normal((3, 1)).astype(np.float32)
    xq, yq = X[3:], RNG.standard_normal((2, 1)).astype(np.float32)
    alpha = 0.1

    def inner(w, x, y):
        return (
            tg.mse_loss((x @ w).tanh(), y)
            if isinstance(w, tg.Tensor)
            else jnp.mean((jnp.tanh(x @ w) - y) ** 2)
        )

    def jouter(w):
        adapted = w - alpha * jax.grad(inner)(w, xs, ys)
        return inner(adapted, xq, yq)

    w0 = RNG.standard_normal((3, 1)).astype(np.float32)
    w = tg.tensor(w0).require_grad()
    (g,) = tg.grad(inner(w, tg.tensor(xs), tg.tensor(ys)), w, create_graph=True)
    adapted = w - alpha * g
    outer = inner(adapted, tg.tensor(xq), tg.tensor(yq))
    outer.backward()
    close(outer, jouter(w0), rtol=1e-5)
    assert w.grad is not None
    close(w.grad, jax.grad(jouter)(w0), rtol=1e-4, atol=1e-6)


def test_newton_step_on_least_squares_reaches_the_solution() -> None:
    """f(x) = |Ax - b|^2 / 2 is quadratic: one Newton step with the Hessian built from tg.hvp
    (and the gradient recorded with create_graph) lands on the least-squares solution."""
    a = RNG.standard_normal((8, 3)).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)

    def f(x):
        r = tg.tensor(a) @ x - b
        return 0.5 * (r * r).sum()

    x = tg.zeros(3)
    rows = [tg.hvp(f, x, tg.tensor(np.eye(3, dtype=np.float32)[i]))[1].numpy() for i in range(3)]
    hessian = np.stack(rows)
    close(hessian, jax.hessian(lambda x: 0.5 * jnp.sum((a @ x - b) ** 2))(jnp.zeros(3)), rtol=1e-5)
    xg = x.detach().require_grad()
    (g,) = tg.grad(f(xg), xg)
    step = np.linalg.solve(hessian, g.numpy())
    solution = np.linalg.lstsq(a, b, rcond=None)[0]
    close(x.numpy() - step, solution, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_full_hessian_of_a_small_mlp_matches_jax_hessian() -> None:
    """All 16 parameters in one vector (sliced and reshaped inside), Hessian row by row from
    a create_graph gradient: against jax.hessian of the same function."""
    theta0 = np.concatenate([W1.ravel(), W2.ravel()])

    def f(theta):
        if isinstance(theta, tg.Tensor):
            w1, w2 = theta[:12].reshape(3, 4), theta[12:].reshape(4, 1)
            return (((tg.tensor(X) @ w1).tanh() @ w2) ** 2).mean()
        w1, w2 = theta[:12].reshape(3, 4), theta[12:].reshape(4, 1)
        return jnp.mean((jnp.tanh(X @ w1) @ w2) ** 2)

    theta = tg.tensor(theta0).require_grad()
    (g,) = tg.grad(f(theta), theta, create_graph=True)
    rows = [tg.grad(g[i], theta, retain_graph=True)[0].numpy() for i in range(16)]
    close(np.stack(rows), jax.hessian(f)(jnp.asarray(theta0)), rtol=1e-4, atol=1e-6)
    close(g, jax.grad(f)(jnp.asarray(theta0)), rtol=1e-5)


def test_the_readme_gradient_penalty_example_runs() -> None:
    """The README's "Higher-order gradients" example, run as written; its Hessian-vector
    product against ``jax.jvp(jax.grad(f))`` of the function it means (its ``fn`` once closed
    over ``w1`` instead of using its argument: tg.hvp ran it on a fresh leaf and returned
    exact zeros)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## Higher-order gradients", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    env: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), env)
    for name in ("w1", "w2"):
        param = env[name]
        assert isinstance(param, tg.Tensor) and param.grad is not None
        assert np.isfinite(param.grad.numpy()).all()
    assert env["g"].requires_grad
    w1, w2, real = (env[name].data for name in ("w1", "w2", "real"))

    def f(w: jax.Array) -> jax.Array:
        return jnp.mean((jnp.tanh(real @ w) @ w2) ** 2)

    _, want = jax.jvp(jax.grad(f), (w1,), (jnp.ones((2, 16)),))
    assert np.abs(want).max() > 1.0  # the check means something: H v is far from zero here
    close(env["value"], f(w1), rtol=1e-5)
    close(env["hv"], want, rtol=1e-4, atol=1e-5)
    env.clear()


def test_an_op_returning_its_input_links_that_residual_to_the_input() -> None:
    """A user's op whose forward returns its input array and saves it: the residual is the
    input (the second derivative differentiates through x), not the op's output, which is
    the same array object (found by a review of the provenance fast path)."""
    op = tg.Op(lambda a: (a, (a,)), name="scaled_grad")
    op.defvjp(lambda res, g: (g * res[0],))
    x = tg.tensor(np.array([2.0, 3.0], np.float32), requires_grad=True)
    (g,) = tg.grad(op(x).sum(), [x], create_graph=True)
    np.testing.assert_array_equal(g.numpy(), [2.0, 3.0])  # the rule: g * x
    g.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])  # d/dx sum(x) = 1


_BOUNDS = {
    "NumPy arrays": (np.full((1, 4), -0.5, np.float32), np.full((1, 4), 0.5, np.float32)),
    "0-d JAX arrays": (jnp.asarray(-0.5), jnp.asarray(0.5)),
}


@pytest.mark.parametrize("kind", list(_BOUNDS))
def test_second_derivative_through_clip_with_array_bounds(kind: str) -> None:
    """Array bounds are parameters (constants), not residuals: the second derivative runs
    and equals jax.grad's (torch.clamp with tensor bounds gives the same)."""
    lo, hi = _BOUNDS[kind]
    x0 = np.array([[-1.0, -0.2, 0.3, 2.0]], np.float32)

    def f(x: Any) -> Any:
        return (jnp.clip(x, lo, hi) ** 3).sum()

    x = tg.tensor(x0).require_grad()
    (g,) = tg.grad((x.clip(lo, hi) ** 3).sum(), x, create_graph=True)
    (h,) = tg.grad((g * g).sum(), x)
    close(h, jax.grad(lambda x: (jax.grad(f)(x) ** 2).sum())(jnp.asarray(x0)))


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("leaky_relu", lambda x, a: tg.leaky_relu(x, a)),
        ("elu", lambda x, a: tg.elu(x, alpha=a)),
        ("softplus", lambda x, a: tg.softplus(x, beta=a * 20)),
        ("normalize", lambda x, a: tg.normalize(x, axis=-1, eps=a * 1e-5)),
        ("pad", lambda x, a: tg.pad(x, ((0, 0), (1, 1)), value=a)),
    ],
)
def test_a_number_parameter_given_as_a_one_element_array_is_its_number(
    name: str, call: Any
) -> None:
    """As PyTorch takes a 0-d tensor for a float: first and second derivatives equal the
    Python number's (the array reached a kernel's static argument: JAX's "non-hashable"
    error in the backward)."""
    x0 = np.array([[-1.0, -0.2, 0.3, 2.0]], np.float32)
    results = []
    for a in (0.1, jnp.asarray(0.1), np.float32(0.1), np.array([0.1], np.float32), tg.tensor(0.1)):
        x = tg.tensor(x0).require_grad()
        y = call(x, a)
        (g,) = tg.grad((y**3).sum(), x, create_graph=True)
        (h,) = tg.grad((g * g).sum(), x)
        results.append((y.numpy(), g.numpy(), h.numpy()))
    for got in results[1:]:
        for a, b in zip(got, results[0], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    if name != "normalize":  # a function of ops: its eps broadcasts (a ShapeError here)
        message = str(error_of(TypeError, call, tg.tensor(x0), np.full(3, 0.1, np.float32)))
        assert "must be a number" in message, message
