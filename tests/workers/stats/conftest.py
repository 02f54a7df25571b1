"""Fixtures the stats modules share: fast delivery settings with a small circuit threshold, and three
loopback destinations."""

from __future__ import annotations

import msgspec
import pytest

from shared.settings import Settings
from tests.destination import FAST_DELIVERY
from tests.workers.stats.support import COOLDOWN_S, THRESHOLD


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(
        settings,
        **{**FAST_DELIVERY, "deliver_timeout_s": 5.0, "deliver_lease_s": 10.0},
        circuit_failure_threshold=THRESHOLD,
        circuit_cooldown_s=COOLDOWN_S,
    )
