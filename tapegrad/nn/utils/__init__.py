"""PyTorch's ``torch.nn.utils``: gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``)
and, in ``tapegrad.nn.utils.rnn``, padded and packed batches of sequences."""

from tapegrad.nn.utils import rnn
from tapegrad.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_", "rnn"]
