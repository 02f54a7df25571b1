"""The service layer: every operation written once, called by the /v1 handlers and the MCP tools alike.

Functions take a ``Context`` (the process's pool, Redis client and settings) and, for account-scoped
operations, the caller's ``Principal``; they return public records and raise ``shared.errors`` types.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import redis.asyncio as aioredis

from shared.keys import Keys
from shared.settings import Settings

__all__ = ("Context", "Principal")


@dataclass(frozen=True, slots=True)
class Context:
    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis
    keys: Keys


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the account an API key belongs to, and what the key may do."""

    account_id: str
    key_id: str
    kind: str  # "live" or "temporary"
    read_only: bool = False
