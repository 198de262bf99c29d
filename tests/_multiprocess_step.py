"""A tg.jit data-parallel step on a global mesh, run by ``test_devices.py`` as
``python -m tapegrad.launch -n 2 --devices-per-process 4 tests/_multiprocess_step.py``.

Each process holds its half of a global batch of 16; after 10 steps the (replicated)
parameters must equal those of the same step run on one device with the whole batch.
Prints ``rank R: params match one process after 10 steps (max error E)`` and exits 0.
"""

from __future__ import annotations

import sys

from tapegrad.launch import initialize

initialize()  # before any other JAX call

import jax  # noqa: E402 - after joining the runtime
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tapegrad as tg  # noqa: E402
from tapegrad import nn, optim  # noqa: E402

STEPS = 10


def make_step(model: nn.Module, opt: optim.Optimizer) -> object:
    @tg.jit
    def step(x: tg.Tensor, y: jax.Array) -> tg.Tensor:
        opt.zero_grad()
        loss = tg.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 16, key=0), nn.Tanh(), nn.Linear(16, 3, key=1))


def main() -> int:
    rank, nproc = jax.process_index(), jax.process_count()
    assert jax.device_count() == 4 * nproc, jax.devices()
    rng = np.random.default_rng(0)
    x_all = rng.normal(size=(16, 6)).astype(np.float32)
    y_all = (np.arange(16) % 3).astype(np.int32)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    data, repl = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    per = 16 // nproc
    local = slice(rank * per, (rank + 1) * per)
    x = tg.tensor(jax.make_array_from_process_local_data(data, x_all[local]))
    y = jax.make_array_from_process_local_data(data, y_all[local])

    many = model()
    for p in many.parameters():  # every process puts the same values: replicated globally
        p.data = jax.device_put(np.asarray(p.data), repl)
    step = make_step(many, optim.SGD(many.parameters(), lr=0.1, momentum=0.9))
    for _ in range(STEPS):
        step(x, y)

    one = model()  # the reference: the whole batch on this process's first device
    ref_step = make_step(one, optim.SGD(one.parameters(), lr=0.1, momentum=0.9))
    x1, y1 = tg.tensor(jnp.asarray(x_all)), jnp.asarray(y_all)
    for _ in range(STEPS):
        ref_step(x1, y1)

    err = 0.0
    for (name, p), q in zip(many.named_parameters(), one.parameters(), strict=True):
        assert p.sharding.is_equivalent_to(repl, p.ndim), f"{name} on {p.sharding}"
        got = np.asarray(p.data.addressable_data(0))
        err = max(err, float(np.max(np.abs(got - np.asarray(q.data)))))
    assert err <= 1e-5, f"rank {rank}: max error {err}"
    print(f"rank {rank}: params match one process after {STEPS} steps (max error {err:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
