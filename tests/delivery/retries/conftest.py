"""The retry modules' settings."""

from __future__ import annotations

import msgspec
import pytest

from shared.settings import Settings


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The room's fast delivery settings, and: two attempts per task (one scheduled retry), a circuit that
    opens after 5 failures and probes 0.3 s later, and 8 requests at most in flight to one destination."""
    return msgspec.structs.replace(
        settings,
        retry_schedule_s=(0.05,),
        circuit_failure_threshold=5,
        circuit_cooldown_s=0.3,
        deliver_per_destination=8,
    )
