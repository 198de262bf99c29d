"""tapegrad.nn: layers and models with PyTorch's names, layouts and initialisations.

A :class:`Module` registers what is assigned to its attributes, as PyTorch's does:

- a ``Tensor`` that is a leaf requiring grad is a **parameter** (``parameters()``,
  ``named_parameters()``, ``state_dict()``); there is no separate ``Parameter`` class;
- another ``Tensor`` that does not require grad is a **buffer** (in ``state_dict()``, not
  in ``parameters()``: running statistics);
- a ``Module`` is a **sub-module** (its entries are listed under ``"name."``);
- anything else, including the output of a recorded op, is a plain attribute.

Parameters are ordinary tape leaves: an optimizer step replaces their value with
``p.data = new`` and keeps their node (``tapegrad.optim``). Parameter names and layouts are
PyTorch's (``Linear.weight`` is ``(out_features, in_features)``), so a PyTorch
``state_dict()`` loads unchanged with ``load_state_dict``.
"""

from tapegrad.nn import utils
from tapegrad.nn.activation import GELU, ReLU, Sigmoid, SiLU, Tanh
from tapegrad.nn.attention import MultiheadAttention
from tapegrad.nn.container import ModuleDict, ModuleList, Sequential
from tapegrad.nn.conv import Conv1d, Conv2d
from tapegrad.nn.dropout import Dropout
from tapegrad.nn.linear import Identity, Linear
from tapegrad.nn.loss import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss, NLLLoss
from tapegrad.nn.module import LoadResult, Module
from tapegrad.nn.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from tapegrad.nn.pooling import AvgPool2d, MaxPool2d
from tapegrad.nn.rnn import GRU, LSTM
from tapegrad.nn.shape import Flatten
from tapegrad.nn.sparse import Embedding
from tapegrad.nn.transformer import TransformerEncoderLayer

__all__ = [
    "Module",
    "LoadResult",
    "Linear",
    "Identity",
    "Conv1d",
    "Conv2d",
    "MaxPool2d",
    "AvgPool2d",
    "Flatten",
    "Embedding",
    "LayerNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "Dropout",
    "ReLU",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "LSTM",
    "GRU",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "BCEWithLogitsLoss",
    "utils",
]
