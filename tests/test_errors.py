"""The error catalogue (docs/api.md "Errors"): each error has the built-in type docs/api.md promises
(checked by tapegrad, not left to JAX), a message that says what to do, and leaves the tape
consistent: stats unchanged, a later backward and a cleanup still work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import M, X, error_of

import tapegrad as tg

Trigger = Callable[[tg.Tensor, tg.Tensor], Any]


def consumed_root(w: tg.Tensor, m: tg.Tensor) -> None:
    y = (w * 2.0).sum()
    y.backward()
    (y * 3.0).backward()


def consumed_create_graph(w: tg.Tensor, m: tg.Tensor) -> None:
    (g,) = tg.grad(w.exp().sum(), w, create_graph=True, retain_graph=False)
    g.sum().backward()  # vjp(exp) reads exp's output: it reaches the consumed exp node


def in_place(w: tg.Tensor, m: tg.Tensor) -> None:
    w += 1.0


def set_attr(name: str, value: Any) -> Trigger:
    return lambda w, m: setattr(w, name, value)


# (id, trigger(w, m), built-in type, fragments of the message: what happened / what to do)
CATALOGUE: list[tuple[str, Trigger, type[BaseException], tuple[str, ...]]] = [
    # backward and grad
    ("backward-no-grad", lambda w, m: tg.ones(3).sum().backward(), RuntimeError, ("require_grad",)),
    ("backward-multi", lambda w, m: (w * 2.0).backward(), RuntimeError, ("grad=", ".sum()")),
    ("backward-consumed", consumed_root, RuntimeError, ("retain_graph", ".item()", ".detach()")),
    ("grad-shape", lambda w, m: (w * 2.0).backward(np.ones(4)), ValueError, ("own shape",)),
    ("create-graph-consumed", consumed_create_graph, RuntimeError, ("retain_graph", "'exp'")),
    ("grad-input", lambda w, m: tg.grad(w.sum(), tg.ones(3)), TypeError, (".require_grad()",)),
    ("grad-output", lambda w, m: tg.grad(tg.ones(3).sum(), w), RuntimeError, ("require_grad",)),
    ("retain-grad", lambda w, m: tg.ones(3).retain_grad(), RuntimeError, ("require_grad()",)),
    ("grad-input-str", lambda w, m: tg.grad(w.sum(), "w"), TypeError, ("is a str, not a Tensor",)),
    (
        "retain-graph-str",
        lambda w, m: (w * 2.0).sum().backward(retain_graph="no"),
        TypeError,
        ("retain_graph must be True or False", "'no'"),
    ),
    (
        "create-graph-float",
        lambda w, m: tg.grad((w * 2.0).sum(), w, create_graph=2.0),
        TypeError,
        ("create_graph must be True or False",),
    ),
    # shape mismatches: ValueError even where JAX raises TypeError
    ("add-bcast", lambda w, m: w + tg.ones(4), ValueError, ("broadcast", "reshape")),
    ("mul-bcast", lambda w, m: m * tg.ones((3, 2)), ValueError, ("broadcast", "reshape")),
    ("pow-bcast", lambda w, m: w ** jnp.ones(2), ValueError, ("broadcast",)),
    ("sub-bcast-left", lambda w, m: np.ones(2, np.float32) - w, ValueError, ("broadcast",)),
    ("maximum-bcast", lambda w, m: tg.maximum(m, tg.ones(2)), ValueError, ("broadcast",)),
    ("where-bcast", lambda w, m: tg.where(w > 0, m, tg.ones(2)), ValueError, ("broadcast",)),
    ("mse-bcast", lambda w, m: tg.mse_loss(w, tg.ones(2)), ValueError, ("broadcast",)),
    ("matmul-inner", lambda w, m: m @ m, ValueError, ("do not align", "must equal")),
    ("matmul-vector", lambda w, m: w @ tg.ones(4), ValueError, ("align",)),
    ("matmul-0d", lambda w, m: m @ tg.tensor(2.0), ValueError, ("at least 1-D",)),
    ("matmul-batch", lambda w, m: tg.ones((2, 2, 3)) @ tg.ones((3, 3, 1)), ValueError, ("batch",)),
    ("reshape-size", lambda w, m: m.reshape(4), ValueError, ("sizes must match",)),
    ("reshape-two-minus-one", lambda w, m: m.reshape(-1, -1), ValueError, ("at most one -1",)),
    ("sum-axis", lambda w, m: m.sum(axis=2), ValueError, ("use an axis in",)),
    ("mean-axis-repeat", lambda w, m: m.mean(axis=(0, -2)), ValueError, ("list each axis once",)),
    ("squeeze", lambda w, m: m.squeeze(0), ValueError, ("length one",)),
    ("transpose", lambda w, m: m.permute(0, 0), ValueError, ("permutation",)),
    ("concatenate", lambda w, m: tg.concatenate([m, w]), ValueError, ("must match",)),
    ("stack", lambda w, m: tg.stack([w, tg.ones(4)]), ValueError, ("must be equal",)),
    ("expand-dims", lambda w, m: tg.expand_dims(w, 5), ValueError, ("out of range",)),
    ("ce-labels-shape", lambda w, m: tg.cross_entropy(m, tg.tensor([0])), ValueError, ("labels",)),
    (
        "ce-labels-range",
        lambda w, m: tg.cross_entropy(m, [0, 3]),
        ValueError,
        ("[0, 3)",),
    ),
    ("ce-labels-float", lambda w, m: tg.cross_entropy(m, tg.ones(2)), TypeError, ("integer",)),
    # types
    ("require-int", lambda w, m: tg.tensor([1, 2]).require_grad(), TypeError, ("astype",)),
    ("require-bool", lambda w, m: tg.tensor([True]).requires_grad_(), TypeError, ("astype",)),
    ("tensor-int-grad", lambda w, m: tg.tensor([1], requires_grad=True), TypeError, ("astype",)),
    ("operand-str", lambda w, m: w + "a", TypeError, ()),
    ("operand-list", lambda w, m: w + [1, 2], TypeError, ()),
    ("operand-none", lambda w, m: w * None, TypeError, ()),
    ("operand-dict-left", lambda w, m: {} @ w, TypeError, ()),
    ("arity", lambda w, m: tg.exp(w, w), TypeError, ("by keyword",)),
    ("index-float", lambda w, m: w[np.array([0.5])], TypeError, ("astype",)),
    ("index-range", lambda w, m: m[2], IndexError, ()),
    ("data-shape", set_attr("data", jnp.ones(4)), ValueError, ("new tensor",)),
    ("data-dtype", set_attr("data", jnp.ones(3, jnp.int32)), TypeError, ("astype",)),
    ("grad-attr-shape", set_attr("grad", tg.ones(4)), ValueError, ("shape",)),
    ("item-multi", lambda w, m: w.item(), ValueError, (".sum()", ".tolist()")),
    ("format-multi", lambda w, m: f"{w:.3f}", TypeError, ("Tensor.__format__", "tolist()")),
    ("bool-multi", lambda w, m: bool(w), ValueError, ("reduce it",)),
    ("randn-key", lambda w, m: tg.randn(3, key=1.5), TypeError, ("key=0",)),
    ("grad-mode-flag", lambda w, m: tg.set_grad_enabled("yes"), TypeError, ("bool",)),
    # state
    ("in-place", in_place, RuntimeError, ("tg.no_grad()",)),
    (
        "tracer",
        lambda w, m: jax.jit(lambda a: (w * a).data)(X),
        RuntimeError,
        ("tracer", "no_grad"),
    ),
]


@pytest.mark.parametrize(
    ("trigger", "exc_type", "fragments"),
    [pytest.param(t, e, f, id=i) for i, t, e, f in CATALOGUE],
)
def test_error_type_message_and_tape_afterwards(
    trigger: Trigger, exc_type: type[BaseException], fragments: tuple[str, ...]
) -> None:
    w = tg.tensor(X).require_grad()
    m = tg.tensor(M).require_grad()
    stats = tg.graph_stats()
    err = error_of(exc_type, trigger, w, m)
    msg = str(err)
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    # tapegrad raised it, not JAX (whose shape errors are TypeErrors)
    assert type(err).__module__.split(".")[0] in ("tapegrad", "builtins")
    # the tape is consistent: whatever the failed call left is hanging or live, never broken
    after = tg.graph_stats()
    assert after.leaves == stats.leaves
    tg.graph_cleanup()
    assert tg.graph_stats().nodes == stats.nodes
    assert w.tolist() == X.tolist() and w.requires_grad and w.is_leaf
    w.grad = None
    ((w * 2.0).sum() + (m * m).sum()).backward()
    assert w.grad is not None and w.grad.tolist() == [2.0, 2.0, 2.0]
    assert m.grad is not None
    np.testing.assert_allclose(m.grad.numpy(), 2 * M)


def test_failed_op_records_nothing() -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    for bad in (lambda: w + tg.ones(4), lambda: w @ tg.ones(4), lambda: w.reshape(2, 2)):
        error_of(ValueError, bad)
        assert tg.graph_stats() == stats


@pytest.mark.parametrize(
    "bad",
    [
        lambda w: tg.sum(w, dim=0),
        lambda w: tg.scaled_dot_product_attention(w, w, w, attn_mask=None),
        lambda w: w + tg.ones(4),
        lambda w: -(w > 0),
    ],
    ids=["torch_keyword", "torch_keyword_of_a_function", "shape", "refused_dtype"],
)
def test_failed_op_frees_its_inputs_without_the_collector(bad: Callable[[tg.Tensor], Any]) -> None:
    """The error an op raises in place of JAX's holds no reference cycle (an exception kept
    in a local of the frame its traceback holds), so the inputs die with the last reference
    to them, not at the next collection: a dropped leaf is not alive meanwhile."""
    import gc
    import weakref

    def run() -> weakref.ref[tg.Tensor]:
        w = tg.tensor(X).require_grad()
        try:
            bad(w)
        except (TypeError, ValueError):
            pass
        else:
            raise AssertionError("no error")
        return weakref.ref(w)

    enabled = gc.isenabled()
    gc.disable()
    try:
        assert run()() is None
    finally:
        if enabled:
            gc.enable()


def test_shape_errors_are_tapegrad_value_errors_where_jax_raises_type_error() -> None:
    for bad in (  # what JAX itself raises for these
        lambda: jnp.ones(3) + jnp.ones(4),
        lambda: jnp.ones((2, 3)) @ jnp.ones((2, 3)),
        lambda: jnp.ones((2, 3)).reshape(4),
    ):
        assert not isinstance(error_of(TypeError, bad), ValueError)
    for bad in (
        lambda: tg.ones(3) + tg.ones(4),
        lambda: tg.ones((2, 3)) @ tg.ones((2, 3)),
        lambda: tg.ones((2, 3)).reshape(4),
    ):
        err = error_of(ValueError, bad)
        assert isinstance(err, tg.ShapeError) and not isinstance(err, TypeError)


def test_project_exceptions_subclass_the_promised_built_ins() -> None:
    promised = {
        tg.GraphConsumedError: RuntimeError,
        tg.NonScalarBackwardError: RuntimeError,
        tg.NoGradError: RuntimeError,
        tg.TracerError: RuntimeError,
        tg.InPlaceError: RuntimeError,
        tg.ShapeError: ValueError,
        tg.VJPShapeError: RuntimeError,
        tg.DuplicateOpError: ValueError,
        tg.MissingVJPError: NotImplementedError,
    }
    for cls, base in promised.items():
        assert issubclass(cls, base), cls


@pytest.mark.parametrize(
    "trigger",
    [lambda t: t + "a", lambda t: t + [1, 2], lambda t: t * None],
    ids=["str", "list", "none"],
)
def test_unsupported_operand_message_says_what_to_do(trigger: Callable[[tg.Tensor], Any]) -> None:
    err = error_of(TypeError, trigger, tg.tensor(X))
    assert "tg.tensor" in str(err) or "Tensor, a jax.Array" in str(err)


@pytest.mark.parametrize(
    "call",
    [
        lambda: tg.nn.Linear(3, 2)([[1.0, 2.0, 3.0]]),
        lambda: tg.linear([[1.0, 2.0, 3.0]], tg.ones((2, 3))),
        lambda: tg.nn.Conv2d(1, 1, 3)([[[[0.0] * 4] * 4]]),
        lambda: tg.nn.LayerNorm(3)([1.0, 2.0, 3.0]),
        lambda: tg.nn.MaxPool2d(2)([[[[0.0] * 4] * 4]]),
        lambda: tg.scaled_dot_product_attention(
            [[[[1.0]]]], tg.ones((1, 1, 1, 1)), tg.ones((1, 1, 1, 1))
        ),
    ],
)
def test_a_list_given_to_a_layer_is_a_type_error_saying_to_convert_it(call: Any) -> None:
    with pytest.raises(
        TypeError, match=r"unsupported operand type list.*convert lists with tg.tensor"
    ):
        call()
