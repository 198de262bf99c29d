"""Optimizers and schedules against PyTorch: same weights, same gradients, 5-step trajectories;
AMSGrad and ``maximize`` as PyTorch computes them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import tapegrad as tg
from tapegrad import compiled_backward, nn, optim

torch = pytest.importorskip("torch")

STEPS = 5


@pytest.fixture(autouse=True)
def _eager_backward() -> Any:
    """Backward passes stay eager here: these trajectories are compared with torch at float32
    tolerance, and a structure the process has run often enough (earlier test files run the
    same MLP) compiles, whose sums XLA may reorder (equal up to rounding: covered by
    tests/test_compiled_backward.py). RMSprop divides by a small root mean square, which
    turns that rounding into ~3e-5 relative after a few steps."""
    after = compiled_backward.compile_after()
    compiled_backward.set_compile_after(None)
    yield
    compiled_backward.set_compile_after(after)


def _pair() -> tuple[nn.Module, Any]:
    """A tapegrad MLP and a torch MLP holding the same weights (the torch state dict loads
    unchanged). Seeded: torch's global generator would give other weights after other tests
    in the same process, and at some of them a last-layer bias gradient near 0, where RMSprop's
    first step (``g / (sqrt(0.01 g^2) + eps)``) turns float rounding into ~1e-3 relative."""
    torch.manual_seed(0)
    ours = nn.Sequential(nn.Linear(5, 4, key=0), nn.Tanh(), nn.Linear(4, 3, key=1))
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def _batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((8, 5)).astype(np.float32), np.arange(8) % 3


def _trajectories(
    make_ours: Callable[[Any], optim.Optimizer],
    make_theirs: Callable[[Any], Any],
    between: Callable[[Any, Any, int], None] | None = None,
) -> None:
    ours, theirs = _pair()
    opt, topt = make_ours(ours), make_theirs(theirs)
    for step in range(STEPS):
        x, y = _batch(step)
        opt.zero_grad()
        tg.cross_entropy(ours(tg.tensor(x)), y).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y)).backward()
        topt.step()
        if between is not None:
            between(opt, topt, step)
        want = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
        for name, p in ours.named_parameters():
            np.testing.assert_allclose(
                np.asarray(p), want[name], rtol=2e-5, atol=2e-6, err_msg=f"{name} @ {step}"
            )


@pytest.mark.parametrize(
    "options",
    [
        {"lr": 0.1},
        {"lr": 0.1, "momentum": 0.9},
        {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
        {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.1},
        {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.1, "maximize": True},
    ],
    ids=["plain", "momentum", "nesterov+wd", "momentum+wd", "maximize"],
)
def test_sgd_matches_torch(options: dict[str, Any]) -> None:
    _trajectories(
        lambda m: optim.SGD(m.parameters(), **options),
        lambda m: torch.optim.SGD(m.parameters(), **options),
    )


@pytest.mark.parametrize(
    ("ours", "theirs", "options"),
    [
        (optim.Adam, "Adam", {"lr": 0.01}),
        (optim.Adam, "Adam", {"lr": 0.01, "betas": (0.8, 0.99), "weight_decay": 0.1}),
        (optim.AdamW, "AdamW", {"lr": 0.01}),
        (optim.AdamW, "AdamW", {"lr": 0.01, "weight_decay": 0.3, "eps": 1e-6}),
        (optim.RMSprop, "RMSprop", {"lr": 0.01}),
        (optim.RMSprop, "RMSprop", {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.05}),
        (optim.RMSprop, "RMSprop", {"lr": 0.01, "centered": True, "eps": 1e-3}),
        (optim.Adam, "Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.1}),
        (optim.AdamW, "AdamW", {"lr": 0.01, "amsgrad": True, "maximize": True}),
        (optim.Adam, "Adam", {"lr": 0.01, "maximize": True, "weight_decay": 0.1}),
        (optim.RMSprop, "RMSprop", {"lr": 0.01, "momentum": 0.9, "maximize": True}),
        (optim.Adagrad, "Adagrad", {"lr": 0.05}),
        (
            optim.Adagrad,
            "Adagrad",
            {"lr": 0.05, "lr_decay": 0.1, "weight_decay": 0.05, "initial_accumulator_value": 0.1},
        ),
        (optim.Adagrad, "Adagrad", {"lr": 0.05, "eps": 1e-3, "maximize": True}),
    ],
    ids=[
        "adam",
        "adam-l2",
        "adamw",
        "adamw-wd",
        "rmsprop",
        "rmsprop-mom-wd",
        "rmsprop-centered",
        "adam-amsgrad-l2",
        "adamw-amsgrad-maximize",
        "adam-maximize-l2",
        "rmsprop-maximize",
        "adagrad",
        "adagrad-decay-wd-initial",
        "adagrad-eps-maximize",
    ],
)
def test_adaptive_optimizers_match_torch(
    ours: type[optim.Optimizer], theirs: str, options: dict[str, Any]
) -> None:
    _trajectories(
        lambda m: ours(m.parameters(), **options),
        lambda m: getattr(torch.optim, theirs)(m.parameters(), **options),
    )


# Gradients that shrink and grow again: the second moment falls, so the running maximum matters,
# and it differs between the uncorrected moment (PyTorch) and the corrected one (optax).
_SCALES = (1.0, 0.3, 2.0, 0.1, 0.05, 1.0, 0.01, 0.5)


def _gradients() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal((2, 3)).astype(np.float32) * s for s in _SCALES]


def _w0() -> np.ndarray:
    return np.random.default_rng(8).standard_normal((2, 3)).astype(np.float32)


def _amsgrad_steps(opt: optim.Optimizer, topt: Any, gradients: list[np.ndarray]) -> None:
    """Apply the same gradients to both optimizers, comparing after every step (rtol 1e-5)."""
    (w,) = opt.param_groups[0]["params"]
    (p,) = topt.param_groups[0]["params"]
    for i, g in enumerate(gradients):
        w.grad = tg.tensor(g)
        opt.step()
        p.grad = torch.tensor(g)
        topt.step()
        np.testing.assert_allclose(
            np.asarray(w), p.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=f"step {i}"
        )


def _nu_max(opt: optim.Optimizer) -> np.ndarray:
    """The running maximum of the second moment, read from the optimizer's state dict."""
    state = opt.state_dict()["state"]["0"]
    (key,) = (k for k in state if k.endswith(".nu_max[0]"))
    return np.asarray(state[key])


def _assert_nu_max(opt: optim.Optimizer, topt: Any) -> None:
    """``nu_max`` is torch's ``max_exp_avg_sq``; rtol 1e-4: the betas are float32 inputs of the
    compiled update, so ``1 - b2`` is 1.3e-5 (relative) off torch's float64 ``1 - 0.999``."""
    (p,) = topt.param_groups[0]["params"]
    want = topt.state[p]["max_exp_avg_sq"].numpy()
    np.testing.assert_allclose(_nu_max(opt), want, rtol=1e-4)


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.9, 0.5)], ids=["b2-0.999", "b2-0.5"])
def test_amsgrad_matches_torch_step_by_step(name: str, betas: tuple[float, float]) -> None:
    options = {"lr": 0.1, "betas": betas, "amsgrad": True}
    w = tg.tensor(_w0(), requires_grad=True)
    p = torch.tensor(_w0(), requires_grad=True)
    opt = getattr(optim, name)([w], **options)
    topt = getattr(torch.optim, name)([p], **options)
    _amsgrad_steps(opt, topt, _gradients())
    _assert_nu_max(opt, topt)


_ADAM = {"lr": 0.1, "weight_decay": 0.01}


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("Adam", _ADAM),
        ("Adam", {**_ADAM, "amsgrad": True}),
        ("AdamW", _ADAM),
        ("AdamW", {**_ADAM, "amsgrad": True}),
        ("Adagrad", {"lr": 0.1, "lr_decay": 0.5, "initial_accumulator_value": 0.05}),
    ],
    ids=["adam", "adam-amsgrad", "adamw", "adamw-amsgrad", "adagrad-lr-decay"],
)
def test_a_parameter_without_gradient_on_some_steps_keeps_its_own_step_count(
    name: str, options: dict[str, Any]
) -> None:
    """PyTorch counts steps per parameter: ``b`` gets a gradient only at steps 2 and 4, so its
    first Adam update is a full bias-corrected step (a group-wide count would have made it
    about half of that), and its Adagrad learning rate decays by its own count."""
    a, b = (tg.tensor(_w0(), requires_grad=True) for _ in range(2))
    ta, tb = (torch.tensor(_w0(), requires_grad=True) for _ in range(2))
    opt = getattr(optim, name)([a, b], **options)
    topt = getattr(torch.optim, name)([ta, tb], **options)
    for i, g in enumerate(_gradients()[:6]):
        a.grad, ta.grad = tg.tensor(g), torch.tensor(g)
        b.grad, tb.grad = (tg.tensor(-g), torch.tensor(-g)) if i in (2, 4) else (None, None)
        opt.step()
        topt.step()
        for mine, theirs in ((a, ta), (b, tb)):
            np.testing.assert_allclose(
                np.asarray(mine), theirs.detach().numpy(), rtol=1e-5, atol=1e-7, err_msg=f"{i}"
            )


def test_adagrad_differs_from_optax_which_puts_eps_inside_the_root() -> None:
    """Why tapegrad writes its own Adagrad: with small gradients optax's steps differ."""
    p = torch.tensor(_w0(), requires_grad=True)
    topt = torch.optim.Adagrad([p], lr=0.1, eps=1e-3)
    rule = optax.chain(
        optax.scale_by_rss(initial_accumulator_value=0.0, eps=1e-3), optax.scale(-0.1)
    )
    x = jnp.asarray(_w0())
    state = rule.init(x)
    for g in _gradients():
        p.grad = torch.tensor(g * 1e-3)
        topt.step()
        update, state = rule.update(jnp.asarray(g * 1e-3), state)
        x = x + update
    assert not np.allclose(np.asarray(x), p.detach().numpy(), rtol=1e-2)


def test_amsgrad_differs_from_optax_which_maxes_the_corrected_moment() -> None:
    """Why tapegrad writes its own AMSGrad: on these gradients optax's differs from PyTorch's."""
    p = torch.tensor(_w0(), requires_grad=True)
    topt = torch.optim.Adam([p], lr=0.1, amsgrad=True)
    rule = optax.chain(optax.scale_by_amsgrad(), optax.scale(-0.1))
    x = jnp.asarray(_w0())
    state = rule.init(x)
    for g in _gradients():
        p.grad = torch.tensor(g)
        topt.step()
        update, state = rule.update(jnp.asarray(g), state)
        x = x + update
    assert not np.allclose(np.asarray(x), p.detach().numpy(), rtol=1e-2)


def test_amsgrad_state_dict_round_trips_the_running_maximum(tmp_path: Any) -> None:
    gradients = _gradients()
    w = tg.tensor(_w0(), requires_grad=True)
    p = torch.tensor(_w0(), requires_grad=True)
    opt = optim.Adam([w], lr=0.1, amsgrad=True)
    topt = torch.optim.Adam([p], lr=0.1, amsgrad=True)
    _amsgrad_steps(opt, topt, gradients[:4])
    _assert_nu_max(opt, topt)
    tg.save({"w": w, "opt": opt.state_dict()}, tmp_path / "ck.safetensors")
    ck = tg.load(tmp_path / "ck.safetensors")
    resumed = tg.tensor(ck["w"].data, requires_grad=True)
    fresh = optim.Adam([resumed], lr=0.1, amsgrad=True)
    fresh.load_state_dict(ck["opt"])
    np.testing.assert_array_equal(_nu_max(fresh), _nu_max(opt))
    _amsgrad_steps(fresh, topt, gradients[4:])


def test_per_group_learning_rates_set_by_a_loop_match_torch() -> None:
    def groups(m: Any) -> list[dict[str, Any]]:
        return [{"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": 0.02}]

    def set_lr(opt: Any, topt: Any, step: int) -> None:
        for o in (opt, topt):
            o.param_groups[0]["lr"] = 0.1 / (step + 2)

    _trajectories(
        lambda m: optim.SGD(groups(m), lr=0.1, momentum=0.9),
        lambda m: torch.optim.SGD(groups(m), lr=0.1, momentum=0.9),
        set_lr,
    )


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (
            lambda o: optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
            lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
        ),
        (
            lambda o: optim.lr_scheduler.MultiStepLR(o, milestones=[1, 3, 3], gamma=0.5),
            lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[1, 3, 3], gamma=0.5),
        ),
        (
            lambda o: optim.lr_scheduler.ExponentialLR(o, gamma=0.8),
            lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.8),
        ),
        (
            lambda o: optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0.01),
            lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0.01),
        ),
        (
            lambda o: optim.lr_scheduler.LambdaLR(o, lambda e: 0.9**e),
            lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.9**e),
        ),
        (
            lambda o: optim.lr_scheduler.LinearWarmup(o, warmup_steps=3, start_factor=0.25),
            lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.25, total_iters=3),
        ),
        (
            lambda o: optim.lr_scheduler.LinearLR(o, 0.5, 0.1, total_iters=4),
            lambda o: torch.optim.lr_scheduler.LinearLR(o, 0.5, 0.1, total_iters=4),
        ),
        (optim.lr_scheduler.LinearLR, torch.optim.lr_scheduler.LinearLR),  # the defaults
    ],
    ids=[
        "step",
        "multistep",
        "exponential",
        "cosine",
        "lambda",
        "warmup",
        "linear",
        "linear-default",
    ],
)
def test_schedulers_match_torch_and_drive_the_same_trajectory(ours: Any, theirs: Any) -> None:
    scheds: dict[str, Any] = {}

    def make_ours(m: Any) -> optim.Optimizer:
        opt = optim.SGD(m.parameters(), lr=0.2, momentum=0.5)
        scheds["ours"] = ours(opt)
        return opt

    def make_theirs(m: Any) -> Any:
        opt = torch.optim.SGD(m.parameters(), lr=0.2, momentum=0.5)
        scheds["theirs"] = theirs(opt)
        return opt

    def step(opt: Any, topt: Any, i: int) -> None:
        scheds["ours"].step()
        scheds["theirs"].step()
        np.testing.assert_allclose(
            scheds["ours"].get_last_lr(), scheds["theirs"].get_last_lr(), rtol=1e-6
        )

    _trajectories(make_ours, make_theirs, step)


def test_scheduler_state_dict_resumes_and_bad_arguments_raise() -> None:
    x = tg.ones(2).require_grad()
    opt = optim.SGD([x], lr=1.0)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    sched.step()
    sched.step()
    saved = sched.state_dict()
    other_opt = optim.SGD([x], lr=1.0)
    other = optim.lr_scheduler.StepLR(other_opt, step_size=1, gamma=0.5)
    other.load_state_dict(saved)
    assert other.last_epoch == 2 and other.get_last_lr() == pytest.approx([0.25])
    with pytest.raises(ValueError, match="step_size"):
        optim.lr_scheduler.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="warmup_steps=0"):
        optim.lr_scheduler.LinearWarmup(opt, warmup_steps=0)
    with pytest.raises(ValueError, match=r"LinearLR: .*end_factor=1.5"):
        optim.lr_scheduler.LinearLR(opt, end_factor=1.5)
    with pytest.raises(ValueError, match="milestones must be increasing"):
        optim.lr_scheduler.MultiStepLR(opt, milestones=[3, 1])
    with pytest.raises(TypeError, match="schedule already"):
        optim.lr_scheduler.StepLR(optim.SGD([x], lr=lambda step: 0.1), step_size=1)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_a_group_added_after_the_scheduler_is_scheduled_as_torch_steplr_does() -> None:
    """PyTorch's StepLR scales an added group's rate (its LambdaLR and CosineAnnealingLR fail
    there with a bare zip() error); tapegrad schedules it from its own rate."""
    a, b = (tg.tensor(_w0(), requires_grad=True) for _ in range(2))
    ta, tb = (torch.tensor(_w0(), requires_grad=True) for _ in range(2))
    opt, topt = optim.SGD([a], lr=0.1), torch.optim.SGD([ta], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=1, gamma=0.5)
    opt.add_param_group({"params": [b], "lr": 1.0})
    topt.add_param_group({"params": [tb], "lr": 1.0})
    for _ in range(4):
        sched.step()
        tsched.step()
        np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-6)


def test_lambda_lr_with_a_group_added_later() -> None:
    """One shared function schedules the new group too (PyTorch's LambdaLR fails there with a
    bare zip() error); a list of one function per group refuses it, saying what to do."""
    a, b = (tg.tensor(_w0(), requires_grad=True) for _ in range(2))
    opt = optim.SGD([a], lr=0.1)
    sched = optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5**e)
    opt.add_param_group({"params": [b], "lr": 1.0})
    sched.step()
    sched.step()
    np.testing.assert_allclose(sched.get_last_lr(), [0.025, 0.25])
    opt = optim.SGD([a], lr=0.1)
    sched = optim.lr_scheduler.LambdaLR(opt, [lambda e: 0.5**e])
    opt.add_param_group({"params": [b], "lr": 1.0})
    with pytest.raises(ValueError, match="added after the scheduler"):
        sched.step()


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"patience": 2},
        {"patience": 1, "cooldown": 2, "factor": 0.5, "min_lr": 0.01},
        {"mode": "max", "patience": 1, "threshold_mode": "abs", "threshold": 0.01},
    ],
    ids=["defaults", "patience", "cooldown-min_lr", "max-abs"],
)
def test_reduce_lr_on_plateau_reduces_when_torchs_does(options: dict[str, Any]) -> None:
    """ReduceLROnPlateau over a metric that improves, stalls and jumps: the rate after each
    step equals PyTorch's (patience, cooldown, min_lr, max mode, absolute threshold); its
    state dict resumes the counters; a tensor metric is read on the host."""
    metrics = [1.0, 0.9, 0.95, 0.93, 0.92, 0.91, 0.905, 0.9, 0.9, 0.89, 0.95, 0.96, 0.97]
    metrics += [0.97, 0.8, 0.81, 0.82, 0.83]
    opt = optim.SGD([tg.ones(2).require_grad()], lr=0.1)
    topt = torch.optim.SGD([torch.ones(2, requires_grad=True)], lr=0.1)
    ours = optim.lr_scheduler.ReduceLROnPlateau(opt, **options)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **options)
    for i, m in enumerate(metrics):
        ours.step(tg.tensor(m) if i % 2 else m)
        theirs.step(m)
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
    saved = ours.state_dict()
    again = optim.lr_scheduler.ReduceLROnPlateau(opt, **options)
    again.load_state_dict(saved)
    assert again.state_dict() == saved
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        optim.lr_scheduler.ReduceLROnPlateau(opt, mode="lowest")


def test_reduce_lr_on_plateau_reads_numpy_and_one_element_metrics_and_new_groups() -> None:
    """NumPy scalars and one-element tensors are metrics; a group added later takes the one
    min_lr, as PyTorch's; a metric of several numbers is refused, nothing changed."""
    opt = optim.SGD([tg.ones(2).require_grad()], lr=1.0)
    sched = optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5, min_lr=0.3)
    sched.step(np.float32(1.0))
    sched.step(tg.tensor([2.0]))  # worse: reduced
    assert sched.get_last_lr() == [0.5]
    opt.add_param_group({"params": [tg.ones(1).require_grad()], "lr": 0.4})
    sched.step(np.mean([3.0, 4.0]))
    assert sched.get_last_lr() == [0.3, 0.3]
    with pytest.raises(ValueError, match="the metric must be one number, got Tensor of shape"):
        sched.step(tg.ones(3))
    assert sched.last_epoch == 3


@pytest.mark.parametrize(
    ("make", "options"),
    [
        (lambda p, lib: lib.optim.SGD(p, lr=0.1, momentum=0.9), {}),
        (
            lambda p, lib: lib.optim.Adam(p, lr=0.1),
            {"three_phase": True, "anneal_strategy": "linear"},
        ),
        (lambda p, lib: lib.optim.SGD(p, lr=0.1), {"cycle_momentum": False, "pct_start": 0.5}),
    ],
    ids=["sgd-momentum", "adam-three-phase", "sgd-no-cycle"],
)
def test_one_cycle_lr_and_momentum_are_pytorchs(make: Any, options: dict[str, Any]) -> None:
    """OneCycleLR over its 20 steps: the rate and the momentum (SGD's momentum, Adam's first
    beta) after every step equal PyTorch's; a step past total_steps raises as PyTorch's."""
    opt, topt = (
        make([tg.ones(2).require_grad()], tg),
        make([torch.ones(2, requires_grad=True)], torch),
    )
    ours = optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=20, **options)
    theirs = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=1.0, total_steps=20, **options)

    def momentum(group: dict[str, Any]) -> float:
        return float(group["betas"][0] if "betas" in group else group["momentum"])

    for _ in range(19):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
        assert momentum(opt.param_groups[0]) == pytest.approx(momentum(topt.param_groups[0]))
        topt.step()
        ours.step()
        theirs.step()
    ours.step()
    with pytest.raises(ValueError, match="beyond total_steps=20"):
        ours.step()
    with pytest.raises(ValueError, match="momentum > 0"):
        optim.lr_scheduler.OneCycleLR(optim.SGD([tg.ones(1).require_grad()], lr=0.1), 1.0, 5)
