"""A layer's secondary outputs (an RNN's final states, attention weights) that PyTorch code
drops unused (``out, _ = gru(x)``) leave nothing on the tape (docs/design.md rule 4), while
used ones are differentiated as any output (their gradients: test_layers_torch.py)."""

from __future__ import annotations

import pytest

import diagnostics
import tapegrad as tg
from tapegrad import nn


def _params_only(*modules: nn.Module) -> int:
    return sum(len(list(m.parameters())) for m in modules)


@pytest.mark.parametrize("unbatched", [False, True])
def test_ignored_final_states_and_weights_leave_only_the_parameters(unbatched: bool) -> None:
    base = tg.graph_stats().nodes  # tensors other tests of this process keep
    gru, lstm = nn.GRU(3, 4, num_layers=2, key=0), nn.LSTM(4, 4, key=1)
    mha = nn.MultiheadAttention(4, 2, key=2)
    shape = (6, 3) if unbatched else (6, 2, 3)
    with diagnostics.no_leaks():  # raised on these hanging nodes before
        for step in range(3):
            out, _h = gru(tg.randn(shape, key=step))
            out, (_h, _c) = lstm(out)
            q = out.reshape(6, 1, 4) if unbatched else out  # attention takes 3-D inputs
            att, _w = mha(q, q, q)
            att.sum().backward()
            del out, q, _h, _c, att, _w
            assert tg.graph_stats().nodes == base + _params_only(gru, lstm, mha)
