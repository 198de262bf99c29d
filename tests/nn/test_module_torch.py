"""Module state dicts, buffers and casts against PyTorch's: tied weights, non-persistent
buffers, ``half()``/``to(dtype)``; dicts loaded both ways with torch as the oracle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")


class TiedLM(nn.Module):
    """GPT-style: the output projection is the embedding matrix."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(6, 4, key=0)
        self.norm = nn.LayerNorm(4)
        self.head = nn.Linear(4, 6, bias=False, key=1)
        self.head.weight = self.emb.weight

    def forward(self, ids: tg.Tensor) -> tg.Tensor:
        return self.head(self.norm(self.emb(ids)))


class TorchTiedLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(6, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.head = torch.nn.Linear(4, 6, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: Any) -> Any:
        return self.head(self.norm(self.emb(ids)))


def _to_torch(state: dict[str, tg.Tensor]) -> dict[str, Any]:
    return {k: torch.tensor(np.asarray(v)) for k, v in state.items()}


def test_tied_weights_are_listed_under_every_name_and_load_both_ways() -> None:
    ours, theirs = TiedLM(), TorchTiedLM()
    state = ours.state_dict()
    assert list(state) == list(theirs.state_dict())  # emb.weight, norm.*, head.weight
    assert state["head.weight"].data is state["emb.weight"].data  # one array, two names
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 3  # once each

    assert ours.load_state_dict(theirs.state_dict()) == nn.LoadResult([], [])
    assert ours.head.weight is ours.emb.weight  # still tied
    np.testing.assert_array_equal(ours.emb.weight.numpy(), theirs.emb.weight.detach().numpy())
    ids = np.array([[0, 3, 5]])
    np.testing.assert_allclose(
        ours(tg.tensor(ids)).numpy(),
        theirs(torch.tensor(ids)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )

    back = TorchTiedLM()
    result = back.load_state_dict(_to_torch(TiedLM().state_dict()))
    assert not result.missing_keys and not result.unexpected_keys


def test_differing_values_for_one_tied_tensor_name_both_keys_and_load_nothing() -> None:
    model = TiedLM()
    before = model.emb.weight.numpy().copy()
    state = dict(TorchTiedLM().state_dict())
    state["head.weight"] = state["head.weight"] + 1.0  # no longer the same values
    with pytest.raises(ValueError, match=r"'emb\.weight' and 'head\.weight'.*nothing"):
        model.load_state_dict(state)
    np.testing.assert_array_equal(model.emb.weight.numpy(), before)
    np.testing.assert_array_equal(model.norm.weight.numpy(), np.ones(4, np.float32))


def test_a_tied_tensor_loads_from_any_one_of_its_names() -> None:
    model = TiedLM()
    full = TorchTiedLM().state_dict()
    # a checkpoint that keeps one name of a tie (tapegrad's before ties were listed, or one
    # trimmed of duplicates): the tensor is loaded, its other name is not missing
    for kept, dropped in (("emb.weight", "head.weight"), ("head.weight", "emb.weight")):
        state = {k: v for k, v in full.items() if k != dropped}
        assert model.load_state_dict(state) == nn.LoadResult([], [])
        np.testing.assert_array_equal(model.head.weight.numpy(), full[kept].numpy())
    partial = {k: v for k, v in full.items() if "weight" not in k or k.startswith("norm")}
    result = model.load_state_dict(partial, strict=False)
    assert result == nn.LoadResult(["emb.weight", "head.weight"], [])  # neither name given


def test_a_module_assigned_twice_is_listed_under_both_names_as_in_torch() -> None:
    lin, tlin = nn.Linear(2, 2, key=0), torch.nn.Linear(2, 2)
    ours, theirs = (
        nn.Sequential(lin, nn.ReLU(), lin),
        torch.nn.Sequential(tlin, torch.nn.ReLU(), tlin),
    )
    assert (
        list(ours.state_dict())
        == list(theirs.state_dict())
        == [
            "0.weight",
            "0.bias",
            "2.weight",
            "2.bias",
        ]
    )
    assert [n for n, _ in ours.named_parameters()] == ["0.weight", "0.bias"]
    assert ours.load_state_dict(theirs.state_dict()) == nn.LoadResult([], [])
    theirs.load_state_dict(_to_torch(ours.state_dict()))


def test_a_module_referring_to_its_parent_ends_the_state_dict_walk() -> None:
    model = nn.Sequential(nn.Linear(2, 2, key=0))
    model[0].owner = model  # a cycle (PyTorch's state_dict would recurse without end)
    assert list(model.state_dict()) == ["0.weight", "0.bias"]
    assert model.load_state_dict(model.state_dict()) == nn.LoadResult([], [])


def test_tied_checkpoints_round_trip_through_safetensors_files(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    model, path = TiedLM(), tmp_path / "tied.safetensors"
    tg.save(model.state_dict(), path)  # both names saved (PyTorch's save_file refuses ties)
    other = TiedLM()
    assert other.load_state_dict(tg.load(path)) == nn.LoadResult([], [])
    np.testing.assert_array_equal(other.head.weight.numpy(), model.emb.weight.numpy())
    assert other.head.weight is other.emb.weight
    theirs = TorchTiedLM()  # another tool reads the file: every name is there
    theirs.load_state_dict(load_file(str(path)))
    np.testing.assert_array_equal(theirs.head.weight.detach().numpy(), model.emb.weight.numpy())


def _train_step(model: nn.Module, opt: Any, compiled: bool) -> Any:
    def step(x: tg.Tensor, y: tg.Tensor) -> None:
        opt.zero_grad()
        tg.cross_entropy(model(x), y).backward()
        opt.step()

    return tg.jit(step) if compiled else step


def test_a_tied_model_trains_like_torch_eagerly_and_compiled() -> None:
    """The optimizer sees the tied weight once (its gradient sums both uses) and its state
    dict counts it once, as PyTorch's does; a tg.jit step gives the eager result."""
    ids, labels = np.array([0, 2, 5, 1]), np.array([1, 2, 3, 4])
    theirs = TorchTiedLM()
    start = {k: v.clone() for k, v in theirs.state_dict().items()}  # torch shares storage
    topt = torch.optim.Adam(theirs.parameters(), lr=0.1)
    for _ in range(2):
        topt.zero_grad()
        torch.nn.functional.cross_entropy(
            theirs(torch.tensor(ids)), torch.tensor(labels)
        ).backward()
        topt.step()
    results = []
    for compiled in (False, True):
        model = TiedLM()
        model.load_state_dict(start)
        opt = tg.optim.Adam(model.parameters(), lr=0.1)
        assert opt.state_dict()["param_groups"][0]["params"] == [0, 1, 2]
        run = _train_step(model, opt, compiled)
        for _ in range(2):
            run(tg.tensor(ids), tg.tensor(labels))
        assert model.head.weight is model.emb.weight
        results.append(model.state_dict())
    for ours in results:
        for name, value in theirs.state_dict().items():
            np.testing.assert_allclose(ours[name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)


class Cached(nn.Module):
    """Keeps its last output (non-persistent) and a count (persistent), as a model might."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2, key=0)
        self.register_buffer("last_out", None, persistent=False)
        self.register_buffer("mask", tg.ones(2), persistent=False)
        self.register_buffer("seen", tg.zeros(()))

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        y = self.fc(x) * self.mask
        self.last_out = y.detach()  # stays the non-persistent buffer it was registered as
        self.seen = self.seen + x.shape[0]
        return y


class TorchCached(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.register_buffer("last_out", None, persistent=False)
        self.register_buffer("mask", torch.ones(2), persistent=False)
        self.register_buffer("seen", torch.zeros(()))


def test_non_persistent_buffers_stay_out_of_state_dicts_as_in_torch() -> None:
    model = Cached()
    assert list(model.state_dict()) == list(TorchCached().state_dict())  # fc.*, seen
    assert [n for n, _ in model.named_buffers()] == ["mask", "seen"]  # None is in no listing
    model(tg.ones((4, 3)))
    assert [n for n, _ in model.named_buffers()] == ["last_out", "mask", "seen"]  # in place
    assert list(model.state_dict()) == ["seen", "fc.weight", "fc.bias"]
    assert float(model.state_dict()["seen"]) == 4.0
    fresh = Cached()  # the checkpoint of a used model loads into a fresh one
    assert fresh.load_state_dict(model.state_dict()) == nn.LoadResult([], [])
    assert fresh.last_out is None
    np.testing.assert_array_equal(fresh.fc.weight.numpy(), model.fc.weight.numpy())
    assert TorchCached().load_state_dict(_to_torch(model.state_dict())) is not None
    theirs = TorchCached()
    assert fresh.load_state_dict(theirs.state_dict()) == nn.LoadResult([], [])
    device = tg.ones(1).device
    assert model.to(device) is model and model.last_out.device == device  # buffers move


def test_a_compiled_step_writes_non_persistent_buffers_back_as_eager_code_would() -> None:
    models = []
    for compiled in (False, True):
        model = Cached()
        model.register_buffer("last_out", tg.zeros((4, 2)), persistent=False)  # fixed shape
        run = _train_step(model, tg.optim.SGD(model.parameters(), lr=0.1), compiled)
        for _ in range(2):
            run(tg.ones((4, 3)), tg.tensor(np.array([0, 1, 1, 0])))
        models.append(model)
    eager, jitted = models
    np.testing.assert_allclose(jitted.last_out.numpy(), eager.last_out.numpy(), rtol=1e-6)
    assert float(jitted.seen) == float(eager.seen) == 8.0
    assert list(jitted.state_dict()) == ["seen", "fc.weight", "fc.bias"]


def test_a_cached_attribute_without_register_buffer_is_saved_and_the_error_says_what_to_do() -> (
    None
):
    class Naive(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 2, key=0)

        def forward(self, x: tg.Tensor) -> tg.Tensor:
            y = self.fc(x)
            self.last_out = y.detach()  # a new non-grad tensor attribute: a buffer
            return y

    used = Naive()
    used(tg.ones((1, 3)))
    assert "last_out" in used.state_dict()
    with pytest.raises(KeyError, match=r"unexpected keys \['last_out'\].*register_buffer"):
        Naive().load_state_dict(used.state_dict())
    result = Naive().load_state_dict(used.state_dict(), strict=False)
    assert result == nn.LoadResult([], ["last_out"])


def test_buffer_registration_rules_and_errors() -> None:
    model = Cached()
    model.last_out = tg.zeros(2)
    model.last_out = tg.ones(2).require_grad() * 2.0  # an op output: a plain attribute
    assert "last_out" not in dict(model.named_buffers())
    model.last_out = tg.zeros(2)  # the name stays non-persistent until deleted
    assert "last_out" in dict(model.named_buffers()) and "last_out" not in model.state_dict()
    del model.last_out
    model.last_out = tg.zeros(2)  # a new name: a persistent buffer again
    assert "last_out" in model.state_dict()
    model.register_buffer("last_out", tg.zeros(3), persistent=False)
    assert "last_out" not in model.state_dict()
    model.seen = None  # an empty buffer slot
    assert "seen" not in model.state_dict() and model.seen is None

    with pytest.raises(KeyError, match=r"'a\.b'"):
        model.register_buffer("a.b", tg.zeros(1))
    with pytest.raises(KeyError, match="'fc'.*not a buffer.*del module.fc"):
        model.register_buffer("fc", tg.zeros(1))
    with pytest.raises(TypeError, match="Tensor or None.*ndarray"):
        model.register_buffer("x", np.zeros(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="requires grad.*detach"):
        model.register_buffer("x", tg.zeros(1).require_grad())
    assert "x" not in dir(model)
    model.x = tg.zeros(1)  # names still free after the refusals
    assert "x" in model.state_dict()


def test_running_statistics_keep_torch_names_and_order_after_training_steps() -> None:
    ours, theirs = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    ours(tg.ones((4, 3)))
    theirs(torch.ones((4, 3)))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.load_state_dict(theirs.state_dict()) == nn.LoadResult([], [])


def test_half_and_to_dtype_cast_floating_tensors_in_place_like_torch() -> None:
    ours = nn.Sequential(nn.Linear(3, 4, key=0), nn.BatchNorm1d(4))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    ours.load_state_dict(theirs.state_dict())
    weight = ours[0].weight
    ours[0](tg.ones((2, 3))).sum().backward()
    assert ours.half() is ours and theirs.half() is theirs
    assert weight is ours[0].weight and weight.requires_grad and weight.is_leaf
    assert weight.grad is not None and weight.grad.dtype == jnp.float16
    # the released float32 leaves that no backward reached (BatchNorm's) left the tape at once
    assert tg.graph_cleanup().leaves_removed == 0
    dtypes = {k: str(v.dtype) for k, v in ours.state_dict().items()}
    theirs_dtypes = {k: str(v.dtype).removeprefix("torch.") for k, v in theirs.state_dict().items()}
    assert dtypes.pop("1.num_batches_tracked") == "int32"  # integers keep their dtype (torch:
    assert theirs_dtypes.pop("1.num_batches_tracked") == "int64"  # int64, JAX x64 off: int32)
    assert dtypes == theirs_dtypes
    ours(tg.ones((2, 3), dtype=tg.float16)).sum().backward()  # trains in float16
    assert weight.grad.dtype == jnp.float16

    for cast, want in (
        (lambda m: m.to(tg.bfloat16), jnp.bfloat16),
        (lambda m: m.float(), jnp.float32),
        (lambda m: m.bfloat16(), jnp.bfloat16),
        (lambda m: m.to(tg.ones(1).device, dtype=np.float32), jnp.float32),
    ):
        assert cast(ours) is ours and weight.dtype == want and ours[1].running_var.dtype == want


def test_casts_that_cannot_happen_say_why_and_change_nothing() -> None:
    model = nn.Linear(2, 2, key=0)
    with pytest.raises(TypeError, match="floating dtype.*int32"):
        model.to(tg.int32)
    with pytest.raises(TypeError, match=r"torch.float16 is PyTorch's dtype.*tg\.float16"):
        model.to(torch.float16)
    with pytest.raises(TypeError, match="x64"):
        model.double()  # the suite runs with x64 off, as users do
    if jax.default_backend() == "cpu":  # a process without a GPU: .cuda() says so
        with pytest.raises(tg.DeviceError, match="no device 'gpu:0'"):
            model.cuda()
    with pytest.raises(tg.DeviceError, match="names no device"):
        model.to(object())
    assert model.weight.dtype == jnp.float32 and model.cpu() is model


def test_a_sequential_slice_keeps_the_layers_names_as_pytorchs() -> None:
    """Regression: ``seq[1:]`` renumbered its layers from 0 (``'1.weight'`` where PyTorch's
    state dict says ``'2.weight'``), so a slice's state dict did not load into PyTorch's."""
    torch.manual_seed(0)
    ours = nn.Sequential(nn.Linear(2, 3, key=0), nn.ReLU(), nn.Linear(3, 2, key=1))
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    for index in (slice(1, None), slice(None, 1), slice(None, None, 2), slice(-1, None)):
        part, torch_part = ours[index], theirs[index]
        assert list(part.state_dict()) == list(torch_part.state_dict()), index
        assert [n for n, _ in part.named_modules()] == [n for n, _ in torch_part.named_modules()]
    tail = ours[1:]
    assert tail[1] is ours[2] and len(tail) == 2
    theirs[1:].load_state_dict({k: torch.tensor(v.numpy()) for k, v in tail.state_dict().items()})
    x = np.ones((1, 3), np.float32)
    want = theirs[1:](torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(tail(tg.tensor(x)).numpy(), want, rtol=1e-6)


def test_sequential_of_an_ordered_dict_names_its_layers_as_pytorchs() -> None:
    """Regression: ``nn.Sequential(OrderedDict([...]))`` raised TypeError."""
    from collections import OrderedDict

    torch.manual_seed(0)
    ours = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3, key=0)), ("act", nn.Tanh())]))
    theirs = torch.nn.Sequential(
        OrderedDict([("fc", torch.nn.Linear(2, 3)), ("act", torch.nn.Tanh())])
    )
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["fc.weight", "fc.bias"]
    assert isinstance(ours[0], nn.Linear) and ours.fc is ours[0] and len(ours) == 2
    assert list(ours[1:].state_dict()) == [] and [n for n, _ in ours[1:].named_children()] == [
        "act"
    ]
    ours.load_state_dict(theirs.state_dict())
    x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(2, 2)
    want = theirs(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(ours(tg.tensor(x)).numpy(), want, rtol=1e-6)
    with pytest.raises(TypeError, match="Sequential: entry 'act' is a int, not a Module"):
        nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3, key=0)), ("act", 3)]))


def test_forward_hooks_are_pytorchs() -> None:
    """``register_forward_hook`` (reads or replaces the output) and
    ``register_forward_pre_hook`` (replaces the arguments), in registration order, removed
    by their handles: outputs, captured activations and gradients equal PyTorch's; inside a
    ``tg.jit`` step too."""
    a = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    ours = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    seen: dict[str, list[Any]] = {"torch": [], "tapegrad": []}
    handles = {}
    for model, tag in ((theirs, "torch"), (ours, "tapegrad")):
        capture = model[1].register_forward_hook(
            lambda m, args, out, tag=tag: seen[tag].append(out.detach())
        )
        model[2].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
        model[0].register_forward_hook(lambda m, args, out: out + 1)
        handles[tag] = model[0].register_forward_hook(lambda m, args, out: out * 3)  # after
    want = theirs(torch.tensor(a, requires_grad=True))
    x = tg.tensor(a).require_grad()
    got = ours(x)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(seen["tapegrad"][0].numpy(), seen["torch"][0].numpy(), rtol=1e-5)
    for tag in handles:
        handles[tag].remove()
        handles[tag].remove()  # again: nothing
    tx = torch.tensor(a, requires_grad=True)
    theirs(tx).sum().backward()
    ours(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    capture.remove()  # the tapegrad one (last in the loop): inside a compiled step, storing
    # a traced activation in a list would raise (return it from the step instead)
    step = tg.jit(lambda inp: ours(inp).sum())
    eager = ours(tg.tensor(a)).sum().item()
    assert step(tg.tensor(a)).item() == pytest.approx(eager, rel=1e-6)
    with ours[0].register_forward_hook(lambda m, args, out: out * 0) as handle:
        assert isinstance(handle, nn.RemovableHandle)
        bias = np.broadcast_to(ours[2].bias.numpy(), (4, 2))  # layer 0's output is zero
        np.testing.assert_allclose(ours(tg.tensor(a)).numpy(), bias)
    assert ours(tg.tensor(a)).sum().item() == pytest.approx(eager, rel=1e-6)
    late = nn.Linear(3, 2, key=1)  # hooks registered or removed after a step compiled
    compiled = tg.jit(lambda inp: late(inp).sum())
    plain = compiled(tg.tensor(a)).item()
    handle = late.register_forward_hook(lambda m, args, out: out * 0)
    assert compiled(tg.tensor(a)).item() == 0.0
    handle.remove()
    assert compiled(tg.tensor(a)).item() == pytest.approx(plain, rel=1e-6)
    assert compiled.trace_count == 3
    with pytest.raises(TypeError, match="register_forward_hook: the hook must be callable"):
        ours.register_forward_hook(None)  # type: ignore[arg-type]
