"""min-char-rnn (Karpathy): a vanilla RNN over characters, truncated BPTT, Adagrad.

The same model and loop with autograd instead of the hand-written backward: hidden size 100,
``seq_length`` 25, weights ``randn * 0.01``; per time step ``h = tanh(Wxh x + Whh h + bh)``,
``y = Why h + by``, ``p = softmax(y)``, ``loss -= log p[target]`` on column vectors; the
gradients clipped to [-5, 5]; Adagrad; ``hprev`` carried (detached) across chunks and
reset at the end of the text. lr 0.01: at the original 0.1 the loss on the stand-in text
grows and float32 and float64 part ways. Stand-in text: 2,000 characters from a 27-letter chain.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.programs._text import markov_text

SOURCE = "min-char-rnn (truncated BPTT, Adagrad)"
STEPS = 20
HIDDEN = 100
SEQ = 25
VOCAB = 27
LR = 1e-2
PARAMS = ("Wxh", "Whh", "Why", "bh", "by")


def data() -> dict[str, Any]:
    """The text as character ids and the initial weights."""
    rng = np.random.default_rng(10)
    text = markov_text(rng, VOCAB, 2000, 0.2)
    return {
        "text": np.array(text),
        "Wxh": rng.standard_normal((HIDDEN, VOCAB)) * 0.01,
        "Whh": rng.standard_normal((HIDDEN, HIDDEN)) * 0.01,
        "Why": rng.standard_normal((VOCAB, HIDDEN)) * 0.01,
        "bh": np.zeros((HIDDEN, 1)),
        "by": np.zeros((VOCAB, 1)),
    }


def _chunks(text: np.ndarray) -> Any:
    """The loop's data pointer: (inputs, targets, reset hprev?) for each step, forever."""
    p = 0
    while True:
        reset = p + SEQ + 1 >= len(text) or p == 0
        if p + SEQ + 1 >= len(text):
            p = 0
        chunk = [int(c) for c in text[p : p + SEQ + 1]]
        yield chunk[:-1], chunk[1:], reset
        p += SEQ


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    params = [tg.tensor(d[k], dtype=tg.float32).require_grad() for k in PARAMS]
    Wxh, Whh, Why, bh, by = params
    mems = [tg.zeros(p.shape) for p in params]  # Adagrad memory
    onehot = [tg.tensor(np.eye(VOCAB)[:, [i]], dtype=tg.float32) for i in range(VOCAB)]
    chunks = _chunks(d["text"])
    hprev = tg.zeros((HIDDEN, 1))

    def step() -> Any:
        nonlocal hprev
        inputs, targets, reset = next(chunks)
        if reset:
            hprev = tg.zeros((HIDDEN, 1))
        h, loss = hprev, 0.0
        for t in range(SEQ):
            h = (Wxh @ onehot[inputs[t]] + Whh @ h + bh).tanh()
            y = Why @ h + by
            p = y.exp() / y.exp().sum()
            loss = loss - p[targets[t], 0].log()
        loss.backward()
        hprev = h.detach()
        with tg.no_grad():
            for i, param in enumerate(params):
                g = param.grad.clip(-5, 5)
                mems[i] = mems[i] + g * g
                param -= LR * g / (mems[i] + 1e-8).sqrt()
                param.grad = None
        return loss

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch

    params = [torch.tensor(d[k], dtype=dtype, requires_grad=True) for k in PARAMS]
    Wxh, Whh, Why, bh, by = params
    mems = [torch.zeros_like(p) for p in params]
    onehot = [torch.tensor(np.eye(VOCAB)[:, [i]], dtype=dtype) for i in range(VOCAB)]
    chunks = _chunks(d["text"])
    hprev = torch.zeros((HIDDEN, 1), dtype=dtype)

    def step() -> Any:
        nonlocal hprev
        inputs, targets, reset = next(chunks)
        if reset:
            hprev = torch.zeros((HIDDEN, 1), dtype=dtype)
        h, loss = hprev, 0.0
        for t in range(SEQ):
            h = torch.tanh(Wxh @ onehot[inputs[t]] + Whh @ h + bh)
            y = Why @ h + by
            p = torch.exp(y) / torch.sum(torch.exp(y))
            loss = loss - torch.log(p[targets[t], 0])
        loss.backward()
        hprev = h.detach()
        with torch.no_grad():
            for param, mem in zip(params, mems, strict=True):
                g = param.grad.clamp(-5, 5)
                mem += g * g
                param -= LR * g / torch.sqrt(mem + 1e-8)
                param.grad = None
        return loss

    return step
