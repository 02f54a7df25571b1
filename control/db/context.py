"""What every layer of the control plane is handed: the process's resources (``Context``) and, for
account-scoped operations, the caller (``Principal``).

They live below the service layer so that lower modules (routing, workers, delivery) can take a Context
without importing ``control.service``; ``control.service`` re-exports both under their old names.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
import redis.asyncio as aioredis

from shared.keys import Keys
from shared.settings import Settings
from shared.tracing import Tracing

__all__ = ("Context", "Principal")


@dataclass(frozen=True, slots=True)
class Context:
    settings: Settings
    pool: asyncpg.Pool
    redis: aioredis.Redis
    keys: Keys
    tracing: Tracing | None = None
    """This process's tracing when an OTLP endpoint is set (``shared.tracing``), else None."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the account an API key belongs to, and what the key may do."""

    account_id: str
    key_id: str
    kind: str  # "live" or "temporary"
    read_only: bool = False
