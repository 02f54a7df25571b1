"""Migrations: applied once, safe to race, tamper-evident; the events table's daily partitions."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from control.db.migrate import REWORDED, available, migrate, pending
from shared.errors import MigrationError


@pytest.fixture
async def utc_conn(database_url) -> AsyncIterator[asyncpg.Connection]:
    """Unlike the room's ``conn``: a plain asyncpg connection (no jsonb codec) whose session time zone is UTC,
    so the partition bounds it reads are UTC days."""
    c = await asyncpg.connect(database_url)
    await c.execute("SET TIME ZONE 'UTC'")
    yield c
    await c.close()


def _versions() -> list[str]:
    return [v for v, _ in available()]


def test_available_lists_the_shipped_files_in_order():
    versions = _versions()
    assert versions, "no migration files are shipped"
    assert versions[0] == "0001_init"
    assert versions == sorted(versions)


async def test_migrate_is_idempotent(database_url, utc_conn):
    # The test database is a copy of a migrated template: nothing is left to apply, however often we ask.
    assert await migrate(database_url) == []
    assert await migrate(database_url) == []
    rows = await utc_conn.fetch("SELECT version, checksum FROM hy_schema_migrations ORDER BY version")
    assert [r["version"] for r in rows] == _versions()
    assert all(len(r["checksum"]) == 64 for r in rows)


async def test_pending_names_what_migrate_will_apply_before_it_runs(empty_database, monkeypatch):
    """``hookyard up`` says what a long migration will do before it starts (ADR 0072), from this list."""
    shipped = available()
    assert await pending(empty_database) == [version for version, _ in shipped]
    monkeypatch.setattr("control.db.migrate.available", lambda: [m for m in shipped if m[0] < "0040"])
    await migrate(empty_database)
    monkeypatch.setattr("control.db.migrate.available", lambda: shipped)
    assert await pending(empty_database) == [version for version, _ in shipped if version >= "0040"]
    await migrate(empty_database)
    assert await pending(empty_database) == []


async def test_concurrent_runs_on_an_empty_database_apply_each_migration_once(empty_database):
    results = await asyncio.gather(*(migrate(empty_database) for _ in range(3)))
    assert sorted(results, key=len) == [[], [], _versions()]
    c = await asyncpg.connect(empty_database)
    try:
        assert await c.fetchval("SELECT count(*) FROM hy_schema_migrations") == len(_versions())
        assert await c.fetchval("SELECT to_regclass('endpoints') IS NOT NULL")
        # No advisory lock is left behind in this database (other tests' databases on the server take theirs).
        left = "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
        left += " WHERE l.locktype = 'advisory' AND d.datname = current_database()"
        assert await c.fetchval(left) == 0
    finally:
        await c.close()
    assert await migrate(empty_database) == []


async def test_an_edited_applied_migration_stops_the_run(database_url, utc_conn):
    real = await utc_conn.fetchval("SELECT checksum FROM hy_schema_migrations WHERE version = '0001_init'")
    await utc_conn.execute("UPDATE hy_schema_migrations SET checksum = 'edited' WHERE version = '0001_init'")
    with pytest.raises(MigrationError, match="0001_init"):
        await migrate(database_url)
    # Nothing is held or half-done: put the record right and the next run is clean.
    await utc_conn.execute("UPDATE hy_schema_migrations SET checksum = $1 WHERE version = '0001_init'", real)
    assert await migrate(database_url) == []


EARLIER_FIRST_LINES = {
    # The name is spelled in two parts: tests/repo/test_links.py refuses it whole anywhere in the repository.
    "0001_init": "-- hookyard schema, designed for the whole of SPEC"
    + ".md. Later issues fill tables; they do not reshape them.",
    # And a file name the ADR never had, spelled in two parts too (tests/repo/test_links.py checks such paths).
    "0022_alerts": "-- Operational alerts (docs"
    + "/adr/0033-operational-alerts-as-conditions.md): an account's alert destinations,",
}
"""The first line each reworded migration had when installations applied it."""


@pytest.mark.parametrize("version", sorted(REWORDED))
async def test_a_migration_applied_before_its_comments_were_reworded_is_accepted(version, database_url, utc_conn):
    """The recorded checksum of an installation that applied the old text is the old text's, which differs from
    today's in the first comment alone; the run accepts it and updates the record."""
    today = dict(available())[version]
    first, rest = today.split("\n", 1)
    old = EARLIER_FIRST_LINES[version]
    assert first.startswith("-- ")
    assert first != old
    old_checksum = hashlib.sha256(f"{old}\n{rest}".encode()).hexdigest()
    assert REWORDED[version] == {old_checksum}
    update = "UPDATE hy_schema_migrations SET checksum = $1 WHERE version = $2"
    await utc_conn.execute(update, old_checksum, version)
    assert await migrate(database_url) == []
    recorded = await utc_conn.fetchval("SELECT checksum FROM hy_schema_migrations WHERE version = $1", version)
    assert recorded == hashlib.sha256(today.encode()).hexdigest()


async def test_a_failing_migration_raises_and_applies_nothing_of_itself(database_url, utc_conn, monkeypatch):
    shipped = available()
    broken = ("9999_broken", "CREATE TABLE hy_half_done (x int); SELECT 1 / 0;")
    monkeypatch.setattr("control.db.migrate.available", lambda: [*shipped, broken])
    with pytest.raises(MigrationError, match="9999_broken"):
        await migrate(database_url)
    assert await utc_conn.fetchval("SELECT to_regclass('hy_half_done')") is None
    assert await utc_conn.fetchval("SELECT count(*) FROM hy_schema_migrations WHERE version = '9999_broken'") == 0


async def _partitions(conn: asyncpg.Connection) -> dict[str, str]:
    rows = await conn.fetch(
        """SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'events'::regclass"""
    )
    return {r["relname"]: r["bound"] for r in rows}


async def test_events_is_partitioned_by_day_with_a_default_partition(utc_conn):
    assert await utc_conn.fetchval("SELECT relkind::text FROM pg_class WHERE relname = 'events'") == "p"
    assert await utc_conn.fetchval("SELECT pg_get_partkeydef('events'::regclass)") == "RANGE (received_at)"
    parts = await _partitions(utc_conn)
    assert parts["events_default"] == "DEFAULT"
    today = datetime.now(UTC).date()
    for offset in range(0, 8):
        day = today + timedelta(days=offset)
        name = f"events_{day:%Y%m%d}"
        assert name in parts, f"missing partition {name}"
        assert parts[name] == (
            f"FOR VALUES FROM ('{day:%Y-%m-%d} 00:00:00+00') TO ('{day + timedelta(days=1):%Y-%m-%d} 00:00:00+00')"
        )
    # Creating them again is a no-op.
    assert await utc_conn.fetchval("SELECT hy_ensure_event_partitions(0, 7)") == 0


async def _endpoint(conn: asyncpg.Connection) -> str:
    await conn.execute("INSERT INTO accounts (id) VALUES ('acct_1')")
    await conn.execute(
        """INSERT INTO endpoints (id, account_id, name, environment, ingest_token, signing_secret)
           VALUES ('ep_1', 'acct_1', 'e', 'production', 'tok', 'whsec_x')"""
    )
    return "ep_1"


async def _insert_event(conn: asyncpg.Connection, event_id: str, received_at: str) -> str:
    return await conn.execute(
        """INSERT INTO events (id, endpoint_id, received_at, method, headers, body, body_is_utf8)
           VALUES ($1, 'ep_1', $2::text::timestamptz, 'POST', '{}'::jsonb, ''::bytea, true)
           ON CONFLICT (id, received_at) DO NOTHING""",
        event_id,
        received_at,
    )


async def test_rows_land_in_their_day_and_reinserting_is_a_no_op(utc_conn):
    await _endpoint(utc_conn)
    now = datetime.now(UTC).replace(microsecond=123456)
    assert await _insert_event(utc_conn, "evt_1", now.isoformat()) == "INSERT 0 1"
    assert await _insert_event(utc_conn, "evt_1", now.isoformat()) == "INSERT 0 0"
    assert await utc_conn.fetchval("SELECT count(*) FROM events WHERE id = 'evt_1'") == 1
    assert (
        await utc_conn.fetchval("SELECT tableoid::regclass::text FROM events WHERE id = 'evt_1'")
        == f"events_{now:%Y%m%d}"
    )
    # Far outside the prepared days: the default partition takes it.
    assert await _insert_event(utc_conn, "evt_far", "2001-01-01T00:00:00Z") == "INSERT 0 1"
    assert (
        await utc_conn.fetchval("SELECT tableoid::regclass::text FROM events WHERE id = 'evt_far'") == "events_default"
    )


async def test_drop_event_partitions_drops_old_days_and_keeps_recent_ones(utc_conn):
    await _endpoint(utc_conn)
    await utc_conn.execute(
        """CREATE TABLE events_20000101 PARTITION OF events
           FOR VALUES FROM ('2000-01-01 00:00:00+00') TO ('2000-01-02 00:00:00+00')"""
    )
    await _insert_event(utc_conn, "evt_ancient", "2000-01-01T12:00:00Z")
    await _insert_event(utc_conn, "evt_old_default", "1999-06-01T00:00:00Z")
    far_future = (datetime.now(UTC) + timedelta(days=60)).isoformat()
    await _insert_event(utc_conn, "evt_future_default", far_future)
    now = datetime.now(UTC).isoformat()
    await _insert_event(utc_conn, "evt_now", now)
    before = set(await _partitions(utc_conn))

    assert await utc_conn.fetchval("SELECT hy_drop_event_partitions(30)") == 1

    after = set(await _partitions(utc_conn))
    assert before - after == {"events_20000101"}
    assert await utc_conn.fetchval("SELECT to_regclass('events_20000101')") is None
    ids = {r["id"] for r in await utc_conn.fetch("SELECT id FROM events")}
    assert ids == {"evt_future_default", "evt_now"}
    # Running it again finds nothing more to drop.
    assert await utc_conn.fetchval("SELECT hy_drop_event_partitions(30)") == 0


async def test_ensure_partitions_leaves_a_day_already_in_the_default_partition(utc_conn):
    await _endpoint(utc_conn)
    day = datetime.now(UTC).date() + timedelta(days=9)  # the prepared days end at today + 7
    await _insert_event(utc_conn, "evt_early", f"{day:%Y-%m-%d}T08:00:00Z")
    # Preparing that day would fail if it tried to carve the rows out of the default partition; it skips it
    # and creates the two others (today + 8 and today + 10).
    assert await utc_conn.fetchval("SELECT hy_ensure_event_partitions(0, 10)") == 2
    assert f"events_{day:%Y%m%d}" not in await _partitions(utc_conn)
    assert f"events_{day + timedelta(days=1):%Y%m%d}" in await _partitions(utc_conn)


# -- 0005: the config version ----------------------------------------------------------------------


async def _version(conn: asyncpg.Connection, endpoint_id: str = "ep_1") -> int:
    return await conn.fetchval("SELECT config_version FROM endpoints WHERE id = $1", endpoint_id)


async def test_every_change_routing_or_the_edge_reads_bumps_the_config_version(utc_conn):
    """Triggers bump the endpoint's version on each change of what it routes or serves with, and only then."""
    await _endpoint(utc_conn)
    statements = {
        "auth config created": "INSERT INTO auth_configs (endpoint_id) VALUES ('ep_1')",
        "auth config changed": "UPDATE auth_configs SET hmac_enabled = true WHERE endpoint_id = 'ep_1'",
        "destination created": "INSERT INTO destinations (id, endpoint_id, url) VALUES ('dst_1', 'ep_1', 'http://a')",
        "destination url": "UPDATE destinations SET url = 'http://b' WHERE id = 'dst_1'",
        "destination headers": """UPDATE destinations SET headers = '{"x": "1"}' WHERE id = 'dst_1'""",
        "rule created": "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ('r_1', 'ep_1', 'r', '{}')",
        "rule linked": "INSERT INTO rule_destinations (rule_id, destination_id) VALUES ('r_1', 'dst_1')",
        "rule paused": "UPDATE rules SET active = false WHERE id = 'r_1'",
        "rule tree": """UPDATE rules SET condition_tree = '{"op": "OR", "children": []}' WHERE id = 'r_1'""",
        "link removed": "DELETE FROM rule_destinations WHERE rule_id = 'r_1'",
        "allowlist added": "INSERT INTO allowlist_entries (id, endpoint_id, cidr) VALUES ('al_1', 'ep_1', '10/8')",
        "allowlist removed": "DELETE FROM allowlist_entries WHERE id = 'al_1'",
        "label added": "INSERT INTO label_rules (id, endpoint_id, path, output_key) VALUES ('l_1', 'ep_1', 'a', 'k')",
        "label changed": "UPDATE label_rules SET color = 'red' WHERE id = 'l_1'",
        "label removed": "DELETE FROM label_rules WHERE id = 'l_1'",
        "environment": "UPDATE endpoints SET environment = 'staging' WHERE id = 'ep_1'",
        "expiry": "UPDATE endpoints SET expires_at = now() + interval '3 days', temporary = true WHERE id = 'ep_1'",
        "signing secret": "UPDATE endpoints SET signing_secret = 'whsec_y' WHERE id = 'ep_1'",
        "ingest token": "UPDATE endpoints SET ingest_token = 'tok2' WHERE id = 'ep_1'",
        "rule deleted": "DELETE FROM rules WHERE id = 'r_1'",
        "destination deleted": "DELETE FROM destinations WHERE id = 'dst_1'",
    }
    for change, sql in statements.items():
        before = await _version(utc_conn)
        await utc_conn.execute(sql)
        assert await _version(utc_conn) > before, change
    await utc_conn.execute("INSERT INTO destinations (id, endpoint_id, url) VALUES ('dst_2', 'ep_1', 'http://a')")
    unrelated = {
        "circuit breaker": "UPDATE destinations SET consecutive_failures = 3, circuit = 'open' WHERE id = 'dst_2'",
        "same value": "UPDATE endpoints SET environment = environment WHERE id = 'ep_1'",
        "name and ref": "UPDATE endpoints SET name = 'n', external_ref = 'r', updated_at = now() WHERE id = 'ep_1'",
    }
    for change, sql in unrelated.items():
        before = await _version(utc_conn)
        await utc_conn.execute(sql)
        assert await _version(utc_conn) == before, change


async def test_deleting_an_endpoint_cascades_through_the_version_triggers(utc_conn):
    await _endpoint(utc_conn)
    await utc_conn.execute("INSERT INTO auth_configs (endpoint_id) VALUES ('ep_1')")
    await utc_conn.execute("INSERT INTO destinations (id, endpoint_id, url) VALUES ('dst_1', 'ep_1', 'http://a')")
    await utc_conn.execute(
        "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ('r_1', 'ep_1', 'r', '{}')"
    )
    await utc_conn.execute("INSERT INTO rule_destinations (rule_id, destination_id) VALUES ('r_1', 'dst_1')")
    await utc_conn.execute("INSERT INTO allowlist_entries (id, endpoint_id, cidr) VALUES ('al_1', 'ep_1', '10.0.0.1')")
    await utc_conn.execute(
        "INSERT INTO label_rules (id, endpoint_id, path, output_key) VALUES ('l_1', 'ep_1', 'a', 'b')"
    )
    last = await _version(utc_conn)
    tombstone = await utc_conn.fetchval(
        "DELETE FROM endpoints WHERE id = 'ep_1' RETURNING nextval('hy_config_version')"
    )
    assert tombstone > last
    for table in ("auth_configs", "destinations", "rules", "rule_destinations", "allowlist_entries", "label_rules"):
        assert await utc_conn.fetchval(f"SELECT count(*) FROM {table}") == 0, table
    await utc_conn.execute("DELETE FROM accounts WHERE id = 'acct_1'")  # and an account's endpoints with it


async def test_a_config_change_never_waits_for_the_flushs_locks(utc_conn, database_url):
    """The flush holds key-share locks on the batch's endpoints and destinations until it commits; a bump
    (FOR NO KEY UPDATE of the endpoint row) must not wait for them, nor they for it."""
    await _endpoint(utc_conn)
    await utc_conn.execute("INSERT INTO auth_configs (endpoint_id) VALUES ('ep_1')")
    await utc_conn.execute("INSERT INTO destinations (id, endpoint_id, url) VALUES ('dst_1', 'ep_1', 'http://a')")
    flush = await asyncpg.connect(database_url)
    try:
        async with flush.transaction():
            await flush.execute("SELECT 1 FROM endpoints WHERE id = 'ep_1' FOR KEY SHARE")
            await flush.execute("SELECT 1 FROM destinations WHERE id = 'dst_1' FOR KEY SHARE")
            before = await _version(utc_conn)
            async with utc_conn.transaction():
                await utc_conn.execute("SET LOCAL lock_timeout = '2s'")
                await utc_conn.execute("UPDATE auth_configs SET hmac_enabled = true WHERE endpoint_id = 'ep_1'")
                await utc_conn.execute("UPDATE destinations SET url = 'http://b' WHERE id = 'dst_1'")
                await utc_conn.execute(
                    "INSERT INTO rules (id, endpoint_id, name, condition_tree) VALUES ('r_1', 'ep_1', 'r', '{}')"
                )
                await utc_conn.execute(
                    "INSERT INTO rule_destinations (rule_id, destination_id) VALUES ('r_1', 'dst_1')"
                )
                await utc_conn.execute("UPDATE endpoints SET environment = 'sandbox' WHERE id = 'ep_1'")
            assert await _version(utc_conn) > before
            await flush.execute("SELECT 1 FROM endpoints WHERE id = 'ep_1' FOR KEY SHARE")  # and the reverse
    finally:
        await flush.close()
