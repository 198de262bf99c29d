"""Stand-in text for the language-model programs: characters drawn from a random Markov chain
(each program's own seed), so a model has structure to learn and nothing is downloaded."""

from __future__ import annotations

import numpy as np

__all__ = ["markov_text"]


def markov_text(
    rng: np.random.Generator, vocab: int, length: int, concentration: float
) -> list[int]:
    """``length`` character ids in ``[0, vocab)`` starting at 0; each row of the transition
    matrix is drawn from a Dirichlet of ``concentration`` (smaller: more predictable text)."""
    chain = rng.dirichlet(np.full(vocab, concentration), size=vocab)
    text = [0]
    for _ in range(length - 1):
        text.append(int(rng.choice(vocab, p=chain[text[-1]])))
    return text
