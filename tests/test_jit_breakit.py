"""tg.jit against the eager step: what users change between calls, and what they pass.

Each test runs the same step eagerly and compiled and compares the two (values read from
configuration objects, dicts and lists; a tensor argument the step changes; a module
compiled directly) or checks what a retrace says and where.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.jit import RETRACE_WARNING


class Config:
    """A user's configuration object (not a module): its numbers are read by the step."""

    def __init__(self) -> None:
        self.scale = 1.0
        self.mode = "plain"


CONFIG = Config()
SETTINGS = {"scale": 1.0}
FACTORS = [1.0]
LR = 0.1


def _grad_of_scaled(w: tg.Tensor, x: tg.Tensor, scale: float, mode: str = "plain") -> tg.Tensor:
    w.grad = None
    loss = (x * w * scale).sum()
    if mode == "double":
        loss = loss * 2
    loss.backward()
    grad = w.grad
    assert grad is not None
    return grad


@pytest.mark.parametrize("where", ["object", "dict", "list"])
def test_a_number_changed_in_an_object_dict_or_list_between_calls_is_seen(where: str) -> None:
    w = tg.ones((3,), requires_grad=True)
    x = tg.ones((3,))

    def step(x: tg.Tensor) -> tg.Tensor:
        if where == "object":
            return _grad_of_scaled(w, x, CONFIG.scale, CONFIG.mode)
        if where == "dict":
            return _grad_of_scaled(w, x, SETTINGS["scale"])
        return _grad_of_scaled(w, x, FACTORS[0])

    compiled = tg.jit(step)
    try:
        for value in (1.0, 5.0, 5.0, 0.5):
            CONFIG.scale = SETTINGS["scale"] = FACTORS[0] = value
            want = np.asarray(step(x).data)
            np.testing.assert_allclose(np.asarray(compiled(x).data), want)
        assert compiled.trace_count == 3  # 1.0, 5.0, 0.5: an equal value compiles nothing
        if where == "object":
            CONFIG.mode = "double"
            np.testing.assert_allclose(np.asarray(compiled(x).data), np.asarray(step(x).data))
    finally:
        CONFIG.scale = SETTINGS["scale"] = FACTORS[0] = 1.0
        CONFIG.mode = "plain"


def test_a_number_that_becomes_a_tensor_is_another_computation() -> None:
    w = tg.ones((3,), requires_grad=True)
    x = tg.ones((3,))
    config = Config()

    def step(x: tg.Tensor) -> tg.Tensor:
        return _grad_of_scaled(w, x, config.scale)

    compiled = tg.jit(step)
    compiled(x)
    config.scale = tg.tensor([1.0, 2.0, 3.0])  # type: ignore[assignment]
    np.testing.assert_allclose(np.asarray(compiled(x).data), [1.0, 2.0, 3.0])


def test_a_global_number_rebound_to_an_equal_value_compiles_once_and_a_changing_one_warns() -> None:
    global LR
    w = tg.ones((3,), requires_grad=True)

    def step(x: tg.Tensor) -> tg.Tensor:
        return _grad_of_scaled(w, x, LR)

    compiled = tg.jit(step)
    x = tg.ones((3,))
    try:
        for i in range(4):
            LR = float(np.float32(0.1)) + 0.0 * i  # a new float object, equal each time
            compiled(x)
        assert compiled.trace_count == 1
        with pytest.warns(tg.RetraceWarning, match=r"numbers it reads.*\(LR\)") as record:
            for i in range(RETRACE_WARNING + 1):
                LR = 0.2 + i
                np.testing.assert_allclose(np.asarray(compiled(x).data), [LR] * 3)
        assert record[0].filename == __file__
    finally:
        LR = 0.1


def test_the_shape_retrace_warning_points_at_the_callers_line() -> None:
    w = tg.ones((1,), requires_grad=True)

    @tg.jit
    def step(x: tg.Tensor) -> tg.Tensor:
        return _grad_of_scaled(w, x, 1.0)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for n in range(1, RETRACE_WARNING + 2):
            step(tg.ones((n,)))
    retraces = [r for r in record if issubclass(r.category, tg.RetraceWarning)]
    assert retraces
    assert all(r.filename == __file__ for r in retraces), [r.filename for r in retraces]


def test_a_module_instance_compiles_like_a_function() -> None:
    model = nn.Sequential(nn.Linear(4, 3, key=0), nn.Tanh(), nn.Linear(3, 2, key=1))
    x = tg.randn((5, 4), key=2)
    compiled = tg.jit(model)
    assert compiled.__name__ == "Sequential"
    np.testing.assert_allclose(
        np.asarray(compiled(x).data), np.asarray(model(x).data), rtol=1e-6, atol=1e-6
    )
    assert compiled.trace_count == 1


def test_a_tensor_argument_the_step_changes_in_place_is_written_back() -> None:
    w = tg.ones((3,), requires_grad=True)

    def step(x: tg.Tensor, total: tg.Tensor, seen: tg.Tensor) -> tg.Tensor:
        grad = _grad_of_scaled(w, x, 2.0)
        with tg.no_grad():
            total += grad  # a tensor that does not require grad: changed in place
        seen.data = seen.data + 1
        return grad

    compiled = tg.jit(step)
    x = tg.ones((3,))
    eager_total, eager_seen = tg.zeros((3,)), tg.zeros(())
    total, seen = tg.zeros((3,)), tg.zeros(())
    for _ in range(3):
        step(x, eager_total, eager_seen)
        compiled(x, total, seen)
    np.testing.assert_allclose(np.asarray(total.data), np.asarray(eager_total.data))
    np.testing.assert_allclose(np.asarray(seen.data), np.asarray(eager_seen.data))
    assert compiled.trace_count == 1


COUNTER = tg.zeros((3,))


def test_a_tensor_passed_twice_or_also_reached_as_state_is_one_tensor_inside() -> None:
    """``step(t, t)``, a module's buffer passed beside its module, a global passed as an
    argument: inside the compiled step each is the one tensor it is eagerly, so changes made
    through one name are read through the other and none is lost."""

    def twice(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
        with tg.no_grad():
            a += 1
            b += 10
        return a.sum()

    def buffer(mean: tg.Tensor, bn: nn.BatchNorm1d, x: tg.Tensor) -> tg.Tensor:
        y = bn(x)  # updates bn.running_mean
        with tg.no_grad():
            mean *= 2  # the same tensor
        return y.sum()

    def global_(a: tg.Tensor) -> tg.Tensor:
        with tg.no_grad():
            COUNTER.data = COUNTER.data + 1
            a += 10
        return (a + COUNTER).sum()

    x = tg.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    compiled_twice, compiled_buffer, compiled_global = map(tg.jit, (twice, buffer, global_))
    t_eager, t = tg.zeros((3,)), tg.zeros((3,))
    bn_eager, bn = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    for _ in range(3):
        assert twice(t_eager, t_eager).item() == compiled_twice(t, t).item()
        buffer(bn_eager.running_mean, bn_eager, x)
        compiled_buffer(bn.running_mean, bn, x)
    np.testing.assert_array_equal(np.asarray(t.data), [33.0] * 3)
    np.testing.assert_array_equal(np.asarray(t.data), np.asarray(t_eager.data))
    mean, eager_mean = np.asarray(bn.running_mean.data), np.asarray(bn_eager.running_mean.data)
    np.testing.assert_allclose(mean, eager_mean, rtol=1e-6)
    assert float(np.abs(mean).sum()) > 0
    assert compiled_global(COUNTER).item() == 66.0  # eagerly: (11 + 11) * 3
    np.testing.assert_array_equal(np.asarray(COUNTER.data), [11.0] * 3)
    other = tg.zeros((3,))
    assert compiled_twice(other, tg.zeros((3,))).item() == 3.0  # not aliased: the usual plan
    assert compiled_twice(other, other).item() == 36.0  # (1 + 1 + 10) * 3


def test_a_new_tensor_passed_twice_each_call_compiles_once() -> None:
    """``step(batch, batch)`` in a loop (an autoencoder's input and target): the repeated
    tensor is one traced argument, so fresh tensors every call reuse the computation."""

    def twice(a: tg.Tensor, b: tg.Tensor) -> tg.Tensor:
        with tg.no_grad():
            b += 1
        return (a * 2).sum()

    compiled = tg.jit(twice)
    for i in range(4):
        x = tg.full((3,), float(i))
        assert compiled(x, x).item() == 6.0 * (i + 1)
        np.testing.assert_array_equal(x.numpy(), [i + 1.0] * 3)
    assert compiled.trace_count == 1


def test_a_grad_changed_in_place_inside_the_step_is_written_back() -> None:
    """``p.grad *= 2`` (a hand-made gradient scaling) changes the ``.grad`` tensor in place:
    written back as eagerly; a ``.grad`` passed beside its parameter is refused (inside they
    would be two tensors)."""
    w = tg.ones(2).require_grad()
    w.grad = tg.full((2,), 3.0)

    def scale(w: tg.Tensor) -> tg.Tensor:
        with tg.no_grad():
            g = w.grad
            g *= 2
        return w.grad.sum()

    compiled = tg.jit(scale)
    assert [compiled(w).item() for _ in range(3)] == [12.0, 24.0, 48.0]
    np.testing.assert_array_equal(w.grad.numpy(), [24.0, 24.0])
    assert compiled.trace_count == 1
    with pytest.raises(tg.TracerError, match=r"w\.grad, which the step also reaches"):
        tg.jit(lambda g, w: (g * w).sum())(w.grad, w)


@pytest.mark.parametrize("change", ["dict", "list"])
def test_a_list_or_dict_argument_the_step_changes_is_a_tracer_error(change: str) -> None:
    def step(batch: dict[str, tg.Tensor], extra: list[tg.Tensor]) -> tg.Tensor:
        if change == "dict":
            batch["x"] = batch["x"] * 2
        else:
            extra.append(batch["x"])
        return batch["x"].sum()

    batch, extra = {"x": tg.ones((2,))}, [tg.ones((1,))]
    with pytest.raises(tg.TracerError, match=r"changed argument '(batch|extra)'.*Return"):
        tg.jit(step)(batch, extra)
    assert list(batch) == ["x"] and len(extra) == 1
    np.testing.assert_allclose(np.asarray(batch["x"].data), [1.0, 1.0])


MODEL = nn.Linear(3, 2, key=4)


class _Step:
    """A callable object as a step: the model it trains is a global its ``__call__`` reads."""

    def __init__(self) -> None:
        self.lr = 0.1

    def __call__(self, x: tg.Tensor) -> tg.Tensor:
        MODEL.zero_grad()
        loss = MODEL(x).sum()
        loss.backward()
        with tg.no_grad():
            for p in MODEL.parameters():
                assert p.grad is not None
                p -= self.lr * p.grad
        return loss


def test_a_callable_object_step_reaches_the_globals_of_its_call() -> None:
    x = tg.ones((4, 3))
    before = [np.asarray(p.data) for p in MODEL.parameters()]
    eager = [float(_Step()(x).item()) for _ in range(2)]
    after_eager = [np.asarray(p.data) for p in MODEL.parameters()]
    for p, v in zip(MODEL.parameters(), before, strict=True):
        p.data = tg.tensor(v).data
    compiled = tg.jit(_Step())
    got = [float(compiled(x).item()) for _ in range(2)]
    np.testing.assert_allclose(got, eager, rtol=1e-6)
    for p, v in zip(MODEL.parameters(), after_eager, strict=True):
        np.testing.assert_allclose(np.asarray(p.data), v, rtol=1e-6)


# ---------------------------------------------------------------- review: break-it, round 2

step = 0  # a script's loop variable, named like the optimizer's method the step calls


def test_a_global_named_like_an_attribute_the_step_reads_is_not_a_guard() -> None:
    """``opt.step()`` names the attribute ``step``, not the global: a script's ``for step in
    range(n)`` must not compile the step again every iteration."""
    global step
    model = nn.Linear(3, 2)
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    x = tg.ones((4, 3))

    @tg.jit
    def train_step(x: tg.Tensor) -> tg.Tensor:
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", tg.RetraceWarning)
            for step in range(1000, 1004):  # noqa: B007 - the global the test is about
                train_step(x)
        assert train_step.trace_count == 1
    finally:
        step = 0


def test_a_negative_zero_is_another_value() -> None:
    """``-0.0 == 0.0``, but the step computes with the sign (``1 / (x * -0.0)`` is ``-inf``)."""
    config = Config()
    config.scale = 0.0
    x = tg.ones((2,))

    def step(x: tg.Tensor) -> tg.Tensor:
        return 1.0 / (x * config.scale)

    compiled = tg.jit(step)
    for value in (0.0, -0.0, 0.0):
        config.scale = value
        np.testing.assert_array_equal(np.asarray(compiled(x).data), np.asarray(step(x).data))
    assert compiled.trace_count == 3  # one plan per argument structure: 0.0 compiles again


def test_a_nan_rebound_to_a_new_nan_compiles_once() -> None:
    config = Config()
    x = tg.ones((2,))
    compiled = tg.jit(lambda x: x * config.scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.RetraceWarning)
        for _ in range(RETRACE_WARNING + 2):
            config.scale = float("nan")  # a new object each time, never equal to itself
            assert np.isnan(np.asarray(compiled(x).data)).all()
    assert compiled.trace_count == 1
    config.scale = 2.0
    np.testing.assert_array_equal(np.asarray(compiled(x).data), [2.0, 2.0])


def test_a_numpy_scalar_is_compared_by_value() -> None:
    config = Config()
    x = tg.ones((2,))
    compiled = tg.jit(lambda x: x * config.scale)
    for value in (1.0, 1.0, 1.0, 3.0, 3.0):
        config.scale = np.float32(value)  # type: ignore[assignment]  # a new object each time
        np.testing.assert_array_equal(np.asarray(compiled(x).data), [value, value])
    assert compiled.trace_count == 2
    config.scale = np.float64(3.0)  # type: ignore[assignment]  # another type: another step
    compiled(x)
    assert compiled.trace_count == 3


def test_a_simple_namespace_configuration_is_guarded() -> None:
    """``types.SimpleNamespace`` and ``argparse.Namespace`` are the usual configuration
    objects of scripts: their numbers are read by the step like a user class's."""
    import argparse
    import types

    x = tg.ones((2,))
    for config in (types.SimpleNamespace(scale=1.0), argparse.Namespace(scale=1.0)):
        compiled = tg.jit(lambda x, config=config: x * config.scale)
        for value in (1.0, 2.0, 3.0):
            config.scale = value
            np.testing.assert_array_equal(np.asarray(compiled(x).data), [value, value])


class Settings:
    """A class used as a configuration namespace (its attributes are class attributes)."""

    scale = 1.0


def test_class_attributes_are_guarded() -> None:
    x = tg.ones((2,))
    instance = Settings()
    by_class = tg.jit(lambda x: x * Settings.scale)
    by_instance = tg.jit(lambda x: x * instance.scale)
    try:
        for value in (1.0, 2.0, 3.0):
            Settings.scale = value
            np.testing.assert_array_equal(np.asarray(by_class(x).data), [value, value])
            np.testing.assert_array_equal(np.asarray(by_instance(x).data), [value, value])
        assert by_class.trace_count == by_instance.trace_count == 3
    finally:
        Settings.scale = 1.0


# ------------------------------------------------------------------ objects and grad mode


def _train_step(model: nn.Module, opt: tg.optim.Optimizer, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
    opt.zero_grad()
    loss = tg.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _models(n: int) -> list[tuple[nn.Module, tg.optim.Optimizer]]:
    out = []
    for i in range(n):
        model = nn.Sequential(nn.Linear(8, 16, key=i), nn.Tanh(), nn.Linear(16, 4, key=10 + i))
        out.append((model, tg.optim.Adam(model.parameters(), lr=0.01)))
    return out


_X = tg.tensor(np.random.default_rng(0).normal(size=(16, 8)).astype(np.float32))
_Y = tg.tensor(np.arange(16) % 4)


def test_a_step_called_in_turn_with_several_models_compiles_once_for_each() -> None:
    """An ensemble (or folds, or two players) sharing one step: each (model, optimizer) keeps
    its plan, so going back to one compiles nothing, and each trains as eagerly."""
    compiled, eager = _models(3), _models(3)
    step = tg.jit(_train_step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RetraceWarning
        for _ in range(4):
            for (m, o), (em, eo) in zip(compiled, eager, strict=True):
                got = step(m, o, _X, _Y)
                want = _train_step(em, eo, _X, _Y)
                np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    assert step.trace_count == 3
    for (m, _), (em, _) in zip(compiled, eager, strict=True):
        for p, q in zip(m.parameters(), em.parameters(), strict=True):
            np.testing.assert_allclose(np.asarray(p), np.asarray(q), rtol=1e-4, atol=1e-6)


def test_a_step_keeps_no_model_or_optimizer_it_was_called_with_alive() -> None:
    """A loop making a new model (or a new optimizer for the same model) per trial: the
    step's plan for the previous ones lets them go at the next trial's first call, with no
    garbage collection (no reference cycle)."""
    import gc
    import weakref

    step = tg.jit(_train_step)
    gone = []
    gc.disable()
    try:
        for _ in range(3):
            ((model, opt),) = _models(1)
            step(model, opt, _X, _Y)
            gone.append((weakref.ref(model), weakref.ref(opt), weakref.ref(model[0].weight)))
            opt = tg.optim.SGD(model.parameters(), lr=0.1)  # a new optimizer, same model
            step(model, opt, _X, _Y)
        del model, opt
    finally:
        gc.enable()
    assert [r() is None for refs in gone[:-1] for r in refs] == [True] * 6
    assert gone[-1][0]() is not None  # the plan in use holds its objects, as before
    assert sum(map(len, step._plans.values())) == 1


def test_more_models_than_the_step_keeps_plans_for_warn() -> None:
    """Beyond the plans a step keeps, each call compiles again; the warning says so."""
    from tapegrad.jit import _PLANS_KEPT

    many = _models(_PLANS_KEPT + 1)
    step = tg.jit(_train_step)
    with pytest.warns(tg.RetraceWarning, match=f"last {_PLANS_KEPT}") as caught:
        for _ in range(RETRACE_WARNING // len(many) + 2):
            for m, o in many:
                step(m, o, _X, _Y)
    assert caught[0].filename == __file__


def test_a_step_defined_in_a_class_is_a_method() -> None:
    """``@tg.jit`` on a method binds the instance, as a function in a class body is bound;
    two trainers keep a plan each."""

    class Trainer:
        def __init__(self, seed: int) -> None:
            ((self.model, self.opt),) = _models(1) if seed == 0 else _models(2)[1:]

        @tg.jit
        def step(self, x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
            return _train_step(self.model, self.opt, x, y)

    a, b = Trainer(0), Trainer(1)
    ((em, eo),) = _models(1)
    for _ in range(3):
        np.testing.assert_allclose(a.step(_X, _Y).item(), _train_step(em, eo, _X, _Y).item())
        b.step(_X, _Y)
    assert isinstance(Trainer.step, tg.jit(_train_step).__class__)
    assert Trainer.step.trace_count == 2
    np.testing.assert_allclose(np.asarray(a.model[0].weight), np.asarray(em[0].weight), rtol=1e-5)


def test_the_callers_grad_mode_is_part_of_what_a_step_compiles_for() -> None:
    """Under no_grad the step runs as it would eagerly (a backward raises NoGradError); a
    step first called under no_grad (an evaluation) reads grad mode on again later."""
    ((model, opt),) = _models(1)
    step = tg.jit(_train_step)
    step(model, opt, _X, _Y)
    before = np.asarray(model[0].weight).copy()
    with tg.no_grad(), pytest.raises(tg.NoGradError):
        step(model, opt, _X, _Y)
    np.testing.assert_array_equal(np.asarray(model[0].weight), before)
    step(model, opt, _X, _Y)  # grad mode on again: the first plan, still valid
    assert step.trace_count == 1

    @tg.jit
    def mode() -> tg.Tensor:
        return tg.tensor(tg.is_grad_enabled())

    with tg.no_grad():
        assert not mode().item()
    assert mode().item()
    with tg.no_grad():
        assert not mode().item()
    assert mode.trace_count == 2


def test_a_model_dropped_while_the_step_runs_another_is_freed_with_its_state() -> None:
    """The plan of a model no longer in use holds it weakly; when the model goes, the plan
    lets go of its parameters and optimizer state at once (not at the next new plan), and a
    tensor argument's plan is not kept at all (it holds the tensor as its state)."""
    import gc
    import weakref

    (a, oa), (b, ob) = _models(2)
    step = tg.jit(_train_step)
    gc.disable()
    try:
        step(b, ob, _X, _Y)
        step(a, oa, _X, _Y)  # b's plan is demoted
        gone = [weakref.ref(x) for x in (b, ob, b[0].weight)]
        del b, ob
        assert [r() is None for r in gone] == [True] * 3
        step(a, oa, _X, _Y)

        @tg.jit
        def scale(w: tg.Tensor, x: tg.Tensor) -> tg.Tensor:
            return (w * x).sum()

        w1 = tg.ones((3,), requires_grad=True)
        scale(w1, tg.ones((3,)))
        dropped = weakref.ref(w1)
        scale(tg.ones((3,), requires_grad=True), tg.ones((3,)))  # w1's plan is not kept
        del w1
        assert dropped() is None
    finally:
        gc.enable()


def test_a_number_changed_on_a_model_not_in_use_is_named() -> None:
    """Two models in turn, a number of one changed before its call: the warning names the
    number (it said the model was another object each time)."""
    (a, oa), (b, ob) = _models(2)
    step = tg.jit(_train_step)
    with pytest.warns(tg.RetraceWarning, match="numbers it reads") as caught:
        for i in range(RETRACE_WARNING + 2):
            a[0].temperature = float(i)  # read by nothing but the walk: a number of a module
            step(a, oa, _X, _Y)
            step(b, ob, _X, _Y)
    assert all("another object" not in str(w.message) for w in caught)


def test_a_failed_plan_for_a_new_model_keeps_the_previous_one() -> None:
    """A new model whose state cannot be walked raises; going back to the model before
    compiles nothing (its plan was left demoted and unreachable)."""
    (a, oa), (b, ob) = _models(2)
    step = tg.jit(_train_step)
    step(a, oa, _X, _Y)

    class Broken(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = b

        def forward(self, x: tg.Tensor) -> tg.Tensor:
            return self.inner(x)

        def __getattribute__(self, name: str) -> Any:
            if name == "__dict__" and _walking[0]:
                raise RuntimeError("cannot walk")
            return super().__getattribute__(name)

    _walking = [False]
    broken = Broken()
    _walking[0] = True
    with pytest.raises(RuntimeError, match="cannot walk"):
        step(broken, ob, _X, _Y)
    _walking[0] = False
    step(a, oa, _X, _Y)
    assert step.trace_count == 1


@pytest.mark.parametrize("kind", [staticmethod, classmethod])
def test_jit_below_staticmethod_or_classmethod_says_to_swap_them(kind: Any) -> None:
    message = str(pytest.raises(TypeError, tg.jit, kind(lambda *a: None)).value)
    assert f"put @{kind.__name__} above @tg.jit" in message, message
