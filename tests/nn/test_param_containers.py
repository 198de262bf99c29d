"""ParameterList, ParameterDict and Embedding.from_pretrained as PyTorch's: registration
names, conversion of plain tensors, state dicts both ways, optimizers, errors."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")


class _Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.plist = nn.ParameterList([tg.ones((2, 3)).require_grad(), tg.zeros(4)])
        self.pdict = nn.ParameterDict({"b": tg.zeros(2), "a": tg.ones(3)})


class _TorchHolder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.plist = torch.nn.ParameterList([torch.randn(2, 3), torch.randn(4)])
        self.pdict = torch.nn.ParameterDict({"b": torch.randn(2), "a": torch.randn(3)})


def test_parameter_containers_register_as_torch_and_load_its_state_dict() -> None:
    ours, theirs = _Holder(), _TorchHolder()
    names = [n for n, _ in ours.named_parameters()]
    assert names == [n for n, _ in theirs.named_parameters()]
    assert names == ["plist.0", "plist.1", "pdict.a", "pdict.b"]  # a plain dict is sorted
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.load_state_dict(theirs.state_dict()) == nn.LoadResult([], [])
    np.testing.assert_array_equal(ours.pdict["a"].numpy(), theirs.pdict["a"].detach().numpy())
    assert all(p.requires_grad for p in ours.parameters())  # plain tensors became parameters
    assert repr(ours.plist).splitlines()[1].strip() == (
        "(0): Parameter containing: [float32 of size 2x3]"
    )


def test_optimizers_train_the_entries() -> None:
    model = _Holder()
    opt = tg.optim.SGD(model.parameters(), lr=0.5)
    loss = model.plist[0].sum() + (model.pdict["a"] * 2.0).sum()
    loss.backward()
    opt.step()
    np.testing.assert_allclose(model.plist[0].numpy(), 0.5)
    np.testing.assert_allclose(model.pdict["a"].numpy(), 0.0)


def test_parameter_list_behaves_as_a_list() -> None:
    holder = nn.Module()
    holder.p = tg.ones(2).require_grad()
    frozen = holder.p
    frozen.requires_grad_(False)  # a frozen parameter stays one, as a torch Parameter does
    plist = nn.ParameterList()
    plist.append(frozen).extend([tg.zeros(3), tg.ones(1)])
    plist += [tg.zeros(5)]
    assert len(plist) == 4 and plist[0] is frozen and not plist[0].requires_grad
    assert [tuple(p.shape) for p in plist] == [(2,), (3,), (1,), (5,)]
    assert plist[-1].shape == (5,)
    part = plist[1:3]
    assert isinstance(part, nn.ParameterList) and part[0] is plist[1]
    plist[1] = tg.full((3,), 7.0)
    assert [n for n, _ in plist.named_parameters()] == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(plist[1].numpy(), 7.0)
    assert plist[1].requires_grad and plist[1].is_leaf
    made = tg.ones(2, requires_grad=True) * 2.0  # not a leaf: a new leaf, as nn.Parameter(t)
    plist.append(made)
    assert plist[4].is_leaf and plist[4].requires_grad


def test_parameter_dict_behaves_as_a_dict() -> None:
    pd = nn.ParameterDict(OrderedDict([("z", tg.zeros(1)), ("y", tg.zeros(2))]))
    assert list(pd) == ["z", "y"]  # an OrderedDict keeps its order (PyTorch's)
    pd.update([("x", tg.zeros(3))])
    pd["z"] = tg.ones(1)  # replaced in its place
    assert pd.keys() == ["z", "y", "x"] and "y" in pd and len(pd) == 3
    assert list(reversed(pd)) == ["x", "y", "z"]
    assert pd.get("w") is None and pd.setdefault("w", tg.zeros(4)).shape == (4,)
    assert pd.pop("y").shape == (2,) and "y" not in pd
    del pd["x"]
    assert [n for n, _ in pd.named_parameters()] == ["z", "w"]
    merged = pd | nn.ParameterDict({"v": tg.zeros(1)})
    assert merged.keys() == ["z", "w", "v"] and merged["z"] is pd["z"]
    assert pd.popitem()[0] == "w"
    pd.clear()
    assert len(pd) == 0 and repr(pd) == "ParameterDict()"


def test_parameter_containers_refuse_what_would_not_train() -> None:
    plist, pd = nn.ParameterList(), nn.ParameterDict()
    with pytest.raises(TypeError, match=r"wrap an array first: tg.tensor\(a\)"):
        plist.append(np.zeros(2))
    with pytest.raises(TypeError, match=r"convert a PyTorch tensor first"):
        plist.append(torch.zeros(2))
    with pytest.raises(TypeError, match="only floating tensors can be parameters"):
        pd["i"] = tg.tensor([1, 2])
    with pytest.raises(TypeError, match="extend should be called with an iterable"):
        plist.extend(tg.zeros(2))
    with pytest.raises(IndexError, match="index 0 is out of range for 0 entries"):
        plist[0]
    with pytest.raises(TypeError, match="keys are strings"):
        pd[1] = tg.zeros(1)  # type: ignore[index]
    with pytest.raises(KeyError, match="without '.'"):
        pd["a.b"] = tg.zeros(1)
    with pytest.raises(KeyError, match="attribute or method"):
        pd["keys"] = tg.zeros(1)
    with pytest.raises(ValueError, match="length 3; 2 is required"):
        pd.update([("a", tg.zeros(1), 3)])  # type: ignore[list-item]


def test_embedding_from_pretrained_as_torch() -> None:
    table = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    for given in (table, tg.tensor(table), tg.tensor(table).data):
        ours = nn.Embedding.from_pretrained(given, padding_idx=-1)
        theirs = torch.nn.Embedding.from_pretrained(torch.tensor(table), padding_idx=-1)
        assert repr(ours) == repr(theirs) and ours.padding_idx == 4
        assert not ours.weight.requires_grad and [n for n, _ in ours.named_parameters()] == [
            "weight"
        ]
        assert list(ours.state_dict()) == list(theirs.state_dict())
        idx = np.array([[0, 4], [2, 2]])
        np.testing.assert_array_equal(ours(idx).numpy(), theirs(torch.tensor(idx)).numpy())
    trained = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=1)
    assert trained.weight.requires_grad
    trained(np.array([1, 2, 2])).sum().backward()
    np.testing.assert_array_equal(trained.weight.grad.numpy()[:, 0], [0, 0, 2, 0, 0])
    np.testing.assert_array_equal(trained.weight.numpy(), table)  # padding row not zeroed


def test_embedding_from_pretrained_refuses_clearly() -> None:
    table = np.zeros((4, 2), np.float32)
    with pytest.raises(TypeError, match=r"tg.tensor\(t\)"):
        nn.Embedding.from_pretrained(torch.zeros(4, 2))
    with pytest.raises(TypeError, match="max_norm=, a PyTorch keyword"):
        nn.Embedding.from_pretrained(table, max_norm=1.0)
    with pytest.raises(TypeError, match="sparse=, a PyTorch keyword"):
        nn.Embedding.from_pretrained(table, sparse=True)
    assert nn.Embedding.from_pretrained(table, sparse=False).weight.shape == (4, 2)
    with pytest.raises(TypeError, match=r"at most 3 positional argument\(s\) \(embeddings"):
        nn.Embedding.from_pretrained(table, True, None, 1.0)  # type: ignore[call-arg]
    with pytest.raises(tg.ShapeError, match="must be 2-D"):
        nn.Embedding.from_pretrained(table[0])
    with pytest.raises(TypeError, match="must be floating"):
        nn.Embedding.from_pretrained(table.astype(np.int32))
    with pytest.raises(ValueError, match=r"padding_idx=4 must be in \[-4, 4\)"):
        nn.Embedding.from_pretrained(table, padding_idx=4)
