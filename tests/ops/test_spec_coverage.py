"""Every built-in op has a spec row, and op names are jnp's (or jax.nn's) names."""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp

import tapegrad as tg

from .specs import SPECS
from .test_second_order import SECOND_ORDER

# Ops named after PyTorch's functional API (no jnp or jax.nn function of that name) and
# indexing, which is Python's ``operator.getitem`` (``t[index]``).
TORCH_NAMES = {
    "cross_entropy",
    "mse_loss",
    "nll_loss",
    "binary_cross_entropy_with_logits",
    "binary_cross_entropy",  # F.binary_cross_entropy, of probabilities
    "logdet",  # torch.logdet (NaN for a negative determinant)
    "kl_div",  # F.kl_div (jax.scipy.special.kl_div is another function)
    "embedding",
    "embedding_bag",  # F.embedding_bag
    "rnn_scan",  # nn.RNN/LSTM/GRU's recurrence over a sequence (one lax.scan), for the layers
    "dropout",
    "conv",
    "conv_transpose",  # F.conv_transpose1d/2d/3d, one op
    "interpolate",  # F.interpolate
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool",  # F.adaptive_avg_pool1d, 2d and 3d, one op
    "adaptive_max_pool",  # F.adaptive_max_pool1d and 2d, one op
    "layer_norm",
    "batch_norm",
    "scaled_dot_product_attention",
    "norm",  # jnp.linalg.norm
    "linear",  # F.linear
    "lerp",  # torch.lerp
    "index_add",  # torch.index_add (jax.lax.scatter_add is scatter_add's namesake)
    "hardtanh",  # F.hardtanh, with min_val/max_val (jax.nn.hard_tanh has no bounds)
    "hardswish",  # F.hardswish (jax.nn.hard_swish)
    "hardsigmoid",  # F.hardsigmoid (jax.nn.hard_sigmoid)
    "softsign",  # F.softsign (jax.nn.soft_sign)
    "hardshrink",  # F.hardshrink
    "softshrink",  # F.softshrink
    "tanhshrink",  # F.tanhshrink
    "threshold",  # F.threshold
    "softmin",  # F.softmin
}


def test_every_registered_op_has_exactly_one_spec_row() -> None:
    names = [spec.name for spec in SPECS]
    assert len(names) == len(set(names)), "an op has two rows"
    assert set(tg.registry()) == set(names)


def test_every_differentiable_op_has_a_second_order_check() -> None:
    """create_graph=True through every op: a new op needs a row that test_second_order.py
    runs (a differentiable row with a case whose output is floating)."""
    differentiable = {name for name, op in tg.registry().items() if op.differentiable}
    missing = differentiable - SECOND_ORDER
    assert not missing, f"ops without a second-order check: {sorted(missing)}"


def test_spec_rows_agree_with_the_ops() -> None:
    for spec in SPECS:
        assert spec.op is tg.registry()[spec.name]
        assert spec.differentiable == spec.op.differentiable, spec.name
        assert spec.cases, spec.name
        assert spec.op.vjp is not None or not spec.op.differentiable, spec.name


def test_op_names_are_jnp_names() -> None:
    for name in tg.registry():
        if name == "getitem":
            assert hasattr(operator, name)
        elif name not in TORCH_NAMES:
            modules = (jnp, jnp.linalg, jax.nn, jax, jax.lax, jax.scipy.special)
            assert any(hasattr(m, name) for m in modules), (
                f"op {name!r} is not named after a jnp, jnp.linalg, jax.nn, jax, jax.lax or "
                "jax.scipy.special function"
            )


def test_public_functions_are_the_registered_ops() -> None:
    """tg.exp is the op itself; the sequence-taking wrappers build the same op's nodes."""
    for name in (
        "exp",
        "log",
        "tanh",
        "relu",
        "sigmoid",
        "sqrt",
        "abs",
        "sin",
        "cos",
        "matmul",
        "maximum",
        "minimum",
        "where",
        "softmax",
        "log_softmax",
        "sum",
        "mean",
        "reshape",
    ):
        assert getattr(tg, name) is tg.registry()[name], name
    a = tg.ones((2,), requires_grad=True)
    for name, out in (
        ("concatenate", tg.concatenate([a, a])),
        ("stack", tg.stack([a, a])),
        ("expand_dims", tg.expand_dims(a, 0)),
        ("cross_entropy", tg.cross_entropy(tg.stack([a, a]), [0, 1])),
        ("mse_loss", tg.mse_loss(a, a)),
        ("transpose", tg.transpose(tg.stack([a, a]), 0, 1)),
    ):
        (record,) = [r for r in tg.snapshot().nodes if r.tensor is not None and r.tensor() is out]
        assert record.op == name
