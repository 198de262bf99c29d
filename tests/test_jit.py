"""tg.jit: an eager step compiled whole, with its state found, written back, and guarded.

Each test builds its own small model (2-3 layers, a few rows), so the state a step finds is
the test's own; the eager twin of every compiled step is the same function run undecorated.
"""

from __future__ import annotations

import collections
import importlib
import queue
import threading
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _support import error_of

import tapegrad as tg
from diagnostics.report import build_report
from tapegrad import nn, optim
from tapegrad.jit import RETRACE_WARNING
from tapegrad.tape import saved_on_any_tape

X = tg.randn((8, 5), key=3)
Y = jnp.arange(8) % 3


def make(opt: str = "sgd", key: int = 0) -> tuple[nn.Module, optim.Optimizer]:
    model = nn.Sequential(nn.Linear(5, 6, key=key), nn.Tanh(), nn.Linear(6, 3, key=key + 1))
    if opt == "adam":
        return model, optim.Adam(model.parameters(), lr=0.01)
    return model, optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def train_step(model: nn.Module, opt: optim.Optimizer, x: tg.Tensor, y: jax.Array) -> tg.Tensor:
    opt.zero_grad()
    loss = tg.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def values(model: nn.Module) -> list[np.ndarray]:
    return [np.asarray(p.data) for p in model.parameters()]


@pytest.mark.slow
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_same_results_as_eager_over_100_steps(opt: str) -> None:
    eager_model, eager_opt = make(opt)
    model, optimizer = make(opt)
    step = tg.jit(train_step)
    for _ in range(100):
        want = train_step(eager_model, eager_opt, X, Y)
        got = step(model, optimizer, X, Y)
        np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
    for a, b in zip(values(model), values(eager_model), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(
            np.asarray(a.grad.data), np.asarray(b.grad.data), rtol=1e-5, atol=1e-7
        )
    for a, b in zip(
        jax.tree.leaves(optimizer.state), jax.tree.leaves(eager_opt.state), strict=True
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    assert step.trace_count == 1
    assert not got.requires_grad and isinstance(got, tg.Tensor)


MODEL, OPT = make(key=10)


@tg.jit
def global_step(x: tg.Tensor, y: jax.Array) -> tg.Tensor:
    """Reaches its model and optimizer through globals; updates in place under no_grad."""
    MODEL.zero_grad()
    loss = tg.cross_entropy(MODEL(x), y)
    loss.backward()
    with tg.no_grad():
        for p in MODEL.parameters():
            p -= 0.1 * p.grad
    return loss


def test_state_found_in_globals_and_closures_in_place_updates() -> None:
    before = values(MODEL)
    losses = [float(global_step(X, Y)) for _ in range(3)]
    assert losses[2] < losses[0]
    assert all(not np.allclose(a, b) for a, b in zip(values(MODEL), before, strict=True))

    model, opt = make(key=20)

    @tg.jit
    def closure_step(x: tg.Tensor) -> tg.Tensor:
        return train_step(model, opt, x, Y)

    eager_model, eager_opt = make(key=20)
    for _ in range(3):
        np.testing.assert_allclose(
            float(closure_step(X)), float(train_step(eager_model, eager_opt, X, Y)), rtol=1e-5
        )
    assert closure_step.trace_count == 1


class RunningMean(nn.Module):
    """A layer with a buffer replaced at each training call, as batch norm's statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 3, key=4)
        self.running = tg.zeros((5,))
        self.calls = tg.zeros(())

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        with tg.no_grad():
            self.running = 0.9 * self.running + 0.1 * x.mean(axis=0)
            self.calls += 1.0
        return self.lin(x - self.running)


def test_module_buffers_written_back() -> None:
    def step(model: RunningMean, opt: optim.Optimizer, x: tg.Tensor) -> tg.Tensor:
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    eager, compiled = RunningMean(), RunningMean()
    eager_opt = optim.SGD(eager.parameters(), lr=0.1)
    opt = optim.SGD(compiled.parameters(), lr=0.1)
    running = compiled.running
    jstep = tg.jit(step)
    for _ in range(5):
        got, want = float(jstep(compiled, opt, X)), float(step(eager, eager_opt, X))
        np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(compiled.running.numpy(), eager.running.numpy(), rtol=1e-6)
    assert compiled.running is running  # written into the buffer the module holds
    assert float(compiled.calls) == 5.0


class Regularised(nn.Module):
    """Batch norm (running statistics as buffers) and dropout from both sources of randomness:
    a layer holding its own key, a layer and a functional call drawing from the process state."""

    def __init__(self, key: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(5, 8, bias=False, key=key)  # batch norm's mean cancels a bias
        self.bn = nn.BatchNorm1d(8)
        self.own_key = nn.Dropout(0.3, key=key + 7)
        self.process = nn.Dropout(0.2)
        self.fc2 = nn.Linear(8, 3, key=key + 1)

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        h = self.process(self.own_key(tg.relu(self.bn(self.fc1(x)))))
        return self.fc2(tg.dropout(h, 0.1, training=self.training))


def _run_regularised(compiled: bool, steps: int) -> tuple[list[float], Regularised, jax.Array]:
    tg.manual_seed(123)
    model = Regularised(key=80)
    opt = optim.Adam(model.parameters(), lr=0.01)
    step = tg.jit(train_step) if compiled else train_step
    losses = [float(step(model, opt, X, Y)) for _ in range(steps)]
    model.eval()
    losses.append(float(step(model, opt, X, Y)))  # running statistics, no dropout
    if compiled:
        assert step.trace_count == 2  # one per training flag
    return losses, model, tg.random.get_state()


@pytest.mark.slow
def test_batch_norm_and_dropout_match_eager_over_100_steps() -> None:
    before = tg.graph_stats()
    want, eager, eager_key = _run_regularised(compiled=False, steps=100)
    got, model, key = _run_regularised(compiled=True, steps=100)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert len(set(got[:100])) > 90  # fresh masks each step: the losses keep changing
    for (name, a), (_, b) in zip(
        model.state_dict().items(), eager.state_dict().items(), strict=True
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6, err_msg=name)
    assert int(model.bn.num_batches_tracked.item()) == 100
    np.testing.assert_array_equal(np.asarray(key), np.asarray(eager_key))  # state written back
    np.testing.assert_array_equal(np.asarray(model.own_key._key), np.asarray(eager.own_key._key))
    stats = tg.graph_stats()  # both models' parameters on top of what was there, none hanging
    params = len(list(model.parameters())) + len(list(eager.parameters()))
    assert stats.nodes == before.nodes + params and stats.hanging_nodes == 0


def test_random_state_is_carried_by_compiled_steps() -> None:
    @tg.jit
    def noise(x: tg.Tensor) -> tg.Tensor:
        return x + tg.randn((3,))  # draws from the process random state

    tg.manual_seed(5)
    first, second = noise(tg.zeros((3,))).numpy(), noise(tg.zeros((3,))).numpy()
    assert not np.array_equal(first, second)  # a fresh draw each call, not a frozen one
    tg.manual_seed(5)
    np.testing.assert_array_equal(tg.randn((3,)).numpy(), first)  # eager draws the same
    np.testing.assert_array_equal(tg.randn((3,)).numpy(), second)
    assert noise.trace_count == 1

    drawn: queue.Queue[tg.Tensor] = queue.Queue()  # a library container: not walked

    @tg.jit
    def draws_beside_a_thread(x: tg.Tensor) -> tg.Tensor:
        thread = threading.Thread(target=lambda: drawn.put(tg.randn((3,))))
        thread.start()  # another thread draws while the step is traced
        thread.join()
        return x + tg.randn((3,))

    tg.manual_seed(5)
    draws_beside_a_thread(tg.zeros((3,)))
    other = drawn.get_nowait()
    assert not isinstance(other.data, jax.core.Tracer)  # the process state, not the traced key
    np.testing.assert_array_equal(other.numpy(), first)

    @tg.jit
    def no_draw(x: tg.Tensor) -> tg.Tensor:
        return x * 2.0

    before = tg.random.get_state()
    no_draw(tg.ones((3,)))
    assert tg.random.get_state() is before  # a step that draws nothing leaves the state


class Scaled(nn.Module):
    """A user module whose forward reads its own flag and number."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 3, key=5)
        self.scale = 2.0

    def forward(self, x: tg.Tensor) -> tg.Tensor:
        return self.lin(x) * (self.scale if self.training else 1.0)


def test_user_modules_flags_and_modules_defined_in_libraries_are_followed() -> None:
    model = Scaled()
    step = tg.jit(lambda x: model(x).sum())
    with tg.no_grad():
        want = float(model.lin(X).sum())
    np.testing.assert_allclose(float(step(X)), 2.0 * want, rtol=1e-5)
    model.scale = 3.0
    np.testing.assert_allclose(float(step(X)), 3.0 * want, rtol=1e-5)
    model.eval()
    np.testing.assert_allclose(float(step(X)), want, rtol=1e-5)
    assert step.trace_count == 3

    class Elsewhere(RunningMean):  # a model class from a library's module (a demo's model)
        pass

    Elsewhere.__module__ = "diagnostics.some_demo"
    compiled, eager = Elsewhere(), Elsewhere()
    opt, eager_opt = optim.SGD(compiled.parameters(), lr=0.1), optim.SGD(eager.parameters(), lr=0.1)

    def fit(model: nn.Module, opt: optim.Optimizer, x: tg.Tensor) -> tg.Tensor:
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    jfit = tg.jit(fit)
    for _ in range(3):
        np.testing.assert_allclose(
            float(jfit(compiled, opt, X)), float(fit(eager, eager_opt, X)), rtol=1e-5
        )
    np.testing.assert_allclose(compiled.running.numpy(), eager.running.numpy(), rtol=1e-6)


def test_hyperparameters_changed_between_calls_are_followed() -> None:
    eager_model, eager_opt = make(key=35)
    model, opt = make(key=35)
    step = tg.jit(train_step)
    sched = optim.lr_scheduler.StepLR(opt, step_size=2)
    eager_sched = optim.lr_scheduler.StepLR(eager_opt, step_size=2)
    for _ in range(4):
        got, want = step(model, opt, X, Y), train_step(eager_model, eager_opt, X, Y)
        np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
        sched.step()
        eager_sched.step()
    assert opt.param_groups[0]["lr"] != 0.1
    assert type(opt.param_groups[0]["lr"]) is float  # the group keeps the scheduler's number
    assert step.trace_count == 1  # the learning rate is an input: a new value compiles nothing


def test_a_scheduler_stepped_inside_the_step_says_to_step_it_after() -> None:
    """Its count is Python state a compiled step cannot advance: it raised a TracerError
    about a traced value at the user's call line, with nothing about the scheduler."""
    model, opt = make(key=36)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        loss = train_step(model, opt, x, y)
        sched.step()
        return loss

    with pytest.raises(tg.TracerError, match=r"StepLR.step\(\) was called inside a tg.jit step"):
        tg.jit(step)(X, Y)
    assert sched.last_epoch == 0 and opt.param_groups[0]["lr"] == 0.1  # nothing advanced
    step(X, Y)  # eagerly it works, as in PyTorch
    assert opt.param_groups[0]["lr"] == 0.05
    with tg.use_tape(tg.Tape(allow_tracers=True)):  # a user's tape, no trace: it steps
        sched.step()
    assert opt.param_groups[0]["lr"] == 0.025


def test_grads_none_then_set_compiles_once_and_accumulation_reads_them() -> None:
    model, opt = make(key=30)
    step = tg.jit(train_step)
    step(model, opt, X, Y)
    step(model, opt, X, Y)
    assert step.trace_count == 1  # .grad None at the first call, arrays after: one compile

    w = tg.ones((3,)).require_grad()

    @tg.jit
    def accumulate(x: tg.Tensor) -> None:
        (w * x).sum().backward()  # no zero_grad: .grad accumulates across calls

    for _ in range(3):
        accumulate(tg.ones((3,)))
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 3.0, 3.0])


def test_one_compile_per_shape_and_static_value_retrace_warning() -> None:
    w = tg.ones((4, 2)).require_grad()

    @tg.jit(static_argnames=("scale",))
    def f(x: tg.Tensor, scale: float = 1.0) -> tg.Tensor:
        return ((x @ w) * scale).sum()

    f(tg.ones((3, 4)))
    f(tg.ones((3, 4)) * 2)
    assert f.trace_count == 1
    f(tg.ones((5, 4)))
    f(tg.ones((3, 4)), scale=2.0)
    assert f.trace_count == 3
    assert float(f(tg.ones((3, 4)), scale=2.0)) == 48.0
    for n in range(6, 11):
        f(tg.ones((n, 4)))
    with pytest.warns(tg.RetraceWarning, match="argument 'x'"):
        f(tg.ones((11, 4)))


def test_a_scheduler_changing_lr_every_step_compiles_once_and_follows_eager() -> None:
    eager_model, eager_opt = make(key=36)
    model, opt = make(key=36)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    eager_sched = optim.lr_scheduler.CosineAnnealingLR(eager_opt, T_max=5)
    step = tg.jit(train_step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.RetraceWarning)
        for _ in range(RETRACE_WARNING + 2):
            got, want = step(model, opt, X, Y), train_step(eager_model, eager_opt, X, Y)
            np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
            sched.step()
            eager_sched.step()
    assert step.trace_count == 1
    for a, b in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    for lr in (1, np.float32(0.05), 0.0):  # an int, a NumPy number, zero: each an input
        opt.param_groups[0]["lr"] = eager_opt.param_groups[0]["lr"] = lr
        got, want = step(model, opt, X, Y), train_step(eager_model, eager_opt, X, Y)
        np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
        assert opt.param_groups[0]["lr"] is lr
    for a, b in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def test_a_number_the_step_reads_changing_every_step_warns_and_a_schedule_compiles_once() -> None:
    model = nn.Linear(3, 1, key=5)
    opt = optim.AdamW(model.parameters(), lr=0.1)
    cfg = {"temperature": 1.0}

    @tg.jit
    def step(x: tg.Tensor) -> None:
        opt.zero_grad()
        (model(x).sum() / cfg["temperature"]).backward()
        opt.step()

    with pytest.warns(tg.RetraceWarning, match=r"numbers it reads.*\['temperature'\].*'betas'"):
        for i in range(RETRACE_WARNING + 1):
            cfg["temperature"] = 1.0 + i
            step(tg.ones((2, 3)))
    assert step.trace_count == RETRACE_WARNING + 1
    scheduled = optim.Adam(model.parameters(), lr=optax.cosine_decay_schedule(0.1, 100))

    @tg.jit
    def step2(x: tg.Tensor) -> None:
        scheduled.zero_grad()
        model(x).sum().backward()
        scheduled.step()

    for _ in range(4):
        step2(tg.ones((2, 3)))
    assert step2.trace_count == 1


def _follows_eager(
    make: Callable[[], nn.Module], opt: Callable[..., optim.Optimizer], set_numbers: Any
) -> list[optim.Optimizer]:
    """A compiled step and its eager twin, ``set_numbers(group, i)`` setting each one's
    hyperparameters before call ``i``: one compile, the same losses and parameters."""
    models = [make(), make()]
    opts = [opt(m.parameters()) for m in models]
    step = tg.jit(train_step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.RetraceWarning)
        for i in range(RETRACE_WARNING + 2):
            for o in opts:
                set_numbers(o.param_groups[0], i)
            got = step(models[0], opts[0], X, Y)
            want = train_step(models[1], opts[1], X, Y)
            np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
    assert step.trace_count == 1
    for a, b in zip(*(m.parameters() for m in models), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    return opts


@pytest.mark.parametrize(
    ("opt", "options", "keys"),
    [
        (optim.SGD, {"lr": 0.1, "momentum": 0.9}, ("momentum", "weight_decay")),
        (optim.AdamW, {"lr": 0.01}, ("betas", "eps", "weight_decay")),
        (optim.RMSprop, {"lr": 0.01, "momentum": 0.5}, ("alpha", "eps", "momentum")),
        (optim.Adagrad, {"lr": 0.1}, ("lr_decay", "weight_decay", "eps")),
    ],
)
def test_every_number_of_a_builtin_optimizer_is_an_input(
    opt: type[optim.Optimizer], options: dict[str, Any], keys: tuple[str, ...]
) -> None:
    """A research loop sets more than the rate between steps (a weight decay schedule, a
    momentum or beta cycle): each number a built-in optimizer's update reads is an input of
    the step, so the step compiles once and follows eager step for step."""
    numbers = {
        "betas": lambda i: (0.9 - 0.02 * i, 0.999 - 0.001 * i),
        "eps": lambda i: 1e-8 * (i + 1),
        "alpha": lambda i: 0.99 - 0.01 * i,
        "momentum": lambda i: 0.9 - 0.05 * i,
        "weight_decay": lambda i: 0.01 * i,
        "lr_decay": lambda i: 0.01 * i,
    }

    def set_numbers(group: dict[str, Any], i: int) -> None:
        group.update({key: numbers[key](i) for key in keys})

    opts = _follows_eager(
        lambda: nn.Sequential(nn.Linear(5, 6, key=9), nn.Tanh(), nn.Linear(6, 3, key=10)),
        lambda params: opt(params, **options),
        set_numbers,
    )
    assert all(type(o.param_groups[0].get("betas", ())) is tuple for o in opts)


def test_tensor_hyperparameters_are_inputs_too() -> None:
    """PyTorch takes a tensor learning rate (and eager tapegrad reads one): a one-element
    tensor set between calls is an input of the step like a number (it compiled the step at
    every call, silently), and the group keeps the tensor."""

    def set_numbers(group: dict[str, Any], i: int) -> None:
        group["lr"] = tg.tensor(0.1 / (i + 1))
        group["weight_decay"] = tg.tensor([0.01 * i])
        group["betas"] = (jnp.float32(0.9 - 0.01 * i), 0.999)

    opts = _follows_eager(
        lambda: nn.Linear(5, 3, key=12), lambda params: optim.Adam(params, lr=0.1), set_numbers
    )
    assert isinstance(opts[0].param_groups[0]["lr"], tg.Tensor)


@pytest.mark.parametrize("opt", ["adam", "sgd"])
def test_one_cycle_with_cycled_momentum_compiles_once_and_follows_eager(opt: str) -> None:
    """``OneCycleLR``'s default ``cycle_momentum=True`` moves Adam's first beta or SGD's
    momentum every batch: inputs of the step, as the rate."""
    (model, o), (eager_model, eager_o) = make(opt, key=42), make(opt, key=42)
    scheds = [optim.lr_scheduler.OneCycleLR(x, max_lr=0.05, total_steps=20) for x in (o, eager_o)]
    step = tg.jit(train_step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.RetraceWarning)
        for _ in range(RETRACE_WARNING + 2):
            got, want = step(model, o, X, Y), train_step(eager_model, eager_o, X, Y)
            np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
            for sched in scheds:
                sched.step()
    assert step.trace_count == 1
    for a, b in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


def test_a_momentum_set_to_zero_or_from_zero_is_refused_as_in_eager() -> None:
    """Whether the update has a momentum buffer is its form, fixed when the optimizer is
    made: a momentum of 0 is a constant of the step (not an input), and a momentum set to 0
    or from 0 later raises the ``ValueError`` eager raises, compiled or not."""
    for first, then in ((0.9, 0.0), (0.0, 0.9)):
        model = nn.Linear(5, 3, key=11)
        o = optim.SGD(model.parameters(), lr=0.1, momentum=first)
        step = tg.jit(train_step)
        step(model, o, X, Y)
        o.param_groups[0]["momentum"] = then
        with pytest.raises(ValueError, match="changed after the optimizer was made"):
            step(model, o, X, Y)
        with pytest.raises(ValueError, match="changed after the optimizer was made"):
            train_step(model, o, X, Y)


def test_static_argnums_and_none_arguments_in_every_position() -> None:
    """A static positional argument (at any position, with or without an optimizer in the
    step) compiles once per value; a ``None`` argument is passed through."""
    model, opt = make()
    x, y = tg.ones((4, 5)), tg.tensor([0, 1, 0, 1])

    @tg.jit(static_argnums=(0,))
    def scaled(k: float, x: tg.Tensor) -> tg.Tensor:
        return (model(x) * k).sum()

    eager = float((model(x) * 2.0).sum())
    assert float(scaled(2.0, x)) == pytest.approx(eager, rel=1e-6)
    assert float(scaled(3.0, x)) == pytest.approx(eager * 1.5, rel=1e-6)
    scaled(2.0, x)
    assert scaled.trace_count == 2

    @tg.jit(static_argnums=(2,))
    def step(x: tg.Tensor, y: tg.Tensor, k: float, extra: None = None) -> tg.Tensor:
        opt.zero_grad()
        loss = tg.cross_entropy(model(x), y) * k
        loss.backward()
        opt.step()
        return loss

    before = float(tg.cross_entropy(model(x), y))
    assert float(step(x, y, 2.0)) == pytest.approx(2 * before, rel=1e-5)
    assert float(step(x, y, 1.0, None)) < before  # a None argument, then the trained model
    assert step.trace_count == 2


def test_static_arguments_are_checked_against_the_signature() -> None:
    """As ``jax.jit``: a position or name the function does not take is a ``ValueError`` at
    decoration; a negative position counts from the last positional parameter; a traced
    value where a shape goes says to make its argument static."""

    def f(x: tg.Tensor, n: int) -> tg.Tensor:
        return x.reshape(n, -1)

    for bad in ({"static_argnums": (5,)}, {"static_argnums": (-3,)}):
        with pytest.raises(ValueError, match=r"takes 2 positional argument\(s\)"):
            tg.jit(f, **bad)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"static_argnames names \['m'\], which f does not"):
        tg.jit(f, static_argnames=("m",))
    with pytest.raises(ValueError, match="give non-negative positions"):
        tg.jit(lambda *xs: xs[0], static_argnums=(-1,))
    assert tg.jit(f, static_argnums=(-1,))(tg.ones((4, 2)), 2).shape == (2, 4)
    with pytest.raises(TypeError, match=r"reshape: shape .* traced value .* static_argnums"):
        tg.jit(f)(tg.ones((4, 2)), 2)


def test_a_captured_tensor_changed_outside_the_step_is_seen() -> None:
    """A tensor the step captures that does not require grad is baked in as a constant; once
    its array is replaced (in place or through ``.data``) the step traces again, carrying it
    as state from then on, so later changes need no new trace."""
    w = tg.ones((3,)).require_grad()
    g = tg.ones((3,))

    @tg.jit
    def f(x: tg.Tensor) -> tg.Tensor:
        return (w * g * x).sum()

    x = tg.ones((3,))
    assert float(f(x)) == 3.0
    g *= 5
    assert float(f(x)) == 15.0
    g.data = g.data * 2
    assert float(f(x)) == 30.0
    g += 1
    assert float(f(x)) == 33.0
    assert f.trace_count == 2


def test_freezing_and_unfreezing_a_captured_tensor_between_calls_matches_eager() -> None:
    """Which tensors require grad decides what the compiled step differentiates: a tensor
    frozen (``requires_grad_(False)``, a fine-tuning pattern) or unfrozen after the first call
    traces again, and gradients match eager calls of the same step every time. The tensors
    are reached through default arguments (``def step(x, w=w)``), found like closures."""
    x = tg.tensor(jnp.arange(3.0))
    results = []
    for compiled in (False, True):
        w = tg.ones((3,)).require_grad()
        b = tg.ones((3,)).require_grad()

        def step(x: tg.Tensor, w: tg.Tensor = w, b: tg.Tensor = b) -> tg.Tensor:
            loss = ((w * x + b) ** 2).sum()
            loss.backward()
            return loss

        run = tg.jit(step) if compiled else step
        seen = []
        for frozen in (False, True, False, True):
            w.grad = b.grad = None
            w.requires_grad_(not frozen)
            seen.append((float(run(x)), _grad_list(w), _grad_list(b)))
        results.append(seen)
        if compiled:
            assert run.trace_count == 4  # pyright: ignore[reportFunctionMemberAccess]
    assert results[0] == results[1]
    assert results[0][1][1] is None and results[0][0][1] == [0.0, 4.0, 12.0]


def _grad_list(t: tg.Tensor) -> list[float] | None:
    return None if t.grad is None else t.grad.tolist()


def test_a_hyperparameter_set_from_a_traced_argument_is_a_tracer_error() -> None:
    model, opt = make(key=11)

    @tg.jit
    def step(x: tg.Tensor, y: jax.Array, lr: float) -> tg.Tensor:
        opt.param_groups[0]["lr"] = lr
        return train_step(model, opt, x, y)

    err = error_of(tg.TracerError, lambda: step(X, Y, 0.05))
    assert "param_groups[0]['lr']" in str(err) and "outside the compiled step" in str(err)
    assert opt.param_groups[0]["lr"] == 0.1  # the step's changes were undone
    before = float(tg.cross_entropy(model(X), Y))
    assert float(train_step(model, opt, X, Y)) == pytest.approx(before, rel=1e-6)


def test_tracer_errors_name_the_line() -> None:
    w = tg.ones((3,)).require_grad()

    def bad_item(x: tg.Tensor) -> tg.Tensor:
        loss = (w * x).sum()
        if loss.item() > 0:  # the line the error names
            loss = loss * 2
        return loss

    for call, what in [
        (lambda x: (w * x).sum().item(), "item()"),
        (lambda x: float((w * x).sum()), "float()"),
        (lambda x: (w * x).numpy(), ".numpy()"),
        (lambda x: bool((w * x).sum() > 0) and x, "bool()"),
        (bad_item, "item()"),
    ]:
        err = error_of(tg.TracerError, tg.jit(call), tg.ones((3,)))
        assert what in str(err) and "test_jit.py:" in str(err) and "Return" in str(err)
    assert w.grad is None and np.asarray(w.data).tolist() == [1.0, 1.0, 1.0]


COUNTER = tg.zeros(())


def test_a_constant_the_step_changes_becomes_state() -> None:
    w = tg.ones((3,)).require_grad()

    @tg.jit
    def counting(x: tg.Tensor) -> tg.Tensor:
        with tg.no_grad():
            COUNTER.data = COUNTER.data + 1.0  # a global tensor without grad, changed
        return (w * x).sum()

    for _ in range(3):
        assert float(counting(tg.ones((3,)))) == 3.0
    assert float(COUNTER) == 3.0 and counting.trace_count == 1


HISTORY: list[tg.Tensor] = []


def test_escaped_tensors_and_bad_results_raise_and_change_nothing() -> None:
    model, opt = make(key=40)
    before = values(model)
    state = jax.tree.leaves(opt.state)

    @tg.jit
    def keeps_in_global(x: tg.Tensor) -> tg.Tensor:
        loss = train_step(model, opt, x, Y)
        HISTORY.append(loss)
        return loss

    err = error_of(tg.TracerError, keeps_in_global, X)
    assert "HISTORY" in str(err) and "Return it" in str(err)
    assert HISTORY == []

    class Holder:
        pass

    holder = Holder()

    @tg.jit
    def keeps_on_object(x: tg.Tensor) -> tg.Tensor:
        holder.last = model(x)  # a tensor made inside, kept on an object
        return train_step(model, opt, x, Y)

    err = error_of(tg.TracerError, keeps_on_object, X)
    assert "holder.last" in str(err)
    assert not hasattr(holder, "last")

    @tg.jit
    def returns_object(x: tg.Tensor) -> object:
        train_step(model, opt, x, Y)
        return opt

    err = error_of(tg.TracerError, returns_object, X)
    assert "returned a SGD" in str(err)

    @tg.jit
    def raises(x: tg.Tensor) -> tg.Tensor:
        loss = train_step(model, opt, x, Y) + tg.randn(())  # draws from the random state
        raise ValueError("boom")
        return loss  # pragma: no cover

    key = tg.random.get_state()
    error_of(ValueError, raises, X)
    assert tg.random.get_state() is key  # nothing written back, the random state included
    for a, b in zip(values(model), before, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jax.tree.leaves(opt.state), state, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert all(p.grad is None for p in model.parameters())


FEATURES: list[tg.Tensor] = []


def test_backward_into_a_graph_made_outside_the_step_raises_and_pins_nothing() -> None:
    """A step whose backward reaches a tensor computed eagerly (a graph outside the step)
    raises, naming it, instead of leaving the leaves of that graph without their gradient;
    the failed step keeps nothing alive."""
    w = tg.ones((3, 3)).require_grad()
    FEATURES.append((tg.ones((4, 3)) @ w).tanh())  # a non-leaf that requires grad

    @tg.jit
    def step(v: tg.Tensor) -> tg.Tensor:
        loss = (FEATURES[0] * v).sum()
        loss.backward()
        return loss

    err = error_of(tg.TracerError, step, tg.ones((4, 3)))
    assert "FEATURES[0]" in str(err) and "'tanh'" in str(err) and ".detach()" in str(err)
    assert w.grad is None
    ops = tg.graph_stats().nodes
    FEATURES.clear()  # the graph goes with its tensor, though the step object lives on
    tg.graph_cleanup()
    assert tg.graph_stats().nodes == ops - 2

    @tg.jit
    def reads(v: tg.Tensor) -> tg.Tensor:  # a forward read without backward is a constant
        return (FEATURES[0] * v).sum()

    FEATURES.append((tg.ones((4, 3)) @ w).tanh())
    expected = float((FEATURES[0] * 2.0).sum())
    assert float(reads(tg.full((4, 3), 2.0))) == pytest.approx(expected)
    FEATURES.clear()


def test_list_mutation_and_tensor_from_another_trace() -> None:
    w = tg.ones((3,)).require_grad()
    params = [w]

    @tg.jit
    def mutates(x: tg.Tensor) -> tg.Tensor:
        loss = (params[0] * x).sum()
        params.pop()
        return loss

    err = error_of(tg.TracerError, mutates, tg.ones((3,)))
    assert "params" in str(err) and "list" in str(err)
    assert params == [w] or params[0] is w

    leaked: list[tg.Tensor] = []

    def leak(x: tg.Tensor) -> tg.Tensor:
        leaked.append(x * 2)
        return x

    jax.jit(lambda a: leak(tg.Tensor(a)).data)(jnp.ones(3))  # a tensor escapes a JAX trace

    @tg.jit
    def uses_leaked(x: tg.Tensor) -> tg.Tensor:
        return leaked[0] + x

    err = error_of(tg.TracerError, uses_leaked, tg.ones((3,)))
    assert "leaked[0]" in str(err) and "another trace" in str(err)


def test_variables_rebound_inside_and_tensors_from_another_tg_jit_trace() -> None:
    kept: tg.Tensor | None = None
    count = 0

    @tg.jit
    def rebinds(x: tg.Tensor) -> tg.Tensor:
        nonlocal kept
        kept = x * 2.0  # a closure variable rebound to a tensor made inside
        return x

    err = error_of(tg.TracerError, rebinds, tg.ones((3,)))
    assert "kept" in str(err) and "Return it" in str(err)
    assert kept is None  # put back

    @tg.jit
    def counts(x: tg.Tensor) -> tg.Tensor:
        nonlocal count
        count += 1  # Python bookkeeping: compiled code would do it once
        return x

    err = error_of(tg.TracerError, counts, tg.ones((3,)))
    assert "count" in str(err) and "only once" in str(err) and count == 0

    hidden = collections.deque()  # a library container tg.jit does not look into

    @tg.jit
    def hides(x: tg.Tensor) -> tg.Tensor:
        hidden.append(x * 2.0)
        return x

    hides(tg.ones((3,)))

    @tg.jit
    def uses_hidden(x: tg.Tensor) -> tg.Tensor:
        return hidden[0] + x

    err = error_of(tg.TracerError, uses_hidden, tg.ones((3,)))
    assert "another trace" in str(err) and "uses_hidden" in str(err)
    hidden.clear()


@pytest.mark.slow
def test_process_tape_does_not_grow_and_parameters_never_hang() -> None:
    model, opt = make(key=50)
    step = tg.jit(train_step)
    step(model, opt, X, Y)
    before = tg.graph_stats()
    for _ in range(10_000):
        step(model, opt, X, Y)
    after = tg.graph_stats()
    assert after == before
    assert after.hanging_nodes == 0
    del model, opt, step
    stats = tg.graph_stats()
    assert stats.hanging_leaves == before.hanging_leaves  # reached by compiled backward: freed


def test_trace_report_counts_dead_code() -> None:
    model, opt = make(key=60)

    @tg.jit
    def with_dead_code(x: tg.Tensor) -> tg.Tensor:
        (model(x) ** 2).sum()  # computed under grad mode, never used: dead code
        return train_step(model, opt, x, Y)

    with_dead_code(X)
    report = with_dead_code.trace_report()
    assert report.hanging_nodes > 0
    assert any("test_jit.py" in origin for origin, _, _ in report.hanging)
    leak = build_report(report.snapshot)  # diagnostics' classes for the private tape
    assert leak.hanging_nodes == report.hanging_nodes
    assert {row.op for row in leak.rows if row.kind == "hanging"} >= {"integer_pow", "sum"}
    assert tg.graph_stats().hanging_nodes == 0
    shown = repr(report)  # a summary, not the snapshot's every record
    assert shown.startswith(f"TraceReport: {report.nodes} nodes recorded, ")
    assert "x integer_pow at " in shown and "test_jit.py" in shown and len(shown) < 1000


def test_donation_spares_arrays_a_pending_graph_on_another_tape_saves() -> None:
    model, opt = make(key=71)
    step = tg.jit(train_step)
    step(model, opt, X, Y)
    with tg.use_tape(tg.Tape("probe")) as probe:
        copies = [p.detach().require_grad() for p in model.parameters()]  # the same arrays
        pending = sum((c * c).sum() for c in copies)  # saved on "probe", not the process tape
    assert probe.stats().saved_bytes > 0
    step(model, opt, X, Y)  # the parameters' arrays are saved on "probe": not donated
    pending.backward()
    assert all(c.grad is not None and np.isfinite(c.grad.numpy()).all() for c in copies)


def test_donation_spares_an_array_two_parameters_share() -> None:
    # two parameters made from one array: XLA cannot donate one buffer twice, so that call
    # donates nothing; the step's outputs are new arrays, donated from then on
    shared = jnp.ones(3)
    a, b = tg.tensor(shared).require_grad(), tg.tensor(shared).require_grad()
    opt = tg.optim.SGD([a, b], lr=0.1)

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        loss = (a * x + b * x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    losses = [step(tg.ones(3)).item() for _ in range(3)]
    np.testing.assert_allclose(losses, [6.0, 5.4, 4.8], rtol=1e-6)
    np.testing.assert_allclose(a.numpy(), [0.7] * 3, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), [0.7] * 3, rtol=1e-6)
    assert np.asarray(shared).tolist() == [1.0] * 3  # not donated: still readable


def test_donation_spares_a_parameter_array_a_captured_constant_shares() -> None:
    # an anchor made from a parameter's array (L2-SP, EWC) is a constant of the step: the
    # parameter's array is not donated while the anchor holds it, also after a retrace
    w = tg.ones(3).require_grad()
    anchor = tg.tensor(w.data)
    opt = tg.optim.SGD([w], lr=0.1)

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        loss = ((w - anchor) ** 2).sum() + (w * x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    for _ in range(3):
        step(tg.ones(3))
    step(tg.full((3,), 2.0))
    np.testing.assert_allclose(anchor.numpy(), [1.0] * 3)
    np.testing.assert_allclose(w.numpy(), [0.6048] * 3, rtol=1e-5)


def test_donation_spares_arrays_a_pending_graph_saves() -> None:
    model, opt = make(key=70)
    step = tg.jit(train_step)
    step(model, opt, X, Y)
    pending = tg.cross_entropy(model(X), Y)  # an eager graph saving the parameters' arrays
    step(model, opt, X, Y)
    pending.backward()  # its saved arrays were not donated: still valid
    assert all(p.grad is not None for p in model.parameters())

    w = tg.ones((2,)).require_grad()
    old = w.data

    @tg.jit(donate=False)
    def sgd(x: tg.Tensor) -> None:
        w.grad = None
        (w * x).sum().backward()
        w.data = w.data - w.grad.data

    sgd(tg.ones((2,)))
    assert np.asarray(old).tolist() == [1.0, 1.0]  # not donated: still readable
    assert w.numpy().tolist() == [0.0, 0.0]


def test_donation_asks_the_tapes_only_when_an_array_has_another_holder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = importlib.import_module("tapegrad.jit")
    asked: list[int] = []

    def counting(arrays: list[jax.Array]) -> bool:
        asked.append(len(arrays))
        return saved_on_any_tape(arrays)

    monkeypatch.setattr(module, "saved_on_any_tape", counting)
    model, opt = make(key=72)
    step = tg.jit(train_step)
    for _ in range(3):
        step(model, opt, X, Y)
    assert asked == []  # only the parameters hold their arrays: no graph can save them
    kept = next(iter(model.parameters())).data
    step(model, opt, X, Y)
    assert asked == [4]  # another holder: the tapes are asked; none saves it, so it is donated
    assert kept.is_deleted()
    stale = tg.tensor(kept)  # using it says what happened and what to do, not JAX's words
    for use in (stale.numpy, stale.tolist, lambda: stale * 2, lambda: float(stale.sum())):
        err = error_of(RuntimeError, use)
        assert "donated to a tg.jit step" in str(err) and "donate=False" in str(err)


def test_a_kept_grad_stays_valid_and_unchanged() -> None:
    model, opt = make(key=73)
    eager_model, eager_opt = make(key=73)
    step = tg.jit(train_step)
    for _ in range(2):
        step(model, opt, X, Y)
        train_step(eager_model, eager_opt, X, Y)
    kept = [p.grad for p in model.parameters()]
    old = [g.numpy() for g in kept]
    step(model, opt, X, Y)
    train_step(eager_model, eager_opt, X, Y)
    for g, o in zip(kept, old, strict=True):
        np.testing.assert_array_equal(g.numpy(), o)  # not donated, not written in place
    for p, q in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-7)
    assert step.trace_count == 2  # a computation that does not take the spent gradients


def test_the_shared_seed_of_a_scalar_backward_is_never_donated() -> None:
    """backward() of a one-element output seeds it with a cached array of ones; a .grad that
    is that very array (a scalar leaf's own backward) is spent by a donating step, yet the
    cache's reference keeps it from being donated, so later backward passes still work."""
    w = tg.tensor(3.0).require_grad()
    w.backward()  # w.grad is the seed itself
    seed = w.grad.data

    @tg.jit
    def step() -> None:
        w.grad = None
        (w * w).backward()

    step()
    step()
    assert not seed.is_deleted()
    assert float(w.grad) == 6.0
    v = tg.tensor(1.0).require_grad()
    (v * 5.0).backward()
    assert float(v.grad) == 5.0


def test_spent_gradients_are_donated() -> None:
    model, opt = make(key=74)
    step = tg.jit(train_step)

    def buffers() -> set[int]:  # of the gradients and the momentum (XLA may swap the two)
        arrays = [p.grad.data for p in model.parameters()] + jax.tree.leaves(opt.state)
        return {a.unsafe_buffer_pointer() for a in arrays if a.ndim}

    for _ in range(2):
        step(model, opt, X, Y)
    before = buffers()
    step(model, opt, X, Y)
    assert buffers() == before  # nothing else held the old .grad: no new buffers
    assert step.trace_count == 1  # .grad None at the first call: one compile all the same
    (plan,) = next(iter(step._plans.values()))
    assert plan.jitted._cache_size() == 1  # the first call's blanks matched the later .grad


class _Holder:
    """A plain object holding a tensor attribute a step reads."""

    def __init__(self) -> None:
        self.scale = tg.tensor(3.0)


def test_state_replaced_between_calls_is_seen() -> None:
    """A buffer, a submodule or a tensor attribute replaced between calls, or a tensor put in
    a list's place, is what the next call computes with (it compiles again), as eagerly."""

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 2, key=0)
            self.temperature = tg.tensor(1.0)

        def forward(self, x: tg.Tensor) -> tg.Tensor:
            return tg.softmax(self.fc(x) / self.temperature, axis=-1)

    net, x = Net(), tg.ones((1, 3))
    predict = tg.jit(lambda x: net(x))
    with tg.no_grad():
        predict(x)
        net.temperature = tg.tensor(100.0)
        np.testing.assert_allclose(predict(x).numpy(), net(x).numpy(), rtol=1e-6)
        net.fc = nn.Linear(3, 2, key=5)
        np.testing.assert_allclose(predict(x).numpy(), net(x).numpy(), rtol=1e-6)
        predict(x)
    assert predict.trace_count == 3  # one per state, not one per call

    holder = _Holder()
    scales = [tg.tensor(2.0)]
    f = tg.jit(lambda x: x * holder.scale * scales[0])
    assert float(f(tg.ones(()))) == 6.0
    holder.scale = tg.tensor(5.0)
    assert float(f(tg.ones(()))) == 10.0
    scales[0] = tg.tensor(7.0)
    assert float(f(tg.ones(()))) == 35.0
    scales.append(tg.tensor(1.0))  # an entry the step never read: no new compile
    f(tg.ones(()))
    assert f.trace_count == 3


@pytest.mark.parametrize("compiled", [False, True])
def test_a_grad_the_step_sets_to_none_is_none_after_it(compiled: bool) -> None:
    """``zero_grad()`` in a step that never reads ``.grad`` leaves ``None`` where no backward
    of this call reached, as the eager step does (also for a parameter frozen since)."""
    a, b = nn.Linear(3, 1, key=0), nn.Linear(3, 1, key=1)
    opt = optim.SGD([*a.parameters(), *b.parameters()], lr=0.1)

    def step(x: tg.Tensor, head: int) -> None:
        opt.zero_grad()
        ((a if head == 0 else b)(x) ** 2).mean().backward()
        opt.step()

    run = tg.jit(step, static_argnums=(1,)) if compiled else step
    run(tg.ones((2, 3)), 0)
    run(tg.ones((2, 3)), 1)
    assert a.weight.grad is None and b.weight.grad is not None
    run(tg.ones((2, 3)), 0)
    assert a.weight.grad is not None and b.weight.grad is None
    b.bias.requires_grad_(False)
    run(tg.ones((2, 3)), 1)
    assert b.bias.grad is None and a.weight.grad is None


def test_nested_steps_run_inline_and_leave_the_parameters_concrete() -> None:
    """A tg.jit step called inside another runs as part of the outer trace (as jax.jit
    nested in jax.jit); under plain jax.jit it refuses clearly; the model stays usable."""
    model, opt = make()

    @tg.jit
    def inner(x: tg.Tensor) -> tg.Tensor:
        return train_step(model, opt, x, Y)

    @tg.jit
    def outer(x: tg.Tensor) -> tg.Tensor:
        return inner(x) * 2

    twin, twin_opt = make()
    want = float(train_step(twin, twin_opt, X, Y)) * 2
    assert float(outer(X)) == pytest.approx(want, rel=1e-5)
    for p, q in zip(values(model), values(twin), strict=True):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    before = tg.current_tape().stats()
    err = error_of(tg.TracerError, jax.jit(lambda a: inner(tg.Tensor(a)).data), X.data)
    assert "this tg.jit step was called with JAX tracers" in str(err)
    assert "Call the step outside the JAX transformation" in str(err)
    assert "under tg.jit" not in str(err)  # it is a tg.jit step already
    assert tg.current_tape().stats().nodes == before.nodes  # nothing recorded
    assert all(
        isinstance(p.data, jax.Array) and not isinstance(p.data, jax.core.Tracer)
        for p in model.parameters()
    )
    inner(X)  # still usable


def test_an_argument_sharing_a_donated_array_is_spared() -> None:
    m = nn.Linear(3, 3, key=0)
    opt = optim.SGD(m.parameters(), lr=0.1)

    @tg.jit
    def step(x: tg.Tensor, ref: tg.Tensor) -> tg.Tensor:
        opt.zero_grad()
        loss = ((m(x) - ref) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    twin = nn.Linear(3, 3, key=0)
    want = ((twin(tg.ones((3, 3))) - twin.weight.detach()) ** 2).mean()
    assert float(step(tg.ones((3, 3)), m.weight.detach())) == pytest.approx(float(want))


def test_create_graph_and_argument_leaves_inside_a_step_are_not_escapes() -> None:
    """An input made to require grad inside the step (a gradient penalty) and a backward with
    ``create_graph=True`` work as eagerly."""
    w = tg.full((3,), 2.0).require_grad()

    def penalty(x: tg.Tensor) -> tg.Tensor | None:
        x = x.require_grad()
        (g,) = tg.grad((x * w * w).sum(), x, create_graph=True)
        (g**2).sum().backward()
        return w.grad

    got = tg.jit(penalty)(tg.ones((3,)))
    w.grad = None
    want = penalty(tg.ones((3,)))
    assert got is not None and want is not None
    np.testing.assert_allclose(got.numpy(), want.numpy())  # d/dw sum(w^4) = 4 w^3 = 32

    model, opt = make()

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        opt.zero_grad()
        loss = tg.cross_entropy(model(x), Y)
        loss.backward(create_graph=True)
        opt.step()
        return loss

    step(X)
    assert float(step(X)) < float(tg.cross_entropy(make()[0](X), Y))


def test_static_arguments_by_position_or_name_and_traced_values_in_control_flow() -> None:
    """As jax.jit: a static parameter is static passed either way, ``static_argnums`` may be
    an int; a traced number in Python control flow, or a boolean mask, is a TracerError
    naming the line and the way out."""
    x = tg.ones((2,))
    f = tg.jit(lambda x, train=True: x * 2 if train else x, static_argnames=("train",))
    assert float(f(x, False).sum()) == 2.0 and float(f(x, train=True).sum()) == 4.0
    g = tg.jit(lambda x, train: x * 2 if train else x, static_argnums=1)
    assert float(g(x, train=False).sum()) == 2.0 and float(g(x, True).sum()) == 4.0

    def repeat(x: tg.Tensor, n: int) -> tg.Tensor:
        for _ in range(n):
            x = x * 2
        return x

    err = error_of(tg.TracerError, tg.jit(repeat), x, 3)
    assert "test_jit.py" in str(err) and "static_argnums" in str(err)
    err = error_of(tg.TracerError, tg.jit(lambda x: x[x > 0]), x)
    assert "tg.where" in str(err)


def test_a_new_tensor_argument_that_requires_grad_every_call_warns() -> None:
    w = tg.ones((3,)).require_grad()

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        loss = (x * w).sum()
        loss.backward()
        return loss

    with pytest.warns(tg.RetraceWarning, match=r"argument 'x' was another object.*require_grad"):
        for _ in range(RETRACE_WARNING + 1):
            step(tg.ones((3,)).require_grad())


class _ClassHeld:
    model = nn.Linear(3, 1, key=0)  # a class attribute: not state tg.jit finds


def test_a_parameter_tg_jit_cannot_find_is_an_error_that_says_so() -> None:
    held = _ClassHeld()

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        loss = (held.model(x) ** 2).mean()
        loss.backward()
        return loss

    err = error_of(tg.TapeMismatchError, step, tg.ones((2, 3)))
    assert "Inside a tg.jit step" in str(err) and "as an argument" in str(err)


def test_a_learning_rate_that_becomes_a_schedule_compiles_again() -> None:
    eager_model, eager_opt = make(key=37)
    model, opt = make(key=37)
    step = tg.jit(train_step)
    schedule = optax.linear_schedule(0.1, 0.0, 10)
    for lr in (0.1, schedule, 0.05, schedule):
        opt.param_groups[0]["lr"] = eager_opt.param_groups[0]["lr"] = lr
        for _ in range(2):
            got, want = step(model, opt, X, Y), train_step(eager_model, eager_opt, X, Y)
            np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
        assert opt.param_groups[0]["lr"] is lr
    assert step.trace_count == 4  # numbers, then a schedule, and back: one plan each change


def test_the_learning_rate_read_in_python_inside_a_step_is_a_tracer_error_saying_so() -> None:
    model, opt = make(key=38)

    @tg.jit
    def logged(x: tg.Tensor, y: jax.Array) -> tg.Tensor:
        loss = train_step(model, opt, x, y)
        print(f"lr {opt.param_groups[0]['lr']:.3f}")  # a format spec on a traced value
        return loss

    @tg.jit
    def gated(x: tg.Tensor, y: jax.Array) -> tg.Tensor:
        opt.zero_grad()
        loss = tg.cross_entropy(model(x), y)
        loss.backward()
        if opt.param_groups[0]["lr"] > 0.01:  # Python control flow on a traced value
            opt.step()
        return loss

    before = [p.numpy() for p in model.parameters()]
    for step in (logged, gated):
        err = error_of(tg.TracerError, lambda step=step: step(X, Y))
        assert "param_groups numbers ('lr', 'betas'" in str(err) and "read them outside" in str(err)
        assert "test_jit.py" in str(err)  # the line
    assert opt.param_groups[0]["lr"] == 0.1
    for p, b in zip(model.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.numpy(), b)  # nothing changed
    assert float(train_step(model, opt, X, Y)) > 0  # usable afterwards


class _Trainer:
    """A training loop's object holding the model, its optimizer and its scheduler."""

    def __init__(self, key: int) -> None:
        self.model, self.opt = make(key=key)
        self.sched = optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=6)


def test_a_step_that_reaches_the_scheduler_or_a_param_group_first_still_takes_lr_as_input() -> None:
    eager, compiled = _Trainer(39), _Trainer(39)
    group = compiled.opt.param_groups[0]  # reached through the closure before the optimizer

    @tg.jit
    def step(trainer: _Trainer, x: tg.Tensor, y: jax.Array) -> tuple[tg.Tensor, tuple[int, ...]]:
        return train_step(trainer.model, trainer.opt, x, y), group["params"][0].shape

    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.RetraceWarning)
        for _ in range(RETRACE_WARNING + 1):
            got = step(compiled, X, Y)[0]
            want = train_step(eager.model, eager.opt, X, Y)
            np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
            compiled.sched.step()
            eager.sched.step()
    assert step.trace_count == 1


def test_an_integer_learning_rate_beyond_int32_is_the_rate_eager_uses() -> None:
    eager_model, eager_opt = make(key=40)
    model, opt = make(key=40)
    step = tg.jit(train_step)
    for lr in (np.int64(2**31 + 5), 2**32, 0.1):
        opt.param_groups[0]["lr"] = eager_opt.param_groups[0]["lr"] = lr
        got, want = step(model, opt, X, Y), train_step(eager_model, eager_opt, X, Y)
        np.testing.assert_allclose(float(got), float(want), rtol=1e-5)
    for a, b in zip(model.parameters(), eager_model.parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
    assert step.trace_count == 1  # every rate is passed as a float: one abstract value


def test_a_learning_rate_traced_by_jax_jit_is_refused_before_the_state_changes() -> None:
    model, opt = make(key=41)
    tg.cross_entropy(model(X), Y).backward()

    def stepped(lr: jax.Array) -> jax.Array:
        opt.param_groups[0]["lr"] = lr
        opt.step()
        return lr

    err = error_of(tg.TracerError, lambda: jax.jit(stepped)(0.1))
    assert "'learning_rate'" in str(err) and "outside the step" in str(err)
    opt.param_groups[0]["lr"] = 0.1
    assert float(train_step(model, opt, X, Y)) > 0  # the optimizer's state holds no tracer


def test_a_returned_parameter_or_buffer_is_its_value_after_the_call() -> None:
    m = nn.Linear(2, 1, key=0)
    opt = optim.SGD(m.parameters(), lr=1.0)

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
        return m.bias  # eager returns the parameter itself, updated

    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", tg.zeros(()))

        def forward(self, x: tg.Tensor) -> tg.Tensor:
            with tg.no_grad():
                self.count += 1
            return self.count

    for _ in range(3):
        np.testing.assert_array_equal(step(tg.ones((1, 2))).numpy(), m.bias.numpy())
    counter = Counter()
    counted = tg.jit(counter)
    assert [float(counted(tg.ones(1))) for _ in range(3)] == [1.0, 2.0, 3.0]
    assert float(counter.count) == 3.0 and step.trace_count == 1


def test_one_step_called_from_two_threads_runs_its_calls_one_at_a_time() -> None:
    """A donating step called from two threads at once: each call reads what the previous
    one left (not arrays it donated), so 2 x 15 calls equal 30 calls in a row."""
    model, opt = make("adam")
    step = tg.jit(train_step)
    step(model, opt, X, Y)  # compiled before the threads start
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work() -> None:
        start.wait()
        try:
            for _ in range(15):
                step(model, opt, X, Y)
        except BaseException as err:  # noqa: BLE001 (reported below)
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    twin, twin_opt = make("adam")
    twin_step = tg.jit(train_step)
    for _ in range(31):
        twin_step(twin, twin_opt, X, Y)
    for p, q in zip(values(model), values(twin), strict=True):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)


def test_backward_through_a_compiled_modules_result_says_the_result_has_no_graph() -> None:
    """A tg.jit step returns concrete values: a loss computed from them outside the step has
    nothing to differentiate, and the error says where backward() belongs."""
    model = nn.Linear(3, 2, key=0)
    loss = tg.cross_entropy(tg.jit(model)(tg.ones((4, 3))), tg.tensor(np.zeros(4, np.int32)))
    message = str(error_of(tg.NoGradError, loss.backward))
    assert "results of a tg.jit step carry no graph" in message
    assert "call backward() inside the compiled step" in message
