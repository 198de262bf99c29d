"""Moving tensors between devices and shardings: the differentiable ``device_put`` op."""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import Sharding

from tapegrad import _placement
from tapegrad._tensor import Tensor, wrap
from tapegrad.op import apply, defop

__all__ = ["device_put"]


def _source(x: jax.Array) -> Sharding | None:
    """Where ``x`` lives, for the VJP to put the cotangent back; ``None`` for a tracer (inside
    ``tg.jit`` XLA places the cotangent) and for an array JAX has not committed anywhere."""
    if not _placement.committed(x):
        return None
    sharding: Sharding = x.sharding
    return sharding


@defop(name="device_put")
def _device_put(x: jax.Array, *, to: Any) -> tuple[jax.Array, tuple[Sharding | None]]:
    """``jax.device_put(x, to)``: the same values on another device or sharding."""
    return jax.device_put(x, to), (_source(x),)


@_device_put.defvjp
def _device_put_vjp(res: tuple[Sharding | None], g: jax.Array, *, to: Any) -> tuple[jax.Array]:
    """The identity on values (JAX's transpose of ``device_put``): the cotangent goes back to
    the input's sharding, so the input's gradient lands where the input lives."""
    (source,) = res
    return (g if source is None else jax.device_put(g, source),)


@_device_put.defvjp_on_tensors
def _device_put_vjp_on_tensors(
    res: tuple[Sharding | None], g: Tensor, needs: tuple[bool, ...], *, to: Any
) -> tuple[Tensor]:
    """The same rule for ``create_graph=True``, recorded as a ``device_put`` of the cotangent
    (whose own VJP moves it back, to any order): as the jnp rule compiled by one ``jax.jit``
    it would fail on a cotangent committed to another device than the input."""
    (source,) = res
    return (g.clone() if source is None else apply(_device_put, (g,), {"to": source}),)


def device_put(t: Any, device_or_sharding: Any) -> Tensor:
    """``t`` on another device or sharding, differentiably (a new op node, like ``astype``).

    Args:
        t: a tensor (or anything ``tg.tensor`` takes).
        device_or_sharding: a ``jax.Device``, a ``jax.sharding.Sharding`` (e.g. a
            ``NamedSharding`` over a ``Mesh``), an index into ``jax.devices()`` or a string
            such as ``"cpu:3"``.

    Returns:
        A tensor of the same shape and dtype on the target; its gradient flows back to ``t``
        on ``t``'s own sharding (VJP: the identity, as ``jax.device_put``'s transpose).

    Raises:
        DeviceError: the device does not exist in this process, or the sharding's mesh does
            not divide ``t``'s shape; the message names the call's origin. Nothing is
            recorded.
    """
    to = _placement.resolve(device_or_sharding, "tg.device_put")
    x = t if isinstance(t, Tensor) else wrap(jax.numpy.asarray(t))
    _placement.check_fits(to, x.shape, "tg.device_put")
    return apply(_device_put, (x,), {"to": to}, depth=3)
