"""Regenerate the README's pictures: ``python docs/pictures/make_pictures.py``.

A small MLP loop with a planted leak (each epoch's running loss summed as a tensor and kept in
a list, the leak of ``notebooks/03_finding_a_leak.ipynb``) runs six epochs with
``diagnostics.epoch_end``; then

- ``leak_history.png``: ``diagnostics.plot_history()`` of those epoch ends (growth shaded);
- ``leak_graph.svg``: ``diagnostics.graph_picture()`` of the last report (the kept-alive
  graphs, with the list that keeps them).

Deterministic: fixed seeds, random data made here (nothing downloaded).
"""

from __future__ import annotations

import warnings
from io import StringIO
from pathlib import Path

import numpy as np
from rich.console import Console

import diagnostics
import tapegrad as tg
from tapegrad import nn, optim

HERE = Path(__file__).resolve().parent
EPOCHS = 6
BATCHES = 8


def main(out: Path = HERE) -> None:
    """Run the leaking loop and write both pictures into ``out``."""
    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((BATCHES * 32, 16), dtype=np.float32)
    y_all = (x_all[:, 0] > 0).astype(np.int32)
    model = nn.Sequential(nn.Linear(16, 32, key=0), nn.ReLU(), nn.Linear(32, 2, key=1))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    quiet = Console(file=StringIO())
    diagnostics.clear_history()
    epoch_losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", diagnostics.LeakWarning)
        for epoch in range(1, EPOCHS + 1):
            running = 0.0
            for b in range(BATCHES):
                x = tg.tensor(x_all[b * 32 : (b + 1) * 32])
                y = tg.tensor(y_all[b * 32 : (b + 1) * 32])
                opt.zero_grad()
                loss = tg.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                running = running + loss  # the leak: a tensor sum of finished losses
            epoch_losses.append(running / BATCHES)
            diagnostics.epoch_end(epoch, console=quiet)
    fig = diagnostics.plot_history()
    fig.savefig(out / "leak_history.png", dpi=90)
    picture = diagnostics.graph_picture(diagnostics.leak_report(explain=True), max_nodes=10)
    picture.save(out / "leak_graph.svg")
    print(f"wrote {out / 'leak_history.png'} and {out / 'leak_graph.svg'}")
    del epoch_losses
    tg.graph_cleanup()


if __name__ == "__main__":
    main()
