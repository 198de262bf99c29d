"""pytest plugin (entry point ``tapegrad_leaks``): the ``no_leaks`` fixture and marker.

Registered through ``[project.entry-points.pytest11]``, so it loads in every pytest run of an
environment where tapegrad is installed. It stays inert unless a test asks for it: importing
it imports neither tapegrad nor JAX, and it adds no autouse fixture.

Usage::

    def test_step(no_leaks):            # the whole test runs under diagnostics.no_leaks()
        ...

    @pytest.mark.no_leaks(allow=2, strict=True)
    def test_other(no_leaks): ...       # the marker passes arguments to the guard
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

__all__ = ["no_leaks", "pytest_configure"]


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``no_leaks`` marker so ``--strict-markers`` accepts it."""
    config.addinivalue_line(
        "markers",
        "no_leaks(allow=0, strict=False): arguments for the no_leaks fixture "
        "(diagnostics.no_leaks).",
    )


@pytest.fixture
def no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run the test under ``diagnostics.no_leaks``; fail it when it leaves hanging nodes.

    Arguments come from a ``@pytest.mark.no_leaks(allow=..., strict=...)`` marker, if any.

    Raises:
        diagnostics.LeakError: at teardown, when the test left more than ``allow`` hanging
            nodes (or, with ``strict=True``, a kept-alive graph) created during it.
    """
    from diagnostics.guard import no_leaks as guard  # lazy: keep the plugin free to load

    marker = request.node.get_closest_marker("no_leaks")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    with guard(**kwargs):
        yield
