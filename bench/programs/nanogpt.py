"""nanoGPT's train.py loop on a small GPT: AdamW with decay groups, gradient clipping, and the
cosine learning-rate schedule with warmup.

model.py at a small size (2 layers, 2 heads, n_embd 32, block 16, vocabulary 65, bias, no
dropout): token and position embeddings, pre-norm blocks (LayerNorm, causal self-attention
from one ``c_attn`` projection split into q, k, v, ``c_proj``; LayerNorm, MLP with exact GELU),
final LayerNorm, ``lm_head`` tied to the token embedding; weights ``normal(0, 0.02)`` and
``c_proj`` scaled by ``1/sqrt(2 n_layer)``. train.py: batch 8 of random slices, AdamW (betas
0.9, 0.95; weight decay 0.1 on 2-D parameters only), ``clip_grad_norm_(1.0)``, lr 1e-3 with 5
warmup steps and cosine decay to 1e-4 over 50. Stand-in text: 5,000 characters.

Both versions use their library's layers (``nn.Linear``, ``nn.LayerNorm``, ``nn.Embedding``,
``nn.GELU``, ``nn.ModuleList``, scaled dot-product attention), ``AdamW`` with the two decay
groups, ``clip_grad_norm_`` and the schedule set on the parameter groups each step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bench.programs._text import markov_text

SOURCE = "nanoGPT training loop (AdamW, clipping, schedule)"
STEPS = 20
N_LAYER, N_HEAD, N_EMBD, BLOCK, VOCAB, BATCH = 2, 2, 32, 16, 65, 8
LR, MIN_LR, WARMUP, DECAY_ITERS = 1e-3, 1e-4, 5, 50


def data() -> dict[str, Any]:
    """Text, batch offsets, and every weight of the model (nanoGPT's initialisation)."""
    rng = np.random.default_rng(12)
    text = markov_text(rng, VOCAB, 5000, 0.1)
    c = N_EMBD
    proj_std = 0.02 / math.sqrt(2 * N_LAYER)
    w: dict[str, np.ndarray] = {
        "wte": rng.normal(0, 0.02, (VOCAB, c)),
        "wpe": rng.normal(0, 0.02, (BLOCK, c)),
        "ln_f.w": np.ones(c),
        "ln_f.b": np.zeros(c),
    }
    for i in range(N_LAYER):
        w |= {
            f"{i}.ln_1.w": np.ones(c),
            f"{i}.ln_1.b": np.zeros(c),
            f"{i}.c_attn.w": rng.normal(0, 0.02, (3 * c, c)),
            f"{i}.c_attn.b": np.zeros(3 * c),
            f"{i}.attn.c_proj.w": rng.normal(0, proj_std, (c, c)),
            f"{i}.attn.c_proj.b": np.zeros(c),
            f"{i}.ln_2.w": np.ones(c),
            f"{i}.ln_2.b": np.zeros(c),
            f"{i}.c_fc.w": rng.normal(0, 0.02, (4 * c, c)),
            f"{i}.c_fc.b": np.zeros(4 * c),
            f"{i}.mlp.c_proj.w": rng.normal(0, proj_std, (c, 4 * c)),
            f"{i}.mlp.c_proj.b": np.zeros(c),
        }
    return {
        "text": np.array(text, np.int64),
        "ix": rng.integers(0, len(text) - BLOCK - 1, (64, BATCH)),
        "w": w,
    }


def get_lr(it: int) -> float:
    """train.py's schedule: linear warmup, then cosine decay to ``MIN_LR``."""
    if it < WARMUP:
        return LR * (it + 1) / (WARMUP + 1)
    if it > DECAY_ITERS:
        return MIN_LR
    ratio = (it - WARMUP) / (DECAY_ITERS - WARMUP)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)


def _batches(d: dict[str, Any]) -> Any:
    """get_batch: ``(x, y)`` as NumPy stacks of random slices, forever."""
    text, i = d["text"], 0
    while True:
        ix = d["ix"][i % len(d["ix"])]
        i += 1
        x = np.stack([text[j : j + BLOCK] for j in ix])
        y = np.stack([text[j + 1 : j + 1 + BLOCK] for j in ix])
        yield x, y


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg
    from tapegrad import nn

    def load(layer: Any, name: str) -> None:
        layer.weight.data = tg.tensor(d["w"][name + ".w"], dtype=tg.float32).data
        layer.bias.data = tg.tensor(d["w"][name + ".b"], dtype=tg.float32).data

    class CausalSelfAttention(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD, key=0)
            self.c_proj = nn.Linear(N_EMBD, N_EMBD, key=0)
            load(self.c_attn, f"{i}.c_attn")
            load(self.c_proj, f"{i}.attn.c_proj")

        def forward(self, x: Any) -> Any:
            B, T, C = x.shape
            q, k, v = tg.split(self.c_attn(x), 3, axis=2)  # split(n_embd, dim=2)
            k = k.reshape(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            q = q.reshape(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            v = v.reshape(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            y = tg.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD, key=0)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD, key=0)
            load(self.c_fc, f"{i}.c_fc")
            load(self.c_proj, f"{i}.mlp.c_proj")

        def forward(self, x: Any) -> Any:
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(N_EMBD)
            self.attn = CausalSelfAttention(i)
            self.ln_2 = nn.LayerNorm(N_EMBD)
            self.mlp = MLP(i)
            load(self.ln_1, f"{i}.ln_1")
            load(self.ln_2, f"{i}.ln_2")

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(VOCAB, N_EMBD, key=0)
            self.wpe = nn.Embedding(BLOCK, N_EMBD, key=0)
            self.h = nn.ModuleList([Block(i) for i in range(N_LAYER)])
            self.ln_f = nn.LayerNorm(N_EMBD)
            self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False, key=0)
            self.wte.weight = self.lm_head.weight  # weight tying
            self.wte.weight.data = tg.tensor(d["w"]["wte"], dtype=tg.float32).data
            self.wpe.weight.data = tg.tensor(d["w"]["wpe"], dtype=tg.float32).data
            load(self.ln_f, "ln_f")

        def forward(self, idx: Any, targets: Any) -> Any:
            b, t = idx.shape
            pos = tg.arange(0, t)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            x = self.ln_f(x)
            logits = self.lm_head(x)
            loss = tg.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            return logits, loss

    model = GPT()
    params = list(model.parameters())
    optim_groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    optimizer = tg.optim.AdamW(optim_groups, lr=LR, betas=(0.9, 0.95))
    batches = _batches(d)
    X, Y = (tg.tensor(a.astype(np.int32)) for a in next(batches))
    it = 0

    def step() -> Any:
        nonlocal X, Y, it
        lr = get_lr(it)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        logits, loss = model(X, Y)
        X, Y = (tg.tensor(a.astype(np.int32)) for a in next(batches))
        loss.backward()
        tg.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        it += 1
        return loss

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812 - nanoGPT's spelling

    def load(layer: Any, name: str) -> None:
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(d["w"][name + ".w"]))
            layer.bias.copy_(torch.from_numpy(d["w"][name + ".b"]))

    class CausalSelfAttention(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD, dtype=dtype)
            self.c_proj = nn.Linear(N_EMBD, N_EMBD, dtype=dtype)
            load(self.c_attn, f"{i}.c_attn")
            load(self.c_proj, f"{i}.attn.c_proj")

        def forward(self, x: Any) -> Any:
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
            k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD, dtype=dtype)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD, dtype=dtype)
            load(self.c_fc, f"{i}.c_fc")
            load(self.c_proj, f"{i}.mlp.c_proj")

        def forward(self, x: Any) -> Any:
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, i: int) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(N_EMBD, dtype=dtype)
            self.attn = CausalSelfAttention(i)
            self.ln_2 = nn.LayerNorm(N_EMBD, dtype=dtype)
            self.mlp = MLP(i)
            load(self.ln_1, f"{i}.ln_1")
            load(self.ln_2, f"{i}.ln_2")

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(VOCAB, N_EMBD, dtype=dtype)
            self.wpe = nn.Embedding(BLOCK, N_EMBD, dtype=dtype)
            self.h = nn.ModuleList([Block(i) for i in range(N_LAYER)])
            self.ln_f = nn.LayerNorm(N_EMBD, dtype=dtype)
            self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False, dtype=dtype)
            self.wte.weight = self.lm_head.weight  # weight tying
            with torch.no_grad():
                self.wte.weight.copy_(torch.from_numpy(d["w"]["wte"]))
                self.wpe.weight.copy_(torch.from_numpy(d["w"]["wpe"]))
            load(self.ln_f, "ln_f")

        def forward(self, idx: Any, targets: Any) -> Any:
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            x = self.ln_f(x)
            logits = self.lm_head(x)
            loss = F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )
            return logits, loss

    model = GPT()
    params = [p for p in model.parameters() if p.requires_grad]
    optim_groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optim_groups, lr=LR, betas=(0.9, 0.95))
    batches = _batches(d)
    X, Y = (torch.from_numpy(a) for a in next(batches))
    it = 0

    def step() -> Any:
        nonlocal X, Y, it
        lr = get_lr(it)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        logits, loss = model(X, Y)
        X, Y = (torch.from_numpy(a) for a in next(batches))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        it += 1
        return loss

    return step
