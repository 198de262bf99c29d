"""Normalization layers as fused ops: layer_norm and batch_norm (one node each, hand VJPs),
and group_norm and instance_norm built on layer_norm's node."""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad._args import integer, torch_keywords
from tapegrad._dtypes import is_float, summed_in
from tapegrad._placement import mixed_devices_error
from tapegrad.derived import compiled_vjp
from tapegrad.errors import ShapeError, raise_instead
from tapegrad.grad_mode import no_grad
from tapegrad.kernels import kernel
from tapegrad.op import as_operand, defop, operand_shape

if TYPE_CHECKING:
    from tapegrad._tensor import Tensor

__all__ = ["layer_norm", "batch_norm", "group_norm", "instance_norm"]

Axes = tuple[int, ...]
Res = tuple[jax.Array, jax.Array]  # the input x and the weight w, as given


def _affine_shape(ndim: int, axes: Axes, channel: int | None) -> tuple[int, ...] | None:
    """How weight and bias are reshaped to broadcast: (C, 1, ..., 1) for batch norm (the
    channel axis 1), unchanged (the normalized trailing shape) for layer norm."""
    if channel is None:
        return None
    return (-1,) + (1,) * (ndim - 2)


def _stats(x: jax.Array, axes: Axes, eps: float) -> tuple[jax.Array, jax.Array]:
    """The normalized input and 1 / sqrt(var + eps) over ``axes`` (biased variance)."""
    xc = x - jnp.mean(x, axis=axes, keepdims=True)
    rstd = jax.lax.rsqrt(jnp.mean(xc * xc, axis=axes, keepdims=True) + eps)
    return xc * rstd, rstd


def _affine(w: jax.Array, ndim: int, channel: int | None) -> jax.Array:
    shape = _affine_shape(ndim, (), channel)
    return jnp.reshape(w, shape) if shape is not None and jnp.ndim(w) else w


@partial(kernel, static_argnames=("axes", "eps", "channel"))
def _normalize(
    x: jax.Array, w: jax.Array, b: jax.Array, *, axes: Axes, eps: float, channel: int | None
) -> jax.Array:
    """y = (x - mean) / sqrt(var + eps) * w + b over ``axes`` (biased variance); a float16 or
    bfloat16 x is normalized in float32 (``summed_in``, as PyTorch) and y rounded back."""
    xhat, _ = _stats(x.astype(summed_in(x.dtype)), axes, eps)
    y = xhat * _affine(w, x.ndim, channel) + _affine(b, x.ndim, channel)
    return y.astype(jnp.result_type(x, w, b))


@partial(kernel, static_argnames=("needs", "axes", "eps", "channel", "w_shape"))
def _normalize_vjp(
    res: Res,
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    axes: Axes,
    eps: float,
    channel: int | None,
    w_shape: tuple[int, ...],
) -> tuple[jax.Array | None, ...]:
    """With xhat the normalized input and gh = g * w:
    gx = rstd (gh - mean(gh) - xhat mean(gh xhat)) (means over ``axes``), gw = sum(g xhat),
    gb = sum(g) (sums over the axes w is broadcast along, then w's shape)."""
    x, w = res
    low = summed_in(x.dtype)  # float32 for a float16 or bfloat16 x, as the forward
    xhat, rstd = _stats(x.astype(low), axes, eps)
    g = g.astype(jnp.promote_types(g.dtype, low))
    gh = g * _affine(w, x.ndim, channel)
    gx = None
    if needs[0]:
        gx = rstd * (
            gh
            - jnp.mean(gh, axis=axes, keepdims=True)
            - xhat * jnp.mean(gh * xhat, axis=axes, keepdims=True)
        ).astype(x.dtype)
    lead = tuple(i for i in range(g.ndim) if i != channel) if channel is not None else None
    if lead is None:  # layer norm: w spans the trailing axes
        lead = tuple(range(g.ndim - len(w_shape)))
    wt = jnp.result_type(w)
    gw = jnp.sum(g * xhat, axis=lead).reshape(w_shape).astype(wt) if needs[1] else None
    gb = jnp.sum(g, axis=lead).reshape(w_shape).astype(wt) if needs[2] else None
    return gx, gw, gb


@defop(name="layer_norm")
def _layer_norm(
    x: jax.Array, w: jax.Array, b: jax.Array, *, axes: Axes, eps: float
) -> tuple[jax.Array, Res]:
    """Normalize over the trailing ``axes``, then scale by w and shift by b."""
    y: jax.Array = _normalize(x, w, b, axes=axes, eps=eps, channel=None)
    return y, (x, w)  # the inputs: create_graph differentiates through them


@_layer_norm.defvjp
def _layer_norm_vjp(
    res: Res, g: jax.Array, needs: tuple[bool, ...], *, axes: Axes, eps: float
) -> tuple[jax.Array | None, ...]:
    """The normalization VJP (see ``_normalize_vjp``); gw, gb summed over the leading axes."""
    w_shape = tuple(g.shape[g.ndim - len(axes) :]) if jnp.ndim(res[1]) else ()
    grads: tuple[jax.Array | None, ...] = _normalize_vjp(
        res, g, needs, axes=axes, eps=eps, channel=None, w_shape=w_shape
    )
    return grads


@torch_keywords({"normalized_shape": "pass it as shape= (or second, by position)."})
def layer_norm(
    x: Any, shape: int | tuple[int, ...], weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> Tensor:
    """Layer normalization, PyTorch's ``F.layer_norm(x, normalized_shape, weight, bias, eps)``:
    over the trailing axes given by ``shape``, ``(x - mean) / sqrt(var + eps) * weight + bias``
    with the biased variance. One node (fused forward and VJP).

    Args:
        x: a float tensor whose trailing axes equal ``shape``.
        shape: the normalized (trailing) shape, an int or a tuple.
        weight: optional, of ``shape`` (default: ones).
        bias: optional, of ``shape`` (default: zeros).
        eps: added to the variance.

    Raises:
        ShapeError: the trailing axes of ``x``, or weight/bias, do not have ``shape``.
    """
    norm_shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    x_shape = operand_shape(x, "layer_norm")
    k = len(norm_shape)
    if not k:
        raise ShapeError(
            "layer_norm: normalized_shape must have at least one axis (PyTorch's rule), got (); "
            "pass the size of the last axis (or the trailing sizes)."
        )
    if x_shape[len(x_shape) - k :] != norm_shape or len(x_shape) < k:
        raise ShapeError(
            f"layer_norm: input of shape {x_shape} does not end with the normalized shape "
            f"{norm_shape}."
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != norm_shape:
            raise ShapeError(
                f"layer_norm: {name} of shape {tuple(t.shape)} must have the normalized shape "
                f"{norm_shape}."
            )
    axes = tuple(range(len(x_shape) - k, len(x_shape)))
    return _layer_norm(
        x,
        1.0 if weight is None else weight,
        0.0 if bias is None else bias,
        axes=axes,
        eps=float(eps),
    )


@partial(kernel, static_argnames=("eps",))
def _bn_eval_fn(
    x: jax.Array, mean: jax.Array, var: jax.Array, w: jax.Array, b: jax.Array, *, eps: float
) -> jax.Array:
    """Evaluation: normalize with the running statistics (constants per channel); a float16
    or bfloat16 x in float32, and y in training's dtype (``x``, ``w`` and ``b``'s: float32
    running statistics do not promote a bfloat16 output, as in PyTorch)."""
    shape = (-1,) + (1,) * (x.ndim - 2)
    scale = jax.lax.rsqrt(jnp.reshape(var, shape) + eps)
    wide = x.astype(summed_in(x.dtype))
    ws = jnp.reshape(w, shape) if jnp.ndim(w) else w
    bs = jnp.reshape(b, shape) if jnp.ndim(b) else b
    return ((wide - jnp.reshape(mean, shape)) * scale * ws + bs).astype(jnp.result_type(x, w, b))


@defop(name="batch_norm")
def _batch_norm(
    x: jax.Array,
    mean: jax.Array,
    var: jax.Array,
    w: jax.Array,
    b: jax.Array,
    *,
    training: bool,
    eps: float,
) -> tuple[jax.Array, Any]:
    """Training: normalize per channel (axis 1) with the batch statistics; evaluation: with
    ``mean`` and ``var`` (the running statistics, which training ignores)."""
    if training:
        y: jax.Array = _normalize(x, w, b, axes=(0, *range(2, x.ndim)), eps=eps, channel=1)
        return y, (x, w)  # the inputs: create_graph differentiates through them
    y = _bn_eval_fn(x, mean, var, w, b, eps=eps)
    return y, (x, mean, var, w, b)


@_batch_norm.defvjp
def _batch_norm_vjp(
    res: Any, g: jax.Array, needs: tuple[bool, ...], *, training: bool, eps: float
) -> tuple[jax.Array | None, ...]:
    """Training: the normalization VJP over axes (0, 2, ...) (see ``_normalize_vjp``); the
    running statistics get no gradient (unused). Evaluation: an affine map per channel, its
    VJP derived by JAX."""
    if training:
        w_shape = (g.shape[1],) if jnp.ndim(res[1]) else ()
        axes = (0, *range(2, g.ndim))
        gx, gw, gb = _normalize_vjp(
            res, g, (needs[0], needs[3], needs[4]), axes=axes, eps=eps, channel=1, w_shape=w_shape
        )
        return gx, None, None, gw, gb
    return compiled_vjp(_bn_eval_fn, (("eps", eps),))(res, g, needs)


def _blend(
    x: jax.Array, mean: jax.Array, var: jax.Array, momentum: float
) -> tuple[jax.Array, jax.Array]:
    """PyTorch's update: mean and the *unbiased* variance of the batch, blended by momentum;
    float16 and bfloat16 batches in float32 (``summed_in``), as PyTorch keeps them."""
    axes = (0, *range(2, x.ndim))
    n = math.prod(x.shape[a] for a in axes)
    x = x.astype(summed_in(x.dtype))
    batch_var = jnp.var(x, axis=axes) * (n / (n - 1))
    new_mean = (1 - momentum) * mean + momentum * jnp.mean(x, axis=axes)
    new_var = (1 - momentum) * var + momentum * batch_var
    return new_mean.astype(mean.dtype), new_var.astype(var.dtype)


_running = kernel(_blend, static_argnames=("momentum",))


@partial(kernel, static_argnames=("momentum",))
def _instance_running(
    x: jax.Array, mean: jax.Array, var: jax.Array, momentum: float
) -> tuple[jax.Array, jax.Array]:
    """PyTorch's instance norm update: each instance (n, c) blended as batch norm's of the
    input seen as (1, N * C, *spatial) against the running statistics repeated N times, then
    the N blends of a channel averaged."""
    n, c = x.shape[:2]
    flat = x.reshape(1, n * c, -1)  # not empty: instance_norm skips an empty input
    new_mean, new_var = _blend(flat, jnp.tile(mean, n), jnp.tile(var, n), momentum)
    return (
        jnp.mean(new_mean.reshape(n, c), axis=0).astype(mean.dtype),
        jnp.mean(new_var.reshape(n, c), axis=0).astype(var.dtype),
    )


@torch_keywords(order="its F.batch_norm's sixth parameter is training")
def batch_norm(
    x: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    *,
    training: bool,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalization over the channel axis 1, PyTorch's ``F.batch_norm``. One node.

    In training, each channel is normalized with the batch mean and biased variance over
    every axis but 1, and ``running_mean``/``running_var`` (when given) are updated in place
    (their ``.data``, outside the graph) as PyTorch does:
    ``running = (1 - momentum) running + momentum batch``, with the *unbiased* batch variance.
    In evaluation, the running statistics normalize instead.

    Args:
        x: (N, C) or (N, C, *spatial).
        running_mean: a (C,) tensor, or ``None`` (training only, no running statistics).
        running_var: a (C,) tensor, or ``None`` (likewise).
        weight: optional (C,) scale (default ones); bias: optional (C,) shift (default zeros).
        training: use (and update) batch statistics, or use the running ones.
        momentum: the running statistics' update factor.
        eps: added to the variance.

    Raises:
        ShapeError: ``x`` has fewer than 2 axes, or a statistic, weight or bias is not (C,).
        ValueError: training with one value per channel (N times the spatial size is 1), or
            evaluation without running statistics.
        TypeError: running statistics to update that are not tensors.
    """
    _check_running("batch_norm", running_mean, running_var, training)
    x_shape = tuple(np.shape(x))
    if len(x_shape) < 2:
        raise ShapeError(f"batch_norm: input of shape {x_shape} must be (N, C, ...).")
    c = x_shape[1]
    for name, t in (
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("weight", weight),
        ("bias", bias),
    ):
        if t is not None and tuple(np.shape(t)) != (c,):
            raise ShapeError(
                f"batch_norm: {name} of shape {tuple(np.shape(t))} must be ({c},) for an input "
                f"of shape {x_shape} (channels on axis 1)."
            )
    if training:
        if math.prod(x_shape) // c <= 1:
            raise ValueError(
                f"batch_norm: training needs more than one value per channel, got input shape "
                f"{x_shape}; use a larger batch or evaluation mode."
            )
    elif running_mean is None:
        raise ValueError(
            "batch_norm: evaluation (training=False) needs running_mean and running_var."
        )
    stats = None
    if training and running_mean is not None:  # first: an error records nothing
        stats = _new_stats("batch_norm", _running, x, running_mean, running_var, momentum)
    y = _batch_norm(
        x,
        0.0 if running_mean is None else running_mean,
        1.0 if running_var is None else running_var,
        1.0 if weight is None else weight,
        0.0 if bias is None else bias,
        training=bool(training),
        eps=float(eps),
    )
    if stats is not None:
        with no_grad():
            running_mean.data, running_var.data = stats
    return y


def _check_running(name: str, running_mean: Any, running_var: Any, update: bool) -> None:
    """Both running statistics or neither; tensors where they are to be updated in place.

    Raises:
        ValueError: one of them is ``None``.
        TypeError: ``update`` and one of them is not a tensor.
    """
    from tapegrad._tensor import Tensor

    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{name}: give both running_mean and running_var, or neither.")
    if update and running_mean is not None:
        if not (isinstance(running_mean, Tensor) and isinstance(running_var, Tensor)):
            raise TypeError(
                f"{name}: running_mean and running_var are updated in place in training, "
                "so they must be tensors (tg.zeros(C), tg.ones(C)), not "
                f"{type(running_mean).__name__} and {type(running_var).__name__}."
            )


def _new_stats(
    name: str, update: Any, x: Any, running_mean: Tensor, running_var: Tensor, momentum: float
) -> tuple[jax.Array, jax.Array]:
    """The running statistics after ``x`` (``update``: ``_running`` or ``_instance_running``),
    computed before the op so that an error records nothing.

    Raises:
        DeviceError: ``x`` and the statistics are on devices no sharding relates.
    """
    from tapegrad._tensor import Tensor

    data = x.data if isinstance(x, Tensor) else jnp.asarray(x)
    arrays = [data, running_mean.data, running_var.data]
    try:
        stats: tuple[jax.Array, jax.Array] = update(*arrays, float(momentum))
    except ValueError:  # JAX's "incompatible devices": name them and what to do
        names = ["the input", "running_mean", "running_var"]
        raise_instead(mixed_devices_error(name, arrays, 1, names))
        raise
    return stats


def _as_tensor(x: Any, name: str) -> Tensor:
    """``x`` as a tensor (a NumPy or JAX array wrapped, as ops take them), else the ops'
    ``OperandTypeError`` naming ``name``."""
    from tapegrad._tensor import Tensor

    return x if isinstance(x, Tensor) else Tensor(jnp.asarray(as_operand(x, name)))


def _per_channel(name: str, x_shape: tuple[int, ...], **tensors: Any) -> None:
    """Raise ``ShapeError`` unless each given tensor is ``(C,)``, C the input's axis 1."""
    for what, t in tensors.items():
        if t is not None and tuple(np.shape(t)) != (x_shape[1],):
            raise ShapeError(
                f"{name}: {what} of shape {tuple(np.shape(t))} must be ({x_shape[1]},) for an "
                f"input of shape {x_shape} (channels on axis 1)."
            )


def group_norm(
    x: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> Tensor:
    """Group normalization, PyTorch's ``F.group_norm(input, num_groups, weight, bias, eps)``
    (Wu & He 2018): the channels of an ``(N, C, *)`` input are split into ``num_groups``
    groups, each group of each sample normalized over its channels and every other axis
    (biased variance), then scaled and shifted per channel. The statistics are one
    ``layer_norm`` node over the groups (its fused VJP); a float16 or bfloat16 input is
    normalized, scaled and shifted in float32 and the result rounded back to its dtype, as
    PyTorch's (in float16, squared deviations of activations over 256 overflow).

    Args:
        x: a floating ``(N, C, *)`` tensor (an empty batch gives an empty output).
        num_groups: divides ``C``.
        weight: optional ``(C,)`` scale (default ones); bias: optional ``(C,)`` shift.
        eps: added to the variance.

    Returns:
        A tensor of ``x``'s shape and dtype. Gradients reach ``x``, ``weight`` and ``bias``.

    Raises:
        ShapeError: ``x`` has fewer than 2 axes, ``C`` is not a multiple of ``num_groups``,
            or weight/bias is not ``(C,)``.
        TypeError: ``num_groups`` is not an integer; ``x`` is not floating.
        OperandTypeError: ``x`` is a list or a PyTorch tensor (convert it with ``tg.tensor``).
    """
    t = _as_tensor(x, "group_norm")
    shape = tuple(t.shape)
    groups = integer(num_groups, "group_norm: num_groups")
    if len(shape) < 2 or groups <= 0 or shape[1] % groups:
        raise ShapeError(
            f"group_norm: input of shape {shape} must be (N, C, ...) with C a positive "
            f"multiple of num_groups={groups}."
        )
    _per_channel("group_norm", shape, weight=weight, bias=bias)
    if not is_float(t.dtype):
        raise TypeError(
            f"group_norm takes floating inputs, got {t.dtype}; cast it first: x.astype(tg.float32)."
        )
    wide = summed_in(t.dtype)  # float32 for float16 and bfloat16, as PyTorch
    xs = t.astype(wide) if wide != t.dtype else t
    per_group = math.prod(shape[1:]) // groups  # not -1: an empty batch
    y = layer_norm(xs.reshape(shape[0], groups, per_group), per_group, eps=eps).reshape(*shape)
    per_channel = (shape[1],) + (1,) * (len(shape) - 2)
    if weight is not None:
        y = y * _as_tensor(weight, "group_norm").reshape(per_channel)
    if bias is not None:
        y = y + _as_tensor(bias, "group_norm").reshape(per_channel)
    return y.astype(t.dtype) if wide != t.dtype else y  # the input's dtype, as PyTorch


@torch_keywords(order="its F.instance_norm's sixth parameter is use_input_stats")
def instance_norm(
    x: Any,
    running_mean: Any = None,
    running_var: Any = None,
    weight: Any = None,
    bias: Any = None,
    *,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Instance normalization, PyTorch's ``F.instance_norm`` (Ulyanov et al. 2016): each
    channel of each sample of an ``(N, C, *spatial)`` input normalized over its spatial axes
    (biased variance), then scaled and shifted per channel.

    With ``use_input_stats`` (the default) the statistics are the input's own: this is
    :func:`group_norm` with one group per channel (its nodes and VJP). ``running_mean`` and
    ``running_var``, when given, are then updated in place (their ``.data``, outside the
    graph) as PyTorch's: each instance's mean and *unbiased* variance blended into the running
    statistics by ``momentum``, and the ``N`` blends of a channel averaged. An empty input
    leaves them as they are (PyTorch writes NaN for an empty batch: an average over no
    instances). Without ``use_input_stats`` the running statistics normalize instead, as
    ``batch_norm(training=False)`` (one node; its VJP derived by JAX).

    Args:
        x: a floating ``(N, C, *spatial)`` tensor.
        running_mean: a ``(C,)`` tensor, or ``None``.
        running_var: a ``(C,)`` tensor, or ``None`` (give both or neither).
        weight: optional ``(C,)`` scale (default ones); bias: optional ``(C,)`` shift.
        use_input_stats: normalize with the input's statistics (and update the running
            ones), or with the running ones.
        momentum: the running statistics' update factor.
        eps: added to the variance.

    Returns:
        A tensor of ``x``'s shape and dtype. Gradients reach ``x``, ``weight`` and ``bias``;
        the running statistics get none.

    Raises:
        ShapeError: ``x`` has fewer than 2 axes, or a statistic, weight or bias is not ``(C,)``.
        ValueError: ``use_input_stats`` with one value per instance (the spatial size is 1,
            PyTorch's rule); ``use_input_stats=False`` without running statistics; one
            running statistic without the other.
        TypeError: running statistics to update that are not tensors; ``x`` is not floating.
    """
    _check_running("instance_norm", running_mean, running_var, use_input_stats)
    x_shape = operand_shape(x, "instance_norm")
    if len(x_shape) < 2:
        raise ShapeError(f"instance_norm: input of shape {x_shape} must be (N, C, ...).")
    _per_channel(
        "instance_norm",
        x_shape,
        running_mean=running_mean,
        running_var=running_var,
        weight=weight,
        bias=bias,
    )
    if not use_input_stats:
        if running_mean is None:
            raise ValueError(
                "instance_norm: use_input_stats=False normalizes with running_mean and "
                "running_var; pass them (or use_input_stats=True)."
            )
        return batch_norm(x, running_mean, running_var, weight, bias, training=False, eps=eps)
    spatial = math.prod(x_shape[2:])
    if spatial == 1:
        raise ValueError(
            f"instance_norm: expected more than 1 spatial element when using the input's "
            f"statistics, got input of shape {x_shape}; each (sample, channel) needs several "
            "values to normalize."
        )
    stats = None
    if running_mean is not None and 0 not in x_shape:  # first: an error records nothing
        stats = _new_stats(
            "instance_norm", _instance_running, x, running_mean, running_var, momentum
        )
    y = group_norm(x, x_shape[1], weight, bias, eps)
    if stats is not None:
        with no_grad():
            running_mean.data, running_var.data = stats
    return y
