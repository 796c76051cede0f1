"""Fixtures of the multi-host tests: one private network per module (tests/multihost/
network.py), removed at the module's end whatever happened; skipped, with the reason,
only where network namespaces cannot be made (not root, no iproute2, refused)."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from tests.multihost.layout import Layout
from tests.multihost.network import Network, unavailable


@functools.cache
def why_unavailable() -> str | None:
    return unavailable()


def require_namespaces() -> None:
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(f"multi-host tests need network namespaces: {reason}")


@pytest.fixture(scope="module")
def network() -> Iterator[Network]:
    """A network of this module's own; its hosts are added by the tests or a layout."""
    require_namespaces()
    with Network() as net:
        yield net


@pytest.fixture
def logs_on_failure(layout: Layout, request: pytest.FixtureRequest) -> Iterator[None]:
    """The tail of every log of the module's ``layout`` when the test failed
    (tests/conftest.py records each phase's report on the item)."""
    yield
    if getattr(getattr(request.node, "rep_call", None), "failed", False):
        print(layout.log_tails())
