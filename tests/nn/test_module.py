"""tapegrad.nn Module protocol: registration, traversal, modes, state dicts, Linear, containers."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn


class Block(nn.Module):
    def __init__(self, key: int) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3, key=key)
        self.scale = tg.ones(3).require_grad()
        self.offset = tg.zeros(3)  # a buffer: does not require grad
        self.name = "block"  # a plain attribute

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        return self.fc(x) * self.scale + self.offset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = Block(0)
        self.head = nn.Linear(3, 2, bias=False, key=1)
        self.shared = self.head  # the same module twice: one module, two state_dict names

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        return self.head(self.body(x).tanh())


def _leaf_ids() -> set[int]:
    return {r.id for r in tg.snapshot().nodes if r.kind == "leaf"}


def test_parameters_are_registered_by_attribute_in_order() -> None:
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    # As PyTorch: each module's own parameters, then its sub-modules', depth first.
    assert names == ["body.scale", "body.fc.weight", "body.fc.bias", "head.weight"]
    params = list(net.parameters())
    assert [p.shape for p in params] == [(3,), (3, 4), (3,), (2, 3)]
    assert all(p.requires_grad and p.is_leaf for p in params)
    assert [n for n, _ in net.named_buffers()] == ["body.offset"]
    assert [n for n, _ in net.named_children()] == ["body", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "body", "body.fc", "head"]
    assert net.body.name == "block"
    assert [n for n, _ in net.body.named_parameters(recurse=False)] == ["scale"]
    assert next(iter(net.named_parameters(prefix="net")))[0] == "net.body.scale"


def test_reassigning_and_deleting_attributes_updates_the_registries() -> None:
    block = Block(0)
    with pytest.raises(TypeError, match="parameter 'scale'"):
        block.scale = tg.full(3, 2.0)  # PyTorch's rule: a parameter name takes parameters
    del block.scale
    block.scale = tg.full(3, 2.0)  # now a buffer
    assert [n for n, _ in block.named_parameters()] == ["fc.weight", "fc.bias"]
    assert [n for n, _ in block.named_buffers()] == ["offset", "scale"]
    x = tg.ones(3).require_grad()
    block.extra = x * 2.0  # an op output is neither parameter nor buffer
    assert "extra" not in dict(block.named_parameters())
    assert "extra" not in dict(block.named_buffers())
    assert block.extra.requires_grad
    del block.extra
    del block.fc
    assert [n for n, _ in block.named_parameters()] == []
    with pytest.raises(AttributeError, match="fc"):
        _ = block.fc
    assert "offset" in dir(block)


def test_assigning_before_super_init_says_what_to_do() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            self.fc = nn.Linear(2, 2, key=0)

    with pytest.raises(AttributeError, match=r"super\(\).__init__\(\)"):
        Broken()


@pytest.mark.parametrize(("n_in", "n_out"), [(64, 128), (5, 3)])
def test_linear_shapes(n_in: int, n_out: int) -> None:
    layer = nn.Linear(n_in, n_out, key=0)
    assert layer.weight.shape == (n_out, n_in)  # PyTorch's layout
    assert layer.bias is not None and layer.bias.shape == (n_out,)
    assert layer.weight.dtype == jnp.float32
    assert layer(tg.ones((7, n_in))).shape == (7, n_out)
    assert layer(tg.ones((2, 7, n_in))).shape == (2, 7, n_out)
    assert layer(tg.ones(n_in)).shape == (n_out,)
    no_bias = nn.Linear(n_in, n_out, bias=False, key=0)
    assert no_bias.bias is None
    assert len(list(no_bias.parameters())) == 1
    assert repr(no_bias) == f"Linear(in_features={n_in}, out_features={n_out}, bias=False)"


def test_linear_init_is_uniform_in_plus_minus_one_over_sqrt_fan_in() -> None:
    layer = nn.Linear(64, 256, key=0)
    k = 1.0 / math.sqrt(64)
    w = np.asarray(layer.weight)
    assert layer.bias is not None
    b = np.asarray(layer.bias)
    assert np.all(np.abs(w) <= k) and np.all(np.abs(b) <= k)
    # Uniform on [-k, k]: extremes near the bounds, mean 0, variance k^2 / 3.
    assert w.max() > 0.99 * k and w.min() < -0.99 * k
    assert b.max() > 0.9 * k and b.min() < -0.9 * k
    assert abs(w.mean()) < 0.02 * k
    assert w.var() == pytest.approx(k * k / 3, rel=0.05)
    same = nn.Linear(64, 256, key=0)
    other = nn.Linear(64, 256, key=jax.random.PRNGKey(1))
    np.testing.assert_array_equal(np.asarray(same.weight), w)
    assert not np.array_equal(np.asarray(other.weight), w)


def test_linear_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        nn.Linear(-1, 3, key=0)
    with pytest.raises(TypeError, match="key"):
        nn.Linear(2, 3, key="seed")
    with pytest.raises(TypeError, match="floating"):
        nn.Linear(2, 3, key=0, dtype=jnp.int32)


def _mlp_jnp(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    h = jnp.tanh(x @ params["0.weight"].T + params["0.bias"])
    h = jax.nn.relu(h @ params["2.weight"].T + params["2.bias"])
    logits = h @ params["4.weight"].T + params["4.bias"]
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=-1))


def test_gradients_match_jax_grad_of_the_same_network_in_jnp() -> None:
    model = nn.Sequential(
        nn.Linear(6, 8, key=0),
        nn.Tanh(),
        nn.Linear(8, 5, key=1),
        nn.ReLU(),
        nn.Linear(5, 3, key=2),
    )
    x = jax.random.normal(jax.random.PRNGKey(3), (10, 6))
    y = jnp.arange(10, dtype=jnp.int32) % 3
    loss = tg.cross_entropy(model(tg.tensor(x)), y)
    loss.backward()
    params = {n: p.data for n, p in model.named_parameters()}
    want_loss, want = jax.value_and_grad(_mlp_jnp)(params, x, y)
    np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-6)
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(np.asarray(p.grad), want[name], rtol=1e-5, atol=1e-7)
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_zero_grad_without_set_to_none_writes_zeros() -> None:
    layer = nn.Linear(3, 2, key=0)
    layer(tg.ones((4, 3))).sum().backward()
    assert layer.bias is not None and layer.bias.grad is not None
    np.testing.assert_allclose(np.asarray(layer.bias.grad), [4.0, 4.0])
    layer.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(np.asarray(layer.bias.grad), [0.0, 0.0])
    assert layer.weight.grad is not None and layer.weight.grad.shape == (2, 3)


def test_state_dict_round_trip_keeps_the_parameter_nodes() -> None:
    net = Net()
    saved = net.state_dict()
    # PyTorch's order: each module's parameters, then its buffers, then its children's; the
    # module assigned twice is listed under both names, as PyTorch lists it.
    assert list(saved) == [
        "body.scale",
        "body.offset",
        "body.fc.weight",
        "body.fc.bias",
        "head.weight",
        "shared.weight",
    ]
    assert not any(t.requires_grad for t in saved.values())
    leaves_before = _leaf_ids()
    x = tg.ones((2, 4))
    before = np.asarray(net(x))
    with tg.no_grad():
        for p in net.parameters():
            p += 1.0
    assert not np.allclose(np.asarray(net(x)), before)
    # The snapshot kept the old values even though the parameters changed.
    np.testing.assert_allclose(
        np.asarray(saved["head.weight"]), np.asarray(net.head.weight) - 1.0, atol=1e-6
    )
    result = net.load_state_dict(saved)
    assert result == nn.LoadResult([], [])
    np.testing.assert_array_equal(np.asarray(net(x)), before)
    assert _leaf_ids() == leaves_before

    other = Net()
    other.load_state_dict({k: np.asarray(v, dtype=np.float64) for k, v in saved.items()})
    np.testing.assert_array_equal(np.asarray(other(x)), before)
    assert other.head.weight.dtype == jnp.float32


def test_load_state_dict_reports_mismatches_and_changes_nothing_on_error() -> None:
    net = Net()
    saved = net.state_dict()
    old = np.asarray(net.head.weight)
    partial = {k: v for k, v in saved.items() if k != "body.scale"}
    partial["extra"] = tg.zeros(1)
    with pytest.raises(KeyError, match="body.scale"):
        net.load_state_dict(partial)
    result = net.load_state_dict(partial, strict=False)
    assert result.missing_keys == ["body.scale"]
    assert result.unexpected_keys == ["extra"]
    bad = dict(saved)
    bad["body.fc.weight"] = tg.zeros((4, 3))
    bad["head.weight"] = tg.zeros((3, 2))
    with pytest.raises(ValueError, match=r"body.fc.weight.*\(4, 3\).*head.weight"):
        net.load_state_dict(bad)
    np.testing.assert_array_equal(np.asarray(net.head.weight), old)


def test_train_and_eval_set_the_flag_on_every_module() -> None:
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_sequential_indexing_and_errors() -> None:
    seq = nn.Sequential(nn.Linear(2, 3, key=0), nn.ReLU(), nn.Tanh())
    assert len(seq) == 3
    assert isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Tanh)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is seq[0]
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Tanh"]
    out = seq(tg.tensor([[1.0, -2.0]]))
    layer = seq[0]
    assert isinstance(layer, nn.Linear)
    want = np.tanh(np.maximum(np.array([[1.0, -2.0]]) @ layer.weight.data.T + layer.bias.data, 0))
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    assert repr(seq).splitlines()[0] == "Sequential("
    assert "  (1): ReLU()" in repr(seq)
    with pytest.raises(TypeError, match="entry 1"):
        nn.Sequential(nn.ReLU(), lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(tg.ones(1))


def test_module_list_and_dict_register_their_entries() -> None:
    layers = nn.ModuleList([nn.Linear(2, 2, key=i) for i in range(2)])
    layers.append(nn.Tanh())
    assert len(layers) == 3 and isinstance(layers[-1], nn.Tanh)
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    first = layers[:1]  # a slice is a ModuleList sharing the modules, as PyTorch's
    assert isinstance(first, nn.ModuleList) and first[0] is layers[0]
    assert list(first.state_dict()) == ["0.weight", "0.bias"]
    heads = nn.ModuleDict({"a": nn.Linear(2, 1, key=0)})
    heads["b"] = nn.Linear(2, 3, key=1)
    assert heads.keys() == ["a", "b"] and "b" in heads and len(heads) == 2
    assert list(heads.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias"]
    del heads["a"]
    assert list(heads) == ["b"]
    with pytest.raises(TypeError, match="not a Module"):
        layers.append(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a Module"):
        heads["c"] = "x"  # type: ignore[assignment]


def test_requires_grad_freezes_and_unfreezes_parameters() -> None:
    net = Net()
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())
    assert len(list(net.parameters())) == 4  # frozen parameters stay parameters
    net(tg.ones((2, 4))).sum()  # nothing requires grad: nothing recorded
    net.requires_grad_(True)
    assert all(p.requires_grad and p.is_leaf for p in net.parameters())


def test_to_moves_parameters_and_buffers_in_place() -> None:
    net = Net()
    device = jax.devices("cpu")[0]
    ids = [id(t) for t in (*net.parameters(), *net.buffers())]
    leaves = _leaf_ids()
    assert net.to(device) is net
    assert [id(t) for t in (*net.parameters(), *net.buffers())] == ids
    assert all(t.device == device for t in (*net.parameters(), *net.buffers()))
    assert _leaf_ids() == leaves


def test_apply_visits_children_first() -> None:
    seen: list[str] = []
    Net().apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Block", "Linear", "Net"]


def test_load_state_dict_rejects_non_arrays_before_writing() -> None:
    layer = nn.Linear(2, 2, key=0)
    before = np.asarray(layer.weight)
    with pytest.raises(TypeError, match="'bias'"):
        layer.load_state_dict({"weight": np.zeros((2, 2)), "bias": object()})
    np.testing.assert_array_equal(np.asarray(layer.weight), before)


LAYERS = {
    "Linear": lambda: nn.Linear(3, 4, key=0),
    "Conv1d": lambda: nn.Conv1d(2, 3, 3, key=0),
    "Conv2d": lambda: nn.Conv2d(2, 3, 3, key=0),
    "Embedding": lambda: nn.Embedding(5, 4, key=0),
    "LayerNorm": lambda: nn.LayerNorm(4),
    "BatchNorm2d": lambda: nn.BatchNorm2d(4),
    "MultiheadAttention": lambda: nn.MultiheadAttention(8, 2, key=0),
    "TransformerEncoderLayer": lambda: nn.TransformerEncoderLayer(8, 2, 16, key=0),
    "LSTM": lambda: nn.LSTM(3, 4, num_layers=2, key=0),
    "GRU": lambda: nn.GRU(3, 4, key=0),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_building_a_layer_leaves_no_hanging_node(name: str) -> None:
    """Every leaf a constructor makes is a parameter it keeps (a replaced initial value would
    hang: MultiheadAttention's zeroed out_proj bias did, two hanging leaves per demo model)."""
    before = tg.graph_stats().hanging_nodes
    layer = LAYERS[name]()
    assert tg.graph_stats().hanging_nodes == before
    assert tg.graph_stats().leaves >= len(list(layer.parameters()))
    if name == "MultiheadAttention":
        assert not layer.out_proj.bias.data.any()  # still zero, as PyTorch's


def test_load_state_dict_copies_numpy_and_torch_values() -> None:
    # jnp.asarray may share a CPU buffer: an in-place change of the source afterwards must
    # not reach the parameter (PyTorch's load_state_dict copies)
    torch = pytest.importorskip("torch")
    source = torch.nn.Linear(4, 3)
    model = nn.Linear(4, 3)
    model.load_state_dict(source.state_dict())
    before = model.weight.numpy().copy()
    with torch.no_grad():
        source.weight.add_(1.0)
    arrays = {"weight": np.zeros((3, 4), np.float32), "bias": np.zeros(3, np.float32)}
    other = nn.Linear(4, 3)
    other.load_state_dict(arrays)
    arrays["weight"] += 5.0
    np.testing.assert_array_equal(model.weight.numpy(), before)
    assert float(np.abs(other.weight.numpy()).max()) == 0.0


def test_load_state_dict_refuses_a_donated_array_with_what_to_do() -> None:
    model = nn.Linear(2, 1)
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    saved = model.state_dict()  # shares the parameters' arrays

    @tg.jit
    def step(x: tg.Tensor) -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    step(tg.ones((3, 2)))  # donates them
    with pytest.raises(RuntimeError, match="donated.*clone"):
        model.load_state_dict(saved)
    step(tg.ones((3, 2)))  # the model is unchanged by the refused load: still runs


def test_deepcopy_copies_the_arrays_so_a_compiled_step_leaves_the_copy_alone() -> None:
    import copy

    model = nn.Linear(2, 1)
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    target = copy.deepcopy(model)  # a target network / EMA copy
    best = copy.deepcopy(model.state_dict())
    assert target.weight.data is not model.weight.data and target.weight.requires_grad

    @tg.jit
    def step(x: tg.Tensor) -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    start = target.weight.numpy().copy()
    step(tg.ones((3, 2)))
    np.testing.assert_array_equal(target(tg.ones((1, 2))).shape, (1, 1))
    np.testing.assert_array_equal(target.weight.numpy(), start)
    np.testing.assert_array_equal(best["weight"].numpy(), start)
