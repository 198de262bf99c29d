"""Porting PyTorch code: layer and Module behaviours checked against PyTorch where a
researcher's code would notice a difference (order of registries, PyTorch's constructor
arguments, error messages)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from _parity import check_against_torch, first

import tapegrad as tg
from tapegrad import nn

torch: Any = pytest.importorskip("torch")


class _Ours(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3, key=0)
        self.bn = nn.BatchNorm2d(2)
        self.fc = nn.Linear(2, 3, key=1)


class _Theirs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.bn = torch.nn.BatchNorm2d(2)
        self.fc = torch.nn.Linear(2, 3)


def test_replacing_a_module_parameter_or_buffer_keeps_its_place_as_in_torch() -> None:
    """``model.conv = new_layer`` (a new head for fine-tuning), ``fc.weight = new`` and
    ``bn.running_mean = new`` keep their positions in ``state_dict()``, ``named_parameters()``
    and ``named_modules()``, as PyTorch's do."""
    ours, theirs = _Ours(), _Theirs()
    ours.conv, theirs.conv = nn.Conv2d(1, 2, 3, key=2), torch.nn.Conv2d(1, 2, 3)
    ours.fc.weight = tg.zeros((3, 2)).require_grad()
    theirs.fc.weight = torch.nn.Parameter(torch.zeros(3, 2))
    ours.bn.running_mean, theirs.bn.running_mean = tg.ones(2), torch.ones(2)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


def test_assigning_a_plain_tensor_to_a_parameter_name_is_refused_as_in_torch() -> None:
    """``fc.weight = tg.tensor(w)`` (a tensor not requiring grad) would silently turn the
    parameter into a frozen buffer; PyTorch raises TypeError, and so do we, leaving the
    parameter in place. ``del`` first, or a parameter, or ``.data =`` work."""
    fc = nn.Linear(2, 2, key=0)
    with pytest.raises(TypeError, match="parameter 'weight' of Linear"):
        fc.weight = tg.tensor(np.ones((2, 2), np.float32))
    with pytest.raises(TypeError):
        torch.nn.Linear(2, 2).weight = torch.ones(2, 2)
    assert [n for n, _ in fc.named_parameters()] == ["weight", "bias"]
    fc.weight.data = tg.tensor(np.ones((2, 2), np.float32))
    assert fc.weight.requires_grad and float(fc.weight.sum()) == 4.0
    fc.weight = tg.zeros((2, 2)).require_grad()
    del fc.bias
    fc.bias = tg.zeros(2)
    assert [n for n, _ in fc.named_parameters()] == ["weight"]
    assert [n for n, _ in fc.named_buffers()] == ["bias"]


def test_a_frozen_parameter_stays_a_parameter_where_it_is_assigned_as_in_torch() -> None:
    """PyTorch's ``nn.Parameter`` keeps its type when frozen: tying a frozen embedding to a
    head, ``m.weight = m.weight`` and swapping frozen weights work, in a deep copy too, and
    the weight is listed as the head's parameter (it was refused, or became a buffer)."""
    emb, head = nn.Embedding(5, 3, key=0), nn.Linear(3, 5, bias=False, key=1)
    emb.weight.requires_grad_(False)
    head.weight = emb.weight
    assert head.weight is emb.weight and [n for n, _ in head.named_parameters()] == ["weight"]
    a, b = nn.Linear(2, 2, key=0), nn.Linear(2, 2, key=1)
    a.requires_grad_(False)
    b.requires_grad_(False)
    a.weight, b.weight = b.weight, a.weight
    a.weight = a.weight
    assert [n for n, _ in a.named_parameters()] == ["weight", "bias"]
    twin = copy.deepcopy(a)
    with pytest.raises(TypeError, match="parameter 'bias'"):
        twin.bias = twin.weight[0].detach()  # a new tensor at a parameter's name
    twin.bias = copy.deepcopy(twin).bias  # a parameter of another (copied) module
    assert [n for n, _ in twin.named_parameters()] == ["weight", "bias"]


def test_module_list_and_dict_setitem_replace_in_place() -> None:
    """``layers[1] = m`` replaces the second layer: iteration and indexing keep the order (it
    used to move the new layer to the end, so ``layers[1]`` was the old third one)."""
    a, b, c, d = (nn.Linear(2, 2, key=i) for i in range(4))
    layers = nn.ModuleList([a, b, c])
    layers[1] = d
    assert list(layers) == [a, d, c]
    assert layers[1] is d and layers[2] is c
    assert [n for n, _ in layers.named_parameters()][:4] == [
        "0.weight",
        "0.bias",
        "1.weight",
        "1.bias",
    ]
    layers[-1] = b
    assert list(layers) == [a, d, b]
    table = nn.ModuleDict({"x": a, "y": b, "z": c})
    table["x"] = d
    assert table.keys() == ["x", "y", "z"] and table["x"] is d


def test_pytorchs_inplace_flags_and_identity_arguments_are_accepted() -> None:
    """``nn.ReLU(inplace=True)`` (torchvision's models), ``nn.Dropout(p, True)`` and
    ``nn.Identity(54, unused=1)`` construct as in PyTorch and compute the same values; the
    input is left unchanged."""
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    t = tg.tensor(x)
    for ours, theirs in [
        (nn.ReLU(inplace=True), torch.nn.ReLU(inplace=False)),
        (nn.ReLU(True), torch.nn.ReLU()),
        (nn.SiLU(inplace=True), torch.nn.SiLU()),
        (nn.Identity(54, unused=1), torch.nn.Identity(54, unused=1)),
    ]:
        np.testing.assert_allclose(np.asarray(ours(t)), theirs(torch.tensor(x)).numpy(), 1e-6)
    np.testing.assert_array_equal(np.asarray(t), x)
    drop = nn.Dropout(0.5, True).eval()
    assert drop(t) is t
    assert repr(nn.ReLU(inplace=True)) == repr(torch.nn.ReLU(inplace=True))
    assert repr(nn.ReLU()) == repr(torch.nn.ReLU())


def test_conv_sizes_may_be_numpy_integers_and_bad_ones_are_named() -> None:
    """Sizes read from a config array (``np.int64``) work as in PyTorch; a float, a wrong
    length or a non-positive stride is refused at construction, naming the layer."""
    conv = nn.Conv2d(3, 4, np.int64(3), stride=(np.int64(1), 2), padding=np.int32(1), key=0)
    assert conv.kernel_size == (3, 3) and conv.stride == (1, 2) and conv.padding == (1, 1)
    with pytest.raises(TypeError, match=r"^Conv2d: kernel_size must be an int or a tuple"):
        nn.Conv2d(3, 4, 3.0)
    with pytest.raises(TypeError, match=r"^Conv1d: stride must be an int or a tuple of 1"):
        nn.Conv1d(3, 4, 3, stride=(1, 1))
    with pytest.raises(ValueError, match=r"^Conv2d: stride must be >= 1"):
        nn.Conv2d(3, 4, 3, stride=0)
    with pytest.raises(ValueError, match=r"^Conv2d: padding must be >= 0"):
        nn.Conv2d(3, 4, 3, padding=-1)
    with pytest.raises(ValueError, match=r"^Conv1d: padding='same' needs stride 1"):
        nn.Conv1d(3, 4, 3, stride=2, padding="same")


@pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")  # PyTorch's note
@pytest.mark.parametrize("padding", [1, "same", (0, 1, 2)])
def test_conv3d_matches_torch(padding: Any) -> None:
    torch.manual_seed(0)
    theirs = torch.nn.Conv3d(4, 6, (2, 3, 3), padding=padding, groups=2, dilation=(1, 1, 2))
    ours = nn.Conv3d(4, 6, (2, 3, 3), padding=padding, groups=2, dilation=(1, 1, 2), key=0)
    x = np.random.default_rng(0).standard_normal((2, 4, 4, 5, 6)).astype(np.float32)
    check_against_torch(ours, theirs, [x], rtol=1e-4, atol=1e-5)
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_rnn_state_of_the_wrong_rank_for_an_unbatched_input_says_so() -> None:
    lstm = nn.LSTM(3, 4, num_layers=2, key=0)
    x = tg.tensor(np.ones((5, 3), np.float32))  # unbatched (L, in)
    h = tg.tensor(np.zeros((2, 1, 4), np.float32))  # a batched state
    with pytest.raises(tg.ShapeError, match=r"unbatched \(L, 3\) input, h_0 must be 2-D"):
        lstm(x, (h, h))
    with pytest.raises(tg.ShapeError, match=r"^GRU: for an unbatched"):
        nn.GRU(3, 4, key=0)(x, tg.tensor(np.zeros((1, 1, 4), np.float32)))
    with pytest.raises(TypeError, match=r"^GRU: hidden_size must be an integer"):
        nn.GRU(3, 4.0)  # type: ignore[arg-type]
    assert nn.GRU(np.int64(3), np.int64(4), key=0)(x)[0].shape == (5, 4)


@pytest.mark.parametrize("kind", ["function", "module"])
def test_transformer_encoder_layer_takes_a_callable_activation_as_torch(kind: str) -> None:
    """PyTorch's ``activation=F.silu`` (or a module) is ``activation=tg.silu`` here."""
    torch.manual_seed(0)
    act = torch.nn.functional.silu if kind == "function" else torch.nn.GELU("tanh")
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, act).eval()
    ours = nn.TransformerEncoderLayer(
        8, 2, 16, 0.0, tg.silu if kind == "function" else nn.GELU("tanh"), key=0
    )
    x = np.random.default_rng(0).standard_normal((5, 3, 8)).astype(np.float32)
    check_against_torch(ours, theirs, [x], rtol=1e-4, atol=1e-5)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    with pytest.raises(ValueError, match=r"^TransformerEncoderLayer: activation must be"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
    with pytest.raises(TypeError, match=r"^TransformerEncoderLayer: activation must be"):
        nn.TransformerEncoderLayer(8, 2, activation=3)  # type: ignore[arg-type]


def _names(module: Any) -> list[str]:
    return list(module.state_dict())


def test_container_list_operations_name_layers_as_torch() -> None:
    """``insert``, ``pop``, ``del``, ``extend``, ``append`` on ``ModuleList`` and ``Sequential``
    and ``pop`` on ``ModuleDict`` leave the layers and state-dict keys PyTorch's would."""
    ours = [nn.Linear(2, i + 1, key=i) for i in range(5)]
    theirs = [torch.nn.Linear(2, i + 1) for i in range(5)]
    for kind in ("ModuleList", "Sequential"):
        o, t = getattr(nn, kind)(), getattr(torch.nn, kind)()
        for m, n in zip(ours[:3], theirs[:3], strict=True):
            o.append(m)
            t.append(n)
        o.insert(1, ours[3])
        t.insert(1, theirs[3])
        assert o.pop(0) is ours[0] and t.pop(0) is theirs[0]
        del o[-1]
        del t[-1]
        o.extend([ours[4]])
        t.extend([theirs[4]])
        o[0] = ours[2]
        t[0] = theirs[2]
        assert _names(o) == _names(t)
        assert [m.out_features for m in o] == [m.out_features for m in t]
        del o[1:]
        del t[1:]
        assert _names(o) == _names(t)
    table = nn.ModuleDict({"a": ours[0], "b": ours[1]})
    assert table.pop("a") is ours[0] and table.keys() == ["b"]
    table.clear()
    assert len(table) == 0
    with pytest.raises(IndexError, match=r"ModuleList: index 3 is out of range for 1"):
        nn.ModuleList([ours[0]]).pop(3)
    joined = nn.ModuleList([ours[0]]) + nn.ModuleList([ours[1]])
    joined += [ours[2]]
    assert list(joined) == ours[:3]


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("per_head", [False, True])
def test_multihead_attention_adds_a_float_mask_and_differentiates_it(
    need_weights: bool, per_head: bool
) -> None:
    """A float ``attn_mask`` (a relative position bias, ALiBi) is added to the scores, as
    PyTorch's; one that requires grad gets PyTorch's gradient; with a float
    ``key_padding_mask`` the two are summed."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n, heads, length, source, e = 2, 2, 3, 4, 8
    theirs = torch.nn.MultiheadAttention(e, heads, batch_first=True)
    ours = nn.MultiheadAttention(e, heads, batch_first=True, key=0)
    ours.load_state_dict(theirs.state_dict())
    q, k = (rng.standard_normal((n, t, e)).astype(np.float32) for t in (length, source))
    bias = rng.standard_normal((n * heads, length, source) if per_head else (length, source))
    pad = np.zeros((n, source), np.float32)
    pad[0, -1] = -np.inf
    tb = torch.tensor(bias.astype(np.float32), requires_grad=True)
    ob = tg.tensor(bias.astype(np.float32), requires_grad=True)
    tk, ok = torch.tensor(k), tg.tensor(k)
    want, _ = theirs(
        torch.tensor(q),
        tk,
        tk,
        attn_mask=tb,
        key_padding_mask=torch.tensor(pad),
        need_weights=need_weights,
    )
    got, _ = ours(
        tg.tensor(q), ok, ok, attn_mask=ob, key_padding_mask=pad, need_weights=need_weights
    )
    np.testing.assert_allclose(np.asarray(got), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    (want**2).sum().backward()
    (got**2).sum().backward()
    assert ob.grad is not None and tb.grad is not None
    np.testing.assert_allclose(np.asarray(ob.grad), tb.grad.numpy(), rtol=1e-4, atol=1e-6)
    with pytest.raises(TypeError, match=r"attn_mask has dtype int32; pass a boolean mask"):
        ours(tg.tensor(q), ok, ok, attn_mask=np.zeros((length, source), np.int32))


def test_pytorchs_registration_methods_and_submodule_lookup() -> None:
    """``add_module``/``register_module``, ``register_parameter`` and ``get_submodule`` as
    PyTorch's, with state-dict keys in PyTorch's order; ``LSTM.flatten_parameters()`` runs."""

    class Ours(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_parameter("scale", tg.ones(2).require_grad())
            for i in range(2):
                self.add_module(f"conv{i}", nn.Conv1d(2, 2, 1, key=i))
            self.register_module("rnn", nn.LSTM(2, 2, key=0))
            self.register_parameter("frozen", tg.zeros(2))
            self.register_parameter("nothing", None)

    class Theirs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_parameter("scale", torch.nn.Parameter(torch.ones(2)))
            for i in range(2):
                self.add_module(f"conv{i}", torch.nn.Conv1d(2, 2, 1))
            self.register_module("rnn", torch.nn.LSTM(2, 2))
            self.register_parameter("frozen", torch.nn.Parameter(torch.zeros(2), False))
            self.register_parameter("nothing", None)

    ours, theirs = Ours(), Theirs()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert ours.nothing is None and not ours.frozen.requires_grad
    assert ours.get_submodule("conv1") is ours.conv1 and ours.get_submodule("") is ours
    ours.rnn.flatten_parameters()
    with pytest.raises(AttributeError, match=r"conv1 has no sub-module 'x'"):
        ours.get_submodule("conv1.x")
    with pytest.raises(TypeError, match=r"a floating leaf Tensor \(or None\) is needed"):
        ours.register_parameter("p", ours.scale * 2)
    with pytest.raises(TypeError, match=r"add_module\('m'\): a Module or None"):
        ours.add_module("m", ours.scale)  # type: ignore[arg-type]
    with pytest.raises(KeyError, match=r"names are non-empty strings without '.'"):
        ours.add_module("a.b", nn.ReLU())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("L1Loss", {}),
        ("SmoothL1Loss", {"beta": 0.5}),
        ("SmoothL1Loss", {"beta": 0.0}),
        ("HuberLoss", {"delta": 0.7}),
        ("HuberLoss", {}),
    ],
)
def test_l1_family_losses_match_torch(name: str, kwargs: dict[str, float], reduction: str) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    b[0, 0] = a[0, 0]  # a tie: gradient 0, as PyTorch's
    theirs = getattr(torch.nn, name)(reduction=reduction, **kwargs)
    ours = getattr(nn, name)(reduction=reduction, **kwargs)
    ta, oa = torch.tensor(a, requires_grad=True), tg.tensor(a, requires_grad=True)
    want, got = theirs(ta, torch.tensor(b)), ours(oa, b)
    np.testing.assert_allclose(np.asarray(got), want.detach().numpy(), rtol=1e-6, atol=1e-7)
    v = rng.standard_normal(want.shape).astype(np.float32)
    (want * torch.tensor(v)).sum().backward()
    (got * tg.tensor(v)).sum().backward()
    np.testing.assert_allclose(np.asarray(oa.grad), ta.grad.numpy(), rtol=1e-6, atol=1e-7)
    assert repr(ours).startswith(name)
    function = {"L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss", "HuberLoss": "huber_loss"}
    plain = getattr(tg, function[name])(tg.tensor(a), b, reduction=reduction, **kwargs)
    np.testing.assert_allclose(np.asarray(plain), np.asarray(got), rtol=1e-6, atol=1e-7)
    twin = getattr(torch.nn.functional, function[name])
    np.testing.assert_allclose(
        np.asarray(plain),
        twin(torch.tensor(a), torch.tensor(b), reduction=reduction, **kwargs).numpy(),
        rtol=1e-6,
        atol=1e-7,
    )


def test_l1_family_losses_refuse_bad_arguments_and_warn_on_broadcast() -> None:
    with pytest.raises(ValueError, match=r"^SmoothL1Loss: beta must be >= 0"):
        nn.SmoothL1Loss(beta=-1.0)
    with pytest.raises(ValueError, match=r"^HuberLoss: delta must be > 0"):
        nn.HuberLoss(delta=0.0)
    with pytest.raises(ValueError, match=r"^L1Loss: reduction must be one of"):
        nn.L1Loss("avg")
    with pytest.raises(TypeError, match=r"size_average"):
        nn.L1Loss(size_average=True)
    with pytest.warns(tg.TapegradWarning, match=r"^L1Loss: prediction shape \(3, 4\)") as w:
        nn.L1Loss()(tg.ones((3, 4)), tg.ones((3, 1)))
    with pytest.warns(tg.TapegradWarning, match=r"^huber_loss: prediction shape") as v:
        tg.huber_loss(tg.ones((3, 4)), tg.ones((3, 1)))
    with pytest.warns(tg.TapegradWarning, match=r"^mse_loss: prediction shape") as u:
        nn.MSELoss()(tg.ones((3, 4)), tg.ones((3, 1)))
    assert {r.filename for r in (*w, *v, *u)} == {__file__}  # the caller's line, not ours
    with pytest.raises(ValueError, match=r"^smooth_l1_loss: beta must be >= 0"):
        tg.smooth_l1_loss(tg.ones(2), tg.ones(2), beta=-1.0)
    with pytest.raises(ValueError, match=r"^l1_loss: reduction must be one of"):
        tg.l1_loss(tg.ones(2), tg.ones(2), reduction="avg")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_takes_class_probabilities_as_torch(
    reduction: str, smoothing: float, weighted: bool
) -> None:
    """PyTorch's soft targets (mixup, distillation): float targets of the logits' shape,
    classes on axis 1 of (N, C, L); the targets get their gradient too."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 3)).astype(np.float32)
    p = rng.random((2, 4, 3)).astype(np.float32)
    p /= p.sum(axis=1, keepdims=True)
    w = (rng.random(4) + 0.5).astype(np.float32) if weighted else None
    theirs = torch.nn.CrossEntropyLoss(
        None if w is None else torch.tensor(w), reduction=reduction, label_smoothing=smoothing
    )
    ours = nn.CrossEntropyLoss(reduction, smoothing, weight=w, axis=1)
    tx, tp = torch.tensor(x, requires_grad=True), torch.tensor(p, requires_grad=True)
    ox, op = tg.tensor(x, requires_grad=True), tg.tensor(p, requires_grad=True)
    want, got = theirs(tx, tp), ours(ox, op)
    np.testing.assert_allclose(np.asarray(got), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    v = rng.standard_normal(want.shape).astype(np.float32)
    (want * torch.tensor(v)).sum().backward()
    (got * tg.tensor(v)).sum().backward()
    np.testing.assert_allclose(np.asarray(ox.grad), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(op.grad), tp.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_cross_entropy_probabilities_of_another_shape_say_what_to_pass() -> None:
    logits = tg.zeros((4, 3))
    with pytest.raises(TypeError, match=r"integer class indices \(shape \(4,\)\) or class prob"):
        tg.cross_entropy(logits, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match=r"labels must be integer class indices"):
        tg.cross_entropy(logits, np.zeros(4, bool))


@pytest.mark.parametrize(
    ("groups", "shape", "affine"),
    [(2, (3, 4, 5), True), (1, (2, 6, 2, 3), True), (6, (2, 6, 4), False), (3, (2, 6), True)],
)
def test_group_norm_matches_torch(groups: int, shape: tuple[int, ...], affine: bool) -> None:
    torch.manual_seed(0)
    theirs = torch.nn.GroupNorm(groups, shape[1], affine=affine)
    if affine:
        with torch.no_grad():
            theirs.weight.normal_()
            theirs.bias.normal_()
    ours = nn.GroupNorm(groups, shape[1], affine=affine)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 3 + 1
    check_against_torch(ours, theirs, [x], rtol=1e-4, atol=1e-5)
    assert repr(ours).startswith(f"GroupNorm({groups}, {shape[1]}, eps=1e-05, affine=")
    with pytest.raises(tg.ShapeError, match=r"GroupNorm\(.*\) expects input \(N, "):
        ours(tg.ones((2, shape[1] + 1)))
    with pytest.raises(ValueError, match=r"^GroupNorm: num_channels \(5\) must be"):
        nn.GroupNorm(2, 5)


# ---------------------------------------------------------------- break-it review of the above


def test_sequential_insert_out_of_range_and_pop_of_a_slice_as_torch() -> None:
    """``Sequential.insert`` outside ``[-n, n]`` raises ``IndexError`` as PyTorch's (it used
    to clamp, silently putting the layer first or last); ``pop`` takes a slice as PyTorch's."""
    seq = nn.Sequential(*(nn.Linear(2, 2, key=i) for i in range(3)))
    with pytest.raises(IndexError, match="out of range"):
        seq.insert(4, nn.ReLU())
    with pytest.raises(IndexError, match="out of range"):
        seq.insert(-4, nn.ReLU())
    assert len(seq) == 3
    seq.insert(3, nn.ReLU()).insert(-4, nn.Tanh())
    assert [type(m).__name__ for m in seq] == ["Tanh", "Linear", "Linear", "Linear", "ReLU"]
    first_two = seq.pop(slice(0, 2))
    assert isinstance(first_two, nn.Sequential) and len(first_two) == 2
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    layers = nn.ModuleList([nn.Linear(2, 2, key=i) for i in range(3)])
    tail = layers.pop(slice(1, None))
    assert isinstance(tail, nn.ModuleList) and len(tail) == 2 and len(layers) == 1
    with pytest.raises(IndexError, match="out of range"):
        seq[5]
    with pytest.raises(IndexError, match="out of range"):
        layers[-2]


def test_container_names_with_a_dot_are_refused_as_in_torch() -> None:
    """``ModuleDict({"a.b": m})`` / ``Sequential(OrderedDict(...))`` with a dotted or empty
    name would make state-dict keys that cannot be told apart (``"a.b.weight"``); PyTorch
    raises ``KeyError``."""
    with pytest.raises(KeyError, match="'.'"):
        nn.ModuleDict({"a.b": nn.Linear(2, 2, key=0)})
    table = nn.ModuleDict()
    with pytest.raises(KeyError, match="'.'"):
        table["x.y"] = nn.Linear(2, 2, key=0)
    with pytest.raises(KeyError):
        table[""] = nn.Linear(2, 2, key=0)
    with pytest.raises(KeyError, match="'.'"):
        nn.Sequential({"conv.1": nn.Linear(2, 2, key=0)})
    assert len(table) == 0


def test_registration_methods_refuse_an_existing_attribute_as_torch() -> None:
    """``register_parameter("training", p)`` used to delete the module's ``training`` flag,
    ``add_module("forward", m)`` registered a module hidden by the method, and both silently
    replaced a plain attribute or an entry of another registry. PyTorch raises ``KeyError``
    ("attribute ... already exists"); re-registering under the same kind stays allowed."""
    lin = nn.Linear(2, 2, key=0)
    lin.register_buffer("buf", tg.ones(2))
    lin.plain = 3
    p = tg.ones(2).require_grad()
    for name in ("training", "forward", "buf", "plain"):
        with pytest.raises(KeyError, match="already"):
            lin.register_parameter(name, p)
    for name in ("training", "eval", "weight", "buf", "plain"):
        with pytest.raises(KeyError, match="already"):
            lin.add_module(name, nn.ReLU())
    assert lin.training is True and lin.plain == 3
    assert list(lin.state_dict()) == ["weight", "bias", "buf"]
    lin.register_parameter("weight", tg.zeros((2, 2)).require_grad())  # same kind: replaced
    lin.register_parameter("extra", None)
    lin.register_parameter("extra", p)  # a None slot is filled (PyTorch's)
    lin.add_module("head", nn.ReLU())
    lin.add_module("head", nn.Tanh())
    assert list(lin.state_dict()) == ["weight", "bias", "extra", "buf"]
    assert isinstance(lin.head, nn.Tanh)


def test_group_norm_of_an_empty_batch_is_empty_as_torch() -> None:
    x = np.zeros((0, 4, 3), np.float32)
    out = nn.GroupNorm(2, 4)(tg.tensor(x))
    assert out.shape == tuple(torch.nn.GroupNorm(2, 4)(torch.tensor(x)).shape) == (0, 4, 3)


def test_layer_sizes_may_be_numpy_integers_and_floats_are_named() -> None:
    """``nn.Conv2d(np.int64(3), ...)`` / ``nn.Linear(np.int64(3), ...)`` (sizes read from an
    array) used to fail with ``'numpy.int64' object has no attribute 'bit_length'``."""
    x = np.ones((1, 2, 4, 4), np.float32)
    conv = nn.Conv2d(np.int64(2), np.int64(4), 3, groups=np.int64(2), key=0)
    assert conv(tg.tensor(x)).shape == (1, 4, 2, 2) and type(conv.in_channels) is int
    assert nn.Linear(np.int64(3), np.int32(5), key=0)(tg.ones((2, 3))).shape == (2, 5)
    with pytest.raises(TypeError, match=r"^Conv3d: in_channels must be an integer"):
        nn.Conv3d(2.0, 4, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Conv1d: groups must be an integer"):
        nn.Conv1d(2, 4, 3, groups=2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["SmoothL1Loss", "HuberLoss"])
def test_smooth_l1_and_huber_gradients_stay_finite_at_an_infinite_error(name: str) -> None:
    """The quadratic branch of ``where`` not taken used to give ``0 * inf = nan``; PyTorch's
    gradient there is the linear branch's, ``sign(d)`` (times ``delta``) over n."""
    x = np.array([np.inf, -np.inf, 3.0, 0.25], np.float32)
    a = tg.tensor(x).require_grad()
    getattr(nn, name)()(a, tg.zeros(4)).backward()
    t = torch.tensor(x, requires_grad=True)
    getattr(torch.nn, name)()(t, torch.zeros(4)).backward()
    assert t.grad is not None
    np.testing.assert_allclose(np.asarray(a.grad), t.grad.numpy(), rtol=1e-6)


def test_cross_entropy_probabilities_refuse_ignore_index_as_torch() -> None:
    """An ``ignore_index`` (>= 0) with class probabilities was silently dropped, so padding
    meant to be ignored counted in the loss; PyTorch refuses it. The default (-100) passes."""
    logits = tg.tensor(np.zeros((2, 3), np.float32))
    probs = tg.tensor(np.full((2, 3), 1 / 3, np.float32))
    with pytest.raises(ValueError, match="ignore_index"):
        tg.cross_entropy(logits, probs, ignore_index=0)
    with pytest.raises(ValueError, match="ignore_index"):
        nn.CrossEntropyLoss(ignore_index=2)(logits, probs)
    np.testing.assert_allclose(float(nn.CrossEntropyLoss()(logits, probs)), np.log(3), 1e-6)


def test_cross_entropy_probabilities_as_a_list_or_float64_array() -> None:
    """Class probabilities given as a nested list (or a float64 NumPy array) are taken as
    float targets of the logits' dtype; a list used to fail inside the op."""
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    p = [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]]
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(p)).item()
    for targets in (p, np.asarray(p)):
        out = tg.cross_entropy(tg.tensor(x), targets)
        assert out.dtype == tg.float32
        np.testing.assert_allclose(float(out), want, rtol=1e-6)


def test_transformer_activation_given_as_a_class_says_to_instantiate_it() -> None:
    """``activation=nn.GELU`` (the class) used to fail at the first call, inside GELU's
    constructor ("approximate must be 'none' or 'tanh', got tensor(...)")."""
    with pytest.raises(TypeError, match=r"nn\.GELU\(\)"):
        nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (lambda: nn.LeakyReLU(0.2, inplace=True), lambda: torch.nn.LeakyReLU(0.2)),
        (lambda: nn.ELU(1.5), lambda: torch.nn.ELU(1.5)),
        (lambda: nn.Softplus(2.0, 1.0), lambda: torch.nn.Softplus(2.0, 1.0)),
        (lambda: nn.Softmax(1), lambda: torch.nn.Softmax(1)),
        (lambda: nn.LogSoftmax(axis=-1), lambda: torch.nn.LogSoftmax(dim=-1)),
        (lambda: nn.RMSNorm(4), lambda: torch.nn.RMSNorm(4)),
        (lambda: nn.RMSNorm((3, 4), eps=1e-3), lambda: torch.nn.RMSNorm((3, 4), eps=1e-3)),
        (
            lambda: nn.RMSNorm(4, elementwise_affine=False),
            lambda: torch.nn.RMSNorm(4, elementwise_affine=False),
        ),
    ],
    ids=["leaky_relu", "elu", "softplus", "softmax", "log_softmax", "rms", "rms2", "rms-plain"],
)
def test_more_layers_match_torch(ours: Any, theirs: Any) -> None:
    """Outputs and input gradients equal PyTorch's (values at 0 included: leaky ReLU's slope,
    ELU's alpha)."""
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    x[0, 0, :2] = 0.0
    layer, twin = ours(), theirs()
    t, p = tg.tensor(x).require_grad(), torch.tensor(x, requires_grad=True)
    y, q = layer(t), twin(p)
    np.testing.assert_allclose(np.asarray(y), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = np.random.default_rng(4).standard_normal(x.shape).astype(np.float32)
    (g,) = tg.grad((y * tg.tensor(w)).sum(), t)
    (h,) = torch.autograd.grad((q * torch.tensor(w)).sum(), p)
    np.testing.assert_allclose(np.asarray(g), h.numpy(), rtol=1e-5, atol=1e-6)
    assert [n for n, _ in layer.named_parameters()] == [n for n, _ in twin.named_parameters()]


def test_rms_norm_and_softmax_refuse_bad_input_clearly() -> None:
    with pytest.raises(tg.ShapeError, match=r"RMSNorm: input of shape \(2, 4\) does not end"):
        nn.RMSNorm(5)(tg.ones((2, 4)))
    with pytest.raises(TypeError, match="use axis="):
        nn.Softmax(dim=1)
    with pytest.raises(TypeError, match="Softmax: axis must be an integer"):
        nn.Softmax(1.0)
    norm = nn.RMSNorm(4, dtype=tg.bfloat16)
    out = norm(tg.ones((2, 4), dtype=tg.bfloat16))  # eps None: bfloat16's machine epsilon
    want = torch.nn.RMSNorm(4, dtype=torch.bfloat16)(torch.ones(2, 4, dtype=torch.bfloat16))
    assert out.dtype == tg.bfloat16
    np.testing.assert_allclose(np.asarray(out, np.float32), want.float().detach().numpy())


def test_bfloat16_attention_takes_a_float_mask_and_rms_norm_keeps_half_dtypes() -> None:
    """A bfloat16 additive mask is a float mask (np.issubdtype said no); RMSNorm of a float16
    input with a float32 weight returns float16, as PyTorch; an integer input is refused."""
    q = tg.ones((1, 2, 3, 4), dtype=tg.bfloat16)
    mask = tg.zeros((3, 3), dtype=tg.bfloat16)
    assert tg.scaled_dot_product_attention(q, q, q, mask=mask).dtype == tg.bfloat16
    assert nn.RMSNorm(4)(tg.ones((2, 4), dtype=tg.float16)).dtype == tg.float16
    with pytest.raises(TypeError, match="RMSNorm takes floating inputs"):
        nn.RMSNorm(4)(tg.ones((2, 4), dtype=tg.int32))


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_rnn_dropout_is_the_probability_as_in_torch(name: str) -> None:
    """``rnn.dropout`` is PyTorch's float (it was a ``Dropout`` submodule, so code reading it
    got a module and ``rnn.dropout = 0.5`` broke the next call); there is no submodule, and a
    new value set on the layer is the one used."""
    ours = getattr(nn, name)(3, 4, num_layers=2, dropout=0.3, key=0)
    theirs = getattr(torch.nn, name)(3, 4, num_layers=2, dropout=0.3)
    assert ours.dropout == theirs.dropout == 0.3
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    x = tg.ones((5, 2, 3))
    ours.dropout = 1.0  # every output of the first layer dropped: the second sees zeros
    dropped = ours(x)[0]
    ours.eval()
    assert not np.allclose(np.asarray(ours(x)[0]), np.asarray(dropped))
    ours.train()
    ours.dropout = 0.0
    np.testing.assert_allclose(np.asarray(ours(x)[0]), np.asarray(ours.eval()(x)[0]))
    a, b = (getattr(nn, name)(3, 4, num_layers=2, dropout=0.5, key=1) for _ in range(2))
    np.testing.assert_array_equal(np.asarray(a(x)[0]), np.asarray(b(x)[0]))  # keyed: same masks


def test_layer_sizes_are_checked_as_conv_checks_them() -> None:
    """``LayerNorm(np.int64(3))`` was "not iterable" (PyTorch takes it); floats and negative
    sizes of LayerNorm, RMSNorm, BatchNorm, Linear, Embedding and MultiheadAttention failed
    inside NumPy or JAX; they now name the layer and the argument, as Conv2d's do."""
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for ours, theirs in (
        (nn.LayerNorm(np.int64(3)), torch.nn.LayerNorm(np.int64(3))),
        (nn.RMSNorm(np.int64(3)), torch.nn.RMSNorm(np.int64(3))),
        (nn.LayerNorm([np.int32(3)]), torch.nn.LayerNorm([3])),
    ):
        assert type(ours.normalized_shape[0]) is int
        want = theirs(torch.tensor(x)).detach().numpy()
        np.testing.assert_allclose(np.asarray(ours(tg.tensor(x))), want, rtol=1e-5, atol=1e-6)
    assert nn.BatchNorm1d(np.int64(3)).num_features == 3
    assert nn.Embedding(np.int64(5), np.int64(2), key=0).weight.shape == (5, 2)
    assert nn.MultiheadAttention(np.int64(8), np.int64(2), key=0).head_dim == 4
    bad = [
        (lambda: nn.LayerNorm(2.5), TypeError, r"^LayerNorm: normalized_shape must be an integer"),
        (lambda: nn.LayerNorm((2, 3.0)), TypeError, r"^LayerNorm: normalized_shape must be an"),
        (lambda: nn.RMSNorm(2.5), TypeError, r"^RMSNorm: normalized_shape must be an integer"),
        (lambda: nn.LayerNorm(-1), ValueError, r"^LayerNorm: normalized_shape \(-1,\) has a neg"),
        (lambda: nn.BatchNorm1d(3.0), TypeError, r"^BatchNorm1d: num_features must be an integ"),
        (lambda: nn.BatchNorm2d(2.5), TypeError, r"^BatchNorm2d: num_features must be an integ"),
        (lambda: nn.Linear(2.5, 3), TypeError, r"^Linear: in_features must be an integer"),
        (lambda: nn.Linear(2, 3.0), TypeError, r"^Linear: out_features must be an integer"),
        (lambda: nn.Linear(-1, 3), ValueError, r"sizes must be non-negative"),
        (lambda: nn.Embedding(5.0, 3), TypeError, r"^Embedding: num_embeddings must be an int"),
        (lambda: nn.Embedding(5, -3), ValueError, r"sizes must be positive"),
        (lambda: nn.MultiheadAttention(8.0, 2), TypeError, r"^MultiheadAttention: embed_dim must"),
        (lambda: nn.MultiheadAttention(8, 2.0), TypeError, r"^MultiheadAttention: num_heads must"),
    ]
    for make, error, message in bad:
        with pytest.raises(error, match=message):
            make()


@pytest.mark.parametrize("tracked", [True, False])
@pytest.mark.parametrize("shape", [(0, 3), (0, 3, 5), (2, 3, 0), (0, 3, 2, 2)])
def test_batch_norm_of_an_empty_batch_is_empty_as_torch(
    shape: tuple[int, ...], tracked: bool
) -> None:
    """Training on an empty batch used to raise "training needs more than one value per
    channel"; PyTorch returns an empty output, keeps the running statistics and counts the
    batch; the parameters' gradients are zeros."""
    name = "BatchNorm2d" if len(shape) == 4 else "BatchNorm1d"
    ours = getattr(nn, name)(3, track_running_stats=tracked)
    theirs = getattr(torch.nn, name)(3, track_running_stats=tracked)
    if tracked:  # statistics an update would change
        ours.running_mean.data, theirs.running_mean.data = tg.full(3, 5.0), torch.full((3,), 5.0)
        ours.running_var.data, theirs.running_var.data = tg.full(3, 2.0), torch.full((3,), 2.0)
    x = np.zeros(shape, np.float32)
    t, p = tg.tensor(x).require_grad(), torch.tensor(x, requires_grad=True)
    y, q = ours(t), theirs(p)
    assert y.shape == tuple(q.shape) == shape
    y.sum().backward()
    q.sum().backward()
    assert t.grad is not None and t.grad.shape == shape
    for (name_ours, a), (name_theirs, b) in zip(
        ours.named_parameters(), theirs.named_parameters(), strict=True
    ):
        assert name_ours == name_theirs
        np.testing.assert_array_equal(np.asarray(a.grad), b.grad.numpy())
    for (_, a), (_, b) in zip(ours.named_buffers(), theirs.named_buffers(), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b.numpy())
    ours.eval()
    assert ours(tg.tensor(x)).shape == shape


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_over_no_keys_gives_zeros_as_torch(
    need_weights: bool, batch_first: bool
) -> None:
    """Zero keys (S == 0) used to fail inside JAX ("zero-size array to reduction operation
    max"); PyTorch attends to nothing: the output is out_proj of zeros (its bias), the
    weights (N, L, 0), and the gradients are zeros (the output bias's: L * N)."""
    ours = nn.MultiheadAttention(8, 2, batch_first=batch_first, key=0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    with torch.no_grad():
        theirs.out_proj.bias.uniform_()  # a non-zero output: out_proj's bias
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 8) if batch_first else (3, 1, 8)).astype(np.float32)
    kv = np.zeros((1, 0, 8) if batch_first else (0, 1, 8), np.float32)
    mask = np.zeros((3, 0), bool)

    def call(m: Any, xs: list[Any]) -> Any:
        out, weights = m(xs[0], xs[1], xs[1], need_weights=need_weights, attn_mask=xs[2])
        if need_weights:
            assert tuple(weights.shape) == (1, 3, 0)
        else:
            assert weights is None
        return out

    check_against_torch(ours, theirs, [x, kv, mask], call=call)


def test_layers_take_arrays_and_name_a_list_as_ops_do() -> None:
    """A list given to GRU, LSTM, MultiheadAttention, TransformerEncoderLayer, GroupNorm,
    BatchNorm or RMSNorm failed with "'list' object has no attribute 'ndim'"; it now raises
    the ops' TypeError (as nn.Linear's: convert it with tg.tensor), and NumPy arrays are taken
    as ops take them."""
    x = np.random.default_rng(0).standard_normal((3, 2, 4)).astype(np.float32)
    layers = [
        (nn.GRU(4, 3, key=0), lambda m, a: m(a)[0]),
        (nn.LSTM(4, 3, key=0), lambda m, a: m(a)[0]),
        (nn.MultiheadAttention(4, 2, key=0), lambda m, a: m(a, a, a)[0]),
        (nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, key=0), lambda m, a: m(a)),
        (nn.GroupNorm(1, 2), lambda m, a: m(a)),
        (nn.BatchNorm1d(2), lambda m, a: m(a)),
        (nn.RMSNorm(4), lambda m, a: m(a)),
    ]
    for layer, call in layers:
        name = type(layer).__name__
        message = rf"^{name}: unsupported operand type list; .*tg\.tensor"
        with pytest.raises(TypeError, match=message):
            call(layer, x.tolist())
        np.testing.assert_allclose(
            np.asarray(call(layer, x)), np.asarray(call(layer, tg.tensor(x))), rtol=1e-6
        )
    with pytest.raises(TypeError, match=r"^GRU: a PyTorch tensor"):
        nn.GRU(4, 3, key=0)(torch.tensor(x))
    mha = nn.MultiheadAttention(4, 2, key=0)
    q = tg.tensor(x)
    want = mha(q, q, q, attn_mask=tg.tensor(np.triu(np.ones((3, 3), bool), 1)))[0]
    got = mha(q, q, q, attn_mask=np.triu(np.ones((3, 3), bool), 1).tolist())[0]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


_ON_DEVICE = [
    lambda device: nn.Linear(2, 3, key=0, device=device),
    lambda device: nn.Conv1d(1, 2, 3, key=0, device=device),
    lambda device: nn.Conv2d(1, 2, 3, key=0, device=device),
    lambda device: nn.LayerNorm(3, device=device),
    lambda device: nn.RMSNorm(3, device=device),
    lambda device: nn.GroupNorm(1, 2, device=device),
    lambda device: nn.BatchNorm1d(3, device=device),
    lambda device: nn.BatchNorm2d(3, device=device),
    lambda device: nn.Embedding(4, 2, key=0, device=device),
    lambda device: nn.LSTM(3, 4, key=0, device=device),
    lambda device: nn.GRU(3, 4, key=0, device=device),
    lambda device: nn.MultiheadAttention(4, 2, key=0, device=device),
    lambda device: nn.TransformerEncoderLayer(4, 2, 8, key=0, device=device),
]


@pytest.mark.parametrize("make", _ON_DEVICE)
def test_layers_take_pytorchs_device_keyword_as_tensor_factories_do(make: Any) -> None:
    """``device=None`` (PyTorch's default) and ``device="cpu"`` were a bare "unexpected keyword
    argument"; every layer that takes ``dtype=`` takes ``device=`` and places its parameters
    and buffers as ``tg.zeros(..., device=)`` places a tensor; a device that does not exist is
    a DeviceError naming the layer."""
    import jax

    from tapegrad._placement import committed

    default = make(None)
    tensors = [*default.parameters(), *default.buffers()]
    assert tensors and not any(committed(t.data) for t in tensors)  # as tg.zeros(shape)
    for device in ("cpu", "cpu:0", 0, jax.devices("cpu")[0]):
        placed = make(device)
        want = tg.zeros(3, device=device).data
        for t in (*placed.parameters(), *placed.buffers()):
            assert committed(t.data) and t.data.sharding == want.sharding
        assert all(t.requires_grad for t in placed.parameters())
    name = type(default).__name__
    with pytest.raises(tg.DeviceError, match=rf"^nn\.{name} at .*there is no device 'cpu:99'"):
        make("cpu:99")
    x = np.zeros((2, 3), np.int32 if name == "Embedding" else np.float32)
    if name in ("Linear", "LayerNorm", "RMSNorm", "BatchNorm1d", "Embedding", "LSTM", "GRU"):
        moved = make("cpu")
        inputs = x[:, :2] if name == "Linear" else x
        np.testing.assert_allclose(
            np.asarray(first(moved(tg.tensor(inputs)))),
            np.asarray(first(make(None)(tg.tensor(inputs)))),
        )


def test_break_it_review_of_the_layer_fixes() -> None:
    """Tying a deep copy's frozen parameter read through named_parameters(); a batch norm's
    momentum set to None after construction (torch's swa_utils.update_bn does it); an empty
    normalized_shape; an RNN's dropout set to a string; a PyTorch tensor as h_0: each works
    as in PyTorch or says what to do (they were a TypeError, a bare float() error, a false
    shape message, a bare comparison error and a self-contradicting "must be a tensor")."""
    emb, head = nn.Embedding(5, 3, key=0), nn.Linear(3, 5, bias=False, key=1)
    pair = copy.deepcopy(nn.ModuleDict({"emb": emb, "head": head}))
    pair.requires_grad_(False)
    pair["head"].weight = dict(pair.named_parameters())["emb.weight"]
    assert pair["head"].weight is pair["emb"].weight
    bn = nn.BatchNorm1d(3)
    bn.momentum = None
    with pytest.raises(ValueError, match="momentum=None"):
        bn(tg.ones((4, 3)))
    for layer in (nn.LayerNorm, nn.RMSNorm):
        with pytest.raises(ValueError, match="at least one axis"):
            layer(())
    with pytest.raises(tg.ShapeError, match="at least one axis"):
        tg.layer_norm(tg.ones((2, 3)), ())
    lstm = nn.LSTM(3, 4, 2, key=0)
    lstm.dropout = "0.5"  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"LSTM.dropout: dropout probability must be a number"):
        lstm(tg.ones((5, 2, 3)))
    with pytest.raises(TypeError, match="GRU: h_0: a PyTorch tensor"):
        nn.GRU(3, 4, key=0)(tg.ones((5, 2, 3)), torch.zeros(1, 2, 4))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("scale", "upstream"), [(300.0, 1.0), (1.0, 8192.0)])
def test_group_norm_of_half_precision_normalises_in_float32_as_torch(
    dtype: str, scale: float, upstream: float
) -> None:
    """GroupNorm was built from float16 ops: activations ~300 (squared deviations over
    65,504) gave all zeros, and upstream gradients ~8192 gave 256 of 256 non-finite input
    gradients. PyTorch normalises half precision in float32 and rounds the output back (the
    bias gradient, a sum of 64 values ~8192, is beyond float16 in both)."""
    rng = np.random.default_rng(0)
    theirs = torch.nn.GroupNorm(2, 8).to(getattr(torch, dtype))
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = nn.GroupNorm(2, 8).to(getattr(tg, dtype))
    ours.load_state_dict({k: tg.tensor(v.float().numpy()) for k, v in theirs.state_dict().items()})
    x = (rng.normal(size=(4, 8, 16)) * scale).astype(np.float32)
    up = (rng.uniform(0.5, 1.0, size=x.shape) * upstream).astype(np.float32)
    xo = tg.tensor(x).astype(getattr(tg, dtype)).require_grad()
    xt = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()
    yo, yt = ours(xo), theirs(xt)
    yo.backward(tg.tensor(up).astype(yo.dtype))
    yt.backward(torch.tensor(up).to(yt.dtype))
    assert yo.dtype == xo.dtype and xo.grad is not None and xo.grad.dtype == xo.dtype
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    for got, want in (
        (yo, yt),
        (xo.grad, xt.grad),
        (ours.weight.grad, theirs.weight.grad),
        (ours.bias.grad, theirs.bias.grad),
    ):
        assert got is not None
        mine, ref = np.asarray(got.astype(tg.float32).numpy()), want.float().detach().numpy()
        finite = np.isfinite(ref)
        np.testing.assert_array_equal(np.isfinite(mine), finite)
        atol = tol * np.abs(ref[finite]).max(initial=0.0)
        np.testing.assert_allclose(mine[finite], ref[finite], rtol=tol, atol=atol)
    assert np.isfinite(xo.grad.numpy()).all()


@pytest.mark.parametrize(("n_in", "n_out"), [(0, 3), (3, 0)])
def test_a_linear_layer_of_zero_features_has_pytorchs_gradients(n_in: int, n_out: int) -> None:
    """``nn.Linear(0, 3)`` / ``nn.Linear(3, 0)``: backward gave JAX's ZeroDivisionError
    (a reshape to ``(-1, 0)``); PyTorch's gradients are zero-size, and the bias's the batch
    size where the output has features."""
    layer = tg.nn.Linear(n_in, n_out, key=0)
    x = tg.zeros((2, n_in), requires_grad=True)
    layer(x).sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.shape == (n_out, n_in)
    assert x.grad is not None and x.grad.shape == (2, n_in)
    assert layer.bias.grad is not None and layer.bias.grad.numpy().tolist() == [2.0] * n_out


def test_pooling_shows_pytorchs_default_stride_and_a_missing_key_gets_no_unrelated_advice() -> None:
    """``MaxPool2d(2)`` prints ``stride=2`` (PyTorch's), not ``stride=None``; a checkpoint
    missing a key is told so without the advice about tensors cached in ``forward`` (which
    only explains unexpected keys)."""
    assert "stride=2" in repr(nn.MaxPool2d(2)) and "stride=3" in repr(nn.AvgPool2d(3))
    model = nn.Sequential(nn.Linear(2, 3, key=0), nn.Linear(3, 1, key=1))
    state = model.state_dict()
    del state["1.bias"]
    with pytest.raises(KeyError, match=r"missing keys \['1.bias'\]") as err:
        model.load_state_dict(state)
    assert "caches on itself" not in str(err.value)
    state = {**model.state_dict(), "cached": np.zeros(2)}
    with pytest.raises(KeyError, match="caches on itself"):
        model.load_state_dict(state)
