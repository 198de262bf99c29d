"""Autograd semantics as a PyTorch user meets them, checked against torch and JAX: what a
``tg.grad`` pass consumes, grad mode around generators, and what each scenario leaves on the
tape (nothing, once its tensors are dropped and swept)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import numpy as np
import pytest
from _support import M, assert_close, error_of

import tapegrad as tg

torch = pytest.importorskip("torch")


def _nothing_left(base: tg.GraphStats) -> None:
    gc.collect()
    tg.graph_cleanup()
    assert tg.graph_stats().nodes == base.nodes


# ------------------------------------------------------------- tg.grad: what a pass consumes


def test_grad_wrt_a_non_leaf_leaves_the_graph_below_it_usable(base: tg.GraphStats) -> None:
    """``tg.grad(y, h)`` runs no VJP below ``h``, so (as in PyTorch) the graph from the
    leaves to ``h`` is not consumed: a later backward through ``h`` works."""
    x = tg.tensor(M).require_grad()
    h = x.exp()
    (gh,) = tg.grad((h * h).sum(), h)
    assert_close(gh.numpy(), 2 * np.exp(M), rtol=1e-5)
    (h * 2.0).sum().backward()
    t = torch.tensor(M, requires_grad=True)
    ht = t.exp()
    torch.autograd.grad((ht * ht).sum(), ht)
    (ht * 2.0).sum().backward()
    assert_close(x.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    del x, h, gh
    _nothing_left(base)


def test_grad_leaves_a_branch_toward_no_input_usable(base: tg.GraphStats) -> None:
    """A branch of the graph on no path toward the inputs is pruned: not run, not consumed."""
    a, b = tg.tensor(M).require_grad(), tg.tensor(M * 2).require_grad()
    sb = b.sin()
    (ga,) = tg.grad((a.exp() * sb).sum(), a)
    assert_close(ga.numpy(), np.exp(M) * np.sin(M * 2), rtol=1e-5)
    sb.sum().backward()
    assert a.grad is None
    assert_close(b.grad.numpy(), np.cos(M * 2), rtol=1e-5)
    del a, b, sb, ga
    _nothing_left(base)


def test_pruned_nodes_are_freed_with_their_tensors_without_a_sweep(base: tg.GraphStats) -> None:
    """What a ``tg.grad`` pass pruned counts as reached (rule 4): dropped, it is freed at once
    instead of hanging until a sweep."""
    a = tg.tensor(M).require_grad()
    h = a.exp()
    (gh,) = tg.grad((h * h).sum(), h)
    del h, gh
    assert tg.graph_stats().hanging_nodes == base.hanging_nodes
    assert tg.graph_stats().nodes == base.nodes + 1  # a only
    del a
    _nothing_left(base)


def test_grad_through_a_pruned_graph_still_consumes_what_ran() -> None:
    x = tg.tensor(M).require_grad()
    h = x.exp()
    y = (h * h).sum()
    tg.grad(y, h)
    err = error_of(RuntimeError, tg.grad, y, h)
    assert "retain_graph" in str(err)


# ------------------------------------------------------------------- grad mode on generators


@pytest.mark.parametrize(
    "make",
    [
        lambda: tg.no_grad(),
        lambda: tg.no_grad,
        lambda: tg.set_grad_enabled(False),
    ],
    ids=["no_grad()", "no_grad", "set_grad_enabled(False)"],
)
def test_grad_mode_decorator_applies_inside_a_generator(make: object) -> None:
    """As in PyTorch: each step of a decorated generator runs in the decorator's mode, and
    the caller's mode is back between steps."""
    deco = make()  # type: ignore[operator]

    @deco
    def steps(x: tg.Tensor) -> Iterator[tuple[bool, bool]]:
        for _ in range(2):
            got = yield tg.is_grad_enabled(), (x * 2.0).requires_grad
            assert got is None or got == 5

    x = tg.tensor(M).require_grad()
    gen = steps(x)
    assert next(gen) == (False, False)
    assert tg.is_grad_enabled()
    assert gen.send(5) == (False, False)
    assert tg.is_grad_enabled()
    with pytest.raises(StopIteration):
        next(gen)
    assert tg.is_grad_enabled()


def test_enable_grad_decorator_applies_inside_a_generator_under_no_grad() -> None:
    @tg.enable_grad()
    def steps() -> Iterator[bool]:
        yield tg.is_grad_enabled()
        yield tg.is_grad_enabled()

    with tg.no_grad():
        gen = steps()
        assert next(gen) is True
        assert not tg.is_grad_enabled()
        assert next(gen) is True
        gen.close()
        assert not tg.is_grad_enabled()


def test_decorated_generator_restores_the_mode_when_it_raises_or_closes() -> None:
    @tg.no_grad()
    def steps() -> Iterator[int]:
        try:
            yield 1
            yield 2
        finally:
            assert not tg.is_grad_enabled()  # cleanup code runs in the decorator's mode too
        raise ValueError("boom")

    gen = steps()
    next(gen)
    gen.close()
    assert tg.is_grad_enabled()
    gen = steps()
    next(gen)
    next(gen)
    error_of(ValueError, next, gen)
    assert tg.is_grad_enabled()
    gen = steps()
    next(gen)
    error_of(KeyError, gen.throw, KeyError("k"))
    assert tg.is_grad_enabled()


# ------------------------------------------------------------ PyTorch's backward/grad keywords


def test_backward_takes_pytorchs_gradient_keyword() -> None:
    x = tg.tensor(M).require_grad()
    (x * x).backward(gradient=tg.full(M.shape, 2.0))
    assert_close(x.grad.numpy(), 4 * M)
    err = error_of(TypeError, (x * 1.0).backward, tg.ones(M.shape), gradient=tg.ones(M.shape))
    assert "gradient" in str(err) and "once" in str(err)


def test_backward_inputs_fills_only_their_grad(base: tg.GraphStats) -> None:
    """``backward(inputs=...)``, PyTorch's: ``.grad`` of the given tensors only (a non-leaf
    among them gets its ``.grad`` too); the other leaves keep theirs."""
    a, b = tg.tensor(M).require_grad(), tg.tensor(M * 2).require_grad()
    h = a * b
    (h.sin()).sum().backward(inputs=[a, h], retain_graph=True)
    ta, tb = torch.tensor(M, requires_grad=True), torch.tensor(M * 2, requires_grad=True)
    th = ta * tb
    th.sin().sum().backward(inputs=[ta, th])
    assert b.grad is None and tb.grad is None
    assert_close(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
    assert_close(h.grad.numpy(), th.grad.numpy(), rtol=1e-6)
    (h.sin()).sum().backward(inputs=b)  # a single tensor; accumulates from here on
    assert_close(b.grad.numpy(), np.cos(M * M * 2) * M, rtol=1e-5)
    assert_close(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)  # unchanged
    del a, b, h
    _nothing_left(base)


def test_backward_inputs_errors_change_nothing() -> None:
    x = tg.tensor(M).require_grad()
    y = (x * x).sum()
    err = error_of(TypeError, y.backward, inputs=[tg.ones(3)])
    assert "inputs" in str(err) and "require_grad" in str(err)
    err = error_of(ValueError, y.backward, inputs=[])
    assert "inputs" in str(err)
    y.backward(inputs=[x])  # nothing was consumed by the rejected calls
    assert_close(x.grad.numpy(), 2 * M)


def test_backward_inputs_below_the_graph_leaves_the_rest_usable() -> None:
    """As for ``tg.grad``: a backward whose inputs are non-leaves consumes only what it ran."""
    x = tg.tensor(M).require_grad()
    h = x.exp()
    (h * h).sum().backward(inputs=[h])
    h.sum().backward()
    assert_close(x.grad.numpy(), np.exp(M), rtol=1e-6)
    assert_close(h.grad.numpy(), 2 * np.exp(M), rtol=1e-5)


def test_grad_allow_unused_as_pytorch() -> None:
    x, unused = tg.tensor(M).require_grad(), tg.tensor(M).require_grad()
    y = (x * 3.0).sum()
    gx, gu = tg.grad(y, [x, unused], retain_graph=True, allow_unused=True)
    assert gu is None and gx is not None
    assert_close(gx.numpy(), np.full(M.shape, 3.0, np.float32))
    gx, gu = tg.grad(y, [x, unused], retain_graph=True, allow_unused=True, materialize_grads=True)
    assert gu is not None and gu.tolist() == np.zeros(M.shape).tolist()
    gx, gu = tg.grad(y, [x, unused], retain_graph=True)  # tapegrad's default: zeros
    assert gu is not None and gu.tolist() == np.zeros(M.shape).tolist()
    err = error_of(RuntimeError, tg.grad, y, [x, unused], retain_graph=True, allow_unused=False)
    assert "input 1" in str(err) and "allow_unused=True" in str(err)
    err = error_of(ValueError, tg.grad, y, x, allow_unused=False, materialize_grads=True)
    assert "materialize_grads" in str(err)
    (g,) = tg.grad(y, x)  # the refused calls consumed nothing
    assert g.tolist() == np.full(M.shape, 3.0).tolist()


# -------------------------------------------------------------------------------- complex


def test_backward_of_a_complex_output_needs_an_explicit_seed() -> None:
    """PyTorch and ``jax.grad`` refuse to imply the seed of a complex output (1 is one choice
    of many); tapegrad used 1 silently. Nothing is consumed by the refusal."""
    z = tg.tensor(np.array([1 + 2j, 3 - 1j], np.complex64)).require_grad()
    y = (z * z).sum()
    err = error_of(RuntimeError, y.backward)
    assert isinstance(err, tg.NonScalarBackwardError)
    assert "complex" in str(err) and "grad=" in str(err)
    err = error_of(RuntimeError, tg.grad, y, z)
    assert "complex" in str(err) and "grad_outputs=" in str(err)
    y.backward(tg.tensor(np.complex64(1.0)))  # explicit: JAX's vjp with a seed of 1
    assert_close(z.grad.numpy(), 2 * np.array([1 + 2j, 3 - 1j], np.complex64))


def test_complex_gradient_of_a_real_loss_is_jaxs_convention() -> None:
    """Documented in docs/api.md: the conjugate of PyTorch's."""
    zs = np.array([1 + 2j, 3 - 1j], np.complex64)
    z = tg.tensor(zs).require_grad()
    (z.abs() ** 2).sum().backward()
    t = torch.tensor(zs, requires_grad=True)
    (t.abs() ** 2).sum().backward()
    assert_close(z.grad.numpy(), np.conj(t.grad.numpy()))


def test_pytorch_autograd_attributes_name_tapegrad_spelling() -> None:
    x = tg.ones((2, 3)).require_grad()
    err = error_of(AttributeError, lambda: x.register_hook(lambda g: g))
    assert "tg.grad" in str(err) and "retain_grad" in str(err)
    err = error_of(AttributeError, lambda: x.grad_fn)
    assert "is_leaf" in str(err)
    assert not hasattr(x, "grad_fn")
