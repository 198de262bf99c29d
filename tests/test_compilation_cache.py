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
    body: str, tmp_path: Path, prelude: str = "import jax\nimport tapegrad as tg\n", **env: str
) -> None:
    script = prelude + textwrap.dedent(body)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    full_env |= {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


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
        assert any(n.startswith("jit_") for n in os.listdir(folder)), os.listdir(folder)
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
        assert any(n.startswith("jit_") for n in os.listdir({str(tmp_path / "here")!r}))
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
