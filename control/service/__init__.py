"""The service layer: every operation written once, called by the /v1 handlers and the MCP tools alike.

Functions take a ``Context`` (the process's pool, Redis client and settings) and, for account-scoped
operations, the caller's ``Principal``; they return public records and raise ``shared.errors`` types.
"""

from __future__ import annotations

from control.db.context import Context, Principal

__all__ = ("Context", "Principal")
