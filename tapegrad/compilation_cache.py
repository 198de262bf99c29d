"""The persistent compilation cache: compiled kernels kept on disk, reused by later processes.

Eager tapegrad compiles one small XLA program per op, shape and dtype (and one per optimizer
and compiled VJP). JAX can keep those programs on disk (its persistent compilation cache), so
a process that runs a program the machine ran before loads them instead of compiling again.
tapegrad turns that cache on by default, lazily: nothing happens at import; the first time
tapegrad is about to compile (its first op, constructor or random draw), it points JAX's
cache at ``<user cache dir>/tapegrad/jax`` (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux,
``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) and lets it keep every program,
however fast it compiled (JAX's default keeps only those that took a second or more; eager
kernels take milliseconds). These are JAX settings, so they also apply to the user's own
``jax.jit`` functions in the same process.

It leaves JAX alone when the user configured a cache already (``jax_compilation_cache_dir``
set, by ``jax.config.update`` or JAX's environment variable) or turned it off
(``jax_enable_compilation_cache`` false), and :func:`set_compilation_cache` relocates or
disables it (``None``), at any time. JAX treats the cache as trusted code: never point it at a
folder others can write.

While tapegrad's cache is in use, ``tapegrad.kernels`` keeps a store of its own kernels'
programs in a ``tapegrad-kernels`` folder inside it, which later processes load without
tracing or lowering the kernels again (JAX's cache needs both to find a program).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import jax
from jax.experimental.compilation_cache import compilation_cache as _jax_cache

__all__ = ["set_compilation_cache", "compilation_cache_dir", "ensure"]

_DEFAULT = "default"
_lock = threading.Lock()
_choice: str | Path | None = _DEFAULT  # the user's choice: default, a folder, or None (off)
_applied: str | None = None  # the folder tapegrad configured in JAX, if any
ready = False
"""Whether the cache was configured (read by the op path before calling ``ensure``)."""


def _user_cache_root() -> Path:
    """The platform's per-user cache folder (read when first needed, never at import)."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) if local else Path.home() / "AppData" / "Local"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg else Path.home() / ".cache"


def _setting(name: str) -> Any:
    """The current value of a JAX config option."""
    return getattr(jax.config, name)


def _set(name: str, value: Any) -> None:
    jax.config.update(name, value)  # type: ignore[no-untyped-call]  # JAX's update is untyped


def _apply(folder: str | None) -> None:
    """Point JAX's persistent cache at ``folder`` (``None``: off) and make JAX re-read it.

    JAX decides once per process, at its first compile, whether it uses the cache; resetting
    that decision makes a later change take effect for the next compile.
    """
    global _applied
    if folder is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        _set("jax_compilation_cache_dir", folder)
        if _setting("jax_persistent_cache_min_compile_time_secs") == 1.0:  # JAX's default
            _set("jax_persistent_cache_min_compile_time_secs", 0.0)
    else:
        _set("jax_compilation_cache_dir", None)
    _applied = folder
    _jax_cache.reset_cache()


def ensure() -> None:
    """Configure the cache once, before tapegrad's first compile (called by the engine)."""
    global ready
    with _lock:
        if ready:
            return
        ready = True
        if _choice is None or _setting("jax_compilation_cache_dir"):
            return  # off, or the user configured JAX's cache: leave JAX as it is
        if not _setting("jax_enable_compilation_cache"):
            return
        folder = _user_cache_root() / "tapegrad" / "jax" if _choice == _DEFAULT else _choice
        _apply(str(folder))


def set_compilation_cache(path: str | os.PathLike[str] | None) -> None:
    """Relocate tapegrad's persistent compilation cache to ``path``, or turn it off (``None``).

    Takes effect for the next compile, whether or not tapegrad compiled anything yet. Turning
    it off unsets the folder only if tapegrad set it (a cache the user configured in JAX
    stays); relocating sets JAX's ``jax_compilation_cache_dir`` to ``path`` (created if
    missing).

    The kernel store (``tapegrad.kernels``) lives in a ``tapegrad-kernels`` folder inside
    the cache folder and follows it: off with it, moved with it.

    Args:
        path: a folder (created if missing) or ``None`` to compile afresh in every process.
    """
    global _choice, ready
    with _lock:
        _choice = None if path is None else Path(path)
        ready = True
        if path is not None:
            _apply(os.fspath(path))
        elif _applied is not None and _setting("jax_compilation_cache_dir") == _applied:
            _apply(None)


def tapegrad_cache_dir() -> str | None:
    """The folder of the persistent cache when tapegrad configured it and it is in use now
    (``None`` when it is off, not configured yet, or the user configured JAX's cache
    instead): where ``tapegrad.kernels`` keeps its store."""
    if not ready:
        ensure()
    folder = _applied
    if folder is None or _setting("jax_compilation_cache_dir") != folder:
        return None
    return folder if _setting("jax_enable_compilation_cache") else None


def compilation_cache_dir() -> str | None:
    """The folder JAX's persistent compilation cache uses now (``None``: none yet, or off).

    Before tapegrad's first compile this is whatever JAX was configured with (usually
    ``None``); the default folder is chosen at that first compile.
    """
    folder: str | None = _setting("jax_compilation_cache_dir")
    return folder
