"""``events/wait?after=``: following an endpoint's events by position, what ``hookyard listen`` relies on.

In the test's own event loop (``live_app``) against real Postgres and Redis, events stored and announced
the way the flush worker does. The ordering test holds a real transaction open: an event stored by an older
transaction that commits late is still answered, and before the newer one. The horizon tests hold one open in
another database of the same server, or in the test's database from a client that is not hookyard's: it must
not hold the follower (ADR 0081, 0087); one of hookyard's connections (``tests.helpers.db`` opens them through
``control.db``, as the flush does) or one nothing identifies must.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from control.db.connection import MARK
from control.db.follow_horizon import SNAPSHOT, horizon
from tests.conftest import _admin
from tests.control.conftest import Live, waiting
from tests.events_support import Ev
from tests.helpers import assert_error, db, wait_for

INSERT_ONE = """INSERT INTO events (id, endpoint_id, received_at, method, headers, body, body_is_utf8)
                VALUES ($1, $2, now(), 'POST', '{}', '\\x7b7d', true)"""


@pytest.fixture
def served(live: Live) -> Live:
    """The room's ``live``: the app in this loop, an endpoint, a database connection and Redis."""
    return live


async def _follow(served, account, after, timeout=5, **params):
    return await served.client.get(
        f"/v1/endpoints/{served.endpoint}/events/wait",
        params={"after": after, "timeout": timeout, **params},
        headers=account.headers,
    )


async def _drain(served, account, cursor, count, **params):
    """The next ``count`` answers from ``cursor``: (event ids, last cursor)."""
    seen = []
    for _ in range(count):
        resp = await _follow(served, account, cursor, timeout=20, **params)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert resp.headers["hookyard-cursor"] == body["cursor"]
        seen.append(body["event"]["id"])
        cursor = body["cursor"]
    return seen, cursor


async def test_every_event_once_in_storing_order_then_204_with_a_cursor(served, account):
    start = await _follow(served, account, "now", timeout=1)
    assert start.status_code == 204
    assert start.content == b""
    cursor = start.headers["hookyard-cursor"]
    first = await served.announce(Ev(served.endpoint), Ev(served.endpoint))
    second = await served.announce(Ev(served.endpoint))
    seen, cursor = await _drain(served, account, cursor, 3)
    assert seen == sorted(first) + second
    again = await _follow(served, account, cursor, timeout=1)
    assert again.status_code == 204
    # The cursor of a 204 is a place to continue from: nothing new means the same events are not repeated.
    assert (await _follow(served, account, again.headers["hookyard-cursor"], timeout=1)).status_code == 204


async def test_a_follow_in_progress_is_woken_by_a_new_event(served, account):
    cursor = (await _follow(served, account, "now", timeout=1)).headers["hookyard-cursor"]
    task = asyncio.create_task(_follow(served, account, cursor, timeout=30))
    await wait_for(waiting(served, calls=[task]))
    ev = Ev(served.endpoint, event_type="invoice.paid")
    await served.announce(ev)
    resp = await asyncio.wait_for(task, 10)
    assert resp.status_code == 200, resp.text
    assert resp.json()["event"]["id"] == ev.id


async def test_an_older_transaction_committing_late_is_not_skipped(served, account):
    cursor = (await _follow(served, account, "now", timeout=1)).headers["hookyard-cursor"]
    late = Ev(served.endpoint).row()[0]
    async with db(served.database_url) as other:
        transaction = other.transaction()
        await transaction.start()
        await other.execute(INSERT_ONE, late, served.endpoint)  # its transaction id is now the older one
        early = await served.announce(Ev(served.endpoint))
        # Stored and visible, but an older transaction is still open: not answered yet, cursor not past it.
        held = await _follow(served, account, cursor, timeout=1)
        assert held.status_code == 204
        cursor = held.headers["hookyard-cursor"]
        await transaction.commit()
    seen, _ = await _drain(served, account, cursor, 2)
    assert seen == [late, *early]


async def test_now_is_after_every_event_already_visible_even_with_an_older_transaction_open(served, account):
    """An unrelated older transaction (another endpoint's flush, another database on the server) holds the
    snapshot's xmin back; an event committed before ``now`` was asked is still before it, and the first
    event stored afterwards is the first answer."""
    async with db(served.database_url) as other:
        transaction = other.transaction()
        await transaction.start()
        await other.execute("SELECT pg_current_xact_id()")  # an xid older than everything below, left open
        already = await served.announce(Ev(served.endpoint))
        cursor = (await _follow(served, account, "now", timeout=1)).headers["hookyard-cursor"]
        later = await served.announce(Ev(served.endpoint))
        await transaction.rollback()
    seen, _ = await _drain(served, account, cursor, 1)
    assert seen == later, f"{already} was stored before 'now' and answered after it"


async def test_filters_skip_events_and_the_timeout_cursor_moves_past_them(served, account):
    cursor = (await _follow(served, account, "now", timeout=1, type="invoice.paid")).headers["hookyard-cursor"]
    await served.announce(Ev(served.endpoint, event_type="orders/create"))
    skipped = await _follow(served, account, cursor, timeout=1, type="invoice.paid")
    assert skipped.status_code == 204
    match = Ev(served.endpoint, event_type="invoice.paid")
    await served.announce(match, Ev(served.endpoint, event_type="other"))
    seen, _ = await _drain(served, account, skipped.headers["hookyard-cursor"], 1, type="invoice.paid")
    assert seen == [match.id]


async def test_a_transaction_open_in_another_database_does_not_hold_the_follower(served, account, empty_database):
    """Another app's long writing transaction on a shared server: below xmin, but it can store no event here."""
    cursor = (await _follow(served, account, "now", timeout=1)).headers["hookyard-cursor"]
    async with db(empty_database) as other:
        transaction = other.transaction()
        await transaction.start()
        await other.execute("CREATE TABLE app_rows (n int); INSERT INTO app_rows VALUES (1)")  # holds an xid
        stored = await served.announce(Ev(served.endpoint))
        resp = await _follow(served, account, cursor, timeout=3)
        await transaction.rollback()
    assert resp.status_code == 200, "held back by another database's transaction"
    assert resp.json()["event"]["id"] == stored[0]


@pytest.mark.parametrize("name", ["psql", ""])
async def test_a_transaction_of_another_client_of_this_database_does_not_hold_the_follower(served, account, name):
    """A developer's psql left open after an ``UPDATE``, a script (asyncpg names no application): a transaction
    in hookyard's own database that is not hookyard's stores no event, so it does not hold the follower."""
    cursor = (await _follow(served, account, "now", timeout=1)).headers["hookyard-cursor"]
    other = await asyncpg.connect(served.database_url, server_settings={"application_name": name})
    try:
        transaction = other.transaction()
        await transaction.start()
        await other.execute("UPDATE accounts SET email = email WHERE id = $1", account.id)  # an xid
        stored = await served.announce(Ev(served.endpoint))
        resp = await _follow(served, account, cursor, timeout=3)
        await transaction.rollback()
    finally:
        await other.close()
    assert resp.status_code == 200, "held back by a transaction that is not hookyard's"
    assert resp.json()["event"]["id"] == stored[0]


@pytest.mark.parametrize("statement", ["SELECT pg_current_xact_id()", INSERT_ONE])
async def test_a_transaction_of_hookyard_in_this_database_still_holds_the_follower(served, account, statement):
    """Any transaction of one of hookyard's connections with an xid may still store an event before the one
    already visible, whether it is a flush (an insert) or anything else: the follower waits for it."""
    cursor = (await _follow(served, account, "now", timeout=1)).headers["hookyard-cursor"]
    args = (Ev(served.endpoint).row()[0], served.endpoint) if statement == INSERT_ONE else ()
    async with db(served.database_url) as other:
        assert await other.fetchval("SHOW application_name") == MARK
        transaction = other.transaction()
        await transaction.start()
        await other.execute(statement, *args)
        stored = await served.announce(Ev(served.endpoint))
        held = await _follow(served, account, cursor, timeout=1)
        await transaction.rollback()
    assert held.status_code == 204
    assert held.headers["hookyard-cursor"] == cursor, "moved past a transaction that may still store an event"
    seen, _ = await _drain(served, account, cursor, 1)
    assert seen == stored


async def test_an_in_progress_xid_no_backend_shows_still_holds(conn):
    """A transaction the stats cannot name (ended after the snapshot, a backend hidden, a prepared one of this
    database) holds the horizon: a snapshot listing xids no backend has answers the smallest of them."""
    base = int(await conn.fetchval("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")) + 1000
    snapshot = f"(SELECT '{base}:{base + 10}:{base + 5},{base + 7}'::pg_snapshot AS snap) s"
    assert await conn.fetchval(f"SELECT {horizon(str(base + 7))} FROM {snapshot}") == base + 5


@pytest.mark.parametrize("after", ["", "yesterday", "x" * 201, "cG9zfDF8ZXZ0"])
async def test_a_bad_position_is_400_naming_after(served, account, after):
    resp = await _follow(served, account, after, timeout=1)
    assert_error(resp, 400, "validation_error", field="after")


async def test_another_accounts_endpoint_is_404(served, other_account):
    resp = await served.client.get(
        f"/v1/endpoints/{served.endpoint}/events/wait",
        params={"after": "now", "timeout": 1},
        headers=other_account.headers,
    )
    assert_error(resp, 404, "not_found")


@pytest.mark.parametrize("where", ["another database", "this database, another client"])
async def test_a_role_without_read_all_stats_still_sees_transactions_that_store_no_event(
    servers, database_url, empty_database, where
):
    """``pg_stat_activity`` hides other roles' query text from a plain role, not ``datid``, ``application_name``
    and ``backend_xid``: the horizon passes another database's open transaction, and a non-hookyard client's in
    this database, for hookyard's role without ``pg_read_all_stats``."""
    role = f"hy_t_{uuid.uuid4().hex[:16]}"
    await _admin(servers, f"CREATE ROLE {role} LOGIN")
    try:
        dsn = empty_database if where == "another database" else database_url
        other = await asyncpg.connect(dsn, server_settings={"application_name": "psql"})
        try:
            transaction = other.transaction()
            await transaction.start()
            held: int = await other.fetchval("SELECT pg_current_xact_id()::text::bigint")
            plain = await asyncpg.connect(database_url, user=role)
            try:
                await plain.execute("SELECT pg_current_xact_id()")  # a commit after it: the snapshot lists it
                xmin, passed = await plain.fetchrow(
                    f"SELECT pg_snapshot_xmin(s.snap)::text::bigint, {horizon('1 + ' + str(held))} FROM {SNAPSHOT}"
                )
            finally:
                await plain.close()
            await transaction.rollback()
        finally:
            await other.close()
    finally:
        await _admin(servers, f"DROP ROLE {role}")
    assert xmin <= held < passed


async def test_every_connection_of_the_app_carries_the_mark(served, account, database_url):
    """What lets the horizon pass a client's transaction must never describe hookyard's own: after the app
    answered (its pool connected), every client backend of the database but this check's is marked, and a
    DSN naming another application cannot unmark one."""
    assert (await _follow(served, account, "now", timeout=1)).status_code == 204
    async with db(f"{database_url}{'&' if '?' in database_url else '?'}application_name=mine") as renamed:
        checker = await asyncpg.connect(database_url, server_settings={"application_name": "check"})
        try:
            names = await checker.fetch(
                "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
                " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            )
        finally:
            await checker.close()
        assert await renamed.fetchval("SHOW application_name") == MARK
    assert len(names) >= 3  # the app's pool, ``served.conn``, ``renamed``
    assert {n[0] for n in names} == {MARK}
