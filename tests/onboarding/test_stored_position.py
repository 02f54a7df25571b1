"""The position ``test-webhook`` hands out (``control.support.until_stored``), in process against real Postgres
and Redis: events are stored and announced the way the flush worker does (``tests.events_support.store``).

Once the sample is stored, its ``cursor`` is the position just before it, so following from it answers the
sample even when its transaction stored an earlier event of the endpoint too; when the sample is not stored
in time, the cursor read before the send still leads to it once it is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from control.db.context import Principal
from control.db.events import EventFilters
from control.service.events.follow import follow_events
from control.support.until_stored import watch_storing
from shared.keys import Keys
from tests.events_support import Ev, live_app, store
from tests.helpers import create_endpoint, db, redis_client


@pytest.fixture
async def live(settings, account):
    async with (
        live_app(settings) as (client, app),
        db(settings.database_url) as conn,
        redis_client(settings.redis_url) as redis,
    ):
        endpoint = (await create_endpoint(client, account.headers))["id"]
        principal = Principal(account_id=account.id, key_id="test", kind="live")
        yield app.state.ctx, app.state.wakeups, principal, endpoint, conn, redis, Keys(settings.redis_prefix)


async def test_the_cursor_of_a_stored_sample_answers_that_sample_first(live) -> None:
    ctx, wakeups, principal, endpoint, conn, redis, keys = live
    earlier = Ev(endpoint, received_at=datetime.now(UTC) - timedelta(seconds=5), event_type="earlier")
    sample = Ev(endpoint, event_type="sample")
    async with watch_storing(ctx, wakeups, endpoint) as storing:
        await store(conn, redis, keys, [earlier, sample])  # one transaction: the sample's id sorts after
        assert earlier.id < sample.id
        stored, cursor = await storing.position(sample.id, timeout_s=5)
    assert stored is True
    followed = await follow_events(ctx, wakeups, principal, endpoint, EventFilters(), after=cursor, timeout_s=5)
    assert followed.event is not None
    assert followed.event.id == sample.id
    after = await follow_events(ctx, wakeups, principal, endpoint, EventFilters(), after=followed.cursor, timeout_s=1)
    assert after.event is None  # the answer's cursor is past the sample


async def test_a_sample_not_stored_in_time_is_still_followed_from_its_cursor(live) -> None:
    ctx, wakeups, principal, endpoint, conn, redis, keys = live
    sample = Ev(endpoint, event_type="late")
    sample.row()  # gives it its id, as the edge does before the flush stores it
    async with watch_storing(ctx, wakeups, endpoint) as storing:
        stored, cursor = await storing.position(sample.id, timeout_s=0.2)
    assert stored is False
    await store(conn, redis, keys, [sample])
    followed = await follow_events(ctx, wakeups, principal, endpoint, EventFilters(), after=cursor, timeout_s=5)
    assert followed.event is not None
    assert followed.event.id == sample.id
