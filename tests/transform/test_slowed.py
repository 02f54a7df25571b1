"""A destination whose transform keeps being stopped by a limit is slowed by the worker's sandbox pool, and the
destination says so (``transform_slowed_at``, ``transform_slowed_s``) through /v1 and MCP alike: from its
second stop in a row, growing with the wait, gone when a call ends normally or the code changes. A user saw
each burst of such a destination take ~30 s to settle, and nothing said why."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from control.db.context import Context
from shared.settings import Settings
from tests.destination import FAST_DELIVERY, make_task, running, serving, settled
from tests.events_support import live_app
from tests.helpers import create_endpoint
from tests.mcp_client import call, connected

SOMETIMES_RUNAWAY = "function handler(r) { if (r.body.spin) { for (;;) {} } return r; }"
SPIN, PLAIN = b'{"spin":true}', b'{"spin":false}'
STUCK = "transform failed: stopped: still running after 1 s"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, **FAST_DELIVERY)


async def _shown(client, mcp, account, dst: str) -> dict[str, Any]:
    """The destination through /v1 and through MCP's tool: one service function, one answer."""
    resp = await client.get(f"/v1/destinations/{dst}", headers=account.headers)
    assert resp.status_code == 200, resp.text
    is_error, answer = await call(mcp, "get_destination", destination_id=dst)
    assert not is_error, answer
    shown = resp.json()
    assert (answer["transform_slowed_at"], answer["transform_slowed_s"]) == (
        shown["transform_slowed_at"],
        shown["transform_slowed_s"],
    )
    return shown


async def _deliver(ctx: Context, url: str, endpoint: str, dst: str, body: bytes, status: str) -> None:
    made = await make_task(ctx, url, endpoint_id=endpoint, destination_id=dst, body=body)
    row = await settled(ctx, made["task"], status, timeout=15)
    if status == "failed":
        assert row["last_error"] == STUCK


async def test_a_slowed_transform_is_shown_until_a_normal_call_or_new_code(
    ctx: Context, settings: Settings, account
) -> None:
    async with live_app(settings) as (client, app), connected(app, account.key) as mcp:
        await _slowed_and_cleared(ctx, client, mcp, account)


async def _slowed_and_cleared(ctx: Context, client, mcp, account) -> None:
    with serving() as sink:
        endpoint = (await create_endpoint(client, account.headers))["id"]
        body = {"url": sink.url, "transform": SOMETIMES_RUNAWAY}
        created = await client.post(f"/v1/endpoints/{endpoint}/destinations", json=body, headers=account.headers)
        dst = created.json()["id"]
        assert (created.json()["transform_slowed_at"], created.json()["transform_slowed_s"]) == (None, None)
        async with running(ctx):
            await _deliver(ctx, sink.url, endpoint, dst, SPIN, "failed")
            assert (await _shown(client, mcp, account, dst))["transform_slowed_at"] is None  # one stop is free
            await _deliver(ctx, sink.url, endpoint, dst, SPIN, "failed")
            slowed = await _shown(client, mcp, account, dst)
            assert slowed["transform_slowed_at"] is not None
            assert slowed["transform_slowed_s"] == 0.5
            await _deliver(ctx, sink.url, endpoint, dst, SPIN, "failed")
            slower = await _shown(client, mcp, account, dst)
            assert (slower["transform_slowed_at"], slower["transform_slowed_s"]) == (slowed["transform_slowed_at"], 1)
            listed = (await client.get(f"/v1/endpoints/{endpoint}/destinations", headers=account.headers)).json()
            assert [d["transform_slowed_s"] for d in listed["destinations"]] == [1]

            changed = SOMETIMES_RUNAWAY.replace("return r;", "r.headers['x-v'] = '2'; return r;")
            patch = {"transform": changed}
            resp = await client.patch(f"/v1/destinations/{dst}", json=patch, headers=account.headers)
            assert (resp.json()["transform_slowed_at"], resp.json()["transform_slowed_s"]) == (None, None)

            for _ in range(2):  # the new code's own strikes
                await _deliver(ctx, sink.url, endpoint, dst, SPIN, "failed")
            assert (await _shown(client, mcp, account, dst))["transform_slowed_s"] == 0.5
            await _deliver(ctx, sink.url, endpoint, dst, PLAIN, "succeeded")
            normal = await _shown(client, mcp, account, dst)
        assert (normal["transform_slowed_at"], normal["transform_slowed_s"]) == (None, None)
        (got,) = sink.requests
        assert got.headers["x-v"] == "2"


async def test_code_patched_back_after_other_code_ran_starts_without_the_old_stops(
    ctx: Context, settings: Settings, account
) -> None:
    """A new user's trial: stopped code, a fix that ran, then a PATCH back to the first text: its old stops went
    on (each event waited ~30 s) while the destination, its mark cleared by the PATCH, said nothing."""
    async with live_app(settings) as (client, app), connected(app, account.key) as mcp:
        with serving() as sink:
            endpoint = (await create_endpoint(client, account.headers))["id"]
            body = {"url": sink.url, "transform": SOMETIMES_RUNAWAY}
            created = await client.post(f"/v1/endpoints/{endpoint}/destinations", json=body, headers=account.headers)
            dst = created.json()["id"]

            async def patch(source: str) -> None:
                resp = await client.patch(
                    f"/v1/destinations/{dst}", json={"transform": source}, headers=account.headers
                )
                assert resp.status_code == 200, resp.text

            async with running(ctx):
                for _ in range(2):
                    await _deliver(ctx, sink.url, endpoint, dst, SPIN, "failed")
                assert (await _shown(client, mcp, account, dst))["transform_slowed_s"] == 0.5
                await patch(SOMETIMES_RUNAWAY.replace("return r;", "r.headers['x-v'] = '2'; return r;"))
                await _deliver(ctx, sink.url, endpoint, dst, PLAIN, "succeeded")  # the fix ran here
                await patch(SOMETIMES_RUNAWAY)
                await _deliver(ctx, sink.url, endpoint, dst, SPIN, "failed")
                again = await _shown(client, mcp, account, dst)
            assert (again["transform_slowed_at"], again["transform_slowed_s"]) == (None, None)  # one stop is free
