"""Applies ``migrations/*.sql`` in name order, each once, each in its own transaction.

Safe to run twice and from several processes at once: the whole run holds a session advisory lock, and
the table ``hy_schema_migrations`` records what is applied together with a checksum, so an applied file
that was edited afterwards stops the run instead of silently diverging.
"""

from __future__ import annotations

import hashlib
from importlib import resources

import asyncpg

from control.db.connection import Connection, marked_connection
from shared.errors import MigrationError

__all__ = ("REWORDED", "available", "migrate", "pending")

# Any constant works; this one spells "hookyard" in hex-ish and keeps clear of other apps' locks.
_LOCK_KEY = 0x686F6F6B79617264

REWORDED: dict[str, frozenset[str]] = {
    # Its first comment named a design document outside the repository. For each file here the statements
    # are unchanged: tests/control/test_migrations.py rebuilds the old text and checks the checksum.
    "0001_init": frozenset({"65dd80bb2bac28daadf8d408fbedfeecd369f41c416b94c85cb7d051a297fd5f"}),
    # Its first comment named its ADR by a file name the ADR never had.
    "0022_alerts": frozenset({"350a4b270e27168559983c37ba17917427da8c7518c177bb489eff301f2b87b0"}),
}
"""Checksums an applied migration had before only its comments were reworded: an installation that applied
the old text is not stopped, and its record is updated to today's checksum."""


def available() -> list[tuple[str, str]]:
    """(version, sql) for every migration file shipped in the package, in order."""
    folder = resources.files("control.db") / "migrations"
    files = sorted((p for p in folder.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name)
    return [(p.name.removesuffix(".sql"), p.read_text(encoding="utf-8")) for p in files]


async def migrate(dsn: str) -> list[str]:
    """Apply what is missing; returns the versions applied by this call."""
    conn = await marked_connection(dsn)
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        try:
            return await _apply(conn)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    finally:
        await conn.close()


async def pending(dsn: str) -> list[str]:
    """The versions ``migrate`` would apply, for ``hookyard up`` to say beforehand what a long one will do;
    every version on a database never migrated."""
    conn = await marked_connection(dsn)
    try:
        if await conn.fetchval("SELECT to_regclass('hy_schema_migrations')") is None:
            return [version for version, _ in available()]
        done = set(await conn.fetchval("SELECT coalesce(array_agg(version), '{}') FROM hy_schema_migrations"))
        return [version for version, _ in available() if version not in done]
    finally:
        await conn.close()


async def _apply(conn: Connection) -> list[str]:
    await conn.execute(
        """CREATE TABLE IF NOT EXISTS hy_schema_migrations (
               version    text PRIMARY KEY,
               checksum   text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now())"""
    )
    done = {r["version"]: r["checksum"] for r in await conn.fetch("SELECT version, checksum FROM hy_schema_migrations")}
    applied = []
    for version, sql in available():
        checksum = hashlib.sha256(sql.encode()).hexdigest()
        if version in done:
            if done[version] in REWORDED.get(version, ()):
                update = "UPDATE hy_schema_migrations SET checksum = $2 WHERE version = $1"
                await conn.execute(update, version, checksum)
            elif done[version] != checksum:
                raise MigrationError(f"migration {version} was changed after it was applied; add a new file instead")
            continue
        try:
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO hy_schema_migrations (version, checksum) VALUES ($1, $2)", version, checksum
                )
        except asyncpg.PostgresError as exc:
            raise MigrationError(f"migration {version} failed: {exc}") from exc
        applied.append(version)
    return applied
