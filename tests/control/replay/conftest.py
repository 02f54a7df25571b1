"""Fixtures the replay modules share: settings and a payments endpoint."""

from __future__ import annotations

import msgspec
import pytest

from shared.settings import Settings


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, deliver_timeout_s=1.0, deliver_lease_s=5.0)
