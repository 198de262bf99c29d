"""tapegrad.nn: layers and models with PyTorch's names, layouts and initialisations.

A :class:`Module` registers what is assigned to its attributes, as PyTorch's does:

- a ``Tensor`` that is a leaf requiring grad is a **parameter** (``parameters()``,
  ``named_parameters()``, ``state_dict()``); there is no separate ``Parameter`` class, and a
  parameter frozen with ``requires_grad_(False)`` stays one wherever it is assigned
  (``head.weight = frozen_embedding.weight``). At a parameter's name only a parameter (or
  ``None``) may be assigned: anything else raises ``TypeError``, as in PyTorch;
- another ``Tensor`` that does not require grad is a **buffer** (in ``state_dict()``, not
  in ``parameters()``: running statistics), except one declared with
  ``register_buffer(name, t, persistent=False)``, which state dicts leave out (a cache);
- a ``Module`` is a **sub-module** (its entries are listed under ``"name."``);
- anything else, including the output of a recorded op, is a plain attribute.

Parameters are ordinary tape leaves: an optimizer step replaces their value with
``p.data = new`` and keeps their node (``tapegrad.optim``). Parameter names and layouts are
PyTorch's (``Linear.weight`` is ``(out_features, in_features)``), so a PyTorch
``state_dict()`` loads unchanged with ``load_state_dict`` (tied weights are listed under each
name, as PyTorch lists them).

There is no ``tapegrad.nn.functional``: the functions of ``torch.nn.functional`` are ``tg.``
functions (``tg.relu``, ``tg.softmax``, ``tg.cross_entropy``, ``tg.conv2d``,
``tg.scaled_dot_product_attention``, ...); ``tg.nn.functional`` raises an ``AttributeError``
saying so.
"""

from typing import TYPE_CHECKING

from tapegrad.nn import init, utils
from tapegrad.nn.activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from tapegrad.nn.attention import MultiheadAttention
from tapegrad.nn.container import ModuleDict, ModuleList, Sequential
from tapegrad.nn.conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from tapegrad.nn.ctc import CTCLoss
from tapegrad.nn.distance import CosineSimilarity, PairwiseDistance
from tapegrad.nn.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from tapegrad.nn.linear import Identity, Linear
from tapegrad.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from tapegrad.nn.margin_loss import (
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelSoftMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
)
from tapegrad.nn.module import LoadResult, Module, RemovableHandle
from tapegrad.nn.normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    RMSNorm,
)
from tapegrad.nn.param_containers import ParameterDict, ParameterList
from tapegrad.nn.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
)
from tapegrad.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from tapegrad.nn.shape import Flatten, Unflatten
from tapegrad.nn.sparse import Embedding, EmbeddingBag
from tapegrad.nn.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from tapegrad.nn.upsampling import (
    PixelShuffle,
    PixelUnshuffle,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)

__all__ = [
    "init",
    "Module",
    "LoadResult",
    "RemovableHandle",
    "Linear",
    "Identity",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "Upsample",
    "UpsamplingNearest2d",
    "UpsamplingBilinear2d",
    "PixelShuffle",
    "PixelUnshuffle",
    "MaxPool1d",
    "AvgPool1d",
    "MaxPool2d",
    "AvgPool2d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "MaxPool3d",
    "AvgPool3d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "Flatten",
    "Unflatten",
    "Embedding",
    "EmbeddingBag",
    "LayerNorm",
    "RMSNorm",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "ReLU",
    "GELU",
    "SiLU",
    "Tanh",
    "Sigmoid",
    "LeakyReLU",
    "ELU",
    "Softplus",
    "Softmax",
    "LogSoftmax",
    "SELU",
    "Hardtanh",
    "ReLU6",
    "Mish",
    "LogSigmoid",
    "Hardswish",
    "Hardsigmoid",
    "Softsign",
    "CELU",
    "Hardshrink",
    "Softshrink",
    "Tanhshrink",
    "Threshold",
    "Softmin",
    "Softmax2d",
    "PReLU",
    "GLU",
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "CrossEntropyLoss",
    "NLLLoss",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "HuberLoss",
    "BCEWithLogitsLoss",
    "BCELoss",
    "KLDivLoss",
    "MarginRankingLoss",
    "HingeEmbeddingLoss",
    "SoftMarginLoss",
    "MultiLabelSoftMarginLoss",
    "CosineEmbeddingLoss",
    "TripletMarginLoss",
    "GaussianNLLLoss",
    "PoissonNLLLoss",
    "PairwiseDistance",
    "CosineSimilarity",
    "utils",
    "CTCLoss",
]

if not TYPE_CHECKING:  # mypy would otherwise accept any attribute of tapegrad.nn

    def __getattr__(name: str) -> object:
        if name == "functional":
            raise AttributeError(
                "tapegrad has no nn.functional: the functions of torch.nn.functional are tg. "
                "functions (import tapegrad as tg): tg.relu, tg.gelu, tg.softmax, "
                "tg.log_softmax, tg.cross_entropy, tg.mse_loss, tg.dropout, tg.conv2d, "
                "tg.max_pool2d, tg.layer_norm, tg.pad, tg.one_hot, "
                "tg.scaled_dot_product_attention, ... (axis= where PyTorch says dim=)."
            )
        hint = _TORCH_NAMES.get(name)
        if hint is not None:
            raise AttributeError(f"tapegrad.nn has no {name}: {hint}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_TORCH_NAMES = {
    "Parameter": "a parameter is a leaf tensor that requires grad; assign one as a Module "
    "attribute and it is registered by name, as PyTorch's nn.Parameter: "
    "self.w = tg.randn((3, 4)).require_grad().",
}
"""PyTorch names tapegrad.nn spells otherwise: what to write instead."""
