"""The alert tests' receiver: a real HTTP server on loopback that records the alerts sent to it (the alert
destination's URL), one per test; and the headless browser of the inbox page's alert banner test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.destination import Destination, serving
from tests.inbox_browser import browser  # noqa: F401 - a fixture, used by test_inbox_alerts.py


@pytest.fixture
def receiver() -> Iterator[Destination]:
    with serving() as server:
        yield server
