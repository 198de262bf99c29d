"""Random programs against jax.grad of their jnp twins, plus VJP linearity and accumulation.

Hypothesis draws a program: a few inputs from a fixed pool of small shapes, then a sequence of
steps, each applying an op to earlier values (any earlier value, so intermediate values are
reused: fan-out) with broadcasting where the op allows it. One interpreter runs the program on
tapegrad tensors, another on jax arrays; ``check_program`` compares outputs and gradients.

Steps keep values moderate (a magnitude bound is tracked per value; a step that could exceed
it is replaced by ``tanh``) and keep ops in their domains (``log(x*x + 1)``, ``a / (b*b + 1)``),
so float32 comparisons stay meaningful. Input values come from a seeded NumPy generator:
Hypothesis explores program structure; exact ties and zeros are the edge-case tests' job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad.testing import check_program

Shape = tuple[int, ...]

INPUT_SHAPES: tuple[Shape, ...] = ((3,), (2, 3))  # others arise: (), (2, 1), (3, 2), ...
LIMIT = 1e3  # largest magnitude a value may reach

# The "ci" profile must run at least 200 programs a run; "dev" runs its usual count.
PROGRAMS = 200 if settings.get_current_profile_name() == "ci" else settings.default.max_examples


@dataclass(frozen=True)
class Kind:
    """One kind of step: which operands fit, the result's magnitude bound, both twins.

    Attributes:
        name: the step's name (for reports).
        operands: 1 or 2.
        fits: ``(shape_a, shape_b) -> bool`` (``shape_b`` is ``None`` for unary steps).
        bound: ``(bound_a, bound_b, shape_a, shape_b) -> float``, a magnitude bound.
        tg: the step on tapegrad tensors (``*values, **params``).
        jnp: the step on jax arrays.
        params: ``shape_a -> strategy of params``.
    """

    name: str
    operands: int
    fits: Callable[[Shape, Shape | None], bool]
    bound: Callable[[float, float, Shape, Shape | None], float]
    tg: Callable[..., Any]
    jnp: Callable[..., Any]
    params: Callable[[Shape], st.SearchStrategy[dict[str, Any]]] = lambda s: st.just({})


def _size(shape: Shape | None) -> int:
    return int(np.prod(shape)) if shape else 1


def _broadcastable(a: Shape, b: Shape | None) -> bool:
    try:
        np.broadcast_shapes(a, b or ())
    except ValueError:
        return False
    return True


def _matmul_fits(a: Shape, b: Shape | None) -> bool:
    return bool(a) and bool(b) and a[-1] == b[0 if len(b) == 1 else -2]  # type: ignore[index]


def _axis_params(shape: Shape) -> st.SearchStrategy[dict[str, Any]]:
    # A few axes only: each (op, shape, axis, keepdims) compiles; test_grads covers the grid.
    axes: list[Any] = [None, 0, -1] if shape else [None]
    return st.fixed_dictionaries({"axis": st.sampled_from(axes), "keepdims": st.booleans()})


def _mask(shape: Shape) -> np.ndarray:
    return (np.arange(_size(shape)) % 2 == 0).reshape(shape)


def _labels(shape: Shape) -> np.ndarray:
    return (np.arange(_size(shape[:-1])) % shape[-1]).reshape(shape[:-1]).astype(np.int32)


ANY: Callable[[Shape, Shape | None], bool] = lambda a, b: True  # noqa: E731
ND1: Callable[[Shape, Shape | None], bool] = lambda a, b: len(a) >= 1  # noqa: E731
ND2: Callable[[Shape, Shape | None], bool] = lambda a, b: len(a) >= 2  # noqa: E731
ONE: Callable[[float, float, Shape, Shape | None], float] = lambda a, b, s, t: 1.0  # noqa: E731
SAME: Callable[[float, float, Shape, Shape | None], float] = lambda a, b, s, t: a  # noqa: E731

KINDS: tuple[Kind, ...] = (
    # unary, elementwise
    Kind("tanh", 1, ANY, ONE, tg.tanh, jnp.tanh),
    Kind("sigmoid", 1, ANY, ONE, tg.sigmoid, jax.nn.sigmoid),
    Kind("sin", 1, ANY, ONE, tg.sin, jnp.sin),
    Kind("cos", 1, ANY, ONE, tg.cos, jnp.cos),
    Kind("relu", 1, ANY, SAME, tg.relu, jax.nn.relu),
    Kind("abs", 1, ANY, SAME, tg.abs, jnp.abs),
    Kind("exp", 1, ANY, lambda a, b, s, t: float(np.exp(min(a, 50.0))), lambda x: x.exp(), jnp.exp),
    Kind(
        "log1p_sq",
        1,
        ANY,
        lambda a, b, s, t: float(np.log1p(a * a)),
        lambda x: (x * x + 1.0).log(),
        lambda x: jnp.log(x * x + 1.0),
    ),
    Kind(
        "sqrt1p_sq",
        1,
        ANY,
        lambda a, b, s, t: float(np.sqrt(a * a + 1)),
        lambda x: (x * x + 1.0).sqrt(),
        lambda x: jnp.sqrt(x * x + 1.0),
    ),
    Kind("cube", 1, ANY, lambda a, b, s, t: a**3, lambda x: x**3, lambda x: x**3),
    Kind(
        "neg_scale",
        1,
        ANY,
        lambda a, b, s, t: 1.5 + a / 2,
        lambda x: 1.5 - x * 0.5,
        lambda x: 1.5 - x * 0.5,
    ),
    Kind(
        "clip",
        1,
        ANY,
        lambda a, b, s, t: min(a, 0.5),
        lambda x: x.clip(-0.5, 0.5),
        lambda x: jnp.clip(x, -0.5, 0.5),
    ),
    Kind(
        "softmax",
        1,
        ND1,
        ONE,
        lambda x: tg.softmax(x, axis=-1),
        lambda x: jax.nn.softmax(x, axis=-1),
    ),
    Kind(
        "log_softmax",
        1,
        ND1,
        lambda a, b, s, t: 2 * a + float(np.log(s[-1])),
        lambda x: tg.log_softmax(x, axis=0),
        lambda x: jax.nn.log_softmax(x, axis=0),
    ),
    # binary, broadcasting
    Kind(
        "add", 2, _broadcastable, lambda a, b, s, t: a + b, lambda x, y: x + y, lambda x, y: x + y
    ),
    Kind(
        "subtract",
        2,
        _broadcastable,
        lambda a, b, s, t: a + b,
        lambda x, y: x - y,
        lambda x, y: x - y,
    ),
    Kind(
        "multiply",
        2,
        _broadcastable,
        lambda a, b, s, t: a * b,
        lambda x, y: x * y,
        lambda x, y: x * y,
    ),
    Kind(
        "divide",
        2,
        _broadcastable,
        SAME,
        lambda x, y: x / (y * y + 1.0),
        lambda x, y: x / (y * y + 1.0),
    ),
    Kind("maximum", 2, _broadcastable, lambda a, b, s, t: max(a, b), tg.maximum, jnp.maximum),
    Kind("minimum", 2, _broadcastable, lambda a, b, s, t: max(a, b), tg.minimum, jnp.minimum),
    Kind(
        "where",
        2,
        _broadcastable,
        lambda a, b, s, t: max(a, b),
        lambda x, y: tg.where(x > y, x * 2.0, y),
        lambda x, y: jnp.where(x > y, x * 2.0, y),
    ),
    Kind(
        "mse_loss",
        2,
        _broadcastable,
        lambda a, b, s, t: (a + b) ** 2,
        tg.registry()["mse_loss"],  # the op: broadcasting on purpose, without the warning
        lambda x, y: jnp.mean((x - y) ** 2),
    ),
    Kind("matmul", 2, _matmul_fits, lambda a, b, s, t: a * b * s[-1], tg.matmul, jnp.matmul),
    # reductions
    *(
        Kind(name, 1, ANY, bound, getattr(tg.Tensor, name), getattr(jnp, name), _axis_params)
        for name, bound in (
            ("sum", lambda a, b, s, t: a * _size(s)),
            ("mean", SAME),
            ("max", SAME),
            ("min", SAME),
        )
    ),
    # shape
    Kind("T", 1, ND2, SAME, lambda x: x.T, lambda x: x.T),
    Kind("flatten", 1, ANY, SAME, lambda x: x.reshape(-1), lambda x: x.reshape(-1)),
    Kind(
        "expand_dims", 1, ANY, SAME, lambda x: tg.expand_dims(x, 0), lambda x: jnp.expand_dims(x, 0)
    ),
    Kind("squeeze", 1, lambda a, b: 1 in a, SAME, lambda x: x.squeeze(), jnp.squeeze),
    Kind(
        "concatenate",
        2,
        lambda a, b: len(a) >= 1 and a == b,
        lambda a, b, s, t: max(a, b),
        lambda x, y: tg.concatenate([x, y], axis=-1),
        lambda x, y: jnp.concatenate([x, y], axis=-1),
    ),
    Kind(
        "stack",
        2,
        lambda a, b: a == b,
        lambda a, b, s, t: max(a, b),
        lambda x, y: tg.stack([x, y], axis=0),
        lambda x, y: jnp.stack([x, y], axis=0),
    ),
    # indexing
    Kind("first", 1, ND1, SAME, lambda x: x[0], lambda x: x[0]),
    Kind("reverse_last", 1, ND1, SAME, lambda x: x[..., ::-1], lambda x: x[..., ::-1]),
    Kind(
        "gather_repeats", 1, ND1, SAME, lambda x: x[[0, 0, -1]], lambda x: x[jnp.array([0, 0, -1])]
    ),
    Kind("mask", 1, ND1, SAME, lambda x: x[_mask(x.shape)], lambda x: x[_mask(x.shape)]),
    # loss
    Kind(
        "cross_entropy",
        1,
        ND1,
        lambda a, b, s, t: 2 * a + float(np.log(s[-1])),
        lambda x: tg.cross_entropy(x, _labels(x.shape)),
        lambda x: optax.softmax_cross_entropy_with_integer_labels(x, _labels(x.shape)).mean(),
    ),
)
BY_NAME = {k.name: k for k in KINDS}


@dataclass(frozen=True)
class Step:
    """Apply ``kind`` to the values at ``args`` with ``params``."""

    kind: str
    args: tuple[int, ...]
    params: tuple[tuple[str, Any], ...]

    def __repr__(self) -> str:
        params = "".join(f", {k}={v!r}" for k, v in self.params)
        return f"{self.kind}({', '.join(f'v{i}' for i in self.args)}{params})"


@dataclass(frozen=True)
class Program:
    """Inputs (shapes and a value seed) and the steps; the output is the last value plus the
    means of the other unused step values."""

    shapes: tuple[Shape, ...]
    seed: int
    steps: tuple[Step, ...]

    def inputs(self) -> list[np.ndarray]:
        """The input arrays, float32 in [-2, 2]."""
        rng = np.random.default_rng(self.seed)
        return [rng.uniform(-2.0, 2.0, s).astype(np.float32) for s in self.shapes]

    def run(self, use: str) -> Callable[..., Any]:
        """The program as a function of its inputs: ``use`` is ``"tg"`` or ``"jnp"``."""

        def fn(*xs: Any) -> Any:
            values = list(xs)
            for step in self.steps:
                impl = getattr(BY_NAME[step.kind], use)
                values.append(impl(*(values[i] for i in step.args), **dict(step.params)))
            out = values[-1]
            for i in self.sinks():
                out = out + values[i].mean()
            return out

        fn.__name__ = f"program_{use}"
        return fn

    def sinks(self) -> list[int]:
        """Steps other than the last whose values no later step uses; the output adds their
        means, so every step contributes to the gradient."""
        used = {i for step in self.steps for i in step.args}
        n = len(self.shapes)
        return [n + k for k in range(len(self.steps) - 1) if n + k not in used]

    def __repr__(self) -> str:
        lines = [f"inputs {self.shapes} seed {self.seed}"]
        n = len(self.shapes)
        lines += [f"v{n + i} = {step!r}" for i, step in enumerate(self.steps)]
        lines.append(
            f"out = v{n + len(self.steps) - 1}" + "".join(f" + mean(v{i})" for i in self.sinks())
        )
        return "\n".join(lines)


@st.composite
def programs(draw: st.DrawFn, max_steps: int = 6) -> Program:
    """A random program over ``INPUT_SHAPES`` with 1-3 inputs and 1-``max_steps`` steps."""
    shapes = tuple(
        draw(st.lists(st.sampled_from(INPUT_SHAPES), min_size=1, max_size=3), label="shapes")
    )
    seed = draw(st.integers(0, 2**16), label="seed")
    values: list[tuple[Shape, float]] = [(s, 2.0) for s in shapes]
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, max_steps), label="steps")):
        i = draw(st.integers(0, len(values) - 1))
        shape, bound = values[i]
        options = []
        for kind in KINDS:
            if kind.operands == 1:
                if kind.fits(shape, None):
                    options.append((kind, None))
            else:
                partners = [j for j, (s, _) in enumerate(values) if kind.fits(shape, s)]
                if partners:
                    options.append((kind, partners))
        kind, partners = draw(st.sampled_from(options))
        args = (i,) if partners is None else (i, draw(st.sampled_from(partners)))
        params = draw(kind.params(shape))
        other = values[args[-1]]
        new_bound = kind.bound(bound, other[1], shape, other[0])
        if not new_bound <= LIMIT:
            kind, args, params, new_bound = BY_NAME["tanh"], (i,), {}, 1.0
        structs = [jax.ShapeDtypeStruct(values[j][0], jnp.float32) for j in args]
        out = jax.eval_shape(lambda *xs, k=kind, p=params: k.jnp(*xs, **p), *structs)
        values.append((tuple(out.shape), new_bound))
        steps.append(Step(kind.name, args, tuple(params.items())))
    return Program(shapes, seed, tuple(steps))


@settings(max_examples=PROGRAMS)
@given(program=programs())
def test_random_program_gradients_match_jax(program: Program) -> None:
    check_program(
        program.run("tg"),
        program.run("jnp"),
        *program.inputs(),
        rtol=1e-4,
        atol=1e-4,
        seed=program.seed,
        jit=False,  # programs share primitives and shapes: eager compiles amortize
    )


def _grads(program: Program, cotangents: list[jax.Array]) -> list[list[np.ndarray]]:
    """Gradients of the program's inputs for each cotangent, on one retained graph."""
    xs = [tg.tensor(a, requires_grad=True) for a in program.inputs()]
    out = program.run("tg")(*xs)
    results = []
    for k, v in enumerate(cotangents):
        last = k == len(cotangents) - 1
        gs = tg.grad(out, xs, grad_outputs=v, retain_graph=not last)
        results.append([np.asarray(g.data, np.float64) for g in gs])
    return results


@settings(max_examples=max(5, PROGRAMS // 10))
@given(program=programs(max_steps=4), alpha=st.floats(-2, 2), beta=st.floats(-2, 2))
def test_vjp_is_linear_in_the_cotangent(program: Program, alpha: float, beta: float) -> None:
    """grad(alpha*g1 + beta*g2) == alpha*grad(g1) + beta*grad(g2), on one retained graph."""
    out_shape = jax.eval_shape(program.run("jnp"), *program.inputs()).shape
    rng = np.random.default_rng(program.seed)
    g1, g2 = (jnp.asarray(rng.standard_normal(out_shape), jnp.float32) for _ in range(2))
    r1, r2, r12 = _grads(program, [g1, g2, alpha * g1 + beta * g2])
    for a, b, c in zip(r1, r2, r12, strict=True):
        scale = 1.0 + np.abs(alpha * a).max(initial=0) + np.abs(beta * b).max(initial=0)
        np.testing.assert_allclose(c, alpha * a + beta * b, rtol=1e-4, atol=1e-5 * scale)


@settings(max_examples=max(5, PROGRAMS // 10))
@given(program=programs(max_steps=4))
def test_two_retained_backward_passes_accumulate_twice_the_gradient(program: Program) -> None:
    xs = [tg.tensor(a, requires_grad=True) for a in program.inputs()]
    out = program.run("tg")(*xs)
    v = jnp.ones(out.shape, out.dtype)
    out.backward(v, retain_graph=True)
    once = [None if x.grad is None else np.asarray(x.grad.data) for x in xs]
    out.backward(v)
    for x, g in zip(xs, once, strict=True):
        if g is None:  # the output does not depend on this input: no gradient written
            assert x.grad is None
        else:
            assert x.grad is not None
            np.testing.assert_array_equal(np.asarray(x.grad.data), 2 * g)
