"""Linear algebra: matmul with NumPy's rules (1-D operands, batch broadcasting), the fused
affine map ``linear``, norm (and from it normalize and cosine_similarity), einsum."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import numpy_keywords
from tapegrad._dtypes import summed_in
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop, operand_shape

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["matmul", "linear", "norm", "normalize", "cosine_similarity", "einsum"]


def _matmul_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    a, b = (tuple(np.shape(x)) for x in arrays)
    if not a or not b:
        raise ShapeError(f"{name}: operands must be at least 1-D, got shapes {a} and {b}.")
    k_a = a[-1]
    k_b = b[0] if len(b) == 1 else b[-2]
    if k_a != k_b:
        raise ShapeError(
            f"{name}: shapes {a} and {b} do not align: the last axis of the first ({k_a}) "
            f"must equal the {'only' if len(b) == 1 else 'second-to-last'} axis of the second "
            f"({k_b})."
        )
    try:
        np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        raise ShapeError(
            f"{name}: batch dimensions {a[:-2]} and {b[:-2]} cannot be broadcast together."
        ) from None


_matmul = kernel(jnp.matmul)


@defop(check=_matmul_check)
def matmul(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Matrix product a @ b with NumPy's rules: (..., n, k) @ (..., k, m) -> (..., n, m);
    a 1-D operand gains (and then loses) a unit axis."""
    if a.ndim == 0 or b.ndim == 0:
        _matmul_check("matmul", [a, b], {})
    return _matmul(a, b), (a, b)


@matmul.defvjp
@partial(kernel, static_argnames=("needs",))
def _matmul_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, ...]:
    """ga = g @ b^T, gb = a^T @ g (on the promoted 2-D+ forms; the engine sums batch axes)."""
    a, b = res
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    if a.ndim == 1:
        g = jnp.expand_dims(g, -2 if b.ndim > 1 else 0)
    if b.ndim == 1:
        g = jnp.expand_dims(g, -1)
    ga = gb = None
    if needs[0]:
        ga = jnp.matmul(g, jnp.swapaxes(b2, -1, -2))
        if a.ndim == 1:
            ga = ga[..., 0, :]
    if needs[1]:
        gb = jnp.matmul(jnp.swapaxes(a2, -1, -2), g)
        if b.ndim == 1:
            gb = gb[..., 0]
    return (ga, gb)


@kernel
def _linear_fn(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.matmul(x, w.T) + b


@defop(name="linear")
def _linear(
    x: jax.Array, w: jax.Array, b: jax.Array
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """``x @ w.T + b`` in one compiled call: x (..., in), w (out, in), b (out,) or 0."""
    return _linear_fn(x, w, b), (x, w)


@_linear.defvjp
@partial(kernel, static_argnames=("needs",))
def _linear_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, ...]:
    """gx = g @ w, gw = g^T x and gb = sum of g over the leading axes (x and g flattened to
    2-D first): the three cotangents of a linear layer in one compiled call."""
    x, w = res
    rows = math.prod(x.shape[:-1])  # not -1: a layer of 0 features has 0-size rows
    g2 = g.reshape(rows, w.shape[0])
    gx = jnp.matmul(g, w) if needs[0] else None
    gw = jnp.matmul(g2.T, x.reshape(rows, w.shape[1])) if needs[1] else None
    gb = jnp.sum(g2, axis=0) if needs[2] else None
    return (gx, gw, gb)


def linear(x: Any, weight: Any, bias: Any = None) -> Tensor:
    """The affine map of a linear layer, ``x @ weight.T + bias`` (PyTorch's ``F.linear``), as
    one op: one compiled forward and one compiled VJP for all three inputs, instead of a
    transpose, a matmul and an add with their three VJPs and the bias's reduction.

    Args:
        x: input of shape (..., in_features), or (in_features,).
        weight: (out_features, in_features), PyTorch's layout.
        bias: optional (out_features,).

    Returns:
        (..., out_features), in the promoted dtype.

    The VJP (hand-written, compiled per shape and dtype): gx = g @ weight, gweight = g^T x and
    gbias = g summed over the leading axes, with x and g flattened to 2-D.

    Raises:
        ShapeError: ``weight`` is not 2-D, ``x``'s last axis is not ``in_features``, or
            ``bias`` is not (out_features,).
        OperandTypeError: an operand that is not a tensor or an array (a list: convert it
            with ``tg.tensor``).
    """
    w_shape = operand_shape(weight, "linear")
    x_shape = operand_shape(x, "linear")
    if len(w_shape) != 2:
        raise ShapeError(
            f"linear: weight of shape {w_shape} must be 2-D (out_features, in_features)."
        )
    if not x_shape or x_shape[-1] != w_shape[1]:
        raise ShapeError(
            f"linear: input of shape {x_shape} must end in in_features={w_shape[1]} to match "
            f"the weight {w_shape}."
        )
    if bias is None:
        return _linear(x, weight, 0.0)
    if tuple(bias.shape) != (w_shape[0],):
        raise ShapeError(
            f"linear: bias of shape {tuple(bias.shape)} must be ({w_shape[0]},), one per output "
            "feature."
        )
    return _linear(x, weight, bias)


Ord = int | float | str | None


@partial(kernel, static_argnames=("ord", "axis", "keepdims"))
def _jnorm(x: jax.Array, ord: Ord, axis: Any, keepdims: bool) -> jax.Array:
    """The norm, of a float16 or bfloat16 x computed in float32 (``summed_in``: their sums of
    squares overflow at 65,504; PyTorch accumulates in float32 too) and rounded back."""
    xs = x.astype(summed_in(x.dtype))
    y: jax.Array = jnp.linalg.norm(xs, ord=ord, axis=axis, keepdims=keepdims)
    return y.astype(jnp.real(x).dtype)


def _norm_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    raise ShapeError(
        f"norm: ord={params.get('ord')!r} with axis={params.get('axis')!r} does not fit a tensor "
        f"of shape {tuple(np.shape(arrays[0]))}; vector norms take one axis (or a 1-D tensor), "
        "matrix norms ('fro', 'nuc', 1, 2, inf) two axes (or a 2-D tensor)."
    )


@defop(check=_norm_check)
def norm(
    x: jax.Array,
    *,
    ord: Ord = None,
    axis: int | tuple[int, ...] | None = None,
    keepdims: bool = False,
) -> tuple[jax.Array, tuple[jax.Array]]:
    """``jnp.linalg.norm(x, ord, axis, keepdims)``: with the defaults, the 2-norm of all
    elements (the Frobenius norm of a matrix). The gradient of a 2-norm or Frobenius norm
    that is 0 is 0, as in PyTorch (JAX's is NaN)."""
    return _jnorm(x, ord, axis, keepdims), (x,)


def _euclidean(ord: Ord, axis: Any, ndim: int) -> bool:
    """Whether ``norm(ord, axis)`` is the square root of a sum of squares: a vector 2-norm
    or the Frobenius norm (not a matrix 2-norm, the largest singular value)."""
    vector = isinstance(axis, int) or (axis is None and ndim == 1) or len(axis or ()) == 1
    return ord is None or ord == "fro" or (ord == 2 and vector)


def _safe_euclidean(z: jax.Array, axis: Any, keepdims: bool) -> jax.Array:
    """``sqrt(sum(|z|**2))`` over ``axis`` (real for a complex ``z``, as ``jnp.linalg.norm``)
    whose derivative at a zero vector is 0, not NaN (PyTorch's subgradient; the double
    ``where`` keeps 0/0 out of the derivative)."""
    squares = jnp.sum(jnp.real(z * jnp.conj(z)), axis=axis, keepdims=keepdims)
    zero = squares == 0
    return jnp.where(zero, 0.0, jnp.sqrt(jnp.where(zero, 1.0, squares)))


@partial(kernel, static_argnames=("ord", "axis", "keepdims"))
def _jnorm_vjp(x: jax.Array, g: jax.Array, ord: Ord, axis: Any, keepdims: bool) -> jax.Array:
    if _euclidean(ord, axis, x.ndim):
        fn = partial(_safe_euclidean, axis=axis, keepdims=keepdims)
    else:
        fn = partial(jnp.linalg.norm, ord=ord, axis=axis, keepdims=keepdims)
    wide = summed_in(x.dtype)  # float32 for float16 and bfloat16, as the forward
    _, pullback = jax.vjp(fn, x.astype(wide))
    return pullback(g.astype(summed_in(g.dtype)))[0].astype(x.dtype)  # type: ignore[no-any-return]


@norm.defvjp
def _norm_vjp(
    res: tuple[jax.Array],
    g: jax.Array,
    *,
    ord: Ord = None,
    axis: int | tuple[int, ...] | None = None,
    keepdims: bool = False,
) -> tuple[jax.Array]:
    """JAX's derivative (``jax.vjp``, compiled once per shape, dtype and parameters): x / norm
    for the 2-norm and the Frobenius norm, 0 where the norm is 0 (PyTorch's subgradient:
    JAX's derivative of ``jnp.linalg.norm`` is NaN there, which turned a gradient penalty
    with one zero gradient row into NaN everywhere); sign(x) for the 1-norm; JAX's
    derivative of ``jnp.linalg.norm`` for the other orders."""
    (x,) = res
    return (_jnorm_vjp(x, g, ord, axis, keepdims),)


@numpy_keywords
def normalize(x: Any, p: float = 2.0, axis: int = -1, eps: float = 1e-12) -> Tensor:
    """``x / max(norm_p(x), eps)`` along ``axis`` (PyTorch's ``F.normalize``, whose default
    axis is 1: tapegrad's is the last, the features of ``(N, D)`` rows either way); a zero
    vector stays zero, with a finite gradient.

    Raises:
        ShapeError: ``axis`` out of range.
        TypeError: ``axis`` is not an integer; PyTorch's ``dim=``.
    """
    size = norm(x, ord=p, axis=axis, keepdims=True)
    out: Tensor = x / size.clip(eps, None)
    return out


def cosine_similarity(a: Any, b: Any, axis: int = -1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``a`` and ``b`` along ``axis`` (broadcast against each
    other): the sum of ``normalize(a, eps=eps) * normalize(b, eps=eps)``, each norm clamped
    to at least ``eps`` (PyTorch's ``F.cosine_similarity``; its default axis is 1, tapegrad's
    the last). The values are PyTorch's; for a nonzero vector whose norm is below ``eps``
    the gradient is that of the clamped norm (constant), where PyTorch's differs.

    Raises:
        ShapeError: the shapes do not broadcast, or ``axis`` is out of range.
    """
    product: Tensor = normalize(a, axis=axis, eps=eps) * normalize(b, axis=axis, eps=eps)
    return product.sum(axis=axis)


@partial(kernel, static_argnames=("subscripts",))
def _einsum_fn(*xs: jax.Array, subscripts: str) -> jax.Array:
    return jnp.einsum(subscripts, *xs)


def _einsum_check(name: str, arrays: list[Any], params: dict[str, Any]) -> None:
    shapes = ", ".join(str(tuple(np.shape(a))) for a in arrays)
    raise ShapeError(
        f"einsum: subscripts {params['subscripts']!r} do not fit operands of shapes {shapes}; "
        "give one term per operand, one letter per axis, equal sizes for a repeated letter."
    )


@defop(name="einsum", check=_einsum_check)
def _einsum(*xs: jax.Array, subscripts: str) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """Einstein summation ``jnp.einsum(subscripts, *xs)``; its VJP is JAX's (derived)."""
    return _einsum_fn(*xs, subscripts=subscripts), xs


_einsum.defvjp(derived_vjp(_einsum_fn))


def einsum(subscripts: str, *operands: Any) -> Tensor:
    """Einstein summation over the operands, as ``jnp.einsum`` / ``torch.einsum``
    (e.g. ``tg.einsum("bij,bjk->bik", a, b)``).

    The VJP is JAX's derivative of ``jnp.einsum`` (one compiled function per subscripts,
    inputs needing a gradient, shapes and dtypes), keeping the operands as residuals.

    Raises:
        ShapeError: the subscripts do not fit the operands' shapes.
    """
    return _einsum(*operands, subscripts=subscripts)
