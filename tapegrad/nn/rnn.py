"""Recurrent layers ``RNN``, ``LSTM`` and ``GRU`` and their one-step cells ``RNNCell``,
``LSTMCell`` and ``GRUCell`` (PyTorch's equations, gates, parameter names and layouts)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tapegrad import ops
from tapegrad._args import integer, torch_keywords
from tapegrad._dtypes import check_float
from tapegrad._tensor import Tensor, optional_output
from tapegrad.errors import ShapeError
from tapegrad.nn import _init
from tapegrad.nn._inputs import as_input
from tapegrad.nn.dropout import check_p
from tapegrad.nn.module import Module
from tapegrad.nn.utils.rnn import PackedSequence, packed_like, sorted_padded
from tapegrad.op import refuse_torch
from tapegrad.ops.recurrent import rnn_scan
from tapegrad.random import key_of, split_key

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]


_NONLINEARITIES = ("tanh", "relu")


def _check_nonlinearity(name: str, nonlinearity: Any) -> str:
    """``nonlinearity`` of an Elman layer or cell: ``"tanh"`` or ``"relu"`` (PyTorch's).

    Raises:
        ValueError: any other value.
    """
    if nonlinearity not in _NONLINEARITIES:
        raise ValueError(
            f"{name}: unknown nonlinearity {nonlinearity!r}; use 'tanh' or 'relu' (PyTorch's)."
        )
    return str(nonlinearity)


def _mode(module: Module) -> str:
    """The recurrence ``rnn_scan`` runs for ``module`` (an ``RNN``'s nonlinearity, checked:
    code may have set it)."""
    if isinstance(module, RNN | RNNCell):
        return _check_nonlinearity(type(module).__name__, module.nonlinearity)
    return "lstm" if isinstance(module, LSTM | LSTMCell) else "gru"


def _gate_weights(
    module: Module,
    suffix: str,
    sizes: tuple[int, int, int],
    gates: int,
    bias: bool,
    keys: list[jax.Array],
    dtype: Any,
) -> None:
    """PyTorch's recurrent weights on ``module``: ``weight_ih{suffix}`` ``(G*H, in)``,
    ``weight_hh{suffix}`` ``(G*H, P)``, with ``bias`` ``bias_ih{suffix}`` and
    ``bias_hh{suffix}`` ``(G*H,)``, and where ``P != H`` (an LSTM's ``proj_size``)
    ``weight_hr{suffix}`` ``(P, H)``, all uniform in ``[-1/sqrt(H), 1/sqrt(H)]``, from the
    four ``keys`` (``weight_hr``'s from the first, folded); ``sizes`` is ``(in, H, P)``."""
    n_in, hidden, out = sizes
    k, g = _init.fan_in_bound(hidden), gates * hidden
    kih, khh, kbi, kbh = keys
    setattr(module, f"weight_ih{suffix}", _init.uniform(kih, (g, n_in), k, dtype))
    setattr(module, f"weight_hh{suffix}", _init.uniform(khh, (g, out), k, dtype))
    if bias:
        setattr(module, f"bias_ih{suffix}", _init.uniform(kbi, (g,), k, dtype))
        setattr(module, f"bias_hh{suffix}", _init.uniform(kbh, (g,), k, dtype))
    if out != hidden:
        khr = jax.random.fold_in(kih, 1)  # the four keys' draws stay those of proj_size=0
        setattr(module, f"weight_hr{suffix}", _init.uniform(khr, (out, hidden), k, dtype))


def _proj_size(name: str, proj_size: Any, hidden_size: int, gates: int) -> int:
    """PyTorch's ``proj_size``: 0 (none), or for an LSTM an int in ``[1, hidden_size)``.

    Raises:
        TypeError: not an integer.
        ValueError: negative, not below ``hidden_size``, or nonzero for ``RNN``/``GRU``
            (PyTorch's errors).
    """
    size = integer(proj_size, f"{name}: proj_size")
    if size < 0:
        raise ValueError(
            f"{name}: proj_size should be a positive integer or zero to disable projections, "
            f"got {size}."
        )
    if size and gates != 4:
        raise ValueError(
            f"{name}: proj_size argument is only supported for LSTM, not RNN or GRU; "
            "drop it (or use nn.LSTM)."
        )
    if size >= hidden_size:
        raise ValueError(
            f"{name}: proj_size has to be smaller than hidden_size ({size} >= {hidden_size})."
        )
    return size


def _sizes(name: str, *sizes: tuple[str, Any]) -> list[int]:
    """Each ``(argument, value)`` as a positive int.

    Raises:
        TypeError: a value that is not an integer.
        ValueError: a value below 1.
    """
    values = [integer(value, f"{name}: {arg}") for arg, value in sizes]
    if min(values) <= 0:
        *rest, last = (arg for arg, _ in sizes)
        raise ValueError(f"{name}: {', '.join(rest)} and {last} must be positive.")
    return values


def _suffix(layer: int, direction: int) -> str:
    """PyTorch's parameter suffix of a layer's direction: ``_l0``, ``_l0_reverse``."""
    return f"_l{layer}_reverse" if direction else f"_l{layer}"


class _Batch(NamedTuple):
    """A recurrent layer's input as its recurrence takes it: ``x`` time-major ``(L, N, in)``
    (a packed batch padded, in its sorted order), whether it came unbatched, the
    ``PackedSequence`` it came as, and the ``(L, N)`` mask of the steps that are the
    sequences' own (``True``: every step)."""

    x: Tensor
    unbatched: bool
    packed: PackedSequence | None = None
    mask: Any = True


class _RNNBase(Module):
    """Parameters ``weight_ih_l{k}`` ``(G*H, in)``, ``weight_hh_l{k}`` ``(G*H, H)``,
    ``bias_ih_l{k}``, ``bias_hh_l{k}`` ``(G*H,)`` per layer ``k`` (and the same with a
    ``_reverse`` suffix for a bidirectional layer's backward direction), all uniform in
    ``[-1/sqrt(H), 1/sqrt(H)]`` (PyTorch's), ``G`` gates stacked in PyTorch's order."""

    _gates: int

    @torch_keywords()
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        input_size, hidden_size, num_layers = _sizes(
            name,
            ("input_size", input_size),
            ("hidden_size", hidden_size),
            ("num_layers", num_layers),
        )
        self.proj_size = _proj_size(name, proj_size, hidden_size, self._gates)
        check_float(dtype, name)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first = bias, batch_first
        if bidirectional not in (True, False):  # 0 and 1 too, as PyTorch
            raise TypeError(f"{name}: bidirectional must be True or False, got {bidirectional!r}.")
        self.bidirectional = bool(bidirectional)
        directions = 2 if bidirectional else 1
        layer_keys = _init.keys(key, 4 * num_layers * directions + 1)
        out = self.proj_size or hidden_size  # the size of h
        for layer in range(num_layers):
            n_in = input_size if layer == 0 else out * directions
            for d in range(directions):
                at = 4 * (layer * directions + d)
                keys = layer_keys[at : at + 4]
                suffix = _suffix(layer, d)
                sizes = (n_in, hidden_size, out)
                _gate_weights(self, suffix, sizes, self._gates, bias, keys, dtype)
        self.dropout = check_p(name, dropout)  # a float, as PyTorch's (code sets it too)
        self._dropout_key = None if key is None else key_of(layer_keys[-1])
        _init.to_device(self, device, f"nn.{name}")

    def _drop(self, x: Tensor) -> Tensor:
        """Dropout with probability ``self.dropout`` (read at each call: PyTorch code sets
        ``rnn.dropout = 0.3``) on a layer's outputs while training; with a ``key``, the layer's
        own key is split once per call, as ``nn.Dropout``'s."""
        p = check_p(f"{type(self).__name__}.dropout", self.dropout)  # code sets it too
        if not self.training or p == 0.0:
            return x
        key = None
        if self._dropout_key is not None:
            self._dropout_key, key = split_key(self._dropout_key)
        return ops.dropout(x, p, training=True, key=key)

    def _check(self, x: Any) -> _Batch:
        """``x`` (a tensor or a ``PackedSequence``) as a time-major ``(L, N, in)`` batch.

        Raises:
            ShapeError: ``x`` is not ``(L, N, in)``, ``(N, L, in)`` with ``batch_first``,
                or unbatched ``(L, in)``; or it has no step.
        """
        if isinstance(x, PackedSequence):
            if x.data.ndim != 2 or x.data.shape[-1] != self.input_size:
                raise ShapeError(
                    f"{type(self).__name__}: a PackedSequence's data must be (steps, "
                    f"{self.input_size}), got shape {x.data.shape}."
                )
            padded, mask = sorted_padded(x)
            return _Batch(padded, False, x, mask)
        x = as_input(x, type(self).__name__)
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}: input must be (L, N, {self.input_size}) "
                f"({'(N, L, ...)' if self.batch_first else 'time first'}) or unbatched "
                f"(L, {self.input_size}), got shape {x.shape}."
            )
        if x.ndim == 2:
            x, unbatched = x.reshape(x.shape[0], 1, x.shape[1]), True
        else:
            x, unbatched = (x.transpose(1, 0, 2) if self.batch_first else x), False
        if x.shape[0] == 0:
            raise ShapeError(f"{type(self).__name__}: the sequence is empty (length 0).")
        return _Batch(x, unbatched)

    def _state_error(self, name: str, value: Any, want: str) -> TypeError:
        """The error for an initial state ``name`` of the wrong kind; ``want`` says what to
        pass."""
        shape = f" of shape {value.shape}" if isinstance(value, Tensor) else ""
        return TypeError(
            f"{type(self).__name__}: {name} must be {want}, got {type(value).__name__}{shape}; "
            "each state is (num_layers, N, hidden_size), and no hx at all starts from zeros."
        )

    def _state(self, h: Any, batch: _Batch, what: str, cell: bool = False) -> list[Tensor]:
        """The initial state per layer from ``h`` ``(num_layers, N, S)``; zeros for ``None``,
        computed through as PyTorch's (``weight_hh`` gets its zero gradient at a first step).
        ``S`` is ``hidden_size``, or an LSTM's ``proj_size`` for ``h`` (not for the ``cell``
        state ``c``); in the batch's original order (a packed batch's are sorted here).

        Raises:
            TypeError: ``h`` is not an array (a tuple given to ``GRU``, say).
            ShapeError: ``h`` has another shape (also: not 2-D for an unbatched input).
        """
        x, unbatched = batch.x, batch.unbatched
        n = x.shape[1]
        layers = self.num_layers * (2 if self.bidirectional else 1)
        size, size_name = self.hidden_size, "hidden_size"
        if self.proj_size and not cell:
            size, size_name = self.proj_size, "proj_size"
        if h is None:
            return [Tensor(jnp.zeros((n, size), x.dtype))] * layers
        refuse_torch(h, f"{type(self).__name__}: {what}")
        if not isinstance(h, Tensor | jax.Array | np.ndarray):
            raise self._state_error(what, h, "a tensor")
        if unbatched:
            if h.ndim != 2:
                raise ShapeError(
                    f"{type(self).__name__}: for an unbatched (L, {self.input_size}) input, "
                    f"{what} must be 2-D (num_layers * directions, {size_name}) = "
                    f"{(layers, size)}, got shape {tuple(h.shape)}; "
                    f"a batched input (L, N, {self.input_size}) takes "
                    f"(num_layers * directions, N, {size_name})."
                )
            h = h.reshape(h.shape[0], 1, h.shape[1])
        want = (layers, n, size)
        if h.shape != want:
            raise ShapeError(
                f"{type(self).__name__}: {what} must have shape {want} (num_layers * "
                f"directions, N, {size_name}), got {h.shape}."
            )
        if batch.packed is not None and batch.packed.sorted_indices is not None:
            h = as_input(h, type(self).__name__)[:, batch.packed.sorted_indices]
        return [h[layer] for layer in range(layers)]

    def _run(
        self, batch: _Batch, h0: list[Tensor], c0: list[Tensor] | None
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """The recurrence over time-major ``x`` ``(L, N, in)``, layer by layer, each layer's
        directions in turn (a bidirectional layer's second runs from the last step to the
        first; their outputs are concatenated on the last axis, PyTorch's layout): per layer
        direction, the input projections of all steps (one ``linear``) and one ``rnn_scan``.
        ``h0`` (and for an LSTM ``c0``) are the initial states per layer direction
        (layer-major). Returns the last layer's output and the final ``h`` (and ``c``, else
        empty) per layer direction, in that order."""
        mode = _mode(self)
        x, mask = batch.x, batch.mask
        directions = 2 if self.bidirectional else 1
        out = self.proj_size or self.hidden_size  # the size of h
        hs: list[Tensor] = []
        cs: list[Tensor] = []
        for layer in range(self.num_layers):
            outputs = []
            for d in range(directions):
                suffix = _suffix(layer, d)
                k = layer * directions + d
                w_ih, w_hh = (
                    getattr(self, f"weight_ih{suffix}"),
                    getattr(self, f"weight_hh{suffix}"),
                )
                b_ih = getattr(self, f"bias_ih{suffix}") if self.bias else None
                b_hh = getattr(self, f"bias_hh{suffix}") if self.bias else 0.0
                c = 0.0 if c0 is None else c0[k]
                w_hr = getattr(self, f"weight_hr{suffix}") if self.proj_size else 0.0
                xw = ops.linear(x, w_ih, b_ih)
                ys = rnn_scan(xw, w_hh, b_hh, h0[k], c, w_hr, mask, mode=mode, reverse=bool(d))
                last = 0 if d else -1  # the step each direction ends at (masked: kept)
                wide = ys.shape[-1] > out  # the gates the backward reads follow h (and c)
                outputs.append(ys[:, :, :out] if wide else ys)
                hs.append(ys[last, :, :out] if wide else ys[last])
                if c0 is not None:
                    cs.append(ys[last, :, out : out + self.hidden_size])
            x = outputs[0] if directions == 1 else ops.concatenate(outputs, axis=-1)
            if layer < self.num_layers - 1:
                x = self._drop(x)
        return x, hs, cs

    def _one_state(self, x: Any, hx: Any) -> tuple[Tensor, Tensor]:
        """``RNN``'s and ``GRU``'s forward (one state ``h``, see ``_run``). Returns
        ``(output, h_n)``."""
        batch = self._check(x)
        out, hs, _ = self._run(batch, self._state(hx, batch, "h_0"), None)
        return self._output(out, batch), self._final(hs, batch)

    def _output(self, seq: Tensor, batch: _Batch) -> Any:
        """The last layer's steps as the input came: packed, unbatched, batch first."""
        if batch.packed is not None:
            return packed_like(seq, batch.packed)
        if batch.unbatched:
            return seq.reshape(seq.shape[0], seq.shape[2])
        return seq.transpose(1, 0, 2) if self.batch_first else seq

    def _final(self, states: list[Tensor], batch: _Batch) -> Tensor:
        """The final states ``(num_layers, N, H)`` (``(num_layers, H)`` unbatched; a packed
        batch's in its original order): an optional output, which code that ignores it
        (``out, _ = gru(x)``) leaves nothing of on the tape."""
        out = ops.stack(states, axis=0)
        made = [out, *states]
        if batch.packed is not None and batch.packed.unsorted_indices is not None:
            out = out[:, batch.packed.unsorted_indices]
        elif batch.unbatched:
            out = out.reshape(out.shape[0], out.shape[2])
        return optional_output(out, *made)

    def flatten_parameters(self) -> None:
        """Nothing to do (PyTorch's packs the weights for cuDNN; there are no packed weights
        here): kept so PyTorch code that calls it runs unchanged."""

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
            f"batch_first={self.batch_first}"
            + ("" if self.bias else ", bias=False")
            + (f", dropout={self.dropout}" if self.dropout else "")
            + (", bidirectional=True" if self.bidirectional else "")
            + (f", proj_size={self.proj_size}" if self.proj_size else "")
        )


class RNN(_RNNBase):
    """Elman recurrent layer, PyTorch's equation:
    ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)``, ``act`` tanh or ReLU.

    A loop that feeds ``h`` back across batches must ``.detach()`` it (truncated
    backpropagation through time), or each step's graph stays alive through the state: the
    leak report names it as kept alive.

    Args:
        input_size: features of each step.
        hidden_size: ``H``.
        num_layers: stacked layers.
        nonlinearity: ``"tanh"`` (PyTorch's default) or ``"relu"``.
        bias: learn the biases.
        batch_first: ``(N, L, in)`` inputs and outputs; else ``(L, N, in)``.
        dropout: dropout on the outputs of every layer but the last, while training.
        bidirectional: a second direction per layer running from the last step to the
            first (parameters suffixed ``_reverse``); outputs ``(L, N, 2 H)`` (the two
            directions concatenated, forward first) and final states ``(2 num_layers, N, H)``
            (layer by layer, forward direction first), as PyTorch's.
        proj_size: 0 (PyTorch's keyword; projections are an LSTM's).
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters live (PyTorch's ``device=``; ``None``: JAX's default).

    Raises:
        TypeError: a size that is not an integer.
        ValueError: a non-positive size, ``dropout`` outside ``[0, 1]``, a nonlinearity
            other than ``"tanh"`` and ``"relu"``, a nonzero ``proj_size`` (PyTorch's error).
    """

    _gates = 1

    @torch_keywords()
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        proj_size: int = 0,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        checked = _check_nonlinearity("RNN", nonlinearity)
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            proj_size,
            key=key,
            dtype=dtype,
            device=device,
        )
        self.nonlinearity = checked

    def forward(self, x: Any, hx: Tensor | None = None) -> tuple[Any, Tensor]:
        """Run over the sequence: arguments, result and errors as ``GRU.forward``'s, and a
        ``ValueError`` for a ``nonlinearity`` set to another value than "tanh" or "relu"
        (``_mode`` checks it: code may have set it)."""
        return self._one_state(x, hx)

    def extra_repr(self) -> str:
        return super().extra_repr() + (
            f", nonlinearity={self.nonlinearity!r}" if self.nonlinearity != "tanh" else ""
        )


class LSTM(_RNNBase):
    """Long short-term memory (Hochreiter & Schmidhuber 1997), PyTorch's equations:
    ``i, f, g, o = sigmoid, sigmoid, tanh, sigmoid`` of ``x W_ih^T + b_ih + h W_hh^T + b_hh``
    (gates stacked in that order), ``c' = f * c + i * g``, ``h' = o * tanh(c')``; with
    ``proj_size`` ``P``, ``h' = (o * tanh(c')) W_hr^T`` (``weight_hr_l{k}`` ``(P, H)``).

    A loop that feeds ``(h, c)`` back across batches must ``.detach()`` them (truncated
    backpropagation through time), or each step's graph stays alive through the state:
    the leak report names it as kept alive.

    Args:
        input_size: features of each step.
        hidden_size: ``H``.
        num_layers: stacked layers.
        bias: learn the biases.
        batch_first: ``(N, L, in)`` inputs and outputs; else ``(L, N, in)``.
        dropout: dropout on the outputs of every layer but the last, while training.
        bidirectional: a second direction per layer running from the last step to the
            first (parameters suffixed ``_reverse``); outputs ``(L, N, 2 H)`` (the two
            directions concatenated, forward first) and final states ``(2 num_layers, N, H)``
            (layer by layer, forward direction first), as PyTorch's.
        proj_size: ``P``, an int in ``[0, H)``: each step's ``h`` projected to ``P``
            features (PyTorch's; 0, the default, none). Outputs and ``h_n`` then have ``P``
            features, ``c_n`` keeps ``H``; ``weight_hh`` is ``(4H, P)``.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: a size that is not an integer.
        ValueError: a non-positive size, ``dropout`` outside ``[0, 1]``, a ``proj_size``
            outside ``[0, hidden_size)``.
    """

    _gates = 4

    def forward(
        self, x: Any, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Any, tuple[Tensor, Tensor]]:
        """Run over the sequence.

        Args:
            x: ``(L, N, input_size)`` (``(N, L, input_size)`` with ``batch_first``),
                unbatched ``(L, input_size)``, or a ``PackedSequence``
                (``nn.utils.rnn.pack_padded_sequence``): sequences of different lengths,
                each run over its own steps only (a reverse direction starts at its own
                last step); the output is then packed alike, and the final states are each
                sequence's own, in the batch's order.
            hx: initial ``(h_0, c_0)``, each ``(num_layers * directions, N, H)`` (``h_0``'s
                last axis ``proj_size`` where one is set); zeros by default.

        Returns:
            ``(output, (h_n, c_n))``: the last layer's ``h`` at every step, and the final
            states of every layer.

        Raises:
            TypeError: ``hx`` is not a pair ``(h_0, c_0)`` of arrays.
            ShapeError: ``x``, ``h_0`` or ``c_0`` of another shape than given above.
        """
        batch = self._check(x)
        if hx is not None and not (isinstance(hx, tuple | list) and len(hx) == 2):
            raise self._state_error("hx", hx, "a pair (h_0, c_0)")
        h0 = self._state(hx[0] if hx else None, batch, "h_0")
        c0 = self._state(hx[1] if hx else None, batch, "c_0", cell=True)
        out, hs, cs = self._run(batch, h0, c0)
        return self._output(out, batch), (self._final(hs, batch), self._final(cs, batch))


class GRU(_RNNBase):
    """Gated recurrent unit (Cho et al. 2014), PyTorch's equations:
    ``r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr)``, ``z`` likewise,
    ``n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))``, ``h' = (1 - z) * n + z * h``
    (gates stacked ``r, z, n``).

    Args:
        input_size: features of each step.
        hidden_size: ``H``.
        num_layers: stacked layers.
        bias: learn the biases.
        batch_first: ``(N, L, in)`` inputs and outputs; else ``(L, N, in)``.
        dropout: dropout on the outputs of every layer but the last, while training.
        bidirectional: a second direction per layer running from the last step to the
            first (parameters suffixed ``_reverse``); outputs ``(L, N, 2 H)`` (the two
            directions concatenated, forward first) and final states ``(2 num_layers, N, H)``
            (layer by layer, forward direction first), as PyTorch's.
        key: an int seed or a key; ``None`` draws from the process random state.
        dtype: a floating dtype for the parameters.
        device: where the parameters and buffers are made, as ``tg.zeros(..., device=)``
            (``"cpu"``, ``"gpu:0"``, a ``jax.Device``); ``None``: JAX's default device.

    Raises:
        TypeError: a size that is not an integer.
        ValueError: a non-positive size, ``dropout`` outside ``[0, 1]``, a nonzero
            ``proj_size`` (PyTorch's error: projections are an LSTM's).
    """

    _gates = 3

    def forward(self, x: Any, hx: Tensor | None = None) -> tuple[Any, Tensor]:
        """Run over the sequence.

        Args:
            x: as ``LSTM.forward``'s (a tensor, or a ``PackedSequence``).
            hx: initial ``h_0`` ``(num_layers * directions, N, H)``; zeros by default.

        Returns:
            ``(output, h_n)``: the last layer's ``h`` at every step, and the final state of
            every layer.

        Raises:
            TypeError: ``hx`` is not an array (an LSTM-style tuple, say).
            ShapeError: ``x`` or ``hx`` of another shape than given above.
        """
        return self._one_state(x, hx)


class _CellBase(Module):
    """Parameters ``weight_ih`` ``(G*H, in)``, ``weight_hh`` ``(G*H, H)``, ``bias_ih``,
    ``bias_hh`` ``(G*H,)``, uniform in ``[-1/sqrt(H), 1/sqrt(H)]`` (PyTorch's), ``G`` gates
    stacked in PyTorch's order; one step of the recurrence per call."""

    _gates: int

    @torch_keywords()
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        sizes = _sizes(name, ("input_size", input_size), ("hidden_size", hidden_size))
        check_float(dtype, name)
        self.input_size, self.hidden_size, self.bias = *sizes, bias
        n_in, hidden = sizes
        _gate_weights(
            self, "", (n_in, hidden, hidden), self._gates, bias, _init.keys(key, 4), dtype
        )
        _init.to_device(self, device, f"nn.{name}")

    def _input(self, x: Any) -> tuple[Tensor, bool]:
        """``x`` as ``(N, input_size)``; whether it was unbatched ``(input_size,)``."""
        x = as_input(x, type(self).__name__)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}: input must be (N, {self.input_size}) or unbatched "
                f"({self.input_size},), got shape {x.shape}."
            )
        return (x.reshape(1, x.shape[0]), True) if x.ndim == 1 else (x, False)

    def _hidden(self, h: Any, x: Tensor, unbatched: bool, what: str) -> Tensor:
        """A state ``(N, H)`` (``(H,)`` for an unbatched input) as ``(N, H)``; zeros for
        ``None`` (computed through, as PyTorch's: ``weight_hh`` gets its zero gradient).

        Raises:
            TypeError: ``h`` is not an array.
            ShapeError: ``h`` has another shape.
        """
        n = x.shape[0]
        if h is None:
            return Tensor(jnp.zeros((n, self.hidden_size), x.dtype))
        refuse_torch(h, f"{type(self).__name__}: {what}")
        if not isinstance(h, Tensor | jax.Array | np.ndarray):
            raise TypeError(
                f"{type(self).__name__}: {what} must be a tensor, got {type(h).__name__}."
            )
        want = (self.hidden_size,) if unbatched else (n, self.hidden_size)
        if tuple(h.shape) != want:
            raise ShapeError(
                f"{type(self).__name__}: {what} must have shape {want}, got {tuple(h.shape)}."
            )
        state = as_input(h, type(self).__name__)
        return state.reshape(1, self.hidden_size) if unbatched else state

    def _step(self, x: Tensor, h: Tensor, c: Tensor | float = 0.0) -> Tensor:
        """One step of the recurrence from ``x`` ``(N, in)`` and the state ``h`` (and an
        LSTM's ``c``), each ``(N, H)``: an ``rnn_scan`` of one step, ``(1, N, W)``, ``h'``
        first (an LSTM's ``c'`` next), then the gates its backward reads."""
        xw = ops.linear(x, self.weight_ih, self.bias_ih if self.bias else None)
        b_hh = self.bias_hh if self.bias else 0.0
        xw = xw.reshape(1, *xw.shape)
        return rnn_scan(xw, self.weight_hh, b_hh, h, c, 0.0, True, mode=_mode(self))

    @staticmethod
    def _out(h: Tensor, unbatched: bool) -> Tensor:
        return h.reshape(h.shape[1]) if unbatched else h

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """One step of ``RNN``: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (PyTorch's
    ``nn.RNNCell``; ``act`` tanh or ReLU).

    Args:
        input_size, hidden_size, bias, key, dtype, device: as ``RNN``'s.
        nonlinearity: ``"tanh"`` (the default) or ``"relu"``.

    Raises:
        TypeError: a size that is not an integer.
        ValueError: a non-positive size; a nonlinearity other than ``"tanh"`` and ``"relu"``.
    """

    _gates = 1

    @torch_keywords()
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        *,
        key: Any = None,
        dtype: Any = jnp.float32,
        device: Any = None,
    ) -> None:
        checked = _check_nonlinearity("RNNCell", nonlinearity)
        super().__init__(input_size, hidden_size, bias, key=key, dtype=dtype, device=device)
        self.nonlinearity = checked

    def extra_repr(self) -> str:
        return super().extra_repr() + (
            f", nonlinearity={self.nonlinearity!r}" if self.nonlinearity != "tanh" else ""
        )

    def forward(self, x: Tensor, hx: Tensor | None = None) -> Tensor:
        """One step: ``x`` ``(N, input_size)`` or ``(input_size,)``, ``hx`` ``(N, H)`` or
        ``(H,)`` (zeros by default); returns ``h'`` of ``hx``'s shape.

        Raises:
            TypeError: ``hx`` is not an array.
            ShapeError: ``x`` or ``hx`` of another shape.
        """
        x, unbatched = self._input(x)
        return self._out(self._step(x, self._hidden(hx, x, unbatched, "hx"))[0], unbatched)


class LSTMCell(_CellBase):
    """One step of ``LSTM`` (PyTorch's ``nn.LSTMCell``; its equations and gate order
    ``i, f, g, o``). Arguments and errors as ``RNNCell``'s, without ``nonlinearity``."""

    _gates = 4

    def forward(self, x: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """One step: ``x`` ``(N, input_size)`` or ``(input_size,)``, ``hx`` a pair
        ``(h, c)``, each ``(N, H)`` or ``(H,)`` (zeros by default); returns ``(h', c')``.

        Raises:
            TypeError: ``hx`` is not a pair of arrays.
            ShapeError: ``x``, ``h`` or ``c`` of another shape.
        """
        x, unbatched = self._input(x)
        if hx is not None and not (isinstance(hx, tuple | list) and len(hx) == 2):
            raise TypeError(
                f"LSTMCell: hx must be a pair (h, c), got {type(hx).__name__}; each is "
                "(N, hidden_size), and no hx at all starts from zeros."
            )
        h = self._hidden(hx[0] if hx else None, x, unbatched, "h")
        c = self._hidden(hx[1] if hx else None, x, unbatched, "c")
        hc, hid = self._step(x, h, c), self.hidden_size
        return self._out(hc[0, :, :hid], unbatched), self._out(hc[0, :, hid : 2 * hid], unbatched)


class GRUCell(_CellBase):
    """One step of ``GRU`` (PyTorch's ``nn.GRUCell``; its equations and gate order
    ``r, z, n``). Arguments and errors as ``RNNCell``'s, without ``nonlinearity``."""

    _gates = 3

    def forward(self, x: Tensor, hx: Tensor | None = None) -> Tensor:
        """One step: arguments, result and errors as ``RNNCell.forward``'s."""
        x, unbatched = self._input(x)
        h = self._step(x, self._hidden(hx, x, unbatched, "hx"))[0, :, : self.hidden_size]
        return self._out(h, unbatched)
