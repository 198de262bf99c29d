"""tg.save / tg.load: safetensors round trips, bit-exact across processes, clear errors."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn


def _checkpoint() -> dict[str, object]:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(3, 4, key=0), nn.ReLU(), nn.Linear(4, 2, key=1))
    return {
        "model": model.state_dict(),
        "extras": {
            "bf16": tg.tensor(jnp.asarray(rng.standard_normal(5), jnp.bfloat16)),
            "ints": tg.tensor(np.arange(6, dtype=np.int32).reshape(2, 3)),
            "scalar": tg.tensor(np.float32(np.pi)),
            "numpy": rng.standard_normal((2, 2)).astype(np.float32),
        },
        "epoch": 7,
        "loss": 0.125,
        "name": "run-1",
        "done": False,
        "nothing": None,
        "history": [1.5, 2, {"nested": tg.ones(2)}],
    }


def _assert_same(got: object, want: object) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for k in want:
            _assert_same(got[k], want[k])
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _assert_same(g, w)
    elif isinstance(want, (tg.Tensor, np.ndarray)):
        assert isinstance(got, tg.Tensor) and not got.requires_grad
        w = np.asarray(want.data if isinstance(want, tg.Tensor) else want)
        g = np.asarray(got.data)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()  # bit-exact
    else:
        assert got == want and type(got) is type(want)


def test_round_trip_is_bit_exact_in_this_process_and_another(tmp_path: Path) -> None:
    ck = _checkpoint()
    first = tmp_path / "a.safetensors"
    tg.save(ck, first)
    _assert_same(tg.load(first), ck)
    # Another process loads it and saves what it loaded: same values, same bytes.
    second = tmp_path / "b.safetensors"
    code = "import sys, tapegrad as tg; tg.save(tg.load(sys.argv[1]), sys.argv[2])"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", code, str(first), str(second)], check=True, env=env)
    _assert_same(tg.load(second), ck)
    assert second.read_bytes() == first.read_bytes()


def test_a_binary_file_object_holds_what_a_file_would(tmp_path: Path) -> None:
    """tg.save(obj, io.BytesIO()) as torch.save writes a buffer: the same bytes a file gets,
    loaded back bit-exact (float8 too), at the buffer's position; a broken buffer and a
    destination that is neither a path nor writable get clear errors."""
    ck = _checkpoint()
    ck["f8"] = tg.tensor(np.array([-1.5, 0.25])).astype("float8_e4m3fn")
    buffer = io.BytesIO(b"head")
    buffer.seek(4)
    tg.save(ck, buffer)
    tg.save(ck, tmp_path / "a.safetensors")
    assert buffer.getvalue()[4:] == (tmp_path / "a.safetensors").read_bytes()
    buffer.seek(4)
    _assert_same(tg.load(buffer), ck)
    with open(tmp_path / "a.safetensors", "rb") as file:
        _assert_same(tg.load(file), ck)
    cut = io.BytesIO(buffer.getvalue()[4:-3])
    with pytest.raises(ValueError, match=r"the BytesIO object \(\d+ bytes\) is not a complete"):
        tg.load(cut)
    with pytest.raises(TypeError, match="a path or a binary file object .*got list"):
        tg.save(ck, [])
    with open(tmp_path / "t.txt", "w") as text, pytest.raises(TypeError, match="'wb'"):
        tg.save(ck, text)
    with open(tmp_path / "a.safetensors") as text, pytest.raises(TypeError, match="'rb'"):
        tg.load(text)
    stream = io.BytesIO()  # saved one after another: loaded one after another
    tg.save({"first": 1}, stream)
    tg.save({"second": tg.ones(2)}, stream)
    stream.seek(0)
    assert tg.load(stream) == {"first": 1}
    assert list(tg.load(stream)) == ["second"]


def test_a_module_state_dict_is_a_plain_safetensors_file(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    model = nn.Linear(3, 2, key=0)
    tg.save(model.state_dict(), tmp_path / "m.safetensors")
    plain = load_file(tmp_path / "m.safetensors")  # any safetensors reader sees the names
    assert sorted(plain) == ["bias", "weight"] and plain["weight"].shape == (2, 3)
    # A safetensors file from another tool loads as a flat dict of tensors.
    save_file({"fc.weight": np.ones((2, 3), np.float32)}, tmp_path / "other.safetensors")
    loaded = tg.load(tmp_path / "other.safetensors")
    assert list(loaded) == ["fc.weight"] and isinstance(loaded["fc.weight"], tg.Tensor)


@pytest.mark.parametrize("cut", [4, 40, -3])
def test_truncated_or_foreign_files_raise_a_clear_error(tmp_path: Path, cut: int) -> None:
    good = tmp_path / "good.safetensors"
    tg.save(_checkpoint(), good)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(good.read_bytes()[:cut])
    with pytest.raises(ValueError, match=r"bad.safetensors.*not a complete safetensors file"):
        tg.load(bad)
    text = tmp_path / "notes.txt"
    text.write_text("these are not tensors, just some words in a text file\n")
    with pytest.raises(ValueError, match="truncated or in another format"):
        tg.load(text)
    with pytest.raises(FileNotFoundError):
        tg.load(tmp_path / "missing.safetensors")


def test_unsupported_values_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match=r"opt/fn is a function"):
        tg.save({"opt": {"fn": lambda: 0}}, path)
    with pytest.raises(TypeError, match="keys must be strings"):
        tg.save({1: tg.ones(1)}, path)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_saving_into_a_missing_folder_names_the_folder(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such"
    with pytest.raises(FileNotFoundError, match="does not exist; create it first"):
        tg.save({"a": tg.ones(2)}, missing / "ck.safetensors")
    assert not (tmp_path / "no").exists()


def test_64_bit_integers_that_32_bits_cannot_hold_are_refused_naming_the_key(
    tmp_path: Path,
) -> None:
    from safetensors.numpy import save_file

    path = tmp_path / "ck.safetensors"
    # x64 is off here (the suite runs in the mode users run): JAX would narrow to 32 bits
    tg.save({"opt": {"step": np.array([3, 2**40 + 7], np.int64)}}, path)
    with pytest.raises(ValueError, match=r"'opt/step'.* int64 .*jax_enable_x64', True"):
        tg.load(path)
    save_file({"fc.count": np.array([2**32], np.uint64)}, tmp_path / "other.safetensors")
    with pytest.raises(ValueError, match=r"'fc.count'.* uint64 .*jax_enable_x64', True"):
        tg.load(tmp_path / "other.safetensors")
    # narrowing that changes no integer stays as it was, and float64 rounds to float32 as in JAX
    tg.save({"step": np.array([-(2**31), 2**31 - 1], np.int64), "x": np.array([0.1])}, path)
    loaded = tg.load(path)
    assert loaded["step"].dtype == jnp.int32 and loaded["step"].tolist() == [-(2**31), 2**31 - 1]
    assert loaded["x"].dtype == jnp.float32 and loaded["x"].tolist() == [np.float32(0.1)]


def test_saving_a_state_dict_whose_arrays_were_donated_names_the_key(tmp_path: Path) -> None:
    from tapegrad import optim

    model = nn.Linear(4, 2, key=0)
    opt = optim.SGD(model.parameters(), lr=0.1)

    @tg.jit
    def step(x: tg.Tensor) -> None:
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        opt.step()

    step(tg.ones((3, 4)))
    best = model.state_dict()
    step(tg.ones((3, 4)))  # donates the arrays ``best`` holds
    path = tmp_path / "best.safetensors"
    with pytest.raises(RuntimeError, match=r"tg.save: weight: .*donated to a tg.jit step"):
        tg.save(best, path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "bfloat16"])
def test_float8_and_bfloat16_round_trip_bit_exact(tmp_path: Path, dtype: str) -> None:
    ck = {"w": tg.tensor(np.array([[-1.5, 0.25], [3.0, 0.0]])).astype(dtype)}
    tg.save(ck, tmp_path / "f8.safetensors")
    _assert_same(tg.load(tmp_path / "f8.safetensors"), ck)


def test_a_typed_prng_key_is_refused_saying_to_save_its_bits(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match=r"tg.save: k is a typed PRNG key .*wrap_key_data"):
        tg.save({"k": jax.random.key(0)}, path)
    assert list(tmp_path.iterdir()) == []
    # what the message says to do: the bits save, and rebuild the same key
    tg.save({"k": jax.random.key_data(jax.random.key(3))}, path)
    key = jax.random.wrap_key_data(tg.load(path)["k"].data)
    assert jax.random.bits(key).item() == jax.random.bits(jax.random.key(3)).item()


def test_dtypes_safetensors_lacks_are_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match=r"tg.save: q is float4_e2m1fn.*convert it first"):
        tg.save({"q": tg.ones(2).astype(jnp.float4_e2m1fn)}, path)
    assert list(tmp_path.iterdir()) == []
    # a foreign file in a packed 4-bit dtype: a clear error, not NumPy's
    header = b'{"q":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}      '
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0")
    with pytest.raises(ValueError, match=r"'q' in .* safetensors dtype F4, which tg.load cannot"):
        tg.load(path)


def test_tuples_come_back_as_tuples_and_lists_as_lists(tmp_path: Path) -> None:
    path = tmp_path / "t.st"
    tg.save({"pair": (tg.ones(2), 3), "items": [1, (2.0, None)]}, path)
    back = tg.load(path)
    assert isinstance(back["pair"], tuple) and back["pair"][1] == 3
    assert back["items"][0] == 1 and back["items"][1] == (2.0, None)
    assert isinstance(back["items"], list)
