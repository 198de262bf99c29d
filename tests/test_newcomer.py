"""A PyTorch user's first hour: module-level PyTorch names on ``tg`` (``tg.long``,
``tg.from_numpy``, ...), GPU device names on a machine without one, ``float()`` of a
multi-element tensor and ``python -m tapegrad.launch`` without a script or processes each
raise an error that names what to write instead."""

from __future__ import annotations

import jax
import pytest
from _support import error_of

import tapegrad as tg


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("long", "tg.int32"),
        ("float", "tg.float32"),
        ("double", "tg.float64"),
        ("half", "tg.float16"),
        ("int", "tg.int32"),
        ("bool", "tg.bool_"),
        ("from_numpy", "tg.tensor("),
        ("as_tensor", "tg.tensor("),
        ("FloatTensor", "tg.tensor("),
        ("LongTensor", "tg.tensor("),
        ("clamp", "tg.clip("),
        ("cuda", "device"),
        ("inference_mode", "tg.no_grad()"),
        ("chunk", "tg.split(x, n, axis=...)"),
        ("unbind", "list(x)"),
    ],
)
def test_pytorchs_module_names_say_what_to_write(name: str, says: str) -> None:
    err = error_of(AttributeError, lambda: getattr(tg, name))
    message = str(err)
    assert message.startswith(f"module 'tapegrad' has no attribute {name!r} (PyTorch's")
    assert says in message, message
    assert err.name is None  # Python then adds no "Did you mean: 'log'?" after the hint
    assert not hasattr(tg, name)


def test_an_unknown_module_name_is_a_plain_attribute_error() -> None:
    err = error_of(AttributeError, getattr, tg, "no_such_thing")
    assert str(err) == "module 'tapegrad' has no attribute 'no_such_thing'"
    typo = error_of(AttributeError, getattr, tg, "sofmax")
    assert typo.name == "sofmax" and typo.obj is tg  # Python's "Did you mean: 'softmax'?"


def test_from_tapegrad_import_of_a_pytorch_name_fails_as_import_does() -> None:
    with pytest.raises(ImportError):
        exec("from tapegrad import long", {})


@pytest.mark.skipif(
    any(d.platform != "cpu" for d in jax.devices()), reason="the machine has an accelerator"
)
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "gpu"])
def test_a_gpu_name_without_a_gpu_says_jax_sees_none(name: str) -> None:
    err = error_of(tg.DeviceError, lambda: tg.zeros(2, device=name))
    message = str(err)
    assert f"there is no device {name!r}" in message
    assert "no GPU" in message and "jax[cuda" in message, message


@pytest.mark.parametrize("convert", [float, int])
def test_a_number_from_a_multi_element_tensor_says_what_to_do(convert: type) -> None:
    err = error_of(TypeError, convert, tg.ones(3))
    assert "needs a one-element tensor, this one has shape (3,)" in str(err)
    assert ".sum()" in str(err) and ".tolist()" in str(err), str(err)


def test_launch_without_a_script_names_only_what_is_missing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the script's arguments are optional: argparse's own message listed them as required
    from tapegrad import launch

    with pytest.raises(SystemExit) as info:
        launch.main(["-n", "2"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith("error: the following arguments are required: script"), err
    assert "script [args ...]" in err or "script [ARGS...]" in err, err


def test_launch_with_no_processes_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from tapegrad import launch

    with pytest.raises(SystemExit) as info:  # was a ValueError traceback
        launch.main(["-n", "0", "train.py"])
    assert info.value.code == 2
    assert "-n must be at least 1, got 0" in capsys.readouterr().err
