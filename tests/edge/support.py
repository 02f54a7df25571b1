"""The edge app in process for the tests of this folder: started (its Redis connections and config listener)
and stopped around a block, and an HTTP client calling it through ASGI; the fixtures of ``conftest.py`` are
these for the test's own settings, and a test that needs other settings (a Redis relay it cuts, a cluster)
uses them directly."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx

from edge.app import EdgeApp, create_app
from shared.settings import Settings

__all__ = ("http", "started_edge")


@contextlib.asynccontextmanager
async def http(app: EdgeApp) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app`` in process, as ``http://edge.test`` (``client`` is control's)."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://edge.test") as client:
        yield client


@contextlib.asynccontextmanager
async def started_edge(settings: Settings) -> AsyncIterator[EdgeApp]:
    app = create_app(settings)
    await app.startup()
    try:
        yield app
    finally:
        await app.shutdown()
