"""pytest plugin (entry point ``tapegrad_leaks``): the ``no_leaks`` fixture and marker.

Registered through ``[project.entry-points.pytest11]``, so it loads in every pytest run of an
environment where tapegrad is installed (importing the ``diagnostics`` package, hence
tapegrad and JAX). It stays inert unless a test asks for it: it adds no autouse fixture, and
its hook only looks at the test's fixture names and markers.

Usage::

    def test_step(no_leaks):            # the test body runs under diagnostics.no_leaks()
        ...

    @pytest.mark.no_leaks(allow=2, strict=True)
    def test_other():                   # the marker alone works too, with arguments
        ...

The guard wraps the test call itself (not its fixtures' setup or teardown), so a leak fails
the test with ``diagnostics.LeakError`` and its origin table, like any assertion.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

__all__ = ["no_leaks", "pytest_configure", "pytest_runtest_call"]


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``no_leaks`` marker so ``--strict-markers`` accepts it."""
    config.addinivalue_line(
        "markers",
        "no_leaks(allow=0, strict=False): fail the test if it leaves hanging nodes "
        "(diagnostics.no_leaks); the no_leaks fixture does the same with the defaults.",
    )


@pytest.fixture
def no_leaks() -> None:
    """Fail the test when its body leaves hanging nodes (``diagnostics.no_leaks()``).

    Arguments come from a ``@pytest.mark.no_leaks(allow=..., strict=...)`` marker, if any.
    The check itself runs around the test call (see ``pytest_runtest_call``).
    """


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Run the test call under ``diagnostics.no_leaks`` when it asks for it."""
    __tracebackhide__ = True  # a leak is the test's failure: show the test, not this hook
    marker = item.get_closest_marker("no_leaks")
    if marker is None and "no_leaks" not in getattr(item, "fixturenames", ()):
        return (yield)
    from diagnostics.guard import no_leaks as guard

    path, line, name = item.location
    where = f"{name} ({path}:{line + 1})" if line is not None else name
    with guard(**{"name": where, **(marker.kwargs if marker is not None else {})}):
        return (yield)
