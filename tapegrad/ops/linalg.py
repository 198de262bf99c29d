"""Linear algebra: matmul with NumPy's rules (1-D operands, batch broadcasting), the fused
affine map ``linear``, outer, norm (and from it normalize and cosine_similarity), einsum, and
the diagonals of matrices: diag, diagonal, trace."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import integer, numpy_keywords, torch_keywords
from tapegrad._dtypes import summed_in
from tapegrad.derived import derived_vjp
from tapegrad.errors import ShapeError
from tapegrad.kernels import kernel
from tapegrad.op import defop, operand_shape

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = [
    "matmul",
    "linear",
    "outer",
    "norm",
    "normalize",
    "cosine_similarity",
    "einsum",
    "diag",
    "diagonal",
    "trace",
]


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


_outer = kernel(jnp.outer)


@defop
def outer(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """The outer product of two 1-D tensors: ``y[i, j] = a[i] * b[j]``, shape (m, n) for a
    (m,) and b (n,), in their promoted dtype (``torch.outer``; ``np.outer`` of 1-D arrays).

    Raises:
        ShapeError: an operand is not 1-D (NumPy flattens it, PyTorch refuses it: write
            ``x.reshape(-1)`` for NumPy's reading).
    """
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(
            f"outer: takes two 1-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}; "
            "flatten them first (x.reshape(-1)) for NumPy's outer of arrays of any shape."
        )
    return _outer(a, b), (a, b)


@outer.defvjp
@partial(kernel, static_argnames=("needs",))
def _outer_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, ...]:
    """y = a b^T, so ga = g @ b and gb = g^T @ a (written a @ g)."""
    a, b = res
    return (jnp.matmul(g, b) if needs[0] else None, jnp.matmul(a, g) if needs[1] else None)


@kernel
def _linear_fn(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.matmul(x, w.T) + b


@defop(name="linear")
def _linear(
    x: jax.Array, w: jax.Array, b: jax.Array
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """``x @ w.T + b`` in one compiled call: x (..., in), w (out, in), b (out,) or 0; or w
    (in,) and b 0-d, y (...) (``matmul``'s vector rule)."""
    return _linear_fn(x, w, b), (x, w)


@_linear.defvjp
@partial(kernel, static_argnames=("needs",))
def _linear_vjp(
    res: tuple[jax.Array, jax.Array], g: jax.Array, needs: tuple[bool, ...]
) -> tuple[jax.Array | None, ...]:
    """gx = g @ w, gw = g^T x and gb = sum of g over the leading axes (x and g flattened to
    2-D first): the three cotangents of a linear layer in one compiled call. A 1-D w is one
    row and g (...) one column; gw and gb are then read back as (in,) and ()."""
    x, w = res
    if w.ndim == 1:
        gx, gw, gb = _linear_vjp((x, w[None]), g[..., None], needs)
        return (gx, None if gw is None else gw[0], None if gb is None else gb[0])
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
        weight: (out_features, in_features), PyTorch's layout; or (in_features,), PyTorch's
            one-output form: the output has no feature axis.
        bias: optional (out_features,); with a 1-D weight, 0-d (PyTorch's documented shape;
            PyTorch itself refuses any bias with a 1-D weight and a 2-D input, which this
            takes).

    Returns:
        (..., out_features), or (...) for a 1-D weight, in the promoted dtype.

    The VJP (hand-written, compiled per shape and dtype): gx = g @ weight, gweight = g^T x and
    gbias = g summed over the leading axes, with x and g flattened to 2-D (a 1-D weight read
    as one row, g as one column).

    Raises:
        ShapeError: ``weight`` is not 1-D or 2-D, ``x`` is 0-d or its last axis is not
            ``in_features``, or ``bias`` is not (out_features,) (0-d for a 1-D weight).
        OperandTypeError: an operand that is not a tensor or an array (a list: convert it
            with ``tg.tensor``).
    """
    w_shape = operand_shape(weight, "linear")
    x_shape = operand_shape(x, "linear")
    if len(w_shape) not in (1, 2):
        raise ShapeError(
            f"linear: weight of shape {w_shape} must be 2-D (out_features, in_features), or "
            "1-D (in_features,) for one output without a feature axis."
        )
    if not x_shape or x_shape[-1] != w_shape[-1]:
        raise ShapeError(
            f"linear: input of shape {x_shape} must end in in_features={w_shape[-1]} to match "
            f"the weight {w_shape}."
        )
    if len(w_shape) == 1:
        b_shape = () if bias is None else operand_shape(bias, "linear")
        if b_shape != ():
            raise ShapeError(
                f"linear: with a 1-D weight {w_shape} (one output, no feature axis) the bias "
                f"must be 0-d, got shape {b_shape}; pass bias.reshape(()) for a (1,) bias."
            )
        return _linear(x, weight, 0.0 if bias is None else bias)
    if bias is None:
        return _linear(x, weight, 0.0)
    b_shape = operand_shape(bias, "linear")  # a Python number too: shape ()
    if b_shape != (w_shape[0],):
        raise ShapeError(
            f"linear: bias of shape {b_shape} must be ({w_shape[0]},), one per output feature."
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


@numpy_keywords
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


Shape = tuple[int, ...]


def _matrix_axes(name: str, shape: Shape, axis1: Any, axis2: Any) -> tuple[int, int]:
    """``axis1`` and ``axis2`` as two distinct axes in ``[0, ndim)`` of ``shape``.

    Raises:
        ShapeError: fewer than two dimensions, an axis out of range, or the same axis twice.
        TypeError: an axis is not an integer.
    """
    a1, a2 = integer(axis1, f"{name}: axis1"), integer(axis2, f"{name}: axis2")
    n = len(shape)
    if n < 2:
        raise ShapeError(
            f"{name}: needs a tensor of at least 2 dimensions, got shape {shape}"
            + ("; tg.diag(x, k) builds a matrix from a 1-D tensor." if n == 1 else ".")
        )
    if not (-n <= a1 < n and -n <= a2 < n) or a1 % n == a2 % n:
        raise ShapeError(
            f"{name}: axis1={a1} and axis2={a2} must be two different axes of a tensor of "
            f"shape {shape}, in [{-n}, {n})."
        )
    return a1 % n, a2 % n


@partial(kernel, static_argnames=("offset", "axis1", "axis2"))
def _jdiagonal(x: jax.Array, offset: int, axis1: int, axis2: int) -> jax.Array:
    y: jax.Array = jnp.diagonal(x, offset=offset, axis1=axis1, axis2=axis2)
    return y


@partial(kernel, static_argnums=(1, 2, 3, 4))
def _undiagonal(g: jax.Array, shape: Shape, offset: int, axis1: int, axis2: int) -> jax.Array:
    """The transpose of ``_jdiagonal``: zeros of ``shape`` with g's last axis written on the
    ``offset`` diagonal of the axes ``axis1`` (rows) and ``axis2`` (columns)."""
    rest = tuple(s for i, s in enumerate(shape) if i not in (axis1, axis2))
    i = jnp.arange(g.shape[-1])
    rows, cols = i + max(-offset, 0), i + max(offset, 0)
    gx = jnp.zeros((*rest, shape[axis1], shape[axis2]), g.dtype).at[..., rows, cols].set(g)
    return jnp.moveaxis(gx, (-2, -1), (axis1, axis2))


@defop(name="diagonal")
def _diagonal(
    x: jax.Array, *, offset: int = 0, axis1: int = 0, axis2: int = 1
) -> tuple[jax.Array, tuple[Shape]]:
    """The ``offset`` diagonal of the axes ``axis1`` and ``axis2`` (distinct, in ``[0,
    ndim)``), as the last axis of the result (NumPy's ``diagonal``)."""
    _matrix_axes("diagonal", x.shape, axis1, axis2)
    return _jdiagonal(x, offset, axis1, axis2), (tuple(x.shape),)


@_diagonal.defvjp
def _diagonal_vjp(
    res: tuple[Shape], g: jax.Array, *, offset: int = 0, axis1: int = 0, axis2: int = 1
) -> tuple[jax.Array]:
    """Each diagonal entry receives its g; every other entry 0 (g written on the diagonal of
    zeros of x's shape)."""
    (shape,) = res
    return (_undiagonal(g, shape, offset, axis1, axis2),)


_AXES = {
    "dim1": "use axis1= (NumPy's name)",
    "dim2": "use axis2= (NumPy's name)",
    "diagonal": "use offset= (NumPy's name)",
}


@torch_keywords(_AXES)
def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The ``offset`` diagonal (0: the main one, > 0 above it, < 0 below) of the matrices
    spanned by ``axis1`` (rows) and ``axis2`` (columns), as a new last axis: for x of shape
    (n, m), the entries ``x[i, i + offset]``; for more dimensions, the other axes come
    first, in order (NumPy's ``diagonal``; PyTorch's ``diagonal(x, offset, dim1, dim2)``). An
    offset beyond the matrix gives an empty diagonal. The gradient goes back to the diagonal
    entries; the others get 0.

    Raises:
        ShapeError: fewer than two dimensions, an axis out of range, or ``axis1 == axis2``.
        TypeError: ``offset`` or an axis is not an integer; PyTorch's ``dim1=``/``dim2=``.
    """
    a1, a2 = _matrix_axes("diagonal", operand_shape(x, "diagonal"), axis1, axis2)
    return _diagonal(x, offset=integer(offset, "diagonal: offset"), axis1=a1, axis2=a2)


_jdiag = partial(kernel, static_argnames=("k",))(jnp.diag)


@defop(name="diag")
def _diag(x: jax.Array, *, k: int = 0) -> tuple[jax.Array, tuple[Shape]]:
    """1-D x (n,): the (n + |k|, n + |k|) matrix with x on diagonal ``k``; 2-D x: its
    diagonal ``k`` (NumPy's ``diag``)."""
    if x.ndim not in (1, 2):
        raise ShapeError(
            f"diag: takes a 1-D tensor (to build a matrix) or a 2-D one (to read a diagonal), "
            f"got shape {tuple(x.shape)}; for stacks of matrices use "
            "tg.diagonal(x, offset, axis1, axis2)."
        )
    return _jdiag(x, k=k), (tuple(x.shape),)


@_diag.defvjp
def _diag_vjp(res: tuple[Shape], g: jax.Array, *, k: int = 0) -> tuple[jax.Array]:
    """Built from a 1-D x: x[i] sits at one place of the matrix, so gx = diagonal k of g. Read
    from a 2-D x: g written on diagonal k of zeros of x's shape (``diagonal``'s rule)."""
    (shape,) = res
    if len(shape) == 1:
        return (_jdiagonal(g, k, 0, 1),)
    return (_undiagonal(g, shape, k, 0, 1),)


@torch_keywords({"diagonal": "use k= (NumPy's name): tg.diag(x, k=1)"})
def diag(x: Any, k: int = 0) -> Tensor:
    """NumPy's (and PyTorch's) ``diag``: for a 1-D ``x`` of length n, the square matrix of
    size n + |k| with ``x`` on diagonal ``k`` (0: the main one, > 0 above it) and zeros
    elsewhere; for a 2-D ``x``, its diagonal ``k`` as a 1-D tensor (``tg.diagonal(x, k)``).
    The dtype is ``x``'s. The gradient of a built matrix is the diagonal of its cotangent;
    that of a read diagonal goes back to the diagonal's entries.

    Raises:
        ShapeError: ``x`` is not 1-D or 2-D (``tg.diagonal`` takes any stack of matrices).
        TypeError: ``k`` is not an integer; PyTorch's ``diagonal=`` (NumPy's ``k=``).
    """
    return _diag(x, k=integer(k, "diag: k"))


_jtrace = partial(kernel, static_argnames=("offset", "axis1", "axis2"))(jnp.trace)


@partial(kernel, static_argnums=(1, 2, 3, 4))
def _untrace(g: jax.Array, shape: Shape, offset: int, axis1: int, axis2: int) -> jax.Array:
    eye = jnp.eye(shape[axis1], shape[axis2], k=offset, dtype=g.dtype)
    return jnp.moveaxis(g[..., None, None] * eye, (-2, -1), (axis1, axis2))


@defop(name="trace")
def _trace(
    x: jax.Array, *, offset: int = 0, axis1: int = 0, axis2: int = 1
) -> tuple[jax.Array, tuple[Shape]]:
    """The sum of the ``offset`` diagonal of the axes ``axis1`` and ``axis2`` (NumPy's
    ``trace``)."""
    _matrix_axes("trace", x.shape, axis1, axis2)
    return _jtrace(x, offset=offset, axis1=axis1, axis2=axis2), (tuple(x.shape),)


@_trace.defvjp
def _trace_vjp(
    res: tuple[Shape], g: jax.Array, *, offset: int = 0, axis1: int = 0, axis2: int = 1
) -> tuple[jax.Array]:
    """Each entry of the summed diagonal receives g, every other entry 0: gx = g times the
    identity (diagonal ``offset``) over the two axes."""
    (shape,) = res
    return (_untrace(g, shape, offset, axis1, axis2),)


@torch_keywords(_AXES)
def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The sum of the ``offset`` diagonal of the matrices spanned by ``axis1`` and ``axis2``:
    for a 2-D ``x``, the sum of its main diagonal (``torch.trace``); with more dimensions,
    one sum per matrix, the other axes kept in order (NumPy's ``trace``). Integer inputs
    give integers (NumPy's rule). The gradient is the cotangent times the identity.

    Raises:
        ShapeError: fewer than two dimensions, an axis out of range, or ``axis1 == axis2``.
        TypeError: ``offset`` or an axis is not an integer.
    """
    a1, a2 = _matrix_axes("trace", operand_shape(x, "trace"), axis1, axis2)
    return _trace(x, offset=integer(offset, "trace: offset"), axis1=a1, axis2=a2)
