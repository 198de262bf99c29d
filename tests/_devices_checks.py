"""Multi-device checks, run by ``test_devices.py`` in one subprocess with 8 simulated CPU
devices (``XLA_FLAGS`` must be set before JAX starts, so never in the main test process).

``python tests/_devices_checks.py [NAME ...]`` runs the named checks (all by default) and
prints one JSON line per check: ``{"check": name, "ok": bool, "error": traceback or ""}``.
Each check raises ``AssertionError`` on failure and leaves the tape as it found it.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import diagnostics
import tapegrad as tg
from tapegrad import nn, optim

CHECKS: dict[str, Callable[[], None]] = {}
ATOL = 1e-5


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def data_mesh() -> tuple[Mesh, NamedSharding, NamedSharding]:
    mesh = Mesh(np.array(jax.devices()), ("data",))
    return mesh, NamedSharding(mesh, P("data")), NamedSharding(mesh, P())


def close(a: Any, b: Any, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    assert a.shape == b.shape and err <= ATOL, f"{what}: max abs error {err} (shapes {a.shape})"


def on_all(a: jax.Array, mesh: Mesh, what: str) -> None:
    """No gather to one device: the array lives on every device of the mesh."""
    assert a.sharding.device_set == set(mesh.devices.flat), f"{what} is on {a.sharding}"


def grads(model: nn.Module) -> dict[str, jax.Array]:
    out = {n: p.grad.data for n, p in model.named_parameters()}
    model.zero_grad()
    return out


def device_error(fn: Callable[[], Any], *fragments: str) -> str:
    """Call ``fn``; it must raise a ``DeviceError`` whose message holds every fragment; the
    message is returned (the error itself is dropped: its traceback holds the tensors)."""
    try:
        fn()
    except tg.DeviceError as err:
        text = str(err)
    else:
        raise AssertionError(f"no DeviceError (expected one saying {fragments})")
    missing = [f for f in fragments if f not in text]
    assert not missing, f"{missing} not in {text!r}"
    return text


def twin(make: Callable[[], nn.Module], sharding: Any) -> tuple[nn.Module, nn.Module]:
    """The same model twice (same keys): one on the default device, one moved to ``sharding``."""
    return make(), make().to(sharding)


# ------------------------------------------------------------------------ placement


@check
def constructors_place() -> None:
    mesh, data, repl = data_mesh()
    d = jax.devices()
    assert tg.zeros((2, 3), device=d[3]).device == d[3]
    assert tg.ones(4, device="cpu:5").device == d[5]
    assert tg.tensor([1.0, 2.0], device=2).device == d[2]
    assert tg.randn((8, 2), key=0, sharding=data).sharding == data
    assert tg.rand((8,), key=0, sharding=repl).sharding == repl
    assert tg.full((8,), 2.0, sharding=data).sharding == data
    assert tg.arange(8, sharding=data).sharding == data
    placed = tg.ones((8, 2), sharding=data)
    assert tg.zeros_like(placed).sharding == data  # keeps the placement, as PyTorch's
    assert tg.randn_like(placed, key=1).sharding == data
    leaf = tg.zeros(3, device=d[1], requires_grad=True)
    assert leaf.requires_grad and leaf.device == d[1]
    try:
        tg.zeros(3, device=d[1], sharding=repl)
    except TypeError as err:
        assert "not both" in str(err)
    else:
        raise AssertionError("device= and sharding= together did not raise")


@check
def device_put_is_differentiable() -> None:
    mesh, data, repl = data_mesh()
    d = jax.devices()
    z = tg.randn((8, 3), key=0, sharding=data, requires_grad=True)
    y = tg.device_put(z, d[3])
    assert y.device == d[3] and y.requires_grad
    assert tg.snapshot().nodes[-1].op == "device_put"
    w = tg.ones(3, device=d[3])
    (y * y * w).sum().backward()
    assert z.grad.sharding == data, f"gradient on {z.grad.sharding}, input on {data}"
    close(z.grad.data, 2 * np.asarray(z.data), "device_put gradient")
    plain = tg.device_put(tg.ones(3), repl)  # nothing requires grad: nothing recorded
    assert not plain.requires_grad and plain.sharding == repl
    # the jax.grad oracle through jax.device_put
    want = jax.grad(lambda a: (jax.device_put(a, d[3]) ** 2).sum())(z.data)
    close(z.grad.data, want, "device_put against jax.grad")


@check
def device_put_is_differentiable_twice() -> None:
    """create_graph=True through a device_put of a tensor placed explicitly: the recorded VJP
    moves the cotangent back as a device_put node, not inside one jit given arrays of two
    devices (a ValueError before, leaving two nodes hanging)."""
    d = jax.devices()
    before = tg.graph_stats()
    x = tg.tensor([1.0, 2.0], device=0).require_grad()
    (g,) = tg.grad((tg.device_put(x, 1) ** 3).sum(), x, create_graph=True)
    assert g.requires_grad and g.device == d[0], f"gradient on {g.device}, input on {d[0]}"
    (h,) = tg.grad(g.sum(), x)
    plain = tg.tensor([1.0, 2.0]).require_grad()  # the same without placement
    (pg,) = tg.grad((plain**3).sum(), plain, create_graph=True)
    (ph,) = tg.grad(pg.sum(), plain)
    close(g.data, pg.data, "first derivative through device_put")
    close(h.data, ph.data, "second derivative through device_put")
    close(h.data, 6 * np.asarray(x.data), "d2/dx2 of sum(x**3)")
    assert h.device == d[0], f"second derivative on {h.device}"
    # a sharded input, to the third order, against JAX through jax.device_put
    mesh, data, _ = data_mesh()
    z = tg.randn((8, 3), key=0, sharding=data, requires_grad=True)
    (g1,) = tg.grad((tg.device_put(z, d[3]).sin() ** 2).sum(), z, create_graph=True)
    (g2,) = tg.grad(g1.sum(), z, create_graph=True)
    (g3,) = tg.grad(g2.sum(), z)
    j1 = jax.grad(lambda a: (jnp.sin(jax.device_put(a, d[3])) ** 2).sum())
    j2 = jax.grad(lambda a: j1(a).sum())
    j3 = jax.grad(lambda a: j2(a).sum())
    for order, (got, want) in enumerate(((g1, j1), (g2, j2), (g3, j3)), 1):
        close(got.data, want(z.data), f"derivative {order} of a sharded input")
        assert got.sharding == data, f"derivative {order} on {got.sharding}, input on {data}"
    del g, h, pg, ph, g1, g2, g3, x, plain, z
    after = tg.graph_stats()
    assert after == before, f"the tape changed: {before} -> {after}"


@check
def draws_land_on_their_keys_device() -> None:
    # a small draw is cut on the host from a chunked draw (tapegrad.random): it goes back to
    # the device of its key, as jax.random's own draw does
    d = jax.devices()
    key = jax.device_put(jax.random.PRNGKey(4), d[3])
    ours, want = tg.randn((5, 3), key=key), jax.random.normal(key, (5, 3))
    assert ours.data.devices() == want.devices() == {d[3]} and ours.data.committed
    close(ours.data, want, "randn with a key on device 3")
    weight = nn.Linear(4, 2, key=key).weight
    assert weight.data.devices() == {d[3]}, f"Linear.weight on {weight.data.devices()}"


@check
def model_on_one_device_trains_there() -> None:
    d = jax.devices()
    model = nn.Linear(3, 2, key=0).to(d[2])
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = tg.randn((4, 3), key=1)  # made on the default device, uncommitted: JAX moves it
    for _ in range(2):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        for name, p in model.named_parameters():
            assert p.grad.device == d[2], f"{name}.grad on {p.grad.device}, not {d[2]}"
        opt.step()
    for name, p in model.named_parameters():
        assert p.device == d[2], f"{name} moved to {p.device} by the step"
    # tg.grad and an explicit grad= land on the root's device too
    out = model(x)
    (g,) = tg.grad(out, [model.bias], grad_outputs=np.ones((4, 2), np.float32))
    assert g.device == d[2], f"tg.grad result on {g.device}"
    # the same step under tg.jit keeps the model on its device
    step = _jit_step(model, optim.SGD(model.parameters(), lr=0.1))
    step(x, jnp.zeros(4, jnp.int32))
    for name, p in model.named_parameters():
        assert p.device == d[2], f"{name} moved to {p.device} by the tg.jit step"
    # moving the model after making the optimizer leaves its state behind: a clear error
    adam = optim.Adam(model.parameters(), lr=0.1)
    assert all(p.grad is not None for p in model.parameters())
    model.to(d[5])
    assert all(p.grad.device == d[5] for p in model.parameters()), "a .grad stayed behind"
    (model(x) ** 2).mean().backward()
    device_error(adam.step, "Adam.step at ", "_devices_checks.py:", "before making the optimizer")
    model.zero_grad()
    # Module.to keeps each leaf's tensor object and node
    before = [(id(p), p._node) for p in model.parameters()]
    model.to(d[4])
    assert before == [(id(p), p._node) for p in model.parameters()]
    assert all(p.device == d[4] for p in model.parameters())


# ------------------------------------------------------------------------ bad input


def _settled() -> tg.GraphStats:
    """The tape's stats once what earlier checks left to the garbage collector (an error's
    traceback cycle holding their tensors) is gone and cleaned up."""
    gc.collect()
    tg.graph_cleanup()
    return tg.graph_stats()


def _unchanged(before: tg.GraphStats, what: str) -> None:
    now = tg.graph_stats()
    assert now == before, f"the tape changed after {what}: {before} -> {now}"


@check
def bad_placements_raise_clear_errors() -> None:
    mesh, data, _ = data_mesh()
    d = jax.devices()
    w = tg.ones(3, device=d[0], requires_grad=True)
    layer = nn.Linear(3, 3, key=0)
    base = tg.graph_stats()
    cases: list[tuple[str, Callable[[], Any], str]] = [
        ("missing device", lambda: tg.device_put(w, 9), "tg.device_put"),
        ("missing device name", lambda: tg.device_put(w, "cpu:12"), "tg.device_put"),
        ("not a device", lambda: tg.device_put(w, object()), "tg.device_put"),
        ("indivisible", lambda: tg.zeros((6, 2), sharding=data), "tg.zeros"),
        ("indivisible put", lambda: tg.device_put(tg.ones((6,)), data), "tg.device_put"),
        ("mixed devices", lambda: w * tg.ones(3, device=d[1]), "multiply"),
        ("module to", lambda: layer.to(data), "Module.to"),
    ]
    for what, fn, op in cases:
        try:
            fn()
        except tg.DeviceError as err:
            text = str(err)
            assert isinstance(err, ValueError)
            assert op in text, f"{what}: {op!r} not in {text!r}"
            assert "_devices_checks.py:" in text, f"{what}: no origin in {text!r}"
        else:
            raise AssertionError(f"{what}: no DeviceError")
        _unchanged(base, what)
    # the tape still works: a backward from w
    (w * 2.0).sum().backward()
    close(w.grad.data, np.full(3, 2.0), "gradient after the errors")


@check
def sharding_of_more_dimensions_than_the_shape_raises() -> None:
    """A PartitionSpec longer than the shape (P("data") for a scalar) is a DeviceError, not
    JAX's IndexError from shard_shape; Module.to checks every tensor before moving any."""
    mesh, data, _ = data_mesh()
    two = NamedSharding(Mesh(np.array(jax.devices()).reshape(4, 2), ("a", "b")), P("a", "b"))
    bn = nn.BatchNorm1d(8)  # num_batches_tracked: a scalar buffer
    before = [t.data for t in (*bn.parameters(), *bn.buffers())]
    leaf = tg.ones((), requires_grad=True)
    base = _settled()
    for what, fn, op in [
        ("scalar", lambda: tg.tensor(3.0, sharding=data), "tg.tensor"),
        ("1-d, 2-d spec", lambda: tg.zeros(8, sharding=two), "tg.zeros"),
        ("put a scalar", lambda: tg.device_put(leaf, data), "tg.device_put"),
        ("module with a scalar buffer", lambda: bn.to(data), "Module.to"),
    ]:
        try:
            fn()
        except tg.DeviceError as err:
            assert op in str(err) and "_devices_checks.py:" in str(err), f"{what}: {err}"
            assert "PartitionSpec" in str(err), f"{what}: {err}"
        else:
            raise AssertionError(f"{what}: no DeviceError")
        _unchanged(base, what)
    assert all(t.data is a for t, a in zip((*bn.parameters(), *bn.buffers()), before, strict=True))


@check
def meshes_in_another_device_order_raise() -> None:
    """Two Meshes over the same devices in another order are unrelated for JAX: a DeviceError
    naming the op, not JAX's "incompatible devices" ValueError."""
    _, data, _ = data_mesh()
    backwards = NamedSharding(Mesh(np.array(jax.devices()[::-1]), ("data",)), P("data"))
    a = tg.ones((8, 2), sharding=data, requires_grad=True)
    b = tg.ones((8, 2), sharding=backwards)
    base = _settled()
    device_error(lambda: a * b, "multiply at", "another order")
    _unchanged(base, "meshes in another order")


@check
def batch_norm_with_statistics_elsewhere_raises() -> None:
    _, data, _ = data_mesh()
    d = jax.devices()
    x = tg.ones((8, 3), sharding=data, requires_grad=True)
    mean, var = tg.zeros(3, device=d[1]), tg.ones(3, device=d[1])
    old = (mean.data, var.data)
    base = _settled()
    normalize = lambda: tg.batch_norm(x, mean, var, training=True)  # noqa: E731
    device_error(normalize, "batch_norm at", "running_mean")
    _unchanged(base, "batch_norm")  # nothing recorded
    assert (mean.data, var.data) == old, "the running statistics changed"


@check
def jit_step_on_unrelated_devices_raises() -> None:
    """A tg.jit step given a batch on other devices than its parameters: a DeviceError naming
    the step, the argument and the state, not JAX's ValueError; nothing changes."""
    d = jax.devices()
    model = nn.Linear(3, 2, key=0).to(d[2])
    step = _jit_step(model, optim.SGD(model.parameters(), lr=0.1))
    y = jnp.zeros(4, jnp.int32)
    before = {n: p.data for n, p in model.named_parameters()}
    fragments = ("step at ", "_devices_checks.py:", "argument 'x'", "model.weight")
    device_error(lambda: step(tg.ones((4, 3), device=d[3]), y), *fragments)
    for n, p in model.named_parameters():
        assert p.data is before[n] and not p.data.is_deleted(), f"{n} changed"
    step(tg.ones((4, 3), device=d[2]), y)  # the step still runs
    assert all(p.device == d[2] for p in model.parameters())


@check
def jit_gradient_keeps_the_parameter_sharding() -> None:
    """A .grad a tg.jit step makes has its parameter's sharding (sum's gradient would be
    replicated where XLA chooses), from the first call on, and equals jax.grad's."""
    _, data, _ = data_mesh()
    w = tg.tensor(np.arange(32, dtype=np.float32).reshape(8, 4), sharding=data).require_grad()

    @tg.jit
    def step(x: tg.Tensor) -> None:
        (w.sum() * x).backward()

    for n in (1, 2):
        step(tg.tensor(2.0))
        assert w.grad.sharding.is_equivalent_to(data, 2), f"call {n}: {w.grad.sharding}"
        close(w.grad.data, n * jax.grad(lambda a: a.sum() * 2.0)(w.data), f"call {n}")


@check
def jit_state_keeps_its_sharding() -> None:
    """A value a tg.jit step writes into a sharded tensor (nn.init's draw, a .data write)
    stays on that tensor's sharding, as eager nn.init keeps it, where XLA would replicate a
    value made inside the step; the next call then compiles nothing."""
    _, data, _ = data_mesh()
    w = tg.tensor(np.ones((8, 4), np.float32), sharding=data).require_grad()
    b = tg.tensor(np.ones((8,), np.float32), sharding=data)

    @tg.jit
    def step() -> None:
        nn.init.normal_(w, key=0)
        with tg.no_grad():
            b.data = tg.zeros((8,)).data

    step()
    traced = step.trace_report()  # a new one at each trace
    for n in (1, 2):
        for t, what in ((w, "nn.init"), (b, ".data")):
            assert t.sharding.is_equivalent_to(data, t.ndim), f"{what} call {n}: {t.sharding}"
        step()
    assert step.trace_report() is traced, "traced again"
    close(w.data, nn.init.normal_(tg.zeros((8, 4)), key=0).data, "nn.init value")

    # a tensor that does not require grad (a constant until written), and a data argument
    c = tg.tensor(np.ones((8, 4), np.float32), sharding=data)

    @tg.jit
    def fill(x: tg.Tensor) -> None:
        nn.init.normal_(c, key=1)
        nn.init.normal_(x, key=2)

    x = tg.tensor(np.ones((8, 4), np.float32), sharding=data)
    for n in (1, 2):
        fill(x)
        for t, what in ((c, "constant"), (x, "argument")):
            assert t.sharding.is_equivalent_to(data, 2), f"{what} call {n}: {t.sharding}"
    close(x.data, nn.init.normal_(tg.zeros((8, 4)), key=2).data, "argument value")


@check
def eager_gradient_keeps_the_parameter_sharding() -> None:
    """backward() and tg.grad give a sharded leaf its gradient on the leaf's sharding (sum's
    gradient would be replicated where XLA chooses: a full copy on every device), across
    accumulation too, equal to jax.grad's."""
    _, data, _ = data_mesh()
    w = tg.tensor(np.arange(32, dtype=np.float32).reshape(8, 4), sharding=data).require_grad()
    want = jax.grad(lambda a: a.sum() * 3.0)(w.data)
    for n in (1, 2):
        (w.sum() * 3.0).backward()
        assert w.grad.sharding.is_equivalent_to(data, 2), f"backward {n}: {w.grad.sharding}"
        close(w.grad.data, n * want, f"backward {n}")
    (g,) = tg.grad(w.sum() * 3.0, w)
    assert g.sharding.is_equivalent_to(data, 2), f"tg.grad: {g.sharding}"
    close(g.data, want, "tg.grad")
    w.grad = None


@check
def optimizer_state_dict_keeps_the_placement() -> None:
    """An optimizer's state loaded from a checkpoint (tg.load gives arrays on the default
    device) goes onto its parameters' sharding; its next step equals the original's."""
    _, data, _ = data_mesh()
    w = tg.tensor(np.arange(16, dtype=np.float32), sharding=data).require_grad()
    adam = optim.Adam([w], lr=0.1)
    (w * w).sum().backward()
    adam.step()
    again = optim.Adam([w], lr=0.1)
    with tempfile.TemporaryDirectory() as folder:  # a checkpoint: loaded on the default device
        tg.save(adam.state_dict(), f"{folder}/opt.safetensors")
        again.load_state_dict(tg.load(f"{folder}/opt.safetensors"))
    for leaf in jax.tree_util.tree_leaves(again.state):
        if leaf.ndim:  # the moments; the step count is a scalar
            assert leaf.sharding.is_equivalent_to(data, 1), f"state on {leaf.sharding}"
    before = w.data
    adam.step()
    want = w.data
    w.data = before
    again.step()
    close(w.data, want, "the step after loading")
    w.grad = None


@check
def state_from_other_devices_loads_where_its_target_lives() -> None:
    """A state dict held in memory on other devices (a model moved to another device, its
    old optimizer's state kept): the optimizer's state goes where its own state lives, its
    scalars (step counts, hyperparameters) uncommitted as made, so the step runs where the
    parameters are; an unplaced parameter (or module) loading it is not moved to the
    source's device."""
    d = jax.devices()
    w = tg.device_put(tg.ones(4), d[1]).require_grad()
    adam = optim.Adam([w], lr=0.1)
    w.grad = tg.device_put(tg.ones(4), d[1])
    adam.step()
    saved = adam.state_dict()
    for target in (tg.device_put(tg.ones(4), d[2]).require_grad(), tg.ones(4).require_grad()):
        placed = target.data.committed, target.data.devices()
        again = optim.Adam([target], lr=0.1)
        again.load_state_dict(saved)
        target.grad = tg.device_put(tg.zeros(4), d[2]) if placed[0] else tg.zeros(4)
        again.step()  # raised a DeviceError: the step count stayed committed to d[1]
        assert (target.data.committed, target.data.devices()) == placed, target.sharding
        for leaf in jax.tree_util.tree_leaves(again.state):  # uncommitted, or with target
            assert not leaf.committed or placed == (True, leaf.devices()), leaf.sharding
    source = nn.Linear(3, 2, key=0).to(d[1])
    model = nn.Linear(3, 2, key=1)  # unplaced: the default device, uncommitted
    model.load_state_dict(source.state_dict())
    for name, p in model.named_parameters():
        assert not p.data.committed and p.data.devices() == {d[0]}, f"{name} on {p.sharding}"
        close(p.data, dict(source.named_parameters())[name].data, f"loaded {name}")


@check
def optimizer_over_unrelated_devices_says_one_per_device() -> None:
    """Parameters on devices no sharding relates (a layer-by-layer split): the step says to
    make one optimizer per device (not to move the model before making the optimizer)."""
    d = jax.devices()
    a = tg.ones(3, device=d[0], requires_grad=True)
    b = tg.ones(3, device=d[1], requires_grad=True)
    opt = optim.SGD([a, b], lr=0.1)
    a.sum().backward()
    b.sum().backward()
    device_error(opt.step, "one optimizer per device")


@check
def index_on_other_devices_raises() -> None:
    """An index array on devices unrelated to the indexed tensor's: a DeviceError naming the
    op and the index, not JAX's ValueError; nothing recorded."""
    _, data, _ = data_mesh()
    d = jax.devices()
    w = tg.ones((8, 2), sharding=data, requires_grad=True)
    idx = jax.device_put(jnp.array([0, 3]), d[1])
    base = _settled()
    device_error(lambda: w[idx], "getitem at", "index")
    _unchanged(base, "getitem")


@check
def clip_grad_norm_over_devices() -> None:
    """A model split layer by layer over two devices: clip_grad_norm_ clips as on one device
    (the total on the first gradient's device, each gradient left on its own)."""
    d = jax.devices()
    one = [nn.Linear(4, 8, key=0), nn.Linear(8, 2, key=1)]
    two = [nn.Linear(4, 8, key=0).to(d[0]), nn.Linear(8, 2, key=1).to(d[1])]
    x = tg.randn((6, 4), key=2)
    (one[1](one[0](x)) ** 2).mean().backward()
    (two[1](tg.device_put(two[0](tg.device_put(x, d[0])), d[1])) ** 2).mean().backward()
    params = [p for m in two for p in m.parameters()]
    ref = [p for m in one for p in m.parameters()]
    for norm_type in (2.0, float("inf")):
        grads = [(p.grad, q.grad) for p, q in zip(params, ref, strict=True)]
        total = tg.nn.utils.clip_grad_norm_(params, 0.1, norm_type=norm_type)
        want = tg.nn.utils.clip_grad_norm_(ref, 0.1, norm_type=norm_type)
        close(total.data, want.data, f"total {norm_type}-norm")
        assert total.device == d[0], f"total on {total.device}"
        for p, q in zip(params, ref, strict=True):
            close(p.grad.data, q.grad.data, f"clipped gradient ({norm_type})")
            assert p.grad.device == p.device, f"gradient on {p.grad.device}, param {p.device}"
        for (p, q), (gp, gq) in zip(zip(params, ref, strict=True), grads, strict=True):
            p.grad, q.grad = gp, gq


@check
def clip_grad_norm_of_sharded_gradients() -> None:
    """Gradients sharded over eight devices (one group): clip_grad_norm_ reduces each on its
    shards, as on one device, and the clipped gradients keep their sharding."""
    _, data, _ = data_mesh()
    values = [np.arange(16.0, dtype=np.float32).reshape(8, 2), np.ones(8, np.float32)]
    for norm_type in (2.0, float("inf")):
        sharded = [tg.tensor(v, sharding=data).require_grad() for v in values]
        plain = [tg.tensor(v).require_grad() for v in values]
        for p, q, v in zip(sharded, plain, values, strict=True):
            p.grad, q.grad = tg.tensor(v, sharding=data), tg.tensor(v)
        total = tg.nn.utils.clip_grad_norm_(sharded, 1.0, norm_type=norm_type)
        close(
            total.data, tg.nn.utils.clip_grad_norm_(plain, 1.0, norm_type=norm_type).data, "total"
        )
        for p, q in zip(sharded, plain, strict=True):
            close(p.grad.data, q.grad.data, f"clipped gradient ({norm_type})")
            assert p.grad.data.sharding.is_equivalent_to(data, p.ndim), p.grad.data.sharding


@check
def grad_set_on_other_devices_raises() -> None:
    """p.grad = a tensor on other devices is refused at once (PyTorch's rule), not at the
    optimizer's step with advice about moving the model; another sharding of the same
    devices is accepted."""
    _, data, repl = data_mesh()
    d = jax.devices()
    p = tg.ones(8, device=d[0], requires_grad=True)
    device_error(lambda: setattr(p, "grad", tg.ones(8, device=d[1])), "tg.device_put")
    assert p.grad is None
    q = tg.ones(8, sharding=data, requires_grad=True)
    q.grad = tg.ones(8, sharding=repl)
    p.grad = tg.ones(8)  # uncommitted: JAX moves it where it is used
    for t in (p, q):  # each steps where it lives
        optim.SGD([t], lr=0.1).step()


@check
def load_state_dict_keeps_the_placement() -> None:
    """Loading a checkpoint (tg.load gives default-device arrays) into a sharded model keeps
    each parameter's sharding, as PyTorch's copy_ keeps the device."""
    import os
    import tempfile

    mesh, _, repl = data_mesh()
    rows = NamedSharding(mesh, P("data", None))
    model = nn.Linear(4, 8, key=0).to(repl)
    model.weight.data = jax.device_put(model.weight.data, rows)  # Megatron-style
    want = {n: np.asarray(p.data) + 1 for n, p in model.named_parameters()}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.safetensors")
        tg.save({n: tg.tensor(v) for n, v in want.items()}, path)
        model.load_state_dict(tg.load(path))
    assert model.weight.sharding == rows, f"weight on {model.weight.sharding}"
    assert model.bias.sharding == repl, f"bias on {model.bias.sharding}"
    for n, p in model.named_parameters():
        close(p.data, want[n], f"loaded {n}")


# ------------------------------------------------------------------------ memory


def _live_bytes_per_device() -> dict[str, int]:
    """Bytes of the distinct device buffers behind ``jax.live_arrays()``, per device (a
    shard JAX has handed out as its own array shares its parent's buffer: counted once)."""
    buffers: dict[tuple[str, int], int] = {}
    for a in jax.live_arrays():
        for shard in a.addressable_shards:
            data = shard.data
            buffers[(str(shard.device), data.unsafe_buffer_pointer())] = data.nbytes
    out: dict[str, int] = {}
    for (device, _), nbytes in buffers.items():
        out[device] = out.get(device, 0) + nbytes
    return out


@check
def saved_bytes_count_device_memory() -> None:
    mesh, data, repl = data_mesh()
    tg.graph_cleanup()
    base = tg.graph_stats().saved_bytes
    r = tg.ones((64,), sharding=repl, requires_grad=True)  # 256 bytes on each of 8 devices
    s = tg.ones((64,), sharding=data, requires_grad=True)  # 32 bytes on each device
    y = r * s  # saves both inputs
    stats = tg.graph_stats()
    assert stats.saved_bytes - base == 8 * 256 + 256, stats
    snap = tg.snapshot()
    per = dict(snap.bytes_by_device)
    assert set(per) == {str(dev) for dev in jax.devices()}, per
    assert sum(per.values()) == snap.stats.saved_bytes
    report = diagnostics.leak_report()
    assert report.saved_bytes == stats.saved_bytes
    assert dict(report.bytes_by_device) == per
    assert "saved per device" in _render(report)
    del y
    report = diagnostics.leak_report()
    assert report.bytes_held == 8 * 256 + 256, report.bytes_held
    cleaned = tg.graph_cleanup()
    # rule 7: the node's saved arrays are no longer held by the tape (their tensors still
    # hold them, so the memory itself returns only when r and s go)
    assert cleaned.nodes_removed == 1 and cleaned.bytes_freed == 8 * 256 + 256, cleaned
    del r, s


@check
def cleanup_frees_saved_shards() -> None:
    mesh, data, _ = data_mesh()
    tg.set_cleanup_policy("manual")
    try:
        tg.graph_cleanup()
        s = tg.ones((64,), sharding=data, requires_grad=True)
        h = s.exp()  # exp saves its output: a sharded array only the tape keeps
        del h  # hanging now: the tape alone holds exp's output, 32 bytes on each device
        before = _live_bytes_per_device()
        cleaned = tg.graph_cleanup()
        after = _live_bytes_per_device()
        assert cleaned.bytes_freed == 256, cleaned
        for dev in jax.devices():
            freed = before.get(str(dev), 0) - after.get(str(dev), 0)
            assert freed == 32, f"{dev}: {freed} bytes freed, expected 32"
        del s
    finally:
        tg.set_cleanup_policy("threshold", threshold=10_000)


def _render(report: diagnostics.LeakReport) -> str:
    from io import StringIO

    from rich.console import Console

    console = Console(file=StringIO(), width=120, color_system=None)
    console.print(report)
    out: str = console.file.getvalue()  # type: ignore[attr-defined]
    return out


# ------------------------------------------------------------------------ data parallel


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 16, key=0), nn.ReLU(), nn.Linear(16, 3, key=1))


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(2, 4, 3, padding=1, key=0),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 5 * 5, 3, key=1),
    )


def _transformer() -> nn.Module:
    return nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, key=0
    )


def _loss(model: nn.Module, x: tg.Tensor, y: Any) -> tg.Tensor:
    out = model(x)
    if out.ndim == 2:
        return tg.cross_entropy(out, y)
    return (out**2).mean()


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "mlp": (_mlp, (16, 6)),
    "cnn": (_cnn, (8, 2, 5, 5)),
    "transformer": (_transformer, (8, 4, 8)),
}


def _jit_step(model: nn.Module, opt: optim.Optimizer) -> Callable[..., Any]:
    """A data-parallel training step under ``tg.jit`` (model and optimizer found in the
    closure)."""

    @tg.jit
    def step(x: tg.Tensor, y: Any) -> tg.Tensor:
        opt.zero_grad()
        loss = _loss(model, x, y)
        loss.backward()
        opt.step()
        return loss

    return step


def _data_parallel(name: str) -> None:
    mesh, data, repl = data_mesh()
    make, shape = MODELS[name]
    x = tg.randn(shape, key=7)
    y = jnp.arange(shape[0]) % 3
    one, many = twin(make, repl)
    xs = tg.tensor(x.data, sharding=data)
    ys = jax.device_put(y, data)
    # eager: activations stay sharded over the batch, gradients equal the one-device run
    first = many[0] if isinstance(many, nn.Sequential) else None
    if first is not None:
        h = first(xs)
        assert h.sharding.shard_shape(h.shape)[0] == shape[0] // 8, f"{name}: {h.sharding}"
        del h
    _loss(one, x, y).backward()
    loss = _loss(many, xs, ys)
    on_all(loss.data, mesh, f"{name} loss")
    loss.backward()
    del loss
    want, got = grads(one), grads(many)
    for key in want:
        close(got[key], want[key], f"{name} eager grad {key}")
        on_all(got[key], mesh, f"{name} grad {key}")
    xg = tg.tensor(x.data, sharding=data, requires_grad=True)
    _loss(many, xg, ys).backward()
    assert xg.grad.sharding.is_equivalent_to(data, xg.ndim), f"{name}: x.grad {xg.grad.sharding}"
    many.zero_grad()
    # tg.jit: the same step compiled over the mesh; parameters stay replicated
    results = []
    for model, xx, yy in ((one, x, y), (many, xs, ys)):
        step = _jit_step(model, optim.SGD(model.parameters(), lr=0.1))
        for _ in range(2):
            step(xx, yy)
        results.append({n: p.data for n, p in model.named_parameters()})
    for key in results[0]:
        close(results[1][key], results[0][key], f"{name} jit params {key}")
        assert results[1][key].sharding.is_fully_replicated, f"{name} {key} after jit"
        on_all(results[1][key], mesh, f"{name} jit param {key}")


@check
def jit_step_on_a_mesh_compiles_once() -> None:
    """A ``tg.jit`` step of replicated parameters and their optimizer compiles once: the
    optimizer's step counts start on the parameters' devices, replicated, where each step
    puts them (they started uncommitted, and the second call compiled again)."""
    _, data, repl = data_mesh()
    x = tg.tensor(tg.randn((16, 6), key=7).data, sharding=data)
    y = jax.device_put(jnp.arange(16) % 3, data)
    for make in (
        lambda ps: optim.Adam(ps, lr=0.01),
        lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: optim.RMSprop(ps, lr=0.01),
    ):
        model = _mlp().to(repl)
        opt = make(model.parameters())
        for leaf in jax.tree_util.tree_leaves(opt.state):
            assert leaf.sharding.is_equivalent_to(repl, leaf.ndim), f"state on {leaf.sharding}"
        step = _jit_step(model, opt)
        for _ in range(3):
            step(x, y)
        assert step.trace_count == 1, f"{type(opt).__name__}: {step.trace_count} compiles"


@check
def data_parallel_mlp() -> None:
    _data_parallel("mlp")


@check
def data_parallel_cnn() -> None:
    _data_parallel("cnn")


@check
def data_parallel_transformer() -> None:
    _data_parallel("transformer")


# ------------------------------------------------------------------------ model parallel


@check
def model_parallel_megatron_mlp() -> None:
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
    spec = {
        "0.weight": P("model", None),  # column-parallel: output features split
        "0.bias": P("model"),
        "2.weight": P(None, "model"),  # row-parallel: input features split
        "2.bias": P(),
    }
    one, many = _mlp(), _mlp()
    for name, p in many.named_parameters():
        p.data = jax.device_put(p.data, NamedSharding(mesh, spec[name]))
    x = tg.randn((16, 6), key=3)
    y = jnp.arange(16) % 3
    xs = tg.tensor(x.data, sharding=NamedSharding(mesh, P("data", None)))
    ys = jax.device_put(y, NamedSharding(mesh, P("data")))
    hidden = many[0](xs)
    assert hidden.sharding.shard_shape(hidden.shape) == (4, 8), hidden.sharding
    del hidden
    opts = [optim.Adam(m.parameters(), lr=0.01) for m in (one, many)]
    for _ in range(2):
        for model, opt, xx, yy in ((one, opts[0], x, y), (many, opts[1], xs, ys)):
            opt.zero_grad()
            _loss(model, xx, yy).backward()
        for (name, p), q in zip(many.named_parameters(), one.parameters(), strict=True):
            close(p.grad.data, q.grad.data, f"model-parallel grad {name}")
            want = NamedSharding(mesh, spec[name])
            assert p.grad.sharding.is_equivalent_to(want, p.ndim), f"{name}.grad {p.grad.sharding}"
        for opt in opts:
            opt.step()
    for (name, p), q in zip(many.named_parameters(), one.parameters(), strict=True):
        close(p.data, q.data, f"model-parallel param {name} after Adam")
        want = NamedSharding(mesh, spec[name])
        assert p.sharding.is_equivalent_to(want, p.ndim), f"{name} after Adam: {p.sharding}"
    params = dict(many.named_parameters())
    for leaf in jax.tree_util.tree_leaves(opts[1].state):
        if getattr(leaf, "ndim", 0) and leaf.shape != ():
            owner = [n for n, p in params.items() if p.shape == leaf.shape]
            assert any(
                leaf.sharding.is_equivalent_to(params[n].sharding, leaf.ndim) for n in owner
            ), f"optimizer state {leaf.shape} on {leaf.sharding}, params on {owner}"


def main(names: list[str]) -> int:
    failed = 0
    for name in names or list(CHECKS):
        try:
            CHECKS[name]()
            tg.graph_cleanup()
            result = {"check": name, "ok": True, "error": ""}
        except Exception:  # noqa: BLE001 - reported to the test, which fails with it
            failed += 1
            result = {"check": name, "ok": False, "error": traceback.format_exc()}
        print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
