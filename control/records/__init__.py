"""Public request and response records (msgspec Structs), shared by the /v1 API and the MCP tools."""

from __future__ import annotations

import msgspec

__all__ = ("Deleted", "Health")


class Deleted(msgspec.Struct, kw_only=True):
    id: str
    deleted: bool = True


class Health(msgspec.Struct, kw_only=True):
    ok: bool = True
