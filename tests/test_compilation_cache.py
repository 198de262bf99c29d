"""The persistent compilation cache (``tapegrad.compilation_cache``), each case in a fresh
process: JAX decides once per process whether it uses the cache, and the settings are global."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(
    body: str,
    tmp_path: Path,
    prelude: str = "import jax\nimport tapegrad as tg\n",
    args: tuple[str, ...] = (),
    **env: str,
) -> str:
    """Run the script in a fresh process (its user cache folder under ``tmp_path``, no
    ``JAX_`` variables); assert it succeeded and return its standard output."""
    script = prelude + textwrap.dedent(body)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    full_env |= {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_importing_tapegrad_changes_no_jax_setting(tmp_path: Path) -> None:
    """Issue 17 item 4: every ``jax.config`` value and the process environment (``XLA_FLAGS``
    included) are the same before and after ``import tapegrad``."""
    _run(
        """
        import os
        import jax
        before = {k: repr(v) for k, v in jax.config.values.items()}
        env = dict(os.environ)
        import tapegrad
        after = {k: repr(v) for k, v in jax.config.values.items()}
        changed = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
                   if before.get(k) != after.get(k)}
        assert not changed, changed
        assert dict(os.environ) == env
        """,
        tmp_path,
        prelude="",
    )


@pytest.mark.slow
def test_import_changes_nothing_and_the_first_op_turns_the_cache_on(tmp_path: Path) -> None:
    _run(
        """
        assert jax.config.jax_compilation_cache_dir is None
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0
        assert tg.compilation_cache_dir() is None
        y = (tg.ones(3) * 2).sum()
        folder = tg.compilation_cache_dir()
        assert folder.endswith("xdg/tapegrad/jax"), folder
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
        float(y)
        import os
        assert os.listdir(os.path.join(folder, "tapegrad-kernels"))  # tapegrad's kernels
        """,
        tmp_path,
    )


@pytest.mark.slow
def test_set_compilation_cache_relocates_and_disables(tmp_path: Path) -> None:
    _run(
        f"""
        import os
        tg.set_compilation_cache(None)
        float((tg.ones(3) + 1).sum())
        assert tg.compilation_cache_dir() is None
        assert not os.path.exists({str(tmp_path / "xdg")!r})
        tg.set_compilation_cache({str(tmp_path / "here")!r})
        float((tg.ones(4) * 3).sum())
        assert os.listdir({str(tmp_path / "here" / "tapegrad-kernels")!r})
        tg.set_compilation_cache(None)
        assert tg.compilation_cache_dir() is None
        """,
        tmp_path,
    )


@pytest.mark.slow
def test_a_cache_the_user_configured_in_jax_is_kept(tmp_path: Path) -> None:
    mine = str(tmp_path / "mine")
    _run(
        f"""
        float((tg.ones(3) * 2).sum())
        assert tg.compilation_cache_dir() == {mine!r}
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0
        """,
        tmp_path,
        JAX_COMPILATION_CACHE_DIR=mine,
    )


# ---------------------------------------------------------------------- the kernel store

_PROGRAM = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
import tapegrad as tg
from tapegrad import compiled_backward, kernels

compiled_backward.set_compile_after(None)  # eager VJPs: kernels only
lowered = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: lowered.append(1)
    if event == "/jax/core/compile/jaxpr_to_mlir_module_duration" else None
)
tg.set_compilation_cache(sys.argv[1])
x = tg.tensor(np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)).require_grad()
w = tg.tensor(np.linspace(0.5, 2.0, 20, dtype=np.float32).reshape(4, 5)).require_grad()
loss = ((x @ w).tanh() * 3.0 + x.sum(axis=1, keepdims=True)).exp().mean()
loss.backward()
with tg.no_grad():  # kernels that take Python scalars: a slice's start, a fill value
    extra = [float((x[1] * 2.0).sum()), float(tg.zeros(4).sum() + tg.ones((2, 2)).sum() * 0.5)]
    extra += [float(tg.full((3,), 2.5).sum()), float((0.0 - x).sum())]
pool = kernels._background()
for _ in range(2):  # what compiles ahead (VJPs, their runs' kernels) is stored by now
    if pool is not None:
        pool.submit(int).result()
print(json.dumps({
    "extra": extra,
    "loss": float(loss), "gx": np.asarray(x.grad).tolist(), "gw": np.asarray(w.grad).tolist(),
    "lowered": len(lowered), "stored": len(list(kernels.store_dir().rglob("*.bin"))),
}))
"""


def _program(tmp_path: Path, cache: Path, **env: str) -> dict[str, object]:
    """Run ``_PROGRAM`` in a fresh process with its compilation cache at ``cache``."""
    import json

    out = _run(_PROGRAM, tmp_path, prelude="", args=(str(cache),), **env)
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def _oracle() -> tuple[float, object, object]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(0.5, 2.0, 20, dtype=np.float32).reshape(4, 5)

    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.exp(jnp.tanh(x @ w) * 3.0 + x.sum(axis=1, keepdims=True)).mean()

    loss, (gx, gw) = jax.value_and_grad(f, argnums=(0, 1))(x, w)
    return float(loss), np.asarray(gx), np.asarray(gw)


@pytest.mark.slow
def test_a_later_process_loads_kernels_without_lowering_them(tmp_path: Path) -> None:
    """The kernel store (``tapegrad.kernels``): the first process compiles and stores its
    kernels; the next one loads them all (no kernel is lowered again) and computes the same
    loss and gradients, equal to ``jax.grad``'s."""
    import numpy as np

    first = _program(tmp_path, tmp_path / "cache")
    second = _program(tmp_path, tmp_path / "cache")
    assert first["lowered"] and first["stored"]
    assert second["lowered"] == 0, second
    assert second["stored"] == first["stored"]
    assert (first["loss"], first["gx"], first["gw"]) == (second["loss"], second["gx"], second["gw"])
    assert first["extra"] == second["extra"]
    x = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(second["extra"], [2 * x[1].sum(), 2.0, 7.5, -x.sum()], rtol=1e-6)
    loss, gx, gw = _oracle()
    np.testing.assert_allclose(second["loss"], loss, rtol=1e-6)
    np.testing.assert_allclose(second["gx"], gx, rtol=1e-5)
    np.testing.assert_allclose(second["gw"], gw, rtol=1e-5)


@pytest.mark.slow
def test_a_later_process_runs_the_compiled_backward_pass_an_earlier_one_stored(
    tmp_path: Path,
) -> None:
    """A structure that compiled in one process (``compile_after() == 0``: at its second
    pass) is stored; the next process takes its program from the store at the same pass,
    loading it without tracing it, and computes the same gradients. A structure holding a
    ``tg.jax_op`` (a new function in every process) is not stored."""
    body = """
        import json, sys
        import numpy as np
        import tapegrad as tg
        from tapegrad import compiled_backward
        tg.set_compilation_cache(sys.argv[1])
        compiled_backward.set_compile_after(0)
        traced = []
        real = compiled_backward._program
        def spy(*args):
            traced.append(1)
            return real(*args)
        compiled_backward._program = spy
        x = tg.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)).require_grad()
        w = tg.tensor(np.ones((4, 2), np.float32)).require_grad()
        grads = []
        for _ in range(3):
            loss = ((x @ w).tanh() * (x @ w)).sum() + (w * w).mean()
            loss.backward()
            grads.append(w.grad.numpy().tolist())
            w.grad = None
        (entry,) = compiled_backward.cached()
        name = compiled_backward._store_name(entry.structure)
        traced_here = len(traced)
        double = tg.jax_op(lambda a: 2 * a)
        y = (double(x) * x).sum()
        for _ in range(2):
            y.backward(retain_graph=True)
        foreign = [p for p in compiled_backward.cached() if p is not entry]
        print(json.dumps({
            "grads": grads,
            "traced": traced_here,
            "passes": entry.passes,
            "compiled": entry.compiled is not None,
            "name": name,
            "foreign": [compiled_backward._store_name(p.structure) for p in foreign],
        }))
        """
    import json

    import numpy as np

    cache = str(tmp_path / "cache")
    first = json.loads(_run(body, tmp_path, args=(cache,)).splitlines()[-1])
    second = json.loads(_run(body, tmp_path, args=(cache,)).splitlines()[-1])
    assert first["name"] and first["name"] == second["name"]
    assert first["foreign"] == [None] == second["foreign"]
    assert first["traced"] >= 1 and first["compiled"]
    assert second["traced"] == 0 and second["compiled"]  # loaded, not traced
    assert first["passes"] == second["passes"] == 1  # compiled from the second pass in both
    np.testing.assert_allclose(second["grads"], first["grads"], rtol=1e-6)


@pytest.mark.slow
def test_a_users_defop_is_not_taken_from_the_store(tmp_path: Path) -> None:
    """An op the user declares with ``tg.defop`` is named like a built-in, but its VJP rule
    is the user's code (edited between runs, or reading the process's state): a pass holding
    it is not stored, so a later process whose rule differs gets its own gradients, not the
    ones the earlier process's program computes."""
    body = """
        import json, sys
        import numpy as np
        import tapegrad as tg
        from tapegrad import compiled_backward
        tg.set_compilation_cache(sys.argv[1])
        compiled_backward.set_compile_after(0)
        k = float(sys.argv[2])

        @tg.defop
        def user_scaled(x):
            return k * x, ()

        @user_scaled.defvjp
        def _user_scaled_vjp(saved, g):
            return (k * g,)

        x = tg.tensor(np.linspace(0.1, 1, 12, dtype=np.float32).reshape(3, 4)).require_grad()
        grads = []
        for _ in range(3):
            (user_scaled(x.tanh()) * x).sum().backward()
            grads.append(x.grad.numpy().tolist())
            x.grad = None
        print(json.dumps(grads))
        """
    import json

    import numpy as np

    cache = str(tmp_path / "cache")
    for k in ("2", "3"):
        grads = json.loads(_run(body, tmp_path, args=(cache, k)).splitlines()[-1])
        for g in grads[1:]:  # compiled (or loaded) passes: the eager first pass's gradients
            np.testing.assert_allclose(g, grads[0], rtol=1e-6)


@pytest.mark.slow
def test_damaged_or_foreign_store_entries_are_compiled_again(tmp_path: Path) -> None:
    """Entries that do not load (damaged) are replaced, and a process under other
    ``XLA_FLAGS`` uses entries of its own: the results stay right."""
    import numpy as np

    first = _program(tmp_path, tmp_path / "cache")
    for entry in (tmp_path / "cache" / "tapegrad-kernels").rglob("*.bin"):
        entry.write_bytes(b"not a program")
    damaged = _program(tmp_path, tmp_path / "cache")
    assert damaged["lowered"] and damaged["gx"] == first["gx"]
    again = _program(tmp_path, tmp_path / "cache")
    assert again["lowered"] == 0 and again["gw"] == first["gw"]
    other = _program(tmp_path, tmp_path / "cache", XLA_FLAGS="--xla_cpu_enable_fast_math=false")
    assert other["lowered"] and other["stored"] == 2 * first["stored"]
    np.testing.assert_allclose(other["gw"], first["gw"], rtol=1e-6)


_LAPACK = """
import json, sys
import numpy as np
import tapegrad as tg
from tapegrad import kernels

tg.set_compilation_cache(sys.argv[1])
a = tg.tensor(np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]], np.float32))
a.require_grad()
out = tg.det(a) + tg.inv(a).sum() + tg.solve(a, tg.ones(3)).sum() + tg.cholesky(a).sum()
out = out + tg.slogdet(a).logabsdet + tg.eigvalsh(a).sum() + (a * 2.0).sum()
out.backward()
print(json.dumps({
    "out": float(out), "grad": np.asarray(a.grad).tolist(),
    "stored": len(list(kernels.store_dir().rglob("*.bin"))),
    "jax": len(list(kernels.store_dir().rglob("*.jax"))),
}))
"""


def test_kernels_calling_lapack_are_left_to_jax(tmp_path: Path) -> None:
    """A kernel whose program calls LAPACK (det, inv, solve, cholesky, eigvalsh) loaded from
    the store into a later process crashed it (jaxlib readies LAPACK while lowering, and a
    loaded program is not lowered): the store marks such kernels as plain jax.jit's, and the
    second process computes the same values."""
    import json

    runs = []
    for _ in range(2):
        out = _run(_LAPACK, tmp_path, prelude="", args=(str(tmp_path / "cache"),))
        runs.append(json.loads(out.strip().splitlines()[-1]))
    assert runs[0]["jax"] >= 6 and runs[0]["stored"] >= 1, runs[0]
    assert runs[1] == runs[0]


@pytest.mark.slow
def test_no_store_while_the_cache_is_off(tmp_path: Path) -> None:
    _run(
        """
        from tapegrad import kernels
        tg.set_compilation_cache(None)
        float((tg.ones(3) * 2).sum())
        assert kernels.store_dir() is None
        assert not list((__import__("pathlib").Path.cwd() / "xdg").rglob("*.bin"))
        """,
        tmp_path,
    )


@pytest.mark.slow
def test_the_store_removes_environments_unused_for_a_week(tmp_path: Path) -> None:
    """An upgrade (another tapegrad source digest, JAX version or ``XLA_FLAGS``) starts a new
    folder; folders of environments unused for a week go, recent ones stay."""
    store = tmp_path / "cache" / "tapegrad-kernels"
    old, recent = store / "0123456789abcdef", store / "fedcba9876543210"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "x.bin").write_bytes(b"a program")
    week = 7 * 24 * 3600
    os.utime(old, (os.path.getatime(old) - week - 60, os.path.getmtime(old) - week - 60))
    _program(tmp_path, tmp_path / "cache")
    assert not old.exists() and (recent / "x.bin").exists()
    assert len([f for f in store.iterdir() if f != recent]) == 1  # this environment's
