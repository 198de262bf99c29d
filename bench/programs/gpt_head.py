"""Let's build GPT (Karpathy), the bigram model with one self-attention head, AdamW.

Token and position embeddings (n_embd 32), one ``Head`` (key, query, value ``Linear`` without
bias; ``wei = q @ k^T * C**-0.5``, causal ``masked_fill(tril == 0, -inf)``, softmax,
``wei @ v``), ``lm_head``, cross-entropy over ``(B*T, vocab)``; ``get_batch`` stacks 32 random
slices of length 8 of the text; AdamW lr 1e-3. Stand-in text: 5,000 characters (vocabulary
65) from a letter chain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.programs._layers import linear_init, tg_linear, torch_linear
from bench.programs._steps import optimizer_step
from bench.programs._text import markov_text

SOURCE = "Let's build GPT: one self-attention head"
STEPS = 20
VOCAB, N_EMBD, BLOCK, BATCH = 65, 32, 8, 32
LR = 1e-3


def data() -> dict[str, Any]:
    """Text, batch offsets per step, embeddings (randn, as nn.Embedding) and linear layers."""
    rng = np.random.default_rng(11)
    text = markov_text(rng, VOCAB, 5000, 0.1)
    return {
        "text": np.array(text, np.int32),
        "ix": rng.integers(0, len(text) - BLOCK - 1, (64, BATCH)),
        "tok": rng.standard_normal((VOCAB, N_EMBD)),
        "pos": rng.standard_normal((BLOCK, N_EMBD)),
        "key": linear_init(rng, N_EMBD, N_EMBD, bias=False),
        "query": linear_init(rng, N_EMBD, N_EMBD, bias=False),
        "value": linear_init(rng, N_EMBD, N_EMBD, bias=False),
        "lm_head": linear_init(rng, N_EMBD, VOCAB),
    }


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    class Head(tg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.key = tg_linear(*d["key"])
            self.query = tg_linear(*d["query"])
            self.value = tg_linear(*d["value"])
            self.tril = tg.tensor(np.tril(np.ones((BLOCK, BLOCK), bool)))

        def forward(self, x: Any) -> Any:
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * C**-0.5
            wei = tg.where(self.tril[:T, :T], wei, float("-inf"))  # masked_fill(tril == 0)
            wei = tg.softmax(wei, axis=-1)
            v = self.value(x)
            return wei @ v

    class BigramLanguageModel(tg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token_embedding_table = tg.nn.Embedding(VOCAB, N_EMBD, key=0)
            self.position_embedding_table = tg.nn.Embedding(BLOCK, N_EMBD, key=0)
            self.token_embedding_table.weight.data = tg.tensor(d["tok"], dtype=tg.float32).data
            self.position_embedding_table.weight.data = tg.tensor(d["pos"], dtype=tg.float32).data
            self.sa_head = Head()
            self.lm_head = tg_linear(*d["lm_head"])

        def forward(self, idx: Any, targets: Any) -> Any:
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)  # (B, T, C)
            pos_emb = self.position_embedding_table(tg.arange(T))  # (T, C)
            x = tok_emb + pos_emb
            x = self.sa_head(x)
            logits = self.lm_head(x)
            loss = tg.cross_entropy(logits.reshape(B * T, VOCAB), targets.reshape(B * T))
            return logits, loss

    text = tg.tensor(d["text"])
    model = BigramLanguageModel()
    optimizer = tg.optim.AdamW(model.parameters(), lr=LR)
    i = 0

    def get_batch() -> tuple[Any, Any]:
        nonlocal i
        ix = d["ix"][i % len(d["ix"])]
        i += 1
        x = tg.stack([text[int(j) : int(j) + BLOCK] for j in ix])
        y = tg.stack([text[int(j) + 1 : int(j) + BLOCK + 1] for j in ix])
        return x, y

    def loss_of() -> Any:
        xb, yb = get_batch()
        logits, loss = model(xb, yb)
        return loss

    return optimizer_step(loss_of, optimizer)


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch
    import torch.nn.functional as F  # noqa: N812 - the video's spelling

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.key = torch_linear(*d["key"], dtype)
            self.query = torch_linear(*d["query"], dtype)
            self.value = torch_linear(*d["value"], dtype)
            self.register_buffer("tril", torch.tril(torch.ones(BLOCK, BLOCK, dtype=dtype)))

        def forward(self, x: Any) -> Any:
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * C**-0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            wei = F.softmax(wei, dim=-1)
            v = self.value(x)
            return wei @ v

    class BigramLanguageModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.token_embedding_table = torch.nn.Embedding(VOCAB, N_EMBD, dtype=dtype)
            self.position_embedding_table = torch.nn.Embedding(BLOCK, N_EMBD, dtype=dtype)
            with torch.no_grad():
                self.token_embedding_table.weight.copy_(torch.from_numpy(d["tok"]))
                self.position_embedding_table.weight.copy_(torch.from_numpy(d["pos"]))
            self.sa_head = Head()
            self.lm_head = torch_linear(*d["lm_head"], dtype)

        def forward(self, idx: Any, targets: Any) -> Any:
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)
            pos_emb = self.position_embedding_table(torch.arange(T))
            x = tok_emb + pos_emb
            x = self.sa_head(x)
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(B * T, VOCAB), targets.view(B * T))
            return logits, loss

    text = torch.tensor(d["text"], dtype=torch.int64)
    model = BigramLanguageModel()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    i = 0

    def get_batch() -> tuple[Any, Any]:
        nonlocal i
        ix = d["ix"][i % len(d["ix"])]
        i += 1
        x = torch.stack([text[j : j + BLOCK] for j in ix])
        y = torch.stack([text[j + 1 : j + BLOCK + 1] for j in ix])
        return x, y

    def loss_of() -> Any:
        xb, yb = get_batch()
        logits, loss = model(xb, yb)
        return loss

    return optimizer_step(loss_of, optimizer)
