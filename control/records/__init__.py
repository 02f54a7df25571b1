"""Public request and response records (msgspec Structs), shared by the /v1 API and the MCP tools."""

from __future__ import annotations

import msgspec

__all__ = ("Alive", "Deleted", "Health", "HealthDetails")


class Deleted(msgspec.Struct, kw_only=True):
    id: str
    deleted: bool = True


class HealthDetails(msgspec.Struct, kw_only=True):
    dead_letters: int
    """Records the flush could not store, kept for ``hookyard dead-letters`` (0 when all is well)."""
    ingest_backlog: int
    """Ingest stream entries not yet flushed to Postgres, over all shards."""


class Alive(msgspec.Struct, kw_only=True, frozen=True):
    """``/livez``: ``{"ok": true}``, the one shape the edge and a worker's metrics port answer too (no
    ``details``: liveness checks nothing that could have any)."""

    ok: bool = True


class Health(msgspec.Struct, kw_only=True):
    ok: bool = True
    details: HealthDetails | None = None
