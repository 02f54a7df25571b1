"""Destinations as users run them: authentication to the destination (against real servers that enforce it),
Ed25519 signatures and rotation with overlap (verified by libraries we did not write), and disabling on 410;
the headless browser of the inbox page's destinations test."""

from __future__ import annotations

from tests.helpers import fast_delivery_settings  # noqa: F401 - the fixture settings, with FAST_DELIVERY
from tests.inbox_browser import browser  # noqa: F401 - a fixture, used by test_inbox_destinations.py
