"""Destinations as users run them: authentication to the destination (against real servers that enforce it),
Ed25519 signatures and rotation with overlap (verified by libraries we did not write), and disabling on 410."""

from __future__ import annotations

import msgspec
import pytest

from shared.settings import Settings
from tests.destination import FAST_DELIVERY


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY)
