"""Functions of square matrices: ``det``, ``slogdet``, ``logdet``, ``inv``, ``solve``,
``cholesky`` and ``eigvalsh`` (PyTorch's ``torch.linalg`` names where NumPy's agree; all
batched over leading axes).

Each is one op whose forward is ``jnp.linalg``'s, compiled per shape and dtype, and whose
VJP JAX derives from it (``derived_vjp``: compiled once per shape, never traced per call),
so gradients are JAX's own; to second order and beyond too (``create_graph=True``).

What JAX gives for a matrix without the property an op needs, these give: no exception (that
would cost a device-to-host read per call), but values a test can see: ``inv``/``solve`` of a
singular matrix give inf or NaN, ``cholesky`` of a matrix that is not positive definite gives
NaN, and the gradient of ``det`` at a singular matrix is NaN (PyTorch raises for the first
two, and its ``det`` gradient at a singular matrix is finite). ``tg.isfinite(out).all()``
checks a result.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from tapegrad._tensor import Tensor
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import as_operand, defop, operand_shape

__all__ = ["det", "slogdet", "logdet", "inv", "solve", "cholesky", "eigvalsh"]


def _square(name: str, shape: tuple[int, ...], what: str = "input") -> int:
    """``n`` for a ``(..., n, n)`` shape.

    Raises:
        ShapeError: fewer than 2 axes, or the last two differ.
    """
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(
            f"{name}: the {what} must be a square matrix or a batch of them, shape (..., n, n); "
            f"got {shape}."
        )
    return shape[-1]


def _square_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    _square(name, tuple(arrays[0].shape))


def _float(name: str, a: jax.Array) -> None:
    """Raise ``TypeError`` for an integer or boolean matrix (JAX's message is about LU)."""
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        raise TypeError(
            f"{name}: the matrix has dtype {a.dtype}; linear algebra needs floats: convert it "
            "with x.astype(tg.float32)."
        )


@kernel
def _det_fn(a: jax.Array) -> Any:
    return jnp.linalg.det(a)


@defop(name="det", check=_square_check)
def _det(a: jax.Array) -> tuple[jax.Array, tuple[jax.Array]]:
    """The determinant of ``a`` (..., n, n)."""
    _float("det", a)
    return _det_fn(a), (a,)


_det.defvjp(derived_vjp(_det_fn))


def det(a: Any) -> Tensor:
    """Determinant of a square matrix or a batch of them (``torch.linalg.det``).

    Args:
        a: (..., n, n), float or complex.

    Returns:
        (...), ``a``'s dtype.

    The VJP is JAX's (``g * det(a) * inv(a)^T``, through an LU factorisation): NaN at a
    singular matrix, where PyTorch's is finite.

    Raises:
        ShapeError: ``a`` is not (..., n, n).
        TypeError: an integer or boolean matrix.
    """
    _square("det", operand_shape(a, "det"))
    return _det(a)


@kernel
def _logabsdet_fn(a: jax.Array) -> Any:
    return jnp.linalg.slogdet(a)[1]


@defop(name="slogdet", check=_square_check)
def _logabsdet(a: jax.Array) -> tuple[jax.Array, tuple[jax.Array]]:
    """``log |det(a)|`` of ``a`` (..., n, n), computed from an LU factorisation."""
    _float("slogdet", a)
    return _logabsdet_fn(a), (a,)


_logabsdet.defvjp(derived_vjp(_logabsdet_fn))


@kernel
def _sign_fn(a: jax.Array) -> Any:
    return jnp.linalg.slogdet(a)[0]


class SlogdetResult(NamedTuple):
    """``tg.slogdet``'s result, as PyTorch's: ``sign`` and ``logabsdet``."""

    sign: Tensor
    logabsdet: Tensor


def slogdet(a: Any) -> SlogdetResult:
    """Sign and log absolute value of the determinant (``torch.linalg.slogdet``): stable
    where ``det`` overflows or underflows.

    Args:
        a: (..., n, n), float or complex.

    Returns:
        ``(sign, logabsdet)``, each (...): ``sign`` is -1, 0 or 1 (not differentiable),
        ``logabsdet`` is ``log |det(a)|`` (-inf for a singular matrix), whose VJP is JAX's
        (``g * inv(a)^T``).

    Raises:
        ShapeError: ``a`` is not (..., n, n).
        TypeError: an integer or boolean matrix.
    """
    _square("slogdet", operand_shape(a, "slogdet"))
    logabsdet = _logabsdet(a)  # checks the dtype and converts ``a``
    array = a.data if isinstance(a, Tensor) else as_operand(a, "slogdet")
    return SlogdetResult(Tensor(_sign_fn(array)), logabsdet)


@kernel
def _logdet_fn(a: jax.Array) -> Any:
    sign, value = jnp.linalg.slogdet(a)
    return jnp.where(sign < 0, jnp.nan, value)


@defop(name="logdet", check=_square_check)
def _logdet(a: jax.Array) -> tuple[jax.Array, tuple[jax.Array]]:
    """``log det(a)`` of a real ``a`` (..., n, n): NaN for a negative determinant."""
    _float("logdet", a)
    return _logdet_fn(a), (a,)


_logdet.defvjp(derived_vjp(_logdet_fn))


def logdet(a: Any) -> Tensor:
    """Natural logarithm of the determinant (``torch.logdet``): NaN where the determinant is
    negative, -inf where it is 0, as PyTorch's.

    Args:
        a: (..., n, n), real.

    Returns:
        (...), ``a``'s dtype; its VJP is JAX's (``g * inv(a)^T`` for a positive
        determinant).

    Raises:
        ShapeError: ``a`` is not (..., n, n).
        TypeError: an integer or boolean matrix.
    """
    _square("logdet", operand_shape(a, "logdet"))
    return _logdet(a)


@kernel
def _inv_fn(a: jax.Array) -> Any:
    return jnp.linalg.inv(a)


@defop(name="inv", check=_square_check)
def _inv(a: jax.Array) -> tuple[jax.Array, tuple[jax.Array]]:
    """The inverse of ``a`` (..., n, n)."""
    _float("inv", a)
    return _inv_fn(a), (a,)


_inv.defvjp(derived_vjp(_inv_fn))


def inv(a: Any) -> Tensor:
    """Inverse of a square matrix or a batch of them (``torch.linalg.inv``; NumPy's
    ``linalg.inv``). To apply an inverse to a vector or matrix, ``tg.solve(a, b)`` is faster
    and more accurate than ``tg.inv(a) @ b``.

    Args:
        a: (..., n, n), float or complex.

    Returns:
        (..., n, n); inf or NaN entries for a singular ``a`` (PyTorch raises). Its VJP is
        JAX's (``-inv(a)^T g inv(a)^T``).

    Raises:
        ShapeError: ``a`` is not (..., n, n).
        TypeError: an integer or boolean matrix.
    """
    _square("inv", operand_shape(a, "inv"))
    return _inv(a)


@partial(kernel, static_argnames=("vector",))
def _solve_fn(a: jax.Array, b: jax.Array, *, vector: bool) -> Any:
    if vector:
        return jnp.linalg.solve(a, b[..., None])[..., 0]
    return jnp.linalg.solve(a, b)


@defop(name="solve")
def _solve(
    a: jax.Array, b: jax.Array, *, vector: bool
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """``x`` with ``a @ x == b``; ``vector``: ``b`` is (..., n), else (..., n, k)."""
    _float("solve", a)
    return _solve_fn(a, b, vector=vector), (a, b)


_solve.defvjp(derived_vjp(_solve_fn))


def solve(a: Any, b: Any) -> Tensor:
    """The solution ``x`` of ``a @ x = b`` (``torch.linalg.solve``), without forming the
    inverse.

    Args:
        a: (..., n, n), float or complex.
        b: a vector (n,) or a batch of them (..., n) with ``a``'s batch shape, or a matrix
            (..., n, k); PyTorch's rule decides: ``b`` is a batch of vectors when it is 1-D
            or has exactly ``a``'s shape without the last axis. Batch axes broadcast.

    Returns:
        ``x``, ``b``'s shape (batch axes broadcast); inf or NaN for a singular ``a`` (PyTorch
        raises). The VJP is JAX's (``gb = solve(a^T, g)``, ``ga = -gb x^T``).

    Raises:
        ShapeError: ``a`` is not (..., n, n), ``b`` does not have ``n`` rows, or the batch
            axes do not broadcast.
        TypeError: an integer or boolean matrix.
    """
    a_shape, b_shape = operand_shape(a, "solve"), operand_shape(b, "solve")
    n = _square("solve", a_shape, "matrix a")
    vector = len(b_shape) == 1 or b_shape == a_shape[:-1]
    rows = b_shape[-1] if vector and b_shape else (b_shape[-2] if len(b_shape) >= 2 else None)
    batch_a, batch_b = a_shape[:-2], (b_shape[:-1] if vector else b_shape[:-2])
    try:
        jnp.broadcast_shapes(batch_a, batch_b)
        fits = rows == n
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(
            f"solve: a of shape {a_shape} and b of shape {b_shape} do not fit: b must be a "
            f"vector of {n} (or a batch of them, shape {a_shape[:-1]}) or a matrix of {n} rows "
            f"(..., {n}, k), with batch axes that broadcast against {batch_a}."
        )
    return _solve(a, b, vector=vector)


@partial(kernel, static_argnames=("upper",))
def _cholesky_fn(a: jax.Array, *, upper: bool) -> Any:
    return jnp.linalg.cholesky(a, upper=upper)


@defop(name="cholesky", check=_square_check)
def _cholesky(a: jax.Array, *, upper: bool) -> tuple[jax.Array, tuple[jax.Array]]:
    """The Cholesky factor of a symmetric (Hermitian) positive definite ``a``."""
    _float("cholesky", a)
    return _cholesky_fn(a, upper=upper), (a,)


_cholesky.defvjp(derived_vjp(_cholesky_fn))


def cholesky(a: Any, *, upper: bool = False) -> Tensor:
    """Cholesky factor ``L`` with ``a = L @ L^H`` (``torch.linalg.cholesky``), or ``U`` with
    ``a = U^H @ U`` when ``upper``.

    Args:
        a: (..., n, n), symmetric (Hermitian) positive definite. JAX factors
            ``(a + a^H) / 2``: for a matrix that is not symmetric, that matrix's factor
            (PyTorch reads one triangle).
        upper: return the upper factor.

    Returns:
        (..., n, n), triangular; NaN entries where ``a`` is not positive definite (PyTorch
        raises). The VJP is JAX's (Murray 2016, "Differentiation of the Cholesky
        decomposition"), symmetric in ``a``.

    Raises:
        ShapeError: ``a`` is not (..., n, n).
        TypeError: an integer or boolean matrix.
    """
    _square("cholesky", operand_shape(a, "cholesky"))
    return _cholesky(a, upper=bool(upper))


@partial(kernel, static_argnames=("lower",))
def _eigvalsh_fn(a: jax.Array, *, lower: bool) -> Any:
    return jnp.linalg.eigvalsh(a, UPLO="L" if lower else "U")


@defop(name="eigvalsh", check=_square_check)
def _eigvalsh(a: jax.Array, *, lower: bool) -> tuple[jax.Array, tuple[jax.Array]]:
    """The eigenvalues of a symmetric (Hermitian) ``a``, ascending."""
    _float("eigvalsh", a)
    return _eigvalsh_fn(a, lower=lower), (a,)


_eigvalsh.defvjp(derived_vjp(_eigvalsh_fn))


def eigvalsh(a: Any, UPLO: str = "L") -> Tensor:  # noqa: N803 - NumPy's and PyTorch's name
    """Eigenvalues of a symmetric (Hermitian) matrix, ascending (``torch.linalg.eigvalsh``).

    Args:
        a: (..., n, n), symmetric (Hermitian). JAX takes the eigenvalues of
            ``(a + a^H) / 2``: for a matrix that is not symmetric, that matrix's (PyTorch reads
            the triangle ``UPLO`` names).
        UPLO: ``"L"`` (the default) or ``"U"``, PyTorch's and NumPy's argument.

    Returns:
        (..., n), real. The VJP is JAX's, ``V diag(g) V^H`` (``V`` the eigenvectors).

    Raises:
        ShapeError: ``a`` is not (..., n, n).
        TypeError: an integer or boolean matrix.
        ValueError: ``UPLO`` is neither ``"L"`` nor ``"U"``.
    """
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigvalsh: UPLO must be 'L' or 'U', got {UPLO!r}.")
    _square("eigvalsh", operand_shape(a, "eigvalsh"))
    return _eigvalsh(a, lower=UPLO == "L")
