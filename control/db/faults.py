"""Whose fault a failed write is: the record's (isolate it) or the infrastructure's (wait it out).

The flush and the delivery recorder write batches. When a batch fails, only two answers are allowed:

```
* a failed batch write
  x record fault       - the data itself cannot be stored: SQLSTATE class 22 (data exception: NUL in text,
  |                      invalid input syntax, out of range) or 23 (integrity: a CHECK, NOT NULL or unique
  |                      violation), or a value the driver refuses to encode (UnicodeEncodeError, TypeError,
  |                      ValueError raised by asyncpg before anything is sent).
  |                      -> split the batch until the single record is found; only that record is set aside.
  x infrastructure     - everything else: Postgres unreachable, refusing connections, restarting, killing
                         backends, out of connections, a deadlock or serialization failure, a timeout, Redis
                         errors, and failures we do not recognise.
                         -> keep the batch, back off (capped, jittered) and try it again, for as long as it
                            takes; it never counts toward any dead-letter limit.
```

Unknown failures count as infrastructure on purpose: a failure that hits every record alike (a bad deploy,
a missing table) must stall the pipeline, visibly, rather than dead-letter every acknowledged event.
"""

from __future__ import annotations

import random

import asyncpg
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ("UNAVAILABLE", "backoff_s", "describe", "is_record_fault")

_RECORD_CLASSES = ("22", "23")

UNAVAILABLE: tuple[type[Exception], ...] = (
    OSError,  # refused, reset, and TimeoutError (a pool that could not hand out a connection in time)
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,  # the connection went away under a query
    asyncpg.InternalClientError,  # a pooled connection whose backend was terminated, met mid-protocol
    asyncpg.OperatorInterventionError,  # shutting down, cannot connect now, backend terminated
    asyncpg.InsufficientResourcesError,  # too many connections
    asyncpg.ObjectNotInPrerequisiteStateError,  # the database does not accept connections right now
    asyncpg.TransactionRollbackError,  # deadlock or serialization failure: the same request would succeed
    RedisConnectionError,
    RedisTimeoutError,
)
"""A store away, restarting, refusing or out of connections, met while serving a caller: the request is fine
and will work once the store is back (/v1 answers 503 ``unavailable``, ``control.api.errors``; MCP the same
code in a tool error, ``control.mcp.errors``)."""


def is_record_fault(exc: BaseException) -> bool:
    """True when ``exc`` says the written data itself is unstorable (see the module docstring)."""
    if isinstance(exc, asyncpg.PostgresError):
        return (getattr(exc, "sqlstate", None) or "")[:2] in _RECORD_CLASSES
    # asyncpg encodes parameters and COPY rows client side; what it cannot encode it raises as these.
    return isinstance(exc, (UnicodeError, TypeError, ValueError))


def describe(exc: BaseException) -> str:
    """``Type: message`` without Postgres's DETAIL, which quotes the failing row (a webhook body, a secret)
    into logs and dead letters that are read by people who may not see the data."""
    text = (getattr(exc, "message", None) if isinstance(exc, asyncpg.PostgresError) else None) or str(exc)
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def backoff_s(failures: int, *, base_s: float = 0.1, cap_s: float = 5.0, rng: random.Random | None = None) -> float:
    """Capped exponential backoff with full jitter in its upper half: many workers waking from one outage
    do not all hit the recovering server in the same instant, and none waits longer than ``cap_s``."""
    ceiling = min(cap_s, base_s * 2 ** max(0, failures - 1))
    found: float = ceiling * (0.5 + 0.5 * (rng or random).random())
    return found
