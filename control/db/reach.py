"""Whether ``DATABASE_URL`` names a database that exists and lets hookyard in, asked once at start.

The docs promise that infrastructure outages are waited out, and control and the workers start while
Postgres is away (their pools open connections on first use). A database that does not exist, or credentials
refused, is no outage: no wait mends it. An operator's control on ``.../nonexist`` kept running, logging only
``metrics: delivery backlog unavailable (database "nonexist" does not exist)`` every 5 s. Now such a start
ends at once in one line naming the setting and the address (never the password), exit 2; a server that does
not answer is said in one line and waited for, as before.
"""

from __future__ import annotations

import contextlib
import logging
from urllib.parse import parse_qs, urlsplit

import asyncpg

from control.db.connection import marked_connection
from shared.errors import ConfigError
from shared.logs import redact, safe_url

__all__ = ("check_database", "where")

log = logging.getLogger("hookyard.db")

_CONFIG_ERRORS: tuple[type[Exception], ...] = (
    asyncpg.InvalidCatalogNameError,  # the database does not exist
    asyncpg.InvalidAuthorizationSpecificationError,  # no such role, pg_hba refuses, wrong password
)


async def check_database(dsn: str, *, who: str, timeout_s: float = 5.0) -> None:
    """Raises ConfigError when the database is missing or refuses hookyard's credentials; logs one warning and
    returns when Postgres does not answer (``who`` starts anyway and waits for it)."""
    shown = where(dsn)
    try:
        conn = await marked_connection(dsn, timeout=timeout_s)
    except _CONFIG_ERRORS as exc:
        raise ConfigError(f"DATABASE_URL: {shown}: {redact(str(exc))}") from None
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        log.warning(
            "%s: DATABASE_URL %s does not answer yet (%s: %s); starting, and waiting for it",
            who,
            shown,
            type(exc).__name__,
            redact(str(exc)),
        )
        return
    await conn.close()


def where(url: str) -> str:
    """``safe_url``'s ``scheme://host:port``. A DSN through a Unix socket (the embedded Postgres's) has no host,
    which ``safe_url`` says as "(a URL without a host)": its socket directory, a path and no secret, is named."""
    shown = safe_url(url)
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        if not parts.hostname and (socket := parse_qs(parts.query).get("host", [""])[0]):
            return f"{parts.scheme}:// (socket in {socket})"
    return shown
