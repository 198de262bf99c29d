"""Function transforms on tapegrad programs: ``hvp`` (a Hessian-vector product)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tapegrad._tensor import Tensor, node_of
from tapegrad.backward import discard, grad
from tapegrad.creation import zeros_like
from tapegrad.errors import NonScalarBackwardError, ShapeError
from tapegrad.grad_mode import enable_grad

__all__ = ["hvp"]


def _tensors(value: Any, what: str) -> list[Tensor]:
    items = [value] if isinstance(value, Tensor) else list(value)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"tg.hvp: {what} {i} is a {type(t).__name__}; pass tapegrad Tensors.")
    return items


def hvp(
    fn: Callable[..., Tensor],
    inputs: Tensor | Sequence[Tensor],
    v: Tensor | Sequence[Tensor],
) -> tuple[Tensor, Tensor | tuple[Tensor, ...]]:
    """The value of a scalar function and its Hessian-vector product, as
    ``torch.autograd.functional.hvp``.

    Runs ``fn`` on fresh leaves holding the inputs' values, takes the gradient with
    ``create_graph=True`` and differentiates ``<gradient, v>`` again (reverse over reverse).
    Every graph it reached is consumed before it returns, as by a backward without
    ``retain_graph``, so nothing of what it recorded stays on the tape; ``.grad`` is not
    touched, and the inputs' own graphs are not reached (it runs on fresh leaves).

    ``fn`` must compute from its arguments: a tensor it closes over, the input itself
    included, is a constant to it. Where the output does not depend on an argument, that
    argument's product is exact zeros, with no warning (as in JAX, and PyTorch's
    ``strict=False``): ``tg.hvp(lambda w: f(w1), w1, v)`` is zero; write
    ``tg.hvp(lambda w: f(w), w1, v)``. So is every product of a ``fn`` whose value requires
    no grad at all (a constant, a ``.detach()``-ed result).

    Args:
        fn: ``(*tensors) -> Tensor`` with one element, computed from those tensors.
        inputs: a tensor or a sequence of tensors (float).
        v: the vector, with the structure, shapes and dtypes of ``inputs``.

    Returns:
        ``(value, hvp)``: ``fn(*inputs)`` and ``H v`` (a tensor, or a tuple of tensors when
        ``inputs`` is a sequence), none of them requiring grad.

    Raises:
        TypeError: an input or vector entry is not a tensor.
        ShapeError: ``v`` does not match ``inputs`` in length or shapes.
        NonScalarBackwardError: ``fn`` returned more than one element.
    """
    single = isinstance(inputs, Tensor)
    xs = _tensors(inputs, "input")
    vs = _tensors(v, "vector entry")
    if len(vs) != len(xs) or any(a.shape != b.shape for a, b in zip(xs, vs, strict=False)):
        raise ShapeError(
            f"tg.hvp: v has shapes {[t.shape for t in vs]}, the inputs "
            f"{[t.shape for t in xs]}; pass one vector entry per input, of its shape."
        )
    with enable_grad():
        leaves = [x.detach().require_grad() for x in xs]
        try:
            out = fn(*leaves)
        except BaseException:
            discard(leaves)  # reached: freed with their tensors, not left hanging
            raise
        if not isinstance(out, Tensor) or out.size != 1:
            shape = out.shape if isinstance(out, Tensor) else type(out).__name__
            discard([out, *leaves] if isinstance(out, Tensor) else leaves)
            raise NonScalarBackwardError(
                f"tg.hvp: fn must return a one-element tensor (a scalar function: a loss), "
                f"got {shape}; reduce it inside fn (.sum(), .mean())."
            )
        if node_of(out) is None:  # a constant of the inputs: H v is zero (JAX, PyTorch)
            discard(leaves)
            products: tuple[Tensor, ...] = tuple(zeros_like(x) for x in xs)
        else:
            grads = grad(out, leaves, create_graph=True)
            products = grad(grads, leaves, grad_outputs=vs, retain_graph=True)
            discard([out, *grads])
    return out.detach(), (products[0] if single else products)
