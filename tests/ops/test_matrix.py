"""ops/matrix.py against PyTorch (values and gradients, batched, float32 against float64
references), singular and indefinite inputs, second derivatives, ``tg.jit``, and errors
(gradients against jax.grad over random matrices are in test_grads.py, from the spec rows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
M = RNG.normal(size=(2, 4, 4))
A = (M + 4 * np.eye(4)).astype(np.float32)  # nonsingular, positive determinant
SPD = (M @ M.transpose(0, 2, 1) + np.eye(4)).astype(np.float32)
B = RNG.normal(size=(2, 4, 3)).astype(np.float32)
V = RNG.normal(size=(2, 4)).astype(np.float32)


def _compare(ours: Callable[..., Any], theirs: Callable[..., Any], *xs: np.ndarray) -> None:
    """Values and the gradients of every input of ``sum(out * w)``; PyTorch in float64."""
    ts = [tg.tensor(x, requires_grad=True) for x in xs]
    y = ours(*ts)
    w = np.linspace(0.5, 1.5, y.size).reshape(y.shape).astype(np.float32)
    (y * w).sum().backward()
    us = [torch.tensor(x.astype(np.float64), requires_grad=True) for x in xs]
    z = theirs(*us)
    (z * torch.tensor(w.astype(np.float64))).sum().backward()
    np.testing.assert_allclose(np.asarray(y.data), z.detach().numpy(), rtol=2e-5, atol=2e-5)
    for t, u in zip(ts, us, strict=True):
        np.testing.assert_allclose(np.asarray(t.grad.data), u.grad.numpy(), rtol=2e-4, atol=2e-5)


CASES: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...]]] = [
    ("det", tg.det, torch.linalg.det, (A,)),
    ("det-one", tg.det, torch.linalg.det, (A[0],)),
    ("slogdet", lambda a: tg.slogdet(a).logabsdet, lambda a: torch.linalg.slogdet(a)[1], (A,)),
    ("logdet", tg.logdet, torch.logdet, (SPD,)),
    ("inv", tg.inv, torch.linalg.inv, (A,)),
    ("solve-matrix", tg.solve, torch.linalg.solve, (A, B)),
    ("solve-vectors", tg.solve, torch.linalg.solve, (A, V)),
    ("solve-vector", tg.solve, torch.linalg.solve, (A[0], V[0])),
    ("solve-broadcast", tg.solve, torch.linalg.solve, (A, B[0])),
    ("cholesky", tg.cholesky, torch.linalg.cholesky, (SPD,)),
    (
        "cholesky-upper",
        lambda a: tg.cholesky(a, upper=True),
        lambda a: torch.linalg.cholesky(a, upper=True),
        (SPD,),
    ),
    ("eigvalsh", tg.eigvalsh, torch.linalg.eigvalsh, (SPD,)),
    (
        "eigvalsh-U",
        lambda a: tg.eigvalsh(a, UPLO="U"),
        lambda a: torch.linalg.eigvalsh(a, UPLO="U"),
        (SPD,),
    ),
]


@pytest.mark.parametrize(("name", "ours", "theirs", "xs"), CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(
    name: str, ours: Callable[..., Any], theirs: Callable[..., Any], xs: tuple[np.ndarray, ...]
) -> None:
    _compare(ours, theirs, *xs)


def test_slogdet_sign_and_negative_determinants() -> None:
    """The sign is -1, 0 or 1 and requires no grad; logdet of a negative determinant is NaN
    and of a singular matrix -inf, as PyTorch's."""
    flip = A.copy()
    flip[:, [0, 1]] = flip[:, [1, 0]]  # swapped rows: the determinant changes sign
    singular = np.ones((3, 3), np.float32)
    a = tg.tensor(flip, requires_grad=True)
    sign, logabsdet = tg.slogdet(a)
    want = torch.linalg.slogdet(torch.tensor(flip))
    assert not sign.requires_grad and logabsdet.requires_grad
    np.testing.assert_array_equal(np.asarray(sign.data), want.sign.numpy())
    np.testing.assert_allclose(np.asarray(logabsdet.data), want.logabsdet.numpy(), rtol=1e-5)
    assert np.isnan(np.asarray(tg.logdet(tg.tensor(flip)).data)).all()
    assert np.isnan(torch.logdet(torch.tensor(flip)).numpy()).all()
    assert float(tg.logdet(tg.tensor(singular))) == float("-inf")
    assert float(tg.slogdet(tg.tensor(singular)).sign) == 0.0
    del a, sign, logabsdet


def test_singular_and_indefinite_inputs_give_values_a_test_can_see() -> None:
    """Documented: no exception (that would read the device every call), inf or NaN."""
    singular = tg.tensor(np.ones((3, 3), np.float32))
    assert not bool(tg.isfinite(tg.inv(singular)).all())
    assert not bool(tg.isfinite(tg.solve(singular, tg.ones(3))).all())
    indefinite = tg.tensor(np.diag([1.0, -1.0, 2.0]).astype(np.float32))
    assert bool(tg.isnan(tg.cholesky(indefinite)).any())
    assert float(tg.det(singular)) == 0.0


def test_second_derivatives_match_torch() -> None:
    """``create_graph=True``: the Hessian-vector product of log det and of a solve."""
    for ours, theirs, x in (
        (tg.logdet, torch.logdet, SPD[0]),
        (
            lambda a: tg.solve(a, tg.ones(4)).sum(),
            lambda a: torch.linalg.solve(a, torch.ones(4, dtype=a.dtype)).sum(),
            A[0],
        ),
        (lambda a: tg.det(a), torch.linalg.det, A[0]),
    ):
        a = tg.tensor(x, requires_grad=True)
        (g,) = tg.grad(ours(a), [a], create_graph=True)
        (h,) = tg.grad((g * g).sum(), [a])
        t = torch.tensor(x.astype(np.float64), requires_grad=True)
        (gt,) = torch.autograd.grad(theirs(t), [t], create_graph=True)
        (ht,) = torch.autograd.grad((gt * gt).sum(), [t])
        np.testing.assert_allclose(np.asarray(h.data), ht.numpy(), rtol=1e-3, atol=1e-4)
        del a, g, h


def test_under_jit_a_least_squares_step() -> None:
    """A compiled step through solve and slogdet (a Gaussian log likelihood) equals eager."""

    def nll(low: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        cov = low @ low.T + tg.tensor(np.eye(4, dtype=np.float32))
        return 0.5 * (y * tg.solve(cov, y)).sum() + 0.5 * tg.slogdet(cov).logabsdet

    y = tg.tensor(V[0])
    results = []
    for compiled in (False, True):
        lower = tg.tensor(np.tril(M[0]).astype(np.float32), requires_grad=True)

        def step(lower: tg.Tensor = lower) -> tg.Tensor:
            loss = nll(lower, y)
            loss.backward()
            return loss

        loss = tg.jit(step)() if compiled else step()
        results.append((float(loss), np.asarray(lower.grad.data)))
        del lower, loss
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: tg.det(tg.ones((3, 4))), tg.ShapeError, r"square matrix.*\(3, 4\)"),
        (lambda: tg.inv(tg.ones(3)), tg.ShapeError, "square matrix"),
        (lambda: tg.solve(tg.ones((3, 3)), tg.ones(4)), tg.ShapeError, "do not fit"),
        (lambda: tg.solve(tg.ones((2, 3, 3)), tg.ones((4, 3, 1))), tg.ShapeError, "broadcast"),
        (lambda: tg.det(tg.ones((3, 3), dtype=tg.int32)), TypeError, "astype"),
        (lambda: tg.eigvalsh(tg.ones((3, 3)), UPLO="X"), ValueError, "UPLO"),
    ],
)
def test_bad_input_raises_clearly(call: Callable[[], Any], error: type, match: str) -> None:
    before = tg.graph_stats()
    with pytest.raises(error, match=match):
        call()
    assert tg.graph_stats() == before


def test_pytorch_spellings_say_where() -> None:
    with pytest.raises(AttributeError, match=r"tg\.inv"):
        tg.linalg  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError, match=r"tg\.inv\(x\)"):
        tg.ones((2, 2)).inverse()
