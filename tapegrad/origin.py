"""Origins: where a node was made (the first frame outside tapegrad), as ``"path:line"``."""

from __future__ import annotations

import functools
import os
import sys
from types import CodeType, FrameType

__all__ = [
    "user_frame",
    "user_site",
    "user_stacklevel",
    "line_of",
    "display_path",
    "format_origin",
    "function_name",
]

_PKG_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep
_INTERNAL: dict[str, bool] = {}


def _first_user_frame(depth: int) -> FrameType | None:
    """The first frame outside the tapegrad package, ``depth`` frames above the caller's."""
    try:
        return _outside(sys._getframe(depth + 1))
    except ValueError:  # fewer frames than that (called from C, ``atexit``): walk them all
        return _outside(sys._getframe(1))


def _outside(f: FrameType | None) -> FrameType | None:
    """``f`` or the first frame below it on the stack that lies outside the tapegrad package."""
    internal = _INTERNAL
    while f is not None:
        fn = f.f_code.co_filename
        inside = internal.get(fn)
        if inside is None:
            inside = internal[fn] = os.path.abspath(fn).startswith(_PKG_PREFIX)
        if not inside:
            return f
        f = f.f_back
    return None


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` call made by the caller of this function
    that names the first frame outside the tapegrad package (the user's line, whether the
    call came through a function, a module's ``__call__`` or both)."""
    caller = sys._getframe(1)
    user = _outside(caller)
    f: FrameType | None = caller
    level = 1
    while f is not None and f is not user:
        f = f.f_back
        level += 1
    return level if f is not None else 1


def user_frame(depth: int = 2) -> tuple[CodeType | None, int]:
    """Return the code object and line of the first caller frame outside the tapegrad package.

    Args:
        depth: frames to skip before looking (the caller's own frames).
    """
    f = _first_user_frame(depth)
    return (None, 0) if f is None else (f.f_code, f.f_lineno or 0)


def user_site(depth: int = 2) -> tuple[CodeType | None, int]:
    """``user_frame`` for a node's origin, recorded with every tracked op: the code object and
    the offset of its current instruction (``f_lasti``; ``line_of`` gives its line). Reading a
    frame's ``f_lineno`` decodes the function's line table from its start: measured here at
    ~4 us per call in a 300-line function, every op of a long script or notebook cell would
    pay that; the offset costs nothing and is turned into a line only when shown."""
    try:
        f = sys._getframe(depth)
    except ValueError:  # fewer frames than that: an op called from C (``atexit``): walk
        f = sys._getframe(1)
    else:
        code = f.f_code
        if _INTERNAL.get(code.co_filename) is False:  # the usual case: the user's frame
            return code, f.f_lasti
    user = _outside(f)
    return (None, 0) if user is None else (user.f_code, user.f_lasti)


@functools.lru_cache(maxsize=4096)
def line_of(code: CodeType | None, lasti: int) -> int:
    """The source line of the instruction at byte offset ``lasti`` of ``code`` (what the
    frame's ``f_lineno`` was); 0 when unknown."""
    if code is None:
        return 0
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line or 0
    return 0


def display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies under it, else unchanged; a
    Jupyter or IPython cell's file (``/tmp/ipykernel_<pid>/<hash>.py``) is shown as its
    input prompt, ``In[<n>]``, as IPython's own tracebacks name it."""
    cell = _cell_of(path)
    if cell is not None:
        return cell
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:  # another drive on Windows
            return path
        if not rel.startswith(".."):
            return rel
    return path


def _cell_of(path: str) -> str | None:
    """``In[<n>]`` when ``path`` is the file IPython compiled input cell ``n`` under, in this
    process; else ``None``. IPython keeps that map on its compiler (``_filename_map``, what its
    tracebacks read); without a running IPython, or from another version, nothing is mapped."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
        number = shell.compile._filename_map.get(path) if shell is not None else None
    except (AttributeError, TypeError):
        return None
    return f"In[{number}]" if isinstance(number, int) else None


def format_origin(code: CodeType | None, lineno: int) -> str:
    """Format an origin as ``"path:line"``, relative to the current directory when under it."""
    if code is None:
        return "<unknown>:0"
    return f"{display_path(code.co_filename)}:{lineno}"


def function_name(code: CodeType | None) -> str:
    """The qualified name of ``code``'s function, or ``"<unknown>"``."""
    return "<unknown>" if code is None else code.co_qualname
