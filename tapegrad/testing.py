"""Gradient checkers that compare tapegrad's reverse pass with JAX's own derivatives.

``check_vjp`` checks one op: its oracle is ``jax.vjp`` of the op's *forward* (JAX's
derivative of our jnp code, independent of the hand-written VJP rule). ``check_program``
checks a whole program against a jnp twin under ``jax.grad``. Both draw a random cotangent
(JAX's random-projection idea), compare the output and every input gradient elementwise
(``|got - want| <= atol + rtol * |want|``; NaN matches NaN, infinities must match), and assert
that the tape is back where it started after ``tg.graph_cleanup()``, so they also catch leaks.

Usage::

    from tapegrad.testing import check_program, check_vjp

    check_vjp(tg.registry()["sum"], np.ones((2, 3), np.float32), axis=-1, keepdims=True)
    check_program(lambda x: (x * x).sum(), lambda x: (x * x).sum(), np.ones(3, np.float32))

``gradcheck`` and ``gradgradcheck`` check the first and second derivatives of a program on
tensors against JAX (differentiating the program's own forward, no twin needed) and against
central finite differences; the second derivative is taken with ``create_graph=True``::

    gradgradcheck(lambda x, w: (x @ w).tanh().sum(), np.ones((2, 3), np.float32), w0)

Inputs whose dtype is not floating (integer labels, boolean conditions) are passed as
tensors that do not require grad and are never differentiated. The checkers call
``tg.graph_cleanup()``, which also removes hanging nodes that were on the tape before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from tapegrad._compare import (
    check_tape,
    compare_all,
    cotangent,
    default_tolerances,
    is_float,
    surviving_nodes,
    wrt_indices,
)
from tapegrad._gradcheck import gradcheck, gradgradcheck
from tapegrad._tensor import Tensor
from tapegrad.backward import grad
from tapegrad.creation import tensor
from tapegrad.grad_mode import enable_grad
from tapegrad.op import Op

__all__ = [
    "check_vjp",
    "check_program",
    "gradcheck",
    "gradgradcheck",
    "default_tolerances",
]


def check_vjp(
    op: Op,
    *primals: Any,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    wrt: Sequence[int] | None = None,
    **params: Any,
) -> None:
    """Check ``op``'s output and VJP against ``jax.vjp`` of its own forward.

    The oracle is ``jax.vjp(lambda *xs: op.forward(*xs, **params)[0], *primals)`` over the
    floating inputs, pulled back along a random cotangent ``v``. tapegrad runs ``op`` on tensors
    (those in ``wrt`` require grad) and ``tg.grad(out, inputs, grad_outputs=v)``. A
    non-differentiable op (or one whose output is not floating, such as a cast to int) must
    give an output that does not require grad; only its values are checked.

    Args:
        op: a built-in op (``tg.registry()[name]``) or any ``tapegrad.op.Op``.
        primals: the op's tensor inputs as arrays (NumPy, JAX or Python scalars), in order.
        rtol: relative tolerance (default: ``default_tolerances(*primals)[0]``).
        atol: absolute tolerance (default: ``default_tolerances(*primals)[1]``).
        seed: seed of the random cotangent.
        wrt: indices of the inputs that require grad (default: every floating input); the
            other floating inputs are passed as constants, which checks that the VJP computes
            only what is needed.
        params: the op's static keyword parameters (``axis=...``).

    Raises:
        AssertionError: an output or gradient differs (the message names the op, the input
            index, its shape and dtype, and the largest absolute and relative errors), a
            gradient has the wrong shape or dtype, a non-differentiable op recorded a node, or
            the tape holds more nodes after ``graph_cleanup()`` than before (a leak).
        ValueError: ``wrt`` names an input that is not floating.
    """
    arrays = tuple(jnp.asarray(p) for p in primals)
    floats = tuple(i for i, a in enumerate(arrays) if is_float(a))
    wrt_idx = wrt_indices(wrt, floats, f"check_vjp({op.name})")
    label = f"check_vjp({op.name}{_fmt_params(params)})"

    float_args = tuple(arrays[i] for i in floats)
    others = tuple(a for i, a in enumerate(arrays) if i not in floats)
    oracle = _oracle(op, params, floats, len(arrays))
    want_type = jax.eval_shape(lambda *xs: oracle.forward(xs, others), *float_args)
    v: jax.Array | None = None
    want_grads: dict[int, jax.Array] = {}
    if op.differentiable and floats and is_float(want_type):
        v = cotangent(want_type, seed)
        want, grads = oracle.vjp(float_args, others, v)
        want_grads = dict(zip(floats, grads, strict=True))
    else:
        want = oracle.forward(float_args, others)

    def run(*ts: Tensor) -> Tensor:
        return op(*ts, **params)

    got, got_grads = _run_tapegrad(run, arrays, wrt_idx, v, label)
    wanted = {i: want_grads[i] for i in wrt_idx} if v is not None else {}
    compare_all(label, got, want, got_grads, wanted, arrays, rtol, atol)


def check_program(
    tg_fn: Callable[..., Tensor],
    jnp_fn: Callable[..., jax.Array],
    *primals: Any,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
    wrt: Sequence[int] | None = None,
    jit: bool = True,
) -> None:
    """Check a tapegrad program against its jnp twin: output and gradients.

    The oracle is ``jax.grad(lambda *xs: jnp.vdot(jnp_fn(*xs), v), argnums=...)`` over the
    floating inputs, with a random cotangent ``v`` in the output's shape (``jnp_fn`` must be
    traceable; non-floating inputs are closed over as constants, so a boolean mask among them
    may index). tapegrad runs
    ``tg_fn`` on tensors (those in ``wrt`` require grad) and
    ``tg.grad(out, inputs, grad_outputs=v)``.

    Args:
        tg_fn: the program on tapegrad tensors; returns a tensor that requires grad.
        jnp_fn: the same program on ``jax.Array``s.
        primals: the inputs as arrays (NumPy, JAX or Python scalars), in order.
        rtol: relative tolerance (default: ``default_tolerances(*primals)[0]``).
        atol: absolute tolerance (default: ``default_tolerances(*primals)[1]``).
        seed: seed of the random cotangent.
        wrt: indices of the inputs that require grad (default: every floating input).
        jit: compile the oracle with ``jax.jit`` (one compile per call; eager ``jax.grad``
            compiles each primitive per shape instead, which pays off only when many
            programs share primitives and shapes).

    Raises:
        AssertionError: an output or gradient differs (the message names the input index,
            its shape and dtype, and the largest absolute and relative errors), the output
            does not require grad, or the tape holds more nodes after ``graph_cleanup()``
            than before (a leak: the program keeps tensors alive).
        ValueError: no input is floating, ``wrt`` names a non-floating input, or the jnp
            program's output is not floating.
    """
    name = getattr(tg_fn, "__name__", "program")
    label = f"check_program({name})"
    arrays = tuple(jnp.asarray(p) for p in primals)
    floats = tuple(i for i, a in enumerate(arrays) if is_float(a))
    if not floats:
        raise ValueError(f"{label}: no floating input to differentiate.")
    wrt_idx = wrt_indices(wrt, floats, label)

    def program(*xs: jax.Array) -> jax.Array:
        return jnp_fn(*_merge(arrays, floats, xs))

    float_args = tuple(arrays[i] for i in floats)
    shape = jax.eval_shape(program, *float_args)
    if not is_float(shape):
        raise ValueError(f"{label}: the jnp program returns {shape.dtype}; it must be floating.")
    v = cotangent(shape, seed)

    def projected(v: jax.Array, *xs: jax.Array) -> tuple[jax.Array, jax.Array]:
        y = program(*xs)
        return jnp.vdot(y, v), y

    oracle = jax.grad(projected, argnums=tuple(range(1, len(floats) + 1)), has_aux=True)
    grads, want = (jax.jit(oracle) if jit else oracle)(v, *float_args)
    want_grads = dict(zip(floats, grads, strict=True))
    got, got_grads = _run_tapegrad(tg_fn, arrays, wrt_idx, v, label)
    wanted = {i: want_grads[i] for i in wrt_idx}
    compare_all(label, got, want, got_grads, wanted, arrays, rtol, atol)


# ----------------------------------------------------------------------------- helpers


class _Oracle:
    """JAX's derivative of an op's forward: ``forward(floats, others)`` and
    ``vjp(floats, others, v) -> (y, grads)``, jitted when the parameters are hashable (one
    compile per shape instead of one per primitive), else eager."""

    __slots__ = ("forward", "vjp")

    def __init__(
        self, op: Op, params: dict[str, Any], floats: tuple[int, ...], n: int, jit: bool
    ) -> None:
        def forward(xs: tuple[jax.Array, ...], others: tuple[jax.Array, ...]) -> Any:
            it = iter(others)
            args = [xs[floats.index(i)] if i in floats else next(it) for i in range(n)]
            return op.forward(*args, **params)[0]

        def vjp(
            xs: tuple[jax.Array, ...], others: tuple[jax.Array, ...], v: jax.Array
        ) -> tuple[jax.Array, tuple[jax.Array, ...]]:
            y, pullback = jax.vjp(lambda *a: forward(a, others), *xs)
            return y, tuple(pullback(v))

        self.forward = forward
        self.vjp = jax.jit(vjp) if jit else vjp


@functools.lru_cache(maxsize=512)
def _cached_oracle(
    op: Op, params: tuple[tuple[str, Any], ...], floats: tuple[int, ...], n: int
) -> _Oracle:
    return _Oracle(op, dict(params), floats, n, jit=True)


def _oracle(op: Op, params: dict[str, Any], floats: tuple[int, ...], n: int) -> _Oracle:
    key = tuple(sorted(params.items()))
    try:
        hash(key)
    except TypeError:  # e.g. an index holding arrays: differentiate eagerly
        return _Oracle(op, params, floats, n, jit=False)
    return _cached_oracle(op, key, floats, n)


def _merge(arrays: tuple[jax.Array, ...], floats: tuple[int, ...], xs: Sequence[Any]) -> list[Any]:
    """``arrays`` with the floating ones replaced by ``xs`` (what JAX differentiates)."""
    full: list[Any] = list(arrays)
    for i, x in zip(floats, xs, strict=True):
        full[i] = x
    return full


def _fmt_params(params: dict[str, Any]) -> str:
    if not params:
        return ""
    return ", " + ", ".join(f"{k}={_short(v)}" for k, v in params.items())


def _short(value: Any) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _run_tapegrad(
    fn: Callable[..., Tensor],
    arrays: tuple[jax.Array, ...],
    wrt: tuple[int, ...],
    v: jax.Array | None,
    label: str,
) -> tuple[jax.Array, dict[int, jax.Array]]:
    """Run ``fn`` on tensors and pull ``v`` back; check the tape afterwards.

    Returns the output array and the gradients by input index; every tensor is dropped before
    the tape check, so nothing this function made may stay on the tape.
    """
    expected_nodes = surviving_nodes()
    with enable_grad():
        inputs = [tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
        out = fn(*inputs)
        if not isinstance(out, Tensor):
            raise AssertionError(f"{label}: returned {type(out).__name__}, not a Tensor.")
        recorded = out.requires_grad
        got = out.data
        got_grads: dict[int, jax.Array] = {}
        if recorded and v is not None:
            results = grad(out, [inputs[i] for i in wrt], grad_outputs=v)
            got_grads = {i: g.data for i, g in zip(wrt, results, strict=True)}
            del results
    del inputs, out
    check_tape(expected_nodes, label)
    if v is not None and wrt and not recorded:
        raise AssertionError(
            f"{label}: the output does not require grad although inputs {list(wrt)} do; the "
            "op was not recorded."
        )
    if recorded and (v is None or not wrt):
        raise AssertionError(
            f"{label}: the output requires grad, but "
            + (
                "the op is not differentiable (or its output is not floating); such an op "
                if v is None
                else "no input requires grad; the op "
            )
            + "must never be recorded."
        )
    return got, got_grads
