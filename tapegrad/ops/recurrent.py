"""The recurrence of ``nn.RNN``, ``nn.LSTM`` and ``nn.GRU`` over a whole sequence as one op:
a ``jax.lax.scan`` compiled once per shape, dtype and mode, with hand-written
backpropagation through time.

A layer direction is then two kernels (forward, backward) instead of a dozen eager ops per
step, and under ``tg.jit`` the step traces to one loop instead of the sequence unrolled."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from tapegrad.kernels import kernel
from tapegrad.op import defop

__all__: list[str] = []  # used by tapegrad.nn's recurrent layers; in the registry as "rnn_scan"

MODES = ("tanh", "relu", "lstm", "gru")
"""The recurrences: Elman's with tanh or ReLU, LSTM, GRU (PyTorch's equations, gate order)."""

_GATES = {"tanh": 1, "relu": 1, "lstm": 4, "gru": 3}


def _cell(mode: str, hid: int, w_hh: jax.Array, b_hh: Any, w_hr: jax.Array) -> Any:
    """One step ``(carry, x_t W_ih^T + b_ih) -> (carry, extras)`` of ``mode`` (``hid``: the
    cell's size); ``extras`` are what the step's backward reads besides the states (LSTM:
    the gates ``i, f, g, o`` after their nonlinearities; GRU: ``r, z, n`` and
    ``h W_hn^T + b_hn``; Elman: none). With a 2-D ``w_hr`` an LSTM's ``h`` is projected:
    ``(o tanh(c)) W_hr^T``."""

    def elman(h: jax.Array, xw: jax.Array) -> tuple[jax.Array, None]:
        pre = xw + (h @ w_hh.T + b_hh)
        return (jnp.tanh(pre) if mode == "tanh" else jax.nn.relu(pre)), None  # relu'(0) = 0

    def lstm(carry: tuple[jax.Array, jax.Array], xw: jax.Array) -> Any:
        h, c = carry
        gates = xw + (h @ w_hh.T + b_hh)
        i = jax.nn.sigmoid(gates[..., :hid])
        f = jax.nn.sigmoid(gates[..., hid : 2 * hid])
        g = jnp.tanh(gates[..., 2 * hid : 3 * hid])
        o = jax.nn.sigmoid(gates[..., 3 * hid :])
        c = f * c + i * g
        h = o * jnp.tanh(c)
        if jnp.ndim(w_hr) == 2:
            h = h @ w_hr.T
        return (h, c), jnp.concatenate([i, f, g, o], axis=-1)

    def gru(h: jax.Array, xw: jax.Array) -> Any:
        hw = h @ w_hh.T + b_hh
        r = jax.nn.sigmoid(xw[..., :hid] + hw[..., :hid])
        z = jax.nn.sigmoid(xw[..., hid : 2 * hid] + hw[..., hid : 2 * hid])
        hw_n = hw[..., 2 * hid :]
        n = jnp.tanh(xw[..., 2 * hid :] + r * hw_n)
        return n + z * (h - n), jnp.concatenate([r, z, n, hw_n], axis=-1)

    return {"tanh": elman, "relu": elman, "lstm": lstm, "gru": gru}[mode]


def _steps(mask: jax.Array) -> jax.Array | None:
    """``mask`` as ``(L, N, 1)`` for ``where`` against ``(N, ·)`` states, or ``None`` when it
    is 0-d (every step of every sequence)."""
    return mask[..., None] if jnp.ndim(mask) == 2 else None


def _keep(m: jax.Array | None, new: Any, old: Any) -> Any:
    """``new`` where the step is a sequence's own (``m``), else ``old``; ``new`` without one."""
    return new if m is None else jax.tree.map(lambda a, b: jnp.where(m, a, b), new, old)


@partial(kernel, static_argnames=("mode", "reverse"))
def _scan_fn(
    xw: jax.Array,
    w_hh: jax.Array,
    b_hh: jax.Array,
    h0: jax.Array,
    c0: jax.Array,
    w_hr: jax.Array,
    mask: jax.Array,
    *,
    mode: str,
    reverse: bool = False,
) -> jax.Array:
    """The jnp forward: ``lax.scan`` of ``mode``'s step over the leading (time) axis, each
    step's output the new state(s) and the step's extras (``_cell``) on the last axis; a
    masked step keeps the state, outputs it and zeros for the extras. The carry starts in
    the dtype the step computes in (the promotion of every input: a float16 ``h0`` with
    float32 weights runs in float32, as ``linear``)."""
    step = _cell(mode, w_hh.shape[0] // _GATES[mode], w_hh, b_hh, w_hr)
    dtype = jnp.result_type(xw, w_hh, b_hh, h0, c0, w_hr)
    h0, c0 = h0.astype(dtype), c0.astype(dtype)

    def masked(carry: Any, inp: tuple[jax.Array, jax.Array | None]) -> tuple[Any, jax.Array]:
        xw_t, m_t = inp
        new, extras = step(carry, xw_t)
        new = _keep(m_t, new, carry)
        parts = [*new] if mode == "lstm" else [new]
        if extras is not None:
            parts.append(_keep(m_t, extras, 0.0))
        return new, parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)

    init = (h0, c0) if mode == "lstm" else h0
    ys: jax.Array = jax.lax.scan(masked, init, (xw, _steps(mask)), reverse=reverse)[1]
    return ys


@defop(name="rnn_scan")
def rnn_scan(
    xw: jax.Array,
    w_hh: jax.Array,
    b_hh: jax.Array,
    h0: jax.Array,
    c0: jax.Array,
    w_hr: jax.Array,
    mask: jax.Array,
    *,
    mode: str,
    reverse: bool = False,
) -> tuple[jax.Array, tuple[Any, ...]]:
    """One layer direction of a recurrent layer over a whole sequence.

    Args:
        xw: the input projections of every step, ``(L, N, G*H)``: ``x_t W_ih^T + b_ih``
            (``G`` gates: 1, or 4 for ``"lstm"`` (i, f, g, o), 3 for ``"gru"`` (r, z, n)).
        w_hh: ``W_hh``, ``(G*H, P)`` (PyTorch's layout: the step computes ``h W_hh^T``;
            ``P`` is ``H``, or an LSTM's projection size).
        b_hh: ``b_hh``, ``(G*H,)``, or ``0.0`` for none.
        h0: the initial state, ``(N, P)``.
        c0: the initial cell ``(N, H)`` of ``"lstm"``; ignored (pass ``0.0``) otherwise.
        w_hr: an LSTM's projection ``W_hr`` ``(P, H)`` (PyTorch's ``proj_size``: each step's
            ``h`` is ``(o * tanh(c)) W_hr^T``), or ``0.0`` for none.
        mask: ``(L, N)`` booleans, false at the steps past a sequence's own length (a
            ``PackedSequence``'s padding): such a step keeps the state and outputs it, so
            the output's last step (first, with ``reverse``) holds each sequence's final
            state; or a 0-d ``True`` (every step of every sequence).
        mode: ``"tanh"``, ``"relu"``, ``"lstm"`` or ``"gru"`` (PyTorch's equations).
        reverse: run from the last step to the first (a bidirectional layer's second
            direction); outputs stay aligned with the inputs.

    Returns:
        ``(L, N, P)``: ``h`` after each step, then on the last axis what the backward reads:
        ``"lstm"``: ``(L, N, P + 5H)``, ``[h, c, i, f, g, o]`` (the gates after their
        nonlinearities); ``"gru"``: ``(L, N, 5H)``, ``[h, r, z, n, h W_hn^T + b_hn]``.
        Saving them (as PyTorch's kernels save their workspace) spares the backward a
        second pass over the gates; they are outputs, so a ``create_graph`` pass
        differentiates through them.

    Raises:
        ValueError: an unknown ``mode``.

    The VJP is hand-written backpropagation through time (``_scan_vjp``, compiled per shape,
    dtype and mode): one reverse scan over the saved gates carries the state's cotangent;
    checked against JAX's derivative of the scan and against PyTorch's layers.
    """
    if mode not in MODES:
        raise ValueError(f"rnn_scan: unknown mode {mode!r}; use one of {', '.join(MODES)}.")
    y = _scan_fn(xw, w_hh, b_hh, h0, c0, w_hr, mask, mode=mode, reverse=reverse)
    # the backward reads no projection, only its dtype: the (L, N, G*H) array is not kept
    return y, (xw.dtype, w_hh, b_hh, h0, c0, w_hr, mask, y)


def _elman_back(
    mode: str, w_hh: jax.Array, hs: jax.Array, g: jax.Array, m: jax.Array | None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(dxw, dhw, dh0)`` of Elman's recurrence: ``act'`` read from the outputs (tanh:
    ``1 - h^2``, ReLU: ``h > 0``), the state's cotangent carried back through ``W_hh``."""
    slope = 1 - hs * hs if mode == "tanh" else (hs > 0).astype(hs.dtype)

    def step(dh: jax.Array, inp: tuple[Any, ...]) -> tuple[jax.Array, jax.Array]:
        g_t, slope_t, m_t = inp
        dh = dh + g_t
        dpre = dh * slope_t
        return _keep(m_t, dpre @ w_hh, dh), _keep(m_t, dpre, 0.0)

    dh0, dpre = jax.lax.scan(step, jnp.zeros_like(hs[0]), (g, slope, m), reverse=True)
    return dpre, dpre, dh0


def _lstm_back(
    y: jax.Array,
    g: jax.Array,
    w_hh: jax.Array,
    w_hr: jax.Array,
    c0: jax.Array,
    m: jax.Array | None,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(dgates, dh0, dc0, dw_hr)`` of the LSTM recurrence from its output ``y``
    ``[h, c, i, f, g, o]`` and the output's cotangent ``g`` (of the same layout):
    ``c' = f c + i g``, ``h' = o tanh(c')`` (projected: ``h' W_hr^T``), the cotangents of
    ``h`` and ``c`` carried back (``h`` through ``W_hh``, ``c`` through ``f``), a gate's
    own output cotangent added to what it gets through the states; ``dw_hr`` is zeros
    without a projection."""
    hid = c0.shape[-1]
    out = y.shape[-1] - 5 * hid
    projected = jnp.ndim(w_hr) == 2
    cs = y[..., out : out + hid]
    cprev = jnp.concatenate([c0[None].astype(cs.dtype), cs[:-1]], axis=0)
    acts = y[..., out + hid :]  # i, f, g, o
    i, f, gg, o = (acts[..., k * hid : (k + 1) * hid] for k in range(4))
    tc = jnp.tanh(cs)
    slope = jnp.concatenate([i * (1 - i), f * (1 - f), 1 - gg * gg, o * (1 - o)], axis=-1)

    def step(carry: tuple[jax.Array, jax.Array], inp: tuple[Any, ...]) -> Any:
        dh, dc = carry
        gh_t, gc_t, ga_t, i_t, f_t, g_t, o_t, tc_t, cp_t, slope_t, m_t = inp
        dh = dh + gh_t
        dc_in = dc + gc_t
        dr = dh @ w_hr if projected else dh  # the cotangent of o * tanh(c)
        dc = dc_in + dr * o_t * (1 - tc_t * tc_t)
        da = (jnp.concatenate([dc * g_t, dc * cp_t, dc * i_t, dr * tc_t], axis=-1) + ga_t) * slope_t
        prev = _keep(m_t, (da @ w_hh, dc * f_t), (dh, dc_in))
        # each step's h cotangent only for W_hr's (a loop output costs a write per step)
        return prev, (_keep(m_t, da, 0.0), _keep(m_t, dh, 0.0) if projected else None)

    carry = (jnp.zeros_like(g[0, :, :out]), jnp.zeros_like(cs[0]))
    grads = (g[..., :out], g[..., out : out + hid], g[..., out + hid :])
    inp = (*grads, i, f, gg, o, tc, cprev, slope, m)
    (dh0, dc0), (da, dhs) = jax.lax.scan(step, carry, inp, reverse=True)
    dw_hr = jnp.einsum("lnp,lnh->ph", dhs, o * tc) if projected else jnp.zeros_like(w_hr)
    return da, dh0, dc0, dw_hr


def _gru_back(
    y: jax.Array, g: jax.Array, w_hh: jax.Array, hprev: jax.Array, m: jax.Array | None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(dxw, dhw, dh0)`` of the GRU recurrence from its output ``y`` ``[h, r, z, n,
    hw_n]`` and the output's cotangent ``g`` (of the same layout): ``r, z = sigmoid(.)``,
    ``n = tanh(xw_n + r hw_n)``, ``h' = n + z (h - n)``; the state's cotangent carried back
    directly (``z``) and through ``W_hh``, each saved value's own output cotangent added to
    what it gets through the state."""
    hid = y.shape[-1] // 5
    r, z, n, hw_n = (y[..., (k + 1) * hid : (k + 2) * hid] for k in range(4))
    gr, gz, gn, ghw = (g[..., (k + 1) * hid : (k + 2) * hid] for k in range(4))

    def step(dh: jax.Array, inp: tuple[Any, ...]) -> Any:
        g_t, r_t, z_t, n_t, hw_t, hp_t, gr_t, gz_t, gn_t, ghw_t, m_t = inp
        dh = dh + g_t
        dn = (dh * (1 - z_t) + gn_t) * (1 - n_t * n_t)
        dr = (dn * hw_t + gr_t) * r_t * (1 - r_t)
        dz = (dh * (hp_t - n_t) + gz_t) * z_t * (1 - z_t)
        dx = jnp.concatenate([dr, dz, dn], axis=-1)
        dhw = jnp.concatenate([dr, dz, dn * r_t + ghw_t], axis=-1)
        prev = _keep(m_t, dh * z_t + dhw @ w_hh, dh)
        return prev, (_keep(m_t, dx, 0.0), _keep(m_t, dhw, 0.0))

    inp = (g[..., :hid], r, z, n, hw_n, hprev, gr, gz, gn, ghw, m)
    dh0, (dxw, dhw) = jax.lax.scan(step, jnp.zeros_like(hprev[0]), inp, reverse=True)
    return dxw, dhw, dh0


@partial(kernel, static_argnames=("dtype", "mode", "reverse"))
def _scan_vjp(
    w_hh: jax.Array,
    b_hh: jax.Array,
    h0: jax.Array,
    c0: jax.Array,
    w_hr: jax.Array,
    mask: jax.Array,
    y: jax.Array,
    g: jax.Array,
    *,
    dtype: Any,
    mode: str,
    reverse: bool = False,
) -> tuple[jax.Array, ...]:
    """Backpropagation through time from the output ``y`` (the states and the saved gates
    of every step): one reverse scan carries the state's cotangent (through a masked step
    unchanged); ``W_hh``'s and ``b_hh``'s cotangents are sums over the steps. A reversed
    direction is computed on the time-flipped sequences. Returns the cotangents of the
    inputs before ``mask`` (which has none), the projections' in ``dtype``, theirs."""
    m = _steps(mask)
    if reverse:
        y, g = y[::-1], g[::-1]
        m = None if m is None else m[::-1]
    out = h0.shape[-1]
    hs = y[..., :out]
    hprev = jnp.concatenate([h0[None].astype(hs.dtype), hs[:-1]], axis=0)
    dc0, dw_hr = jnp.zeros_like(c0), jnp.zeros_like(w_hr)
    if mode == "lstm":
        dxw, dh0, dc0, dw_hr = _lstm_back(y, g, w_hh, w_hr, c0, m)
        dhw = dxw
    elif mode == "gru":
        dxw, dhw, dh0 = _gru_back(y, g, w_hh, hprev, m)
    else:
        dxw, dhw, dh0 = _elman_back(mode, w_hh, hs, g, m)
    dw_hh = jnp.einsum("lng,lnh->gh", dhw, hprev)
    db_hh = jnp.sum(dhw, axis=(0, 1)) if jnp.ndim(b_hh) else jnp.sum(dhw)
    if reverse:
        dxw = dxw[::-1]
    return (
        dxw.astype(dtype),
        dw_hh.astype(w_hh.dtype),
        db_hh.astype(b_hh.dtype),
        dh0.astype(h0.dtype),
        dc0.astype(c0.dtype),
        dw_hr.astype(w_hr.dtype),
    )


@rnn_scan.defvjp
def _rnn_scan_vjp(
    res: tuple[Any, ...],
    g: jax.Array,
    needs: tuple[bool, ...],
    *,
    mode: str,
    reverse: bool = False,
) -> tuple[jax.Array | None, ...]:
    """Hand-written backpropagation through time (``_scan_vjp``); residuals: the
    projections' dtype, the other inputs and the output (no other array, so a
    ``create_graph`` pass differentiates this rule)."""
    dtype, *arrays = res
    cts = (*_scan_vjp(*arrays, g, dtype=dtype, mode=mode, reverse=reverse), None)  # mask: none
    return tuple(ct if need else None for ct, need in zip(cts, needs, strict=True))
