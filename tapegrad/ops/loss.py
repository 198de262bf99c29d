"""PyTorch's margin, embedding and likelihood losses (margin_ranking, hinge_embedding,
soft_margin, multilabel_soft_margin, cosine_embedding, triplet_margin, gaussian_nll,
poisson_nll) and pairwise_distance, as composites of the op families below them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad._args import number_of, torch_keywords
from tapegrad._tensor import Tensor
from tapegrad.creation import tensor
from tapegrad.errors import ShapeError
from tapegrad.ops.activation import log_sigmoid, softplus
from tapegrad.ops.binary import minimum, where
from tapegrad.ops.linalg import norm
from tapegrad.ops.nn import LOSS_ADVICE, LOSS_ORDER, _check_reduction
from tapegrad.ops.unary import exp, log

__all__ = [
    "pairwise_distance",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "soft_margin_loss",
    "multilabel_soft_margin_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "gaussian_nll_loss",
    "poisson_nll_loss",
]


def _as(x: Any) -> Tensor:
    """``x`` as a tensor (a tensor as it is; an array or a number a constant)."""
    return x if isinstance(x, Tensor) else tensor(x)


def _reduced(per: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return per.mean()
    return per.sum() if reduction == "sum" else per


def _clamp_min0(z: Tensor) -> Tensor:
    """``max(z, 0)`` with PyTorch's ``clamp_min`` gradient: 1 where ``z >= 0``, at 0 too (a
    hinge exactly at its margin still pushes, as PyTorch's; ``relu``'s would be 0); a NaN
    stays NaN, as PyTorch's."""
    out: Tensor = where(z < 0, 0.0, z)
    return out


def _number(value: Any, what: str) -> float:
    return float(number_of(value, what))


@torch_keywords()
def pairwise_distance(
    a: Any, b: Any, p: float = 2.0, eps: float = 1e-6, keepdims: bool = False
) -> Tensor:
    """PyTorch's ``F.pairwise_distance``: the ``p``-norm of ``a - b + eps`` along the last
    axis (broadcasting ``a`` against ``b``; ``eps`` keeps the gradient finite where ``a ==
    b``); the broadcast shape without its last axis (kept with ``keepdims``, PyTorch's
    ``keepdim``).

    Raises:
        ShapeError: the shapes do not broadcast, or both are 0-d.
    """
    a, b = _as(a), _as(b)
    if a.ndim == 0 and b.ndim == 0:
        raise ShapeError("pairwise_distance: both inputs are 0-d; pass vectors (..., D).")
    d: Tensor = a - b + _number(eps, "pairwise_distance: eps")
    out: Tensor = norm(d, ord=_number(p, "pairwise_distance: p"), axis=-1, keepdims=bool(keepdims))
    return out


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def margin_ranking_loss(
    a: Any, b: Any, target: Any, *, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """PyTorch's ``F.margin_ranking_loss``: ``max(0, -target * (a - b) + margin)``, with
    ``target`` 1 where ``a`` should rank higher and -1 where ``b`` should (broadcast), reduced.
    The gradient at the margin is PyTorch's (1).

    Raises:
        ShapeError: the shapes do not broadcast. ValueError: an unknown reduction.
    """
    _check_reduction("margin_ranking_loss", reduction)
    m = _number(margin, "margin_ranking_loss: margin")
    per = _clamp_min0(-_as(target) * (_as(a) - b) + m)
    return _reduced(per, reduction)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def hinge_embedding_loss(
    x: Any, target: Any, *, margin: float = 1.0, reduction: str = "mean"
) -> Tensor:
    """PyTorch's ``F.hinge_embedding_loss``: ``x`` where ``target == 1``, ``max(0, margin -
    x)`` where ``target == -1`` (other target values: the sum of both, as PyTorch's),
    reduced.

    Raises:
        ShapeError: the shapes do not broadcast. ValueError: an unknown reduction.
    """
    _check_reduction("hinge_embedding_loss", reduction)
    m = _number(margin, "hinge_embedding_loss: margin")
    x, t = _as(x), _as(target)
    per: Tensor = where(t != 1, _clamp_min0(m - x), 0.0) + where(t != -1, x, 0.0)
    return _reduced(per, reduction)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def soft_margin_loss(x: Any, target: Any, *, reduction: str = "mean") -> Tensor:
    """PyTorch's ``F.soft_margin_loss``: ``log(1 + exp(-target * x))`` (targets 1 or -1),
    reduced; computed as a softplus, finite where PyTorch's overflows.

    Raises:
        ShapeError: the shapes do not broadcast. ValueError: an unknown reduction.
    """
    _check_reduction("soft_margin_loss", reduction)
    per: Tensor = softplus(-_as(target) * x)
    return _reduced(per, reduction)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def multilabel_soft_margin_loss(
    x: Any, target: Any, weight: Any = None, *, reduction: str = "mean"
) -> Tensor:
    """PyTorch's ``F.multilabel_soft_margin_loss``: per row of ``x`` ``(N, C)`` (or ``(C,)``),
    the mean over the classes of ``-(t log sigmoid(x) + (1 - t) log sigmoid(-x))``, each
    class's term times ``weight`` (broadcast, e.g. ``(C,)``); then reduced over the rows
    (``"none"``: one loss per row).

    Raises:
        ShapeError: the shapes do not broadcast, or ``x`` is 0-d. ValueError: an unknown
        reduction.
    """
    _check_reduction("multilabel_soft_margin_loss", reduction)
    x, t = _as(x), _as(target)
    if x.ndim == 0:
        raise ShapeError(
            "multilabel_soft_margin_loss: x is 0-d; pass scores (N, C) or (C,), classes last."
        )
    per: Tensor = -(t * log_sigmoid(x) + (1 - t) * log_sigmoid(-x))
    if weight is not None:
        per = per * weight
    return _reduced(per.sum(axis=-1) / x.shape[-1], reduction)


def _check_same(name: str, shapes: dict[str, tuple[int, ...]], dims: tuple[int, ...]) -> None:
    first = next(iter(shapes.values()))
    if any(s != first for s in shapes.values()) or len(first) not in dims:
        told = ", ".join(f"{k} {s}" for k, s in shapes.items())
        raise ShapeError(
            f"{name}: the inputs need one shape, (N, D) or (D,), got {told}; pass a batch of "
            "rows of equal length (PyTorch's check)."
        )


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def cosine_embedding_loss(
    a: Any, b: Any, target: Any, *, margin: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """PyTorch's ``F.cosine_embedding_loss``: with ``cos`` the cosine of rows ``a``, ``b``
    ``(N, D)`` (or ``(D,)``; PyTorch's ``1e-12`` added to each squared norm), ``1 - cos``
    where ``target == 1`` and ``max(0, cos - margin)`` where ``target == -1`` (``target``
    ``(N,)`` or 0-d); reduced over the rows.

    Raises:
        ShapeError: ``a`` and ``b`` differ in shape or are not 1-d or 2-d, or ``target`` is
        not of their shape without the last axis. ValueError: an unknown reduction.
    """
    _check_reduction("cosine_embedding_loss", reduction)
    m = _number(margin, "cosine_embedding_loss: margin")
    a, b, t = _as(a), _as(b), _as(target)
    _check_same("cosine_embedding_loss", {"a": a.shape, "b": b.shape}, (1, 2))
    if t.shape != a.shape[:-1]:
        raise ShapeError(
            f"cosine_embedding_loss: target of shape {t.shape} for inputs of shape {a.shape}; "
            f"it needs one 1 or -1 per row, shape {a.shape[:-1]}."
        )
    ab = (a * b).sum(axis=-1)
    aa = (a * a).sum(axis=-1) + 1e-12
    bb = (b * b).sum(axis=-1) + 1e-12
    cos = ab / (aa * bb).sqrt()
    per: Tensor = where(t == 1, 1 - cos, 0.0) + where(t == -1, _clamp_min0(cos - m), 0.0)
    return _reduced(per, reduction)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def triplet_margin_loss(
    anchor: Any,
    positive: Any,
    negative: Any,
    *,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    """PyTorch's ``F.triplet_margin_loss``: ``max(0, margin + d(anchor, positive) -
    d(anchor, negative))`` with ``d`` = ``pairwise_distance(.., p, eps)``; ``swap``: the
    negative distance is the smaller of ``d(anchor, negative)`` and ``d(positive,
    negative)`` (Balntas et al. 2016); over rows ``(N, D)`` or one ``(D,)``, reduced.

    Raises:
        ShapeError: the three inputs differ in shape or are not 1-d or 2-d. ValueError: an
        unknown reduction, or ``margin <= 0`` (PyTorch's check).
    """
    _check_reduction("triplet_margin_loss", reduction)
    m = _number(margin, "triplet_margin_loss: margin")
    if not m > 0:
        raise ValueError(f"triplet_margin_loss: margin must be > 0, got {margin}.")
    a, pos, neg = _as(anchor), _as(positive), _as(negative)
    shapes = {"anchor": a.shape, "positive": pos.shape, "negative": neg.shape}
    _check_same("triplet_margin_loss", shapes, (1, 2))
    d_pos = pairwise_distance(a, pos, p, eps)
    d_neg = pairwise_distance(a, neg, p, eps)
    if swap:
        d_neg = minimum(d_neg, pairwise_distance(pos, neg, p, eps))
    return _reduced(_clamp_min0(m + d_pos - d_neg), reduction)


def _variance_shape(x: tuple[int, ...], var: tuple[int, ...]) -> bool:
    """Whether ``var`` is of a shape PyTorch's ``gaussian_nll_loss`` takes for an input of
    shape ``x``: ``x``, ``x`` without its last axis, or ``x`` with one axis of size 1."""
    if var == x or var == x[:-1]:
        return True
    return len(var) == len(x) and sum(v for i, v in zip(x, var, strict=True) if i != v) == 1


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def gaussian_nll_loss(
    x: Any,
    target: Any,
    var: Any,
    *,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """PyTorch's ``F.gaussian_nll_loss``: ``0.5 (log v + (x - target)**2 / v)`` (plus ``0.5
    log(2 pi)`` with ``full``), ``v`` the variance ``var`` clamped to at least ``eps`` (the
    clamp passes the gradient through unchanged, as PyTorch's, which clamps without
    recording); reduced over the elements.

    ``var`` is of the shape of ``x``, of ``x`` without its last axis (one variance per row),
    or of ``x`` with one axis of size 1 (PyTorch's rules); a Python number is a variance for
    every element.

    Raises:
        ValueError: ``var`` has a negative entry (read from the device, as PyTorch's check),
        ``var`` is of another shape, or an unknown reduction.
    """
    _check_reduction("gaussian_nll_loss", reduction)
    e = _number(eps, "gaussian_nll_loss: eps")
    x = _as(x)
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError(f"gaussian_nll_loss: var={var} is negative; a variance is >= 0.")
        var = tensor(np.full(x.shape, var, np.float64 if x.dtype == np.float64 else np.float32))
    v = _as(var)
    if np.any(np.asarray(v.detach()) < 0):
        raise ValueError(
            "gaussian_nll_loss: var has negative entries; a variance is >= 0 (clamp it, or "
            "predict a log-variance and pass its exp)."
        )
    if v.shape != x.shape:
        if not _variance_shape(x.shape, v.shape):
            raise ValueError(
                f"gaussian_nll_loss: var of shape {v.shape} for an input of shape {x.shape}; "
                f"pass {x.shape}, {x.shape[:-1]} (one per row) or {x.shape} with one axis of "
                "size 1."
            )
        if v.shape == x.shape[:-1]:
            v = v[..., None]
    held = v.detach()
    v = v - held + held.clip(e, None)  # the clamped value; the gradient passes unchanged
    d = x - target
    per: Tensor = 0.5 * (log(v) + d * d / v)
    if full:
        per = per + 0.5 * math.log(2 * math.pi)
    return _reduced(per, reduction)


@torch_keywords(LOSS_ADVICE, order=LOSS_ORDER)
def poisson_nll_loss(
    x: Any,
    target: Any,
    *,
    log_input: bool = True,
    full: bool = False,
    eps: float = 1e-8,
    reduction: str = "mean",
) -> Tensor:
    """PyTorch's ``F.poisson_nll_loss``: ``exp(x) - target * x`` for a log-rate ``x``
    (``log_input``), else ``x - target * log(x + eps)``; ``full`` adds the Stirling term
    ``t log t - t + 0.5 log(2 pi t)`` where ``target > 1`` (0 elsewhere, as PyTorch's);
    reduced over the elements. A target's gradient through the masked Stirling term is 0 (at
    a target of 0 too, where PyTorch's is NaN: it differentiates ``t log t`` before masking).

    Raises:
        ShapeError: the shapes do not broadcast. ValueError: an unknown reduction.
    """
    _check_reduction("poisson_nll_loss", reduction)
    e = _number(eps, "poisson_nll_loss: eps")
    x, t = _as(x), _as(target)
    per: Tensor = exp(x) - t * x if log_input else x - t * log(x + e)
    if full:
        big = t > 1
        s = where(big, t, 2.0)  # the logs of the masked targets stay finite, as their gradient
        stirling = s * log(s) - s + 0.5 * log(2 * math.pi * s)
        per = per + where(big, stirling, 0.0)
    return _reduced(per, reduction)
