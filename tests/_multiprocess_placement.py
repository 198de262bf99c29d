"""Placement across processes, run by ``test_devices.py`` as
``python -m tapegrad.launch -n 2 --devices-per-process 2 tests/_multiprocess_placement.py``.

``jax.devices()`` lists every process's devices: placing a tensor on another process's
device is a ``DeviceError`` (JAX would make an array with no data here), and a global array
sharded over both processes shows in ``repr`` and refuses ``tg.save`` with what to do,
instead of JAX's error for reading values that live in another process; NumPy data and
random draws land on the process's own first device. Prints
``rank R: placement across processes checked`` and exits 0.
"""

from __future__ import annotations

import os
import sys
import tempfile

from tapegrad.launch import initialize

initialize()  # before any other JAX call

import jax  # noqa: E402 - after joining the runtime
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tapegrad as tg  # noqa: E402


def main() -> int:
    rank = jax.process_index()
    mine = jax.local_devices()
    other = next(i for i, d in enumerate(jax.devices()) if d.process_index != rank)
    for target in (other, jax.devices()[other]):
        try:
            tg.zeros(3, device=target)
        except tg.DeviceError as err:
            assert "of process" in str(err) and "jax.local_devices()" in str(err), str(err)
        else:
            raise AssertionError(f"rank {rank}: a tensor placed on another process's device")
    assert tg.ones(3, device=mine[-1]).device == mine[-1]
    # NumPy data and small draws land on this process's default device, as jnp.asarray's
    for made in (tg.tensor(np.arange(6.0)), tg.tensor(np.arange(4)), tg.randn(3)):
        assert made.data.devices() == {mine[0]}, (rank, made.data.sharding)
        assert len((made + 1).tolist()) == made.shape[0]
    mesh = Mesh(np.array(jax.devices()), ("data",))
    local = np.full((2, 3), rank, np.float32)
    x = tg.tensor(jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), local))
    assert "global array" in repr(x), repr(x)
    try:
        tg.save({"x": x}, os.path.join(tempfile.mkdtemp(), "x.safetensors"))
    except ValueError as err:
        assert "process_allgather" in str(err) and "x" in str(err), str(err)
    else:
        raise AssertionError(f"rank {rank}: tg.save wrote a global array")
    print(f"rank {rank}: placement across processes checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
