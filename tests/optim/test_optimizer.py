"""tapegrad.optim machinery: optax by hand, one compiled call, nodes kept, groups, state dicts."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _support import assert_close, compiles, error_of

import tapegrad as tg
from tapegrad import nn, optim


def _model() -> nn.Sequential:
    return nn.Sequential(nn.Linear(5, 4, key=0), nn.Tanh(), nn.Linear(4, 3, key=1))


def _backward(model: nn.Module, seed: int) -> None:
    x = tg.randn((8, 5), key=seed)
    y = tg.tensor(np.arange(8) % 3)
    tg.cross_entropy(model(x), y).backward()


def _values(model: nn.Module) -> tuple[jax.Array, ...]:
    return tuple(p.data for p in model.parameters())


def _grads(model: nn.Module) -> tuple[jax.Array, ...]:
    out = []
    for p in model.parameters():
        assert p.grad is not None
        out.append(p.grad.data)
    return tuple(out)


def _leaf_ids(start: int = -1) -> list[int]:
    """Ids of the leaves on the tape above ``start`` (another test module may keep its own)."""
    return sorted(r.id for r in tg.snapshot().nodes if r.kind == "leaf" and r.id > start)


def _assert_close(got: tuple[jax.Array, ...], want: Any) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    ("make", "by_hand"),
    [
        (lambda ps: optim.Optimizer(ps, optax.sgd(0.1, momentum=0.9)), optax.sgd(0.1, 0.9)),
        (
            lambda ps: optim.Optimizer(
                ps, optax.chain(optax.clip_by_global_norm(0.05), optax.adam(0.01))
            ),
            optax.chain(optax.clip_by_global_norm(0.05), optax.adam(0.01)),
        ),
    ],
    ids=["sgd-momentum", "clip+adam"],
)
def test_steps_equal_optax_applied_by_hand(make: Any, by_hand: Any) -> None:
    model = _model()
    opt = make(model.parameters())
    values = _values(model)
    state = by_hand.init(values)
    for seed in (10, 11):  # two steps: the state (momentum, moments, count) carries over
        opt.zero_grad()
        _backward(model, seed)
        grads = _grads(model)
        updates, state = by_hand.update(grads, state, values)
        values = optax.apply_updates(values, updates)
        opt.step()
        _assert_close(_values(model), values)
    _assert_close(jax.tree.leaves(opt.state[0]), jax.tree.leaves(state))
    # The step moved the parameters (the comparison above is not vacuous).
    assert not np.allclose(np.asarray(values[0]), np.asarray(_model()[0].weight))


def test_parameters_keep_their_nodes_and_the_tape_holds_only_them_after_a_step(
    start: int,
) -> None:
    model = _model()
    params = list(model.parameters())
    opt = optim.Adam(params, lr=0.01)
    leaves = _leaf_ids(start)
    assert len(leaves) == len(params)
    x = tg.randn((8, 5), key=2)
    y = tg.tensor(np.arange(8) % 3)
    loss = tg.cross_entropy(model(x), y)
    loss.backward()
    before = np.asarray(params[0])
    opt.step()
    assert not np.allclose(np.asarray(params[0]), before)
    del loss
    mine = [r for r in tg.snapshot().nodes if r.id > start]
    assert len(mine) == len(params)
    assert all(r.kind == "leaf" and r.live for r in mine)
    assert tg.graph_stats().hanging_nodes == 0 and sum(r.saved_bytes for r in mine) == 0
    assert _leaf_ids(start) == leaves
    assert all(p.requires_grad and p.is_leaf for p in params)
    assert all(p.grad is not None and p.grad.requires_grad is False for p in params)


def test_a_step_is_one_compiled_call_over_all_parameters() -> None:
    calls: list[int] = []
    inner = optax.sgd(0.1)

    def update(updates: Any, state: Any, params: Any = None) -> Any:
        calls.append(len(jax.tree.leaves(updates)))  # runs only while jax.jit traces
        return inner.update(updates, state, params)

    model = _model()
    opt = optim.Optimizer(model.parameters(), optax.GradientTransformation(inner.init, update))
    for seed in range(3):
        opt.zero_grad()
        _backward(model, seed)
        opt.step()
    assert calls == [4]  # traced once, with all four parameters together


def _adam_state(opt: optim.Optimizer) -> Any:
    """The ``ScaleByAdamState`` inside the injected chain of group 0."""
    return opt.state[0].inner_state[1]


def test_parameters_without_grad_are_skipped_as_in_pytorch() -> None:
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.01)
    state0 = opt.state
    opt.step()  # no gradients at all: nothing happens, the state does not advance
    assert opt.state is state0
    # A first step with every gradient, so the moments are non-zero.
    _backward(model, 1)
    opt.step()
    params = list(model.parameters())
    mu_before = [np.asarray(m) for m in _adam_state(opt).mu]
    nu_before = [np.asarray(v) for v in _adam_state(opt).nu]
    frozen_value = np.asarray(params[1])
    grads = list(_grads(model))
    grads[1] = jnp.zeros_like(grads[1])
    before = _adam_state(opt)  # every count is 1 here: optax's one count is the same
    want_updates, _ = optax.adam(0.01).update(
        tuple(grads), (before._replace(count=before.count[0]), optax.EmptyState()), _values(model)
    )
    want = optax.apply_updates(_values(model), want_updates)
    params[1].grad = None
    opt.step()
    np.testing.assert_array_equal(np.asarray(params[1]), frozen_value)
    np.testing.assert_array_equal(np.asarray(_adam_state(opt).mu[1]), mu_before[1])
    np.testing.assert_array_equal(np.asarray(_adam_state(opt).nu[1]), nu_before[1])
    assert not np.allclose(np.asarray(_adam_state(opt).mu[0]), mu_before[0])
    for i in (0, 2, 3):
        np.testing.assert_allclose(np.asarray(params[i]), np.asarray(want[i]), rtol=1e-6, atol=1e-7)
    # steps are counted per parameter, as PyTorch's state[p]['step']
    assert [int(c) for c in _adam_state(opt).count] == [2, 1, 2, 2]


def test_zero_grad_and_closure() -> None:
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.5)
    _backward(model, 0)
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not np.any(np.asarray(p.grad)) for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())

    def closure() -> float:
        opt.zero_grad()
        x = tg.randn((8, 5), key=4)
        loss = tg.cross_entropy(model(x), tg.tensor(np.arange(8) % 3))
        loss.backward()
        return loss.item()

    first = opt.step(closure)
    for _ in range(20):
        last = opt.step(closure)
    assert isinstance(first, float) and last < first


def test_learning_rate_schedule() -> None:
    model = _model()
    schedule = optax.linear_schedule(0.1, 0.0, transition_steps=1)
    opt = optim.SGD(model.parameters(), lr=schedule)
    start = _values(model)
    _backward(model, 0)
    opt.step()  # lr 0.1
    moved = _values(model)
    assert not np.allclose(np.asarray(moved[0]), np.asarray(start[0]))
    opt.step()  # lr 0.0: same gradients, no move
    _assert_close(_values(model), moved)


def test_bad_arguments_say_what_to_do() -> None:
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([], lr=0.1)
    x = tg.ones(3).require_grad()
    with pytest.raises(ValueError, match="leaf"):
        optim.SGD([x * 2.0], lr=0.1)
    frozen = tg.ones(3)  # a leaf that does not require grad: accepted, never updated
    opt = optim.SGD([x, frozen], lr=0.1)
    (x * 2.0).sum().backward()
    opt.step()
    np.testing.assert_array_equal(np.asarray(frozen), np.ones(3))
    np.testing.assert_allclose(np.asarray(x), np.full(3, 0.8), rtol=1e-6)
    x.grad = None
    with pytest.raises(TypeError, match="not a tapegrad Tensor"):
        optim.SGD([jnp.ones(3)], lr=0.1)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="learning rate"):
        optim.Adam([x], lr=-1.0)
    with pytest.raises(ValueError, match="momentum"):
        optim.SGD([x], lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD([x], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam([x], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="another group"):
        optim.SGD([{"params": [x]}, {"params": [x]}], lr=0.1)
    opt = optim.SGD([x, x], lr=0.1)
    assert opt.param_groups[0]["params"] == [x]
    assert repr(opt) == "SGD(1 parameters)"


# PyTorch options no tapegrad optimizer takes, with a word the advice must contain.
_TORCH_ONLY = {
    "foreach": "one fused",
    "fused": "one fused",
    "capturable": "tg.jit",
    "differentiable": "create_graph=True",
    "dampening": "dampening=0",
    "decoupled_weight_decay": "AdamW",
}


@pytest.mark.parametrize(
    "cls", [optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop, optim.Optimizer]
)
def test_pytorch_options_tapegrad_does_not_take_are_named_with_what_to_do(cls: Any) -> None:
    x = tg.ones(3).require_grad()
    refused = dict(_TORCH_ONLY)
    if cls not in (optim.Adam, optim.AdamW):
        refused["amsgrad"] = "only tg.optim.Adam"
    if cls is optim.Optimizer:
        refused["maximize"] = "optax.scale(-1.0)"
    for name, advice in refused.items():
        message = str(error_of(TypeError, cls, [x], **{name: True}))
        assert message.startswith(f"{cls.__name__}() got {name}=, a PyTorch keyword; ")
        assert "does not support it" in message and advice in message, message
    with pytest.raises(TypeError, match="unexpected keyword"):
        cls([x], not_a_torch_option=True)  # anything else: Python's own error


@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop])
def test_pytorch_options_at_their_defaults_are_accepted(cls: Any) -> None:
    """Code copied from PyTorch that spells out an option at its default value (what
    tapegrad does anyway) runs, as layers accept ``bias=True``; the update is unchanged."""
    x, y = tg.ones(3).require_grad(), tg.ones(3).require_grad()
    defaults = {"foreach": None, "fused": None, "capturable": False, "differentiable": False}
    if cls is optim.SGD:
        defaults["dampening"] = 0
    if cls is optim.RMSprop:
        defaults["maximize"] = False
    opt, plain = cls([x], lr=0.1, **defaults), cls([y], lr=0.1)
    for t, o in ((x, opt), (y, plain)):
        (t * t).sum().backward()
        o.step()
    assert_close(x.data, y.data)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop"])
def test_bfloat16_parameters_train_as_in_torch(name: str) -> None:
    # hyperparameters stay float32: cast to bfloat16, Adam's b2 = 0.999 became 1 and every
    # update NaN (its bias correction 1 - b2**t was 0)
    torch = pytest.importorskip("torch")
    w0 = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)
    w = tg.tensor(w0).astype(tg.bfloat16).require_grad()
    tw = torch.tensor(w0, dtype=torch.bfloat16, requires_grad=True)
    opt, topt = getattr(optim, name)([w], lr=0.01), getattr(torch.optim, name)([tw], lr=0.01)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    for _ in range(3):
        opt.zero_grad()
        (tg.tensor(x).astype(tg.bfloat16) @ w.T).astype(tg.float32).sum().backward()
        opt.step()
        topt.zero_grad()
        (torch.tensor(x, dtype=torch.bfloat16) @ tw.T).float().sum().backward()
        topt.step()
    assert w.dtype == tg.bfloat16
    got, want = np.asarray(w.astype(tg.float32)), tw.detach().float().numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, atol=4e-3)  # a bfloat16 step apart at most


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop"])
def test_bfloat16_state_keeps_its_dtypes_so_a_compiled_step_compiles_once(name: str) -> None:
    """The float32 moments of bfloat16 parameters are float32 from the start."""
    w = tg.ones((2, 4), dtype=tg.bfloat16).require_grad()
    opt = getattr(optim, name)([w], lr=0.01)
    before = [a.dtype for a in jax.tree_util.tree_leaves(opt.state)]

    @tg.jit
    def step(x: tg.Tensor) -> None:
        opt.zero_grad()
        (x @ w.T).astype(tg.float32).sum().backward()
        opt.step()

    for _ in range(3):
        step(tg.ones((3, 4), dtype=tg.bfloat16))
    assert step.trace_count == 1
    assert [a.dtype for a in jax.tree_util.tree_leaves(opt.state)] == before
    assert w.dtype == tg.bfloat16


def test_a_pytorch_option_in_a_param_group_is_refused_not_ignored() -> None:
    x = tg.ones(3).require_grad()
    with pytest.raises(TypeError, match="param group 0 has 'dampening'.*dampening=0"):
        optim.SGD([{"params": [x], "dampening": 0.5}], lr=0.1, momentum=0.9)
    with pytest.raises(TypeError, match="param group 1 has 'fused'"):
        optim.Adam([{"params": [x]}, {"params": [tg.ones(2).require_grad()], "fused": True}])
    assert optim.Adam([{"params": [x], "amsgrad": True}]).param_groups[0]["amsgrad"]


def test_load_state_dict_restores_the_saved_options_with_their_state() -> None:
    # PyTorch restores amsgrad/maximize from the saved groups; the state's layout follows
    model = _model()
    saved = optim.Adam(model.parameters(), lr=0.01, amsgrad=True, maximize=True)
    _backward(model, 0)
    saved.step()
    saved.zero_grad()
    checkpoint, start = saved.state_dict(), _values(model)
    _backward(model, 1)
    saved.step()  # the reference: the same optimizer, one step more
    want = [np.asarray(v) for v in _values(model)]
    for p, v in zip(model.parameters(), start, strict=True):
        p.data = v
    plain = optim.Adam(model.parameters(), lr=0.01)
    plain.load_state_dict(checkpoint)
    assert plain.param_groups[0]["amsgrad"] and plain.param_groups[0]["maximize"]
    plain.step()  # the same gradients are still in .grad
    for got, w in zip(_values(model), want, strict=True):
        np.testing.assert_allclose(np.asarray(got), w, rtol=1e-6)
    del saved, plain, model


def test_a_tensor_learning_rate_works_as_in_pytorch() -> None:
    p = tg.ones(2).require_grad()
    opt = optim.Adam([p], lr=tg.tensor(0.01))
    (p * p).sum().backward()
    opt.step()
    np.testing.assert_allclose(p.numpy(), [0.99, 0.99], rtol=1e-6)
    opt.param_groups[0]["lr"] = tg.tensor(0.02)  # set by a loop, as a tensor
    opt.zero_grad()
    (p * p).sum().backward()
    opt.step()
    assert float(np.abs(p.numpy() - 0.99).max()) > 0.015
    del p, opt


def test_a_donated_state_dict_is_refused_with_what_to_do_and_reprs_as_donated() -> None:
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.01)
    _backward(model, 0)
    opt.step()
    saved, params = opt.state_dict(), model.state_dict()

    @tg.jit
    def step() -> None:
        opt.zero_grad()
        _backward(model, 1)
        opt.step()

    step()  # donates the parameters' and the optimizer's arrays
    with pytest.raises(RuntimeError, match="donated.*tg.save"):
        opt.load_state_dict(saved)
    assert "donated to a tg.jit step" in repr(params["0.weight"])
    step()  # the refused load changed nothing


def test_sgd_takes_weight_decay_by_keyword_only() -> None:
    # PyTorch's fourth positional parameter is dampening: the same call must not silently
    # mean weight decay here
    x = tg.ones(3).require_grad()
    for torch_call in ((0.1, 0.9, 1e-4), (0.1, 0.9, 0, 1e-4)):  # dampening, weight_decay
        with pytest.raises(TypeError) as err:
            optim.SGD([x], *torch_call)
        assert str(err.value).startswith(
            "SGD() takes at most 3 positional argument(s) (params, lr, momentum), got "
            f"{1 + len(torch_call)}. Pass the others by keyword (weight_decay=, nesterov=, "
            "maximize=): PyTorch's positional order differs"
        ), err.value
    assert optim.SGD([x], 0.1, 0.9, weight_decay=1e-4).param_groups[0]["weight_decay"] == 1e-4


def test_maximize_and_amsgrad_are_fixed_per_group() -> None:
    model = _model()
    first, second = model[0], model[2]
    opt = optim.Adam(
        [{"params": first.parameters(), "amsgrad": True}, {"params": second.parameters()}],
        lr=0.01,
        maximize=True,
    )
    assert [g["amsgrad"] for g in opt.param_groups] == [True, False]
    assert all(g["maximize"] for g in opt.param_groups)
    before = [np.asarray(p) for p in model.parameters()]
    _backward(model, 0)
    grads = [np.asarray(g) for g in _grads(model)]
    opt.step()
    for p, old, g in zip(model.parameters(), before, grads, strict=True):  # ascends: +lr sign(g)
        np.testing.assert_allclose(np.asarray(p) - old, 0.01 * np.sign(g), atol=1e-6)
    opt.param_groups[1]["amsgrad"] = True
    with pytest.raises(ValueError, match="amsgrad, maximize.* changed after"):
        opt.step()


def test_amsgrad_and_maximize_in_a_tg_jit_step_give_the_eager_trajectory() -> None:
    """tg.jit donates the optimizer state: AMSGrad's three moments start as separate buffers
    (one array shared by two state entries would be donated twice)."""

    def run(compiled: bool) -> list[np.ndarray]:
        model = nn.Linear(4, 3, key=0)
        opt = optim.AdamW(model.parameters(), lr=0.01, amsgrad=True, maximize=True)

        def step(x: tg.Tensor) -> tg.Tensor:
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        fn = tg.jit(step) if compiled else step
        for seed in range(3):
            fn(tg.randn((5, 4), key=seed))
        return [np.asarray(p) for p in model.parameters()]

    for got, want in zip(run(True), run(False), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_param_groups_take_their_own_options_and_a_loop_can_set_lr() -> None:
    model = _model()
    first, second = model[0], model[2]
    opt = optim.SGD(
        [{"params": first.parameters()}, {"params": second.parameters(), "lr": 0.0}],
        lr=0.5,
        momentum=0.9,
    )
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.0]
    assert opt.param_groups[1]["momentum"] == 0.9
    frozen = [np.asarray(p) for p in second.parameters()]
    traces_before = opt._step_fn()._cache_size()  # type: ignore[attr-defined]
    for seed, lr in ((0, 0.5), (1, 0.25), (2, 0.1)):
        opt.param_groups[0]["lr"] = lr  # as the PyTorch tutorials do
        opt.zero_grad()
        _backward(model, seed)
        opt.step()
        lrs = opt.state[0].hyperparams["learning_rate"]
        np.testing.assert_allclose(float(lrs), lr, rtol=1e-6)
    for p, before in zip(second.parameters(), frozen, strict=True):
        np.testing.assert_array_equal(np.asarray(p), before)  # lr 0 in its group
    # Changing a number never recompiles: one trace for all three learning rates.
    assert opt._step_fn()._cache_size() == traces_before + 1  # type: ignore[attr-defined]
    opt.param_groups[0]["nesterov"] = True
    with pytest.raises(ValueError, match="make a new optimizer"):
        opt.step()


def test_state_dict_round_trip_resumes_the_same_trajectory(tmp_path: Any) -> None:
    def run(opt: optim.Optimizer, model: nn.Module, seeds: range) -> None:
        for seed in seeds:
            opt.zero_grad()
            _backward(model, seed)
            opt.step()

    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.01)
    run(opt, model, range(2))
    tg.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ck.safetensors")
    run(opt, model, range(2, 4))
    want = [np.asarray(p) for p in model.parameters()]

    fresh = _model()
    fresh_opt = optim.Adam(fresh.parameters(), lr=0.5)
    ck = tg.load(tmp_path / "ck.safetensors")
    fresh.load_state_dict(ck["model"])
    fresh_opt.load_state_dict(ck["opt"])
    assert fresh_opt.param_groups[0]["lr"] == 0.01
    run(fresh_opt, fresh, range(2, 4))
    for p, w in zip(fresh.parameters(), want, strict=True):
        np.testing.assert_array_equal(np.asarray(p), w)

    sgd = optim.SGD(fresh.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="missing state entries"):
        sgd.load_state_dict(ck["opt"])
    with pytest.raises(ValueError, match="parameter groups"):
        fresh_opt.load_state_dict({"state": {}, "param_groups": []})


def test_optimizer_state_is_made_without_compiling_or_by_one_compile() -> None:
    # optax's eager init compiles a zeros_like per parameter shape (issue 17's cold start): a
    # state of constants (Adam's) is filled on the host, compiling nothing; any other state
    # is made by one compiled init per group; the values are optax's either way
    from tapegrad.optim.optimizer import _init

    shapes = [(7, 3), (3,), (2, 5, 4), (11,)]
    params = [tg.ones(s).require_grad() for s in shapes]
    with compiles() as seen:
        opt = optim.Adam(params, lr=0.1)
    assert seen == []
    copies = optax.GradientTransformation(
        lambda p: jax.tree.map(lambda a: a * 2.0, p), lambda u, s, p=None: (u, s)
    )
    arrays = tuple(tg.ones(s).data + i for i, s in enumerate(shapes[:2]))
    with compiles() as seen:
        doubled = _init(copies, arrays)
    assert len(seen) <= 1  # a computed state: one compile (none on a cache hit)
    for a, b in zip(doubled, arrays, strict=True):
        np.testing.assert_array_equal(np.asarray(a), 2.0 * np.asarray(b))
    want = opt._rules[0].init(tuple(p.data for p in params))  # optax's eager init
    got = opt.state[0]
    del opt, params
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_an_optimizer_made_inside_a_compiled_step_works() -> None:
    # its parameters are traced there: the state is made by optax's init (no host fill)
    w = tg.ones((3,), requires_grad=True)

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        opt = optim.SGD([w], lr=0.1, momentum=0.9)
        loss = (w * x).sum()
        loss.backward()
        opt.step()
        return loss

    assert float(step(tg.ones((3,)))) == 3.0
    np.testing.assert_allclose(np.asarray(w.data), [0.9, 0.9, 0.9], rtol=1e-6)


def test_one_tensor_or_a_string_hyperparameter_is_a_clear_type_error() -> None:
    w = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(TypeError, match=r"got one Tensor of shape \(3,\); pass \[tensor\]"):
        optim.Adam(w, lr=0.1)
    with pytest.raises(TypeError, match="'lr' is '0.1', not a number"):
        optim.SGD([w], lr="0.1")  # type: ignore[arg-type]
    opt = optim.SGD([w], lr=0.1)
    opt.param_groups[0]["lr"] = "0.1"
    w.grad = tg.ones(3)
    with pytest.raises(TypeError, match="'lr' is '0.1', not a number"):
        opt.step()
    assert np.asarray(w).tolist() == [1.0, 1.0, 1.0]  # nothing changed


def test_the_first_update_is_compiled_ahead_with_the_same_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An optimizer starts compiling its update at construction, on a background thread
    (``kernels.compile_ahead``): the first ``step()`` runs that program, and the values equal
    those of an optimizer that compiled at its first step. A parameter that is frozen, or
    left without a gradient, still steps right (another signature: compiled at the call)."""
    from tapegrad import kernels

    if kernels._background() is None:
        pytest.skip("one core: nothing compiles ahead")
    taken: list[bool] = []
    run_ahead = kernels._run_ahead

    def spy(*args: Any) -> Any:
        result = run_ahead(*args)
        taken.append(result is not kernels._MISSED)
        return result

    monkeypatch.setattr(kernels, "_run_ahead", spy)
    results = []
    for ahead in (True, False):
        if not ahead:
            monkeypatch.setattr(optim.Optimizer, "_compile_ahead", lambda self: None)
        model = _model()
        opt = optim.AdamW(model.parameters(), lr=0.1)
        kernels._background().submit(int).result()  # compiled by now, as in a real loop
        for seed in range(3):
            opt.zero_grad()
            _backward(model, seed)
            opt.step()
        results.append(_values(model))
    assert taken[0] is True
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)
    model = _model()
    model[0].weight.requires_grad = False
    unused = tg.zeros((2,)).require_grad()
    opt = optim.SGD([*model.parameters(), unused], lr=0.5)
    before = _values(model)
    _backward(model, 0)
    opt.step()
    after = _values(model)
    np.testing.assert_array_equal(after[0], before[0])  # frozen
    assert not np.array_equal(after[1], before[1])
    assert unused.tolist() == [0.0, 0.0]


def test_updates_that_read_python_state_or_compile_long_are_left_to_the_first_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Compiling ahead traces the update at construction, so it is not done where tracing
    may read Python state that changes before the first step (a schedule as ``lr``, a
    transform of the user's own), nor for more than ``_AHEAD_PARAMS`` parameters (a
    compile a process that never steps would wait for at exit). ``load_state_dict`` keeps
    the compiled update; ``add_param_group`` compiles the new one ahead."""
    from tapegrad import kernels
    from tapegrad.optim import optimizer

    started: list[int] = []
    real = kernels._compile_ahead
    monkeypatch.setattr(kernels, "_compile_ahead", lambda *a: started.append(1) or real(*a))
    w = tg.ones((3,)).require_grad()
    optim.Adam([w], lr=lambda count: 0.1)
    optim.Optimizer([w], optax.sgd(0.1))
    optim.SGD([tg.ones((1,)).require_grad() for _ in range(optimizer._AHEAD_PARAMS + 1)], lr=0.1)
    assert started == []
    opt = optim.Adam([w], lr=0.1)
    assert started == [1]
    update = opt._step_fn()
    opt.load_state_dict(opt.state_dict())
    assert opt._step_fn() is update
    opt.add_param_group({"params": [tg.zeros((2,)).require_grad()]})
    assert started == [1, 1]
    w.grad = tg.ones((3,))
    opt.step()
    assert w.tolist() == pytest.approx([0.9, 0.9, 0.9])
