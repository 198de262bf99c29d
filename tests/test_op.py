"""defop mechanics (docs/style.md "The op-definition pattern"): registration, duplicate names, the
read-only registry, missing VJPs, arity, ``needs`` and static parameters. Throwaway ops are
built as ``Op`` directly so the built-in registry (checked by the spec-coverage test) stays
exact."""

from __future__ import annotations

import inspect
import re
from types import MappingProxyType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _support import X

import tapegrad as tg
from tapegrad.op import Op, defop, registry


def scale(a: jax.Array, b: jax.Array, *, k: float = 1.0) -> tuple[jax.Array, tuple[Any, ...]]:
    """a * b * k (a throwaway forward)."""
    return a * b * k, (a, b)


def test_registry_is_read_only_and_holds_the_built_in_ops() -> None:
    reg = registry()
    assert isinstance(reg, MappingProxyType)
    with pytest.raises(TypeError):
        reg["mine"] = Op(scale, name="mine")  # type: ignore[index]
    with pytest.raises(TypeError):
        del reg["exp"]  # type: ignore[attr-defined]
    assert "mine" not in registry()
    assert reg["exp"] is tg.exp
    assert reg["matmul"] is tg.matmul
    for name, op in reg.items():
        assert isinstance(op, Op) and op.name == name


def test_duplicate_built_in_name_raises_before_registering() -> None:
    before = dict(registry())
    with pytest.raises(tg.DuplicateOpError, match="'exp' is already registered") as info:
        defop(scale, name="exp")
    assert isinstance(info.value, ValueError)
    del info
    with pytest.raises(tg.DuplicateOpError):

        @defop
        def multiply(a: jax.Array, b: jax.Array) -> tuple[jax.Array, tuple[()]]:
            return a * b, ()

    assert dict(registry()) == before
    assert registry()["exp"] is tg.exp


def test_op_built_directly_never_enters_the_registry() -> None:
    before = set(registry())
    op = Op(scale, name="throwaway_scale")
    assert set(registry()) == before
    assert op.name == "throwaway_scale"
    assert op.__name__ == "scale" and op.__doc__ == scale.__doc__  # update_wrapper
    assert repr(op) == "<tapegrad op throwaway_scale>"
    assert op.arity == 2


def test_missing_vjp_raises_at_record_time_and_records_nothing() -> None:
    op = Op(scale, name="no_vjp")
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    with pytest.raises(tg.MissingVJPError, match="'no_vjp'") as info:
        op(w, 2.0)
    assert isinstance(info.value, NotImplementedError)
    assert "defvjp" in str(info.value)
    del info
    assert tg.graph_stats() == stats
    # nothing would be recorded, so no VJP is needed: inputs without grad, or no_grad
    assert op(tg.tensor(X), 2.0).tolist() == (X * 2.0).tolist()
    with tg.no_grad():
        assert op(w, 2.0).requires_grad is False


def test_non_differentiable_op_is_never_recorded() -> None:
    op = Op(lambda a: (a > 0, ()), name="positive", differentiable=False)
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    y = op(w)
    assert y.requires_grad is False
    assert y.tolist() == [True, False, True]
    assert tg.graph_stats() == stats


def test_vjp_receives_needs_and_params() -> None:
    calls: list[tuple[tuple[bool, ...], dict[str, Any]]] = []
    op = Op(scale, name="spy_scale")

    @op.defvjp
    def _vjp(res: Any, g: jax.Array, needs: tuple[bool, ...], *, k: float = 1.0) -> Any:
        calls.append((needs, {"k": k}))
        a, b = res
        return (g * b * k if needs[0] else None, g * a * k if needs[1] else None)

    assert _vjp is not None  # defvjp returns the rule unchanged (usable as a decorator)
    w = tg.tensor(X).require_grad()
    c = tg.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    op(w, c, k=3.0).sum().backward()
    op(c, w, k=0.5).sum().backward()
    op(w, 2.0).sum().backward()
    # the third call passed no k: the rule's own default applies
    assert calls == [
        ((True, False), {"k": 3.0}),
        ((False, True), {"k": 0.5}),
        ((True, False), {"k": 1.0}),
    ]
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), c.numpy() * 3.0 + c.numpy() * 0.5 + 2.0)


def test_vjp_without_needs_in_its_signature() -> None:
    op = Op(lambda a: (jnp.sin(a), (a,)), name="my_sin")
    op.defvjp(lambda res, g: (g * jnp.cos(res[0]),))
    w = tg.tensor(X).require_grad()
    op(w).sum().backward()
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), np.cos(X), rtol=1e-6)


def test_cotangents_in_the_output_broadcast_shape_are_summed_by_the_engine() -> None:
    op = Op(scale, name="bcast_scale")
    op.defvjp(lambda res, g: (g * res[1], g * res[0]))  # both in the (2, 3) output shape
    a = tg.tensor(X).require_grad()  # (3,)
    b = tg.tensor(np.array([[1.0], [2.0]], np.float32)).require_grad()  # (2, 1)
    op(a, b).sum().backward()
    assert a.grad is not None and b.grad is not None
    assert a.grad.shape == (3,) and b.grad.shape == (2, 1)
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 3.0, 3.0])
    np.testing.assert_allclose(b.grad.numpy(), [[X.sum()], [X.sum()]])


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda w: tg.exp(w, w), "exp takes 1 tensor input(s), got 2"),
        (lambda w: tg.exp(), "exp takes 1 tensor input(s), got 0"),
        (lambda w: tg.maximum(w), "maximum takes 2 tensor input(s), got 1"),
        (lambda w: tg.registry()["sum"](w, 0, False, 1), "parameters (axis, keepdims) in that"),
        (lambda w: tg.registry()["sum"](w, 0, axis=0), "each given once"),
        (lambda w: tg.where(w > 0, w), "where takes 3 tensor input(s), got 2"),
    ],
)
def test_wrong_number_of_tensor_inputs_is_type_error(call: Any, fragment: str) -> None:
    w = tg.tensor(X).require_grad()
    stats = tg.graph_stats()
    with pytest.raises(TypeError, match=re.escape(fragment)):
        call(w)
    assert tg.graph_stats() == stats


def test_parameters_may_follow_the_tensor_inputs_positionally() -> None:
    w = tg.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    summed = tg.registry()["sum"](w, 1, True)  # np.sum(x, axis, keepdims)'s order
    assert summed.tolist() == w.sum(axis=1, keepdims=True).tolist() == [[3.0], [12.0]]
    assert tg.softmax(w, 0).tolist() == tg.softmax(w, axis=0).tolist()


def test_variadic_ops_take_any_number_of_inputs() -> None:
    a, b, c = (tg.tensor(X * i).require_grad() for i in (1.0, 2.0, 3.0))
    y = tg.concatenate([a, b, c])
    assert y.shape == (9,)
    s = tg.stack([a, b])
    assert s.shape == (2, 3)
    (y.sum() + (s * 2.0).sum()).backward()
    assert a.grad is not None and b.grad is not None and c.grad is not None
    assert a.grad.tolist() == b.grad.tolist() == [3.0, 3.0, 3.0]
    assert c.grad.tolist() == [1.0, 1.0, 1.0]


def test_ops_convert_python_scalars_and_arrays_to_constants() -> None:
    op = Op(scale, name="const_scale")
    op.defvjp(lambda res, g, needs: (g * res[1] if needs[0] else None, None))
    w = tg.tensor(X).require_grad()
    for const in (2.0, 2, np.float32(2.0), np.full(3, 2.0, np.float32), jnp.full(3, 2.0)):
        w.grad = None
        y = op(w, const)
        assert y.dtype == np.float32
        y.sum().backward()
        assert w.grad is not None
        assert w.grad.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError, match="unsupported operand type str"):
        op(w, "2")


def test_vjp_returning_a_non_array_cotangent_raises_vjp_shape_error() -> None:
    op = Op(lambda a: (a * 1.0, ()), name="floaty")
    op.defvjp(lambda res, g: (1.0,))
    w = tg.tensor(X).require_grad()
    y = op(w).sum()
    try:
        y.backward()
    except Exception as err:  # noqa: BLE001 - the type is the assertion
        kind, msg = type(err), str(err)
    else:
        kind, msg = type(None), ""
    del y, w
    assert issubclass(kind, tg.VJPShapeError), kind
    assert "'floaty'" in msg


def test_an_ops_signature_is_how_it_is_called() -> None:
    """What editors and ``help()`` show: tensors in, a Tensor out, parameters after them."""
    sig = inspect.signature(tg.softmax)
    assert sig.return_annotation == "Tensor"
    assert list(sig.parameters) == ["x", "axis"]
    assert sig.parameters["axis"].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert float(tg.sum(tg.ones((2, 3)), 1)[0]) == 3.0  # as the signature says


def test_int_arguments_become_cached_constants_on_a_second_sight() -> None:
    """A slice's starts: passed as ints the first time a value is met, as one weakly typed
    device constant (the same object) from the second on; bools and arrays pass untouched."""
    from tapegrad.op import int_arguments

    value = 912_345  # a value no other test slices at
    first = int_arguments((value, True, 1.5))
    assert first == (value, True, 1.5)
    second = int_arguments((value,))[0]
    assert isinstance(second, jax.Array) and second.aval.weak_type and int(second) == value
    assert int_arguments((value,))[0] is second
    t = tg.tensor(np.arange(10.0, dtype=np.float32)).require_grad()
    for _ in range(3):  # slicing at one place: same values, gradient included
        out = t[3:6]
        np.testing.assert_array_equal(out.numpy(), [3.0, 4.0, 5.0])
        (g,) = tg.grad(out.sum(), t)
        np.testing.assert_array_equal(g.numpy(), [0, 0, 0, 1, 1, 1, 0, 0, 0, 0])


def test_index_arguments_keep_the_host_bounds_check() -> None:
    """A gather's NumPy rows become a cached device array from their second sight on; the
    values and gradients stay those of the first call, and rows out of range still raise
    on the host, however often valid ones were met."""
    from tapegrad.op import index_arguments

    rows = np.array([4, 0, 4, 2], dtype=np.int64) + 907  # contents no other test gathers
    assert index_arguments((rows,))[0] is rows
    cached = index_arguments((rows,))[0]
    assert isinstance(cached, jax.Array) and cached.dtype == jnp.asarray(rows).dtype
    assert index_arguments((rows.copy(),))[0] is cached  # keyed by contents
    table = tg.tensor(np.arange(1000.0, dtype=np.float32)).require_grad()
    for _ in range(3):
        out = table[rows]
        np.testing.assert_array_equal(out.numpy(), rows.astype(np.float32))
        (g,) = tg.grad(out.sum(), table)
        assert float(g.numpy()[911]) == 2.0 and float(g.numpy().sum()) == 4.0
    with pytest.raises(IndexError, match="out of bounds"):
        table[rows + 100]


def test_cached_index_constants_follow_the_x64_setting() -> None:
    """A start or rows cached under ``jax.enable_x64`` (int64) are not reused with x64 off
    (int32): slices and gathers work on both sides, in either order, without warnings."""
    import warnings

    x = tg.tensor(np.arange(10.0, dtype=np.float32))
    rows = np.array([7, 1, 7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x64 in (True, False, True, False):
            with jax.enable_x64(x64):
                for _ in range(3):
                    np.testing.assert_array_equal(x[3:6].numpy(), [3.0, 4.0, 5.0])
                    np.testing.assert_array_equal(x[rows].numpy(), [7.0, 1.0, 7.0])
                    np.testing.assert_array_equal((x * 2)[1:2].numpy(), [2.0])


def test_a_backward_does_not_count_as_a_second_sight() -> None:
    """Rows met by one forward and its backward only (random minibatches) make no constant."""
    from tapegrad.op import _INDICES, index_arguments

    table = tg.tensor(np.arange(40.0, dtype=np.float32).reshape(20, 2)).require_grad()
    rows = np.array([19, 3, 11, 5]) * 1  # contents no other test gathers
    before = len(_INDICES.made)
    table[rows].sum().backward()
    assert len(_INDICES.made) == before
    assert index_arguments((rows,), count=False)[0] is rows  # a lookup makes nothing
    table[rows].sum().backward()  # a second forward: now it is made
    assert len(_INDICES.made) == before + 1


def test_a_transfer_guard_sees_the_same_transfers_every_call() -> None:
    """Under a host-to-device transfer guard no constant is made, so a slice at a new
    place raises on every call, as JAX's own conversion of the start does."""
    x = tg.tensor(np.zeros(9000, dtype=np.float32))
    with jax.transfer_guard_host_to_device("disallow"):
        for _ in range(3):
            with pytest.raises(Exception, match="[Dd]isallowed"):
                x[8123:8125]  # a start no other test slices at
    np.testing.assert_array_equal(x[8123:8125].numpy(), [0.0, 0.0])
