"""Edge cases of tapegrad.optim found by comparing with PyTorch: groups without gradients,
schedules at a zero rate, schedulers on an optimizer they cannot drive, and bad input that
must say what happened and what to do."""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import numpy as np
import optax
import pytest
from _support import error_of

import tapegrad as tg
from tapegrad import nn, optim
from tapegrad.optim import lr_scheduler

torch = pytest.importorskip("torch")


def _leaf(n: int = 3) -> tg.Tensor:
    return tg.ones(n).require_grad()


# ------------------------------------------------------------------ groups without gradients


def test_a_group_without_any_gradient_keeps_its_optax_state() -> None:
    """A group none of whose parameters has ``.grad`` is skipped whole, as PyTorch skips each
    parameter: the group-wide step count of ``optax.adam`` stood still is what the module docs
    promise (it advanced before, so the group's first real step was not bias-corrected as a
    first step)."""
    a, b = _leaf(), _leaf()
    opt = optim.Optimizer([{"params": [a]}, {"params": [b]}], optax.adam(0.1))
    before = opt.state[1]
    for _ in range(3):
        a.grad, b.grad = tg.ones(3), None
        opt.step()
    assert int(opt.state[1][0].count) == 0
    assert jax.tree.all(jax.tree.map(lambda x, y: bool((x == y).all()), opt.state[1], before))
    b.grad = tg.full((3,), 2.0)
    opt.step()
    # Adam's first bias-corrected step moves each entry by the learning rate
    np.testing.assert_allclose(np.asarray(b), np.full(3, 0.9), rtol=1e-6)


def test_a_schedule_as_lr_counts_only_the_steps_of_its_group() -> None:
    a, b = _leaf(), _leaf()
    opt = optim.SGD([{"params": [a]}, {"params": [b]}], lr=optax.linear_schedule(0.0, 1.0, 10))
    for _ in range(3):
        a.grad, b.grad = tg.ones(3), None
        opt.step()
    assert [int(s.count) for s in opt.state] == [3, 0]


# ------------------------------------------------------------------ schedulers


@pytest.mark.parametrize("eta_min", [0.0, 0.01])
def test_cosine_from_a_zero_rate_follows_torch(eta_min: float) -> None:
    """A group at lr 0 (PyTorch's closed form: from 0 up towards eta_min), beside one at 0.1."""
    a, b = _leaf(), _leaf()
    ta, tb = (torch.ones(3, requires_grad=True) for _ in range(2))
    opt = optim.SGD([{"params": [a], "lr": 0.0}, {"params": [b], "lr": 0.1}])
    topt = torch.optim.SGD([{"params": [ta], "lr": 0.0}, {"params": [tb], "lr": 0.1}])
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=eta_min)
    tsched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=5, eta_min=eta_min)
    for epoch in range(12):
        np.testing.assert_allclose(
            sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-6, atol=1e-9, err_msg=f"{epoch}"
        )
        topt.step()
        sched.step()
        tsched.step()


def _rates(sched: lr_scheduler.LRScheduler, steps: int = 4) -> list[float]:
    rates = [sched.get_last_lr()[0]]
    for _ in range(steps):
        sched.step()
        rates.append(sched.get_last_lr()[0])
    return rates


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_scheduled_rates_read_back_as_the_numbers_set() -> None:
    """0.1 stays 0.1 (not float32's 0.10000000149011612) where a schedule is at its base rate,
    and 0.1 * 0.5 is 0.05, as in PyTorch: a loop compares and logs these numbers."""
    topt = torch.optim.SGD([torch.ones(3, requires_grad=True)], lr=0.1)
    theirs = _rates(torch.optim.lr_scheduler.StepLR(topt, 2, 0.5))
    assert _rates(lr_scheduler.StepLR(optim.SGD([_leaf()], lr=0.1), 2, 0.5)) == theirs
    warmup = _rates(lr_scheduler.LinearWarmup(optim.SGD([_leaf()], lr=0.1), 2, 0.5))
    assert warmup[0] == 0.05 and warmup[2:] == [0.1, 0.1, 0.1]
    cosine = _rates(lr_scheduler.CosineAnnealingLR(optim.SGD([_leaf()], lr=0.1), 2))
    assert cosine[0] == cosine[4] == 0.1


def test_a_scheduler_on_an_optimizer_without_lr_says_what_to_do() -> None:
    opt = optim.Optimizer([_leaf()], optax.sgd(0.1))
    message = str(error_of(TypeError, lr_scheduler.StepLR, opt, 1))
    assert "param_groups[0] has no 'lr'" in message and "optax schedule" in message, message
    for make in (lambda o: lr_scheduler.StepLR(o, 1), lambda o: lr_scheduler.LambdaLR(o, abs)):
        message = str(error_of(TypeError, make, [_leaf()]))
        assert "not an optimizer" in message and "LR(opt, ...)" in message, message


def test_lambda_lr_refuses_what_is_not_a_function() -> None:
    opt = optim.SGD([_leaf()], lr=0.1)
    message = str(error_of(TypeError, lr_scheduler.LambdaLR, opt, 0.5))
    assert "lr_lambda" in message and "lambda epoch" in message, message


def test_scheduler_load_state_dict_of_something_else_says_what_to_do() -> None:
    opt = optim.SGD([_leaf()], lr=0.1)
    sched = lr_scheduler.StepLR(opt, 2)
    for wrong in ({}, opt.state_dict()):
        message = str(error_of(ValueError, sched.load_state_dict, wrong))
        assert "not a scheduler's state dict" in message and "sched.state_dict()" in message
    assert sched.last_epoch == 0


def test_pytorch_scheduler_keywords_say_what_to_do() -> None:
    opt = optim.SGD([_leaf()], lr=0.1)
    lr_scheduler.StepLR(opt, 2, last_epoch=-1)  # PyTorch's default: what tapegrad does
    message = str(error_of(TypeError, lr_scheduler.StepLR, opt, 2, last_epoch=4))
    assert "last_epoch=" in message and "load_state_dict" in message, message


def test_two_schedulers_stepped_together_warn_that_they_do_not_chain() -> None:
    """PyTorch's chainable schedulers compound (ChainedScheduler); tapegrad's closed forms
    replace each other's rate, so the second one stepped silently wins: it warns."""
    opt = optim.SGD([_leaf()], lr=0.1)
    warmup = lr_scheduler.LinearWarmup(opt, 3)
    with pytest.warns(tg.TapegradWarning, match="do not chain") as seen:
        decay = lr_scheduler.StepLR(opt, 2, 0.5)
        for _ in range(2):
            warmup.step()
            decay.step()
    assert [str(w.message).split(".")[0] for w in seen] == ["StepLR", "LinearWarmup"]  # once each


def test_a_second_scheduler_warns_when_made_and_a_rate_set_by_hand_does_not() -> None:
    """Made after a warm-up, a second scheduler sets its own rate at once (PyTorch's keeps the
    warm-up's): it warns. A rate set by hand, or a scheduler replacing one that is gone, does
    not."""
    opt = optim.SGD([_leaf()], lr=0.1)
    warmup = lr_scheduler.LinearWarmup(opt, 2)
    with pytest.warns(
        tg.TapegradWarning, match="CosineAnnealingLR.step\\(\\) replaces the learning"
    ):
        lr_scheduler.CosineAnnealingLR(opt, 4)
    del warmup
    opt = optim.SGD([_leaf()], lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched = lr_scheduler.LinearWarmup(opt, 2)
        sched.step()
        opt.param_groups[0]["lr"] = 0.5  # by hand: replaced at the next step, as documented
        sched.step()
        del sched
        cosine = lr_scheduler.CosineAnnealingLR(opt, 4)
        cosine.step()


# ------------------------------------------------------------------ a transform of one's own


def test_lr_in_a_group_of_a_transform_of_ones_own_is_refused_not_ignored() -> None:
    x = _leaf()
    message = str(
        error_of(TypeError, optim.Optimizer, [{"params": [x], "lr": 0.5}], optax.sgd(0.1))
    )
    assert "'lr'" in message and "optax schedule" in message, message
    opt = optim.Optimizer([x], optax.sgd(0.1))
    opt.param_groups[0]["lr"] = 100.0  # a PyTorch loop's habit: ignored silently before
    x.grad = tg.ones(3)
    assert "'lr'" in str(error_of(TypeError, opt.step))
    np.testing.assert_array_equal(np.asarray(x), np.ones(3))


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda x: optim.SGD([x], lr=math.nan), "learning rate"),
        (lambda x: optim.SGD([x], lr=0.1, momentum=math.nan), "momentum"),
        (lambda x: optim.Adam([x], eps=math.nan), "eps"),
        (lambda x: optim.Adam([x], betas=(0.9, math.nan)), "betas"),
    ],
    ids=["lr", "momentum", "eps", "beta"],
)
def test_nan_hyperparameters_are_refused_as_pytorch_does(make: Any, words: str) -> None:
    assert words in str(error_of(ValueError, make, _leaf()))


@pytest.mark.parametrize("betas", [0.9, (0.9, 0.99, 0.999)])
def test_betas_that_are_not_a_pair_say_what_to_write(betas: Any) -> None:
    x = _leaf()
    message = str(error_of((TypeError, ValueError), optim.Adam, [x], betas=betas))  # type: ignore[arg-type]
    assert "betas must be a pair" in message and "(0.9, 0.999)" in message, message
    opt = optim.Adam([x])
    opt.param_groups[0]["betas"] = betas  # set by a loop: refused at the step
    x.grad = tg.ones(3)
    assert "betas must be a pair" in str(error_of((TypeError, ValueError), opt.step))


def test_params_that_are_not_a_list_of_tensors_say_what_to_pass() -> None:
    x = _leaf()
    message = str(error_of(TypeError, optim.SGD, nn.Linear(2, 2, key=0), lr=0.1))
    assert "Linear" in message and "model.parameters()" in message, message
    message = str(error_of(TypeError, optim.SGD, {x}, lr=0.1))
    assert "set" in message and "list" in message, message
    opt = optim.SGD([x], lr=0.1)
    message = str(error_of(TypeError, opt.add_param_group, [_leaf()]))
    assert "dict" in message and "add_param_group({'params'" in message, message
    message = str(error_of(TypeError, opt.add_param_group, {"params": {_leaf()}}))
    assert "set" in message, message
    for groups in ([{"params": [x]}, {"param": [_leaf()]}], [{"lr": 0.1}]):
        message = str(error_of(ValueError, optim.SGD, groups, lr=0.1))
        assert "no 'params'" in message, message
    assert len(opt.param_groups) == 1


def test_optimizer_load_state_dict_of_something_else_says_what_to_do() -> None:
    x = _leaf()
    opt = optim.SGD([x], lr=0.1, momentum=0.9)
    sched = lr_scheduler.StepLR(opt, 2)
    for wrong in ({}, {"0.weight": tg.ones(3)}, sched.state_dict()):
        message = str(error_of(ValueError, opt.load_state_dict, wrong))
        assert "not an optimizer's state dict" in message and "opt.state_dict()" in message


@pytest.mark.parametrize(("key", "value"), [("lr", -1.0), ("lr", "abc"), ("momentum", math.nan)])
def test_optimizer_load_state_dict_checks_the_hyperparameters_before_loading(
    key: str, value: Any
) -> None:
    x = _leaf()
    saved = optim.SGD([x], lr=0.1, momentum=0.9).state_dict()
    saved["param_groups"][0][key] = value
    opt = optim.SGD([x], lr=0.2, momentum=0.5)
    error_of((TypeError, ValueError), opt.load_state_dict, saved)
    assert (opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]) == (0.2, 0.5)


def test_clip_grad_norm_takes_torch_spellings_of_its_arguments() -> None:
    p = _leaf(4)
    tp = torch.ones(4, requires_grad=True)
    g = np.array([3.0, -4.0, 1.0, 0.5], np.float32)
    p.grad, tp.grad = tg.tensor(g), torch.tensor(g)
    total = nn.utils.clip_grad_norm_([p], 1.0, "inf", foreach=None)  # type: ignore[arg-type]
    want = torch.nn.utils.clip_grad_norm_([tp], 1.0, "inf", foreach=None)
    np.testing.assert_allclose(float(total), float(want), rtol=1e-6)
    assert p.grad is not None
    np.testing.assert_allclose(np.asarray(p.grad), tp.grad.numpy(), rtol=1e-6)
    message = str(error_of(TypeError, nn.utils.clip_grad_norm_, [p], 1.0, foreach=True))
    assert "foreach=" in message and "Remove it" in message, message


def test_optimizer_state_indexed_by_a_tensor_says_it_is_per_group() -> None:
    model = nn.Linear(2, 1)
    opt = optim.Adam(model.parameters(), lr=0.1)
    model(tg.ones((3, 2))).sum().backward()
    opt.step()
    p = model.weight
    message = str(error_of(KeyError, lambda: opt.state[p]))
    assert "indexed by parameter group" in message and "opt.state[0]" in message, message
    error_of(TypeError, lambda: p in opt.state)
    # still the list and pytree it was: indexed by group, flattened by JAX, written by step()
    assert len(opt.state) == 1 and opt.state[0] in opt.state
    leaves = jax.tree.leaves(opt.state)
    assert sum(leaf.shape == (1, 2) for leaf in leaves) == 2  # Adam's two moments of w
    step = tg.jit(lambda: (model(tg.ones((3, 2))).sum().backward(), opt.step()))
    step()
    assert isinstance(opt.state, list)
    error_of(KeyError, lambda: opt.state[p])
