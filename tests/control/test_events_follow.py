"""``events/wait?after=``: following an endpoint's events by position, what ``hookyard listen`` relies on.

In the test's own event loop (``live_app``) against real Postgres and Redis, events stored and announced
the way the flush worker does. The ordering test holds a real transaction open: an event stored by an older
transaction that commits late is still answered, and before the newer one. The horizon tests hold one open in
another database of the same server: it must not hold the follower, one in the test's database must (ADR 0081).
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

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


@pytest.mark.parametrize("statement", ["SELECT pg_current_xact_id()", INSERT_ONE])
async def test_a_transaction_open_in_this_database_still_holds_the_follower(served, account, statement):
    """Any transaction of this database with an xid may still store an event before the one already visible,
    whether it is a flush (an insert) or anything else: the follower waits for it."""
    cursor = (await _follow(served, account, "now", timeout=1)).headers["hookyard-cursor"]
    args = (Ev(served.endpoint).row()[0], served.endpoint) if statement == INSERT_ONE else ()
    async with db(served.database_url) as other:
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


async def test_a_role_without_read_all_stats_still_sees_other_databases_transactions(
    servers, database_url, empty_database
):
    """``pg_stat_activity`` hides other roles' query text from a plain role, not ``datid`` and ``backend_xid``:
    the horizon passes another database's open transaction for hookyard's role without ``pg_read_all_stats``."""
    role = f"hy_t_{uuid.uuid4().hex[:16]}"
    await _admin(servers, f"CREATE ROLE {role} LOGIN")
    try:
        async with db(empty_database) as other:
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
        await _admin(servers, f"DROP ROLE {role}")
    assert xmin <= held < passed
