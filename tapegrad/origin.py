"""Origins: where a node was made (the first frame outside tapegrad), as ``"path:line"``."""

from __future__ import annotations

import os
import sys
from types import CodeType

__all__ = ["user_frame", "display_path", "format_origin", "function_name"]

_PKG_PREFIX = os.path.dirname(os.path.abspath(__file__)) + os.sep
_INTERNAL: dict[str, bool] = {}


def user_frame(depth: int = 2) -> tuple[CodeType | None, int]:
    """Return the code object and line of the first caller frame outside the tapegrad package.

    Args:
        depth: frames to skip before looking (the caller's own frames).
    """
    f = sys._getframe(depth)
    internal = _INTERNAL
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        inside = internal.get(fn)
        if inside is None:
            inside = internal[fn] = os.path.abspath(fn).startswith(_PKG_PREFIX)
        if not inside:
            return code, f.f_lineno or 0
        f = f.f_back  # type: ignore[assignment]
    return None, 0


def display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies under it, else unchanged."""
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:  # another drive on Windows
            return path
        if not rel.startswith(".."):
            return rel
    return path


def format_origin(code: CodeType | None, lineno: int) -> str:
    """Format an origin as ``"path:line"``, relative to the current directory when under it."""
    if code is None:
        return "<unknown>:0"
    return f"{display_path(code.co_filename)}:{lineno}"


def function_name(code: CodeType | None) -> str:
    """The qualified name of ``code``'s function, or ``"<unknown>"``."""
    return "<unknown>" if code is None else code.co_qualname
