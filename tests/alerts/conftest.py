"""The alert tests' receiver: a real HTTP server on loopback that records the alerts sent to it (the alert
destination's URL), one per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.destination import Destination, serving


@pytest.fixture
def receiver() -> Iterator[Destination]:
    with serving() as server:
        yield server
