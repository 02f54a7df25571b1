"""Delivery: the deliver worker, its transport and egress policy, signing, bodies, retries and replays against
real loopback destinations (``tests.destination``), in process and through real processes."""

from __future__ import annotations

import msgspec
import pytest

from shared.settings import Settings
from tests.destination import FAST_DELIVERY
from tests.inbox_browser import browser  # noqa: F401 - a fixture, used by test_retry_inbox.py


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The suite's settings with retries, polls and sweeps in fractions of a second; a module that needs more
    (a shorter schedule, a circuit, a cap) overrides this fixture with only its difference."""
    return msgspec.structs.replace(settings, **FAST_DELIVERY)
