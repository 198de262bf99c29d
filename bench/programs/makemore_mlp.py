"""makemore part 2 (MLP, Bengio et al. 2003): character embeddings, tanh layer, minibatch SGD.

Stand-in for names.txt: 1,000 made-up lowercase "names" drawn from a fixed letter chain. The
video's model: context 3, embedding ``C`` (27, 10), ``W1`` (30, 200), ``W2`` (200, 27), all
``randn``; ``emb = C[X[ix]]``, ``h = tanh(emb.view(-1, 30) @ W1 + b1)``, cross-entropy,
``p.data += -lr * p.grad`` with lr 0.1 on minibatches of 32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SOURCE = "makemore part 2 (MLP)"
STEPS = 20
BLOCK = 3
LR = 0.1


def _dataset(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Contexts and next characters of 1,000 made-up names (vocabulary: '.' and a-z)."""
    chain = rng.dirichlet(np.full(27, 0.3), size=27)  # next-letter probabilities
    xs, ys = [], []
    for _ in range(1000):
        context, ch = [0] * BLOCK, 0
        for _ in range(12):
            ch = int(rng.choice(27, p=chain[ch]))
            xs.append(list(context))
            ys.append(ch)
            context = context[1:] + [ch]
            if ch == 0:
                break
    return np.array(xs, np.int32), np.array(ys, np.int32)


def data() -> dict[str, Any]:
    """The dataset, the minibatch indices of every step and the video's randn weights."""
    rng = np.random.default_rng(7)
    x, y = _dataset(rng)
    return {
        "X": x,
        "Y": y,
        "ix": rng.integers(0, len(x), (64, 32)),
        "C": rng.standard_normal((27, 10)),
        "W1": rng.standard_normal((30, 200)),
        "b1": rng.standard_normal(200),
        "W2": rng.standard_normal((200, 27)),
        "b2": rng.standard_normal(27),
    }


PARAMS = ("C", "W1", "b1", "W2", "b2")


def tapegrad(d: dict[str, Any]) -> Any:
    import tapegrad as tg

    X, Y, ixs = (tg.tensor(d[k]) for k in ("X", "Y", "ix"))
    C, W1, b1, W2, b2 = (tg.tensor(d[k], dtype=tg.float32).require_grad() for k in PARAMS)
    parameters = [C, W1, b1, W2, b2]
    i = 0

    def step() -> Any:
        nonlocal i
        ix = ixs[i % len(ixs)]
        i += 1
        emb = C[X[ix]]  # (32, 3, 10)
        h = (emb.reshape(-1, 30) @ W1 + b1).tanh()  # (32, 200)
        logits = h @ W2 + b2  # (32, 27)
        loss = tg.cross_entropy(logits, Y[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        with tg.no_grad():
            for p in parameters:
                p += -LR * p.grad
        return loss

    return step


def torch(d: dict[str, Any], dtype: Any) -> Any:
    import torch
    import torch.nn.functional as F  # noqa: N812 - the video's spelling

    X, Y, ixs = (torch.tensor(d[k], dtype=torch.int64) for k in ("X", "Y", "ix"))
    C, W1, b1, W2, b2 = (torch.tensor(d[k], dtype=dtype, requires_grad=True) for k in PARAMS)
    parameters = [C, W1, b1, W2, b2]
    i = 0

    def step() -> Any:
        nonlocal i
        ix = ixs[i % len(ixs)]
        i += 1
        emb = C[X[ix]]
        h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Y[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -LR * p.grad
        return loss

    return step
