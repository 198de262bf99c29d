"""``gradcheck`` and ``gradgradcheck``: first and second derivatives of a tapegrad program
against JAX and against central finite differences.

The JAX oracle differentiates the program's own forward: the program runs on tensors that do
not require grad, whose ops are jnp code JAX can trace, so the oracle is independent of every
hand-written VJP rule and of ``create_graph``'s recording. Finite differences check both
(directional derivatives along random directions, in the inputs' dtype: loose tolerances).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._compare import (
    check_tape,
    compare,
    cotangent,
    default_tolerances,
    is_float,
    surviving_nodes,
    wrt_indices,
)
from tapegrad._tensor import Tensor, wrap
from tapegrad.backward import grad
from tapegrad.creation import tensor
from tapegrad.grad_mode import enable_grad, no_grad

__all__ = ["gradcheck", "gradgradcheck"]

Program = Callable[..., Tensor]


class _Setup:
    """The inputs of a check: arrays, the indices differentiated, and the program as a jnp
    function of the differentiated arrays (the others are constants)."""

    def __init__(self, fn: Program, primals: Sequence[Any], wrt: Sequence[int] | None, label: str):
        self.fn = fn
        self.label = label
        for p in primals:
            if isinstance(p, (tuple, list)) and any(hasattr(e, "shape") for e in p):
                raise TypeError(
                    f"{label}: an input is a {type(p).__name__} of arrays or tensors; pass the "
                    "inputs as separate arguments, check(fn, a, b), not as one tuple "
                    "(PyTorch's form), or stack them into one array first."
                )
        self.arrays = tuple(jnp.asarray(p) for p in primals)
        floats = tuple(i for i, a in enumerate(self.arrays) if is_float(a))
        if not floats:
            raise ValueError(f"{label}: no floating input to differentiate.")
        self.wrt = wrt_indices(wrt, floats, label)
        self.xs = tuple(self.arrays[i] for i in self.wrt)

    def full(self, xs: Sequence[Any]) -> list[Any]:
        """The program's arguments with the differentiated ones replaced by ``xs``."""
        args: list[Any] = list(self.arrays)
        for i, x in zip(self.wrt, xs, strict=True):
            args[i] = x
        return args

    def forward(self, *xs: jax.Array) -> jax.Array:
        """The program on arrays (JAX can trace it: nothing is recorded)."""
        with no_grad():
            out = self.fn(*(wrap(a) for a in self.full(xs)))
        if not isinstance(out, Tensor):
            raise TypeError(f"{self.label}: the program returned {type(out).__name__}.")
        return out.data

    def leaves(self) -> list[Tensor]:
        """Fresh tensors for the program; the differentiated ones require grad."""
        return [tensor(a, requires_grad=i in self.wrt) for i, a in enumerate(self.arrays)]

    def directions(self, seed: int) -> list[jax.Array]:
        """One random direction per differentiated input."""
        return [cotangent(x, seed + 1 + k) for k, x in enumerate(self.xs)]

    def shifted(self, us: Sequence[jax.Array], t: float) -> list[jax.Array]:
        return [x + t * u for x, u in zip(self.xs, us, strict=True)]


def _dot(a: Sequence[Any], b: Sequence[Any]) -> float:
    return float(
        sum(
            np.vdot(np.asarray(x, np.float64), np.asarray(y, np.float64))
            for x, y in zip(a, b, strict=True)
        )
    )


def _fd_check(
    what: str, analytic: float, plus: float, minus: float, eps: float, tol: float
) -> None:
    numeric = (plus - minus) / (2 * eps)
    if not abs(analytic - numeric) <= tol * max(1.0, abs(numeric), abs(analytic)):
        raise AssertionError(
            f"{what}: the directional derivative is {analytic!r}, central finite differences "
            f"give {numeric!r} (eps={eps:g}, tolerance {tol:g} relative)."
        )


def _tolerances(
    rtol: float | None, atol: float | None, arrays: Sequence[Any]
) -> tuple[float, float]:
    d_rtol, d_atol = default_tolerances(*arrays)
    return (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)


def gradcheck(
    fn: Program,
    *primals: Any,
    wrt: Sequence[int] | None = None,
    eps: float | None = 1e-3,
    fd_tol: float = 1e-2,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
) -> bool:
    """Check the first derivatives of a tapegrad program against JAX and finite differences.

    ``tg.grad(fn(*xs), xs, grad_outputs=v)`` for a random cotangent ``v`` must equal
    ``jax.vjp`` of the program's forward (elementwise, ``rtol``/``atol``), and its projection
    on a random direction ``u`` must equal the central difference
    ``(<fn(x + eps u), v> - <fn(x - eps u), v>) / (2 eps)`` within ``fd_tol`` (relative).

    Args:
        fn: a program on tensors, returning a tensor (``lambda x, w: (x @ w).tanh()``).
        primals: its inputs as arrays; non-floating ones are constants.
        wrt: the indices of the inputs differentiated (default: every floating input).
        eps: the finite-difference step (``None``: no finite differences).
        fd_tol: the relative tolerance of the finite-difference comparison.
        rtol: relative tolerance against JAX (default: the dtype's, as ``check_vjp``).
        atol: absolute tolerance against JAX.
        seed: seed of the random cotangent and directions.

    Returns:
        ``True`` when every check passed (``torch.autograd.gradcheck``'s convention, so a
        test reads ``assert gradcheck(...)``); a failed check raises.

    Raises:
        AssertionError: a gradient differs (the message says which, and by how much), or the
            tape holds more nodes after ``tg.graph_cleanup()`` than before (a leak).
        ValueError: no floating input, or ``wrt`` names a non-floating one.
    """
    s = _Setup(fn, primals, wrt, f"gradcheck({getattr(fn, '__name__', 'program')})")
    y, pull = jax.vjp(s.forward, *s.xs)
    v = cotangent(y, seed)
    want = pull(v)
    expected = surviving_nodes()
    with enable_grad():
        ts = s.leaves()
        got = [g.data for g in grad(fn(*ts), [ts[i] for i in s.wrt], grad_outputs=v)]
    del ts
    check_tape(expected, s.label)
    rtol, atol = _tolerances(rtol, atol, s.arrays)
    for i, g, w in zip(s.wrt, got, want, strict=True):
        compare(f"{s.label}: the gradient of input {i}", g, w, rtol, atol)
    if eps is not None:
        us = s.directions(seed)
        plus = _dot([s.forward(*s.shifted(us, eps))], [v])
        minus = _dot([s.forward(*s.shifted(us, -eps))], [v])
        _fd_check(f"{s.label}: first derivative", _dot(got, us), plus, minus, eps, fd_tol)
    return True


def gradgradcheck(
    fn: Program,
    *primals: Any,
    wrt: Sequence[int] | None = None,
    eps: float | None = 1e-2,
    fd_tol: float = 2e-2,
    rtol: float | None = None,
    atol: float | None = None,
    seed: int = 0,
) -> bool:
    """Check the second derivatives of a tapegrad program against JAX and finite differences.

    With a random cotangent ``v`` of the output and ``w`` of each input,
    ``gs = tg.grad(fn(*xs), xs, v, create_graph=True)`` (the first derivative, recorded) and
    ``tg.grad(gs, xs, grad_outputs=w)`` (the second) must equal ``jax.vjp`` of
    ``x -> vjp(forward)(v)`` along ``w``, computed from the program's own forward; and the
    second derivative projected on a random direction ``u`` must equal the central
    difference of ``<tg.grad(fn(x), x, v), w>`` (tapegrad's first derivative) along ``u``.

    The arguments are :func:`gradcheck`'s; ``eps`` and ``fd_tol`` default larger (a finite
    difference of a first derivative is noisier), and ``seed`` also draws the ``w``.

    Returns:
        ``True`` when every check passed (as :func:`gradcheck`); a failed check raises.

    Raises:
        AssertionError: as :func:`gradcheck`, for the first and the second derivatives; also
            when a first derivative recorded with ``create_graph`` does not require grad.
        ValueError: as :func:`gradcheck`.
    """
    s = _Setup(fn, primals, wrt, f"gradgradcheck({getattr(fn, '__name__', 'program')})")
    y = jax.eval_shape(s.forward, *s.xs)
    v = cotangent(y, seed)
    ws = tuple(cotangent(x, seed + 100 + k) for k, x in enumerate(s.xs))

    def first(*xs: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(jax.vjp(s.forward, *xs)[1](v))

    @jax.jit
    def oracle(xs: tuple[jax.Array, ...]) -> tuple[Any, Any]:
        gs, pull = jax.vjp(first, *xs)
        return gs, pull(ws)

    want1, want2 = oracle(s.xs)
    expected = surviving_nodes()
    with enable_grad():
        ts = s.leaves()
        targets = [ts[i] for i in s.wrt]
        gs = grad(fn(*ts), targets, grad_outputs=v, create_graph=True)
        if not all(g.requires_grad for g in gs):
            raise AssertionError(
                f"{s.label}: a gradient made with create_graph=True does not require grad."
            )
        got1 = [g.data for g in gs]
        got2 = [g.data for g in grad(gs, targets, grad_outputs=list(ws))]
    del ts, targets, gs
    check_tape(expected, s.label)
    rtol, atol = _tolerances(rtol, atol, s.arrays)
    for i, g1, w1, g2, w2 in zip(s.wrt, got1, want1, got2, want2, strict=True):
        compare(f"{s.label}: the first derivative for input {i}", g1, w1, rtol, atol)
        compare(f"{s.label}: the second derivative for input {i}", g2, w2, rtol, atol)
    if eps is not None:
        us = s.directions(seed)

        def projected(xs: Sequence[jax.Array]) -> float:
            with enable_grad():
                ts = [tensor(a, requires_grad=i in s.wrt) for i, a in enumerate(s.full(xs))]
                gs = grad(fn(*ts), [ts[i] for i in s.wrt], grad_outputs=v)
                return _dot([g.data for g in gs], ws)

        plus, minus = projected(s.shifted(us, eps)), projected(s.shifted(us, -eps))
        _fd_check(f"{s.label}: second derivative", _dot(got2, us), plus, minus, eps, fd_tol)
        check_tape(expected, s.label)
    return True
