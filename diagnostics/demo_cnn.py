"""``python -m diagnostics demo --model cnn``: a small convnet on the bundled digits, with
the classic convnet-loop leak planted: a running loss kept as a tensor.

The digits (8x8, one channel) are those of the MLP demo (``demo.load_data``), standardised
and reshaped to NCHW. The network is ``conv 3x3 (32) - batch norm - ReLU - max pool 2 - conv
3x3 (64) - ReLU - max pool 2 - dropout - linear (10)``, trained with AdamW and a cosine
schedule. Planted leak: the epoch's running loss is summed as a **tensor**
(``running = running + loss``, as ``total_loss += loss`` does in many PyTorch tutorials'
first drafts), so every step's loss stays reachable through a growing chain of additions:
the report names that graph as kept alive, with the line. ``--fixed`` sums ``loss.item()``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

import tapegrad as tg
from diagnostics.demo import Data, load_data
from diagnostics.training import Task
from tapegrad import nn, optim

__all__ = ["ConvNet", "CNNTask"]

BATCH_SIZE = 32
LEARNING_RATE = 4e-3


class ConvNet(nn.Module):
    """A two-block convnet for ``(N, 1, 8, 8)`` digits -> 10 logits."""

    def __init__(self, key: int = 0) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, key=key),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, key=key + 1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Dropout(0.2, key=key + 2), nn.Linear(64 * 2 * 2, 10, key=key + 3)
        )

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        """Logits ``(N, 10)`` of images ``(N, 1, 8, 8)``."""
        logits: tg.Tensor = self.head(self.features(x))
        return logits


class CNNTask(Task):
    """The convnet demo (see the module docstring)."""

    name = "cnn"

    def __init__(
        self, epochs: int, seed: int = 0, steps: int | None = None, data: Data | None = None
    ) -> None:
        data = data if data is not None else load_data()
        self.x_train = data.x_train.reshape(-1, 1, 8, 8)
        self.y_train = data.y_train
        self.x_test = data.x_test.reshape(-1, 1, 8, 8)
        self.y_test = data.y_test
        full = self.x_train.shape[0] // BATCH_SIZE
        self.steps = min(full, steps) if steps else full
        self.model = ConvNet(key=3 * seed)
        self.opt = optim.AdamW(self.model.parameters(), lr=LEARNING_RATE, weight_decay=1e-4)
        self.schedule = optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=max(epochs, 1))
        self.order = np.arange(self.x_train.shape[0])
        self.running: Any = 0.0

    def start_epoch(self, rng: np.random.Generator) -> None:
        self.order = rng.permutation(self.x_train.shape[0])
        self.running = 0.0

    def train_step(self, i: int, fixed: bool) -> float:
        idx = self.order[i * BATCH_SIZE : (i + 1) * BATCH_SIZE]
        x, y = tg.tensor(self.x_train[idx]), tg.tensor(self.y_train[idx])
        self.opt.zero_grad()
        loss = tg.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        if fixed:
            self.running += loss.item()
        else:
            self.running = self.running + loss  # planted leak: the total keeps every graph
        return float(loss.item())

    def evaluate(self, fixed: bool) -> dict[str, float]:
        with tg.no_grad():
            logits = self.model(tg.tensor(self.x_test))
        accuracy = float(jnp.mean(jnp.argmax(logits.data, axis=-1) == self.y_test))
        return {"train loss": float(self.running) / self.steps, "test acc": accuracy}

    def describe(self, metrics: dict[str, float]) -> str:
        return (
            f"train loss {metrics['train loss']:.3f}, test accuracy {metrics['test acc']:.1%}, "
            f"lr {self.opt.param_groups[0]['lr']:.2e}"
        )
