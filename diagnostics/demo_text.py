"""``python -m diagnostics demo --model transformer``: a small character-level transformer
trained on the source of Python's standard library, with the classic attention-model leak
planted: attention maps kept "for visualisation" with their graphs.

Data: the ``.py`` files at the top of the standard library directory
(``sysconfig.get_paths()["stdlib"]``), in sorted order, concatenated and cut at
``max_chars`` (so every run on a machine reads the same text); characters outside printable
ASCII become ``?``. The first 90 % train, the rest validate. Losses are printed in **bits
per character** (cross entropy / ln 2), beside the unigram baseline: the entropy of the
validation text under the training text's character frequencies.

Model: token and position embeddings, ``layers`` pre-norm blocks (``LayerNorm`` -
causal ``MultiheadAttention`` - residual - ``LayerNorm`` - ``Linear``/``GELU``/``Linear`` -
residual), a final ``LayerNorm`` and a linear head; AdamW with a linear warm-up.

Planted leak: each step appends the first block's attention map (first sequence, first head)
to a history list for a later picture, without ``.detach()``: every map keeps its
step's graph reachable, and the list grows across epochs; the report names the growing
graphs as kept alive, with the line. ``--fixed`` appends ``.detach()``\\ ed maps.
"""

from __future__ import annotations

import math
import os
import sysconfig
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tapegrad as tg
from diagnostics.training import Task
from tapegrad import nn, optim

__all__ = ["load_corpus", "Corpus", "CharTransformer", "TextTask", "sample"]

BATCH_SIZE = 16
BLOCK = 64
LEARNING_RATE = 3e-3


class Corpus:
    """The standard library's source as character ids.

    Attributes:
        chars: the vocabulary (sorted characters).
        train: int32 ids of the first 90 %.
        val: int32 ids of the rest.
    """

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        lookup = {c: i for i, c in enumerate(self.chars)}
        ids = np.fromiter((lookup[c] for c in text), dtype=np.int32, count=len(text))
        cut = int(0.9 * len(ids))
        self.train, self.val = ids[:cut], ids[cut:]

    def decode(self, ids: Any) -> str:
        """The text of ``ids``."""
        return "".join(self.chars[int(i)] for i in ids)

    def encode(self, text: str) -> np.ndarray:
        """The ids of ``text`` (characters outside the vocabulary become ``?``)."""
        lookup = {c: i for i, c in enumerate(self.chars)}
        return np.array([lookup.get(c, lookup.get("?", 0)) for c in text], dtype=np.int32)

    def unigram_bits(self) -> float:
        """Bits per character of the validation text under the training text's character
        frequencies (add-one smoothed): the baseline a model must beat."""
        counts = np.bincount(self.train, minlength=len(self.chars)) + 1.0
        p = counts / counts.sum()
        return float(-np.mean(np.log2(p[self.val])))


def load_corpus(max_chars: int = 300_000) -> Corpus:
    """The first ``max_chars`` characters of the standard library's top-level ``.py`` files
    (sorted by name), printable ASCII (others become ``?``)."""
    stdlib = sysconfig.get_paths()["stdlib"]
    parts: list[str] = []
    total = 0
    for name in sorted(os.listdir(stdlib)):
        if not name.endswith(".py") or total >= max_chars:
            continue
        with open(os.path.join(stdlib, name), encoding="utf-8", errors="replace") as f:
            text = f.read()
        parts.append(text)
        total += len(text)
    raw = "".join(parts)[:max_chars]
    return Corpus("".join(c if c == "\n" or 32 <= ord(c) < 127 else "?" for c in raw))


class Block(nn.Module):
    """A pre-norm transformer block; keeps its last attention weights ``(N, heads, L, L)`` in
    ``attention``."""

    def __init__(self, width: int, heads: int, dropout: float, key: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True, key=key)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width, key=key + 1),
            nn.GELU(),
            nn.Linear(4 * width, width, key=key + 2),
            nn.Dropout(dropout, key=key + 3),
        )
        # the last attention weights, for the report: not state (a checkpoint resumes without)
        self.register_buffer("attention", None, persistent=False)

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        """``x`` ``(N, L, width)`` through attention (causal) and the MLP, with residuals."""
        h = self.ln1(x)
        # Per-head weights: the softmax output itself, on the loss's graph (no extra op).
        out, self.attention = self.attn(
            h, h, h, need_weights=True, average_attn_weights=False, is_causal=True
        )
        x = x + out
        y: tg.Tensor = x + self.mlp(self.ln2(x))
        return y


class CharTransformer(nn.Module):
    """Next-character logits ``(N, L, vocab)`` of ids ``(N, L)``, ``L <= block``."""

    def __init__(
        self,
        vocab: int,
        block: int = BLOCK,
        width: int = 64,
        heads: int = 4,
        layers: int = 2,
        dropout: float = 0.1,
        key: int = 0,
    ) -> None:
        super().__init__()
        self.block = block
        self.tok = nn.Embedding(vocab, width, key=key)
        self.pos = nn.Embedding(block, width, key=key + 1)
        self.blocks = nn.ModuleList(
            Block(width, heads, dropout, key=key + 10 * (i + 1)) for i in range(layers)
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, key=key + 2)

    def forward(self, ids: tg.Tensor) -> tg.Tensor:
        """Logits for each position of ``ids``."""
        x = self.tok(ids) + self.pos(jnp.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits: tg.Tensor = self.head(self.norm(x))
        return logits


def sample(
    model: CharTransformer, corpus: Corpus, prompt: str, length: int, *, seed: int = 0
) -> str:
    """``prompt`` continued by ``length`` characters drawn from the model (temperature 0.8),
    under ``tg.no_grad()``; the prompt is left-padded with newlines to the model's block."""
    rng = np.random.default_rng(seed)
    ids = list(corpus.encode(prompt))
    # The context is always ``block`` long (left-padded with newlines), so every forward has
    # one shape and JAX compiles each op once, not once per context length.
    pad = [int(corpus.encode("\n")[0])] * model.block
    model.eval()
    with tg.no_grad():
        for _ in range(length):
            context = np.array([(pad + ids)[-model.block :]], dtype=np.int32)
            logits = model(tg.tensor(context)).data[0, -1] / 0.8
            p = np.asarray(jax.nn.softmax(logits), dtype=np.float64)
            ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return corpus.decode(ids)


class TextTask(Task):
    """The transformer demo (see the module docstring)."""

    name = "transformer"

    def __init__(
        self,
        epochs: int,
        seed: int = 0,
        steps: int | None = None,
        corpus: Corpus | None = None,
        width: int = 64,
        layers: int = 2,
    ) -> None:
        self.corpus = corpus if corpus is not None else load_corpus()
        self.steps = steps or 150
        self.model: CharTransformer = CharTransformer(
            len(self.corpus.chars), width=width, layers=layers, key=seed
        )
        self.opt = optim.AdamW(self.model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
        self.warmup = optim.lr_scheduler.LinearWarmup(self.opt, min(50, self.steps))
        self.schedule, self.schedule_every_step = self.warmup, True
        self.maps: list[tg.Tensor] = []  # attention maps kept for a picture (the leak's home)
        self.rng = np.random.default_rng(seed)
        self.total = 0.0

    def _batch(self, data: np.ndarray, rng: np.random.Generator) -> tuple[tg.Tensor, tg.Tensor]:
        starts = rng.integers(0, len(data) - BLOCK - 1, BATCH_SIZE)
        windows = np.stack([data[s : s + BLOCK + 1] for s in starts])
        return tg.tensor(windows[:, :-1]), tg.tensor(windows[:, 1:])

    def start_epoch(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.total = 0.0

    def train_step(self, i: int, fixed: bool) -> float:
        x, y = self._batch(self.corpus.train, self.rng)
        self.opt.zero_grad()
        logits = self.model(x)
        loss = tg.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        self.opt.step()
        self.warmup.step()
        attention = self.model.blocks[0].attention
        assert attention is not None
        if fixed:
            self.maps.append(attention.detach()[0, 0])
        else:
            self.maps.append(attention[0, 0])  # planted leak: the map keeps its step's graph
        value = float(loss.item())
        self.total += value
        return value / math.log(2)

    def evaluate(self, fixed: bool) -> dict[str, float]:
        rng = np.random.default_rng(12345)  # the same validation windows every epoch
        losses = []
        with tg.no_grad():
            for _ in range(4):
                x, y = self._batch(self.corpus.val, rng)
                logits = self.model(x)
                losses.append(
                    tg.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
                )
        return {
            "train bpc": self.total / self.steps / math.log(2),
            "val bpc": float(np.mean(losses)) / math.log(2),
        }

    def describe(self, metrics: dict[str, float]) -> str:
        return (
            f"train {metrics['train bpc']:.3f} bits/char, validation {metrics['val bpc']:.3f} "
            f"bits/char (unigram baseline {self.corpus.unigram_bits():.3f}), "
            f"{len(self.maps)} attention maps kept"
        )
