"""Registering through real processes: once /api/register answered, the edge has forgotten the expiry.

Two sessions whose endpoints are set to expire in two seconds, with the edge holding that config (and having
served it, so it is cached); one session registers. When the other endpoint's expiry has passed and the edge
answers it 410, the registered one still answers 200: the edge was told before the 201, not a sweep later.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from control.db.context import Context
from control.support import edge_config
from tests.stack import Stack

pytestmark = pytest.mark.slow


def _start(control_url: str) -> dict:
    resp = httpx.post(f"{control_url}/api/start", timeout=10)  # no cookie jar: a new session each time
    assert resp.status_code == 200, resp.text
    return resp.json()


async def test_a_registered_endpoint_never_answers_410(stack: Stack, ctx: Context) -> None:
    stack.start_control()
    stack.start_edge()
    kept, dropped = _start(stack.control_url), _start(stack.control_url)
    soon = datetime.now(UTC) + timedelta(seconds=2)
    async with ctx.pool.acquire() as conn:
        await conn.execute(
            "UPDATE endpoints SET expires_at = $2 WHERE id = any($1::text[])",
            [kept["endpoint_id"], dropped["endpoint_id"]],
            soon,
        )
        await edge_config.sync(ctx, conn, [kept["endpoint_id"], dropped["endpoint_id"]])
    with httpx.Client(timeout=10) as client:
        for started in (kept, dropped):  # both are served, and cached by the edge, with the near expiry
            assert client.post(started["ingest_url"], json={"n": 1}).status_code == 200

        registered = client.post(
            f"{stack.control_url}/api/register", json={"email": "kept@example.com", "api_token": kept["api_token"]}
        )
        assert registered.status_code == 201, registered.text
        key = registered.json()["api_key"]

        deadline = time.monotonic() + 15
        while (gone := client.post(dropped["ingest_url"], json={"n": 2})).status_code == 200:
            assert time.monotonic() < deadline, "the unregistered endpoint never expired"
            time.sleep(0.05)
        assert gone.status_code == 410
        assert gone.json()["error"]["code"] == "endpoint_expired"
        assert datetime.now(UTC) >= soon

        assert client.post(kept["ingest_url"], json={"n": 3}).status_code == 200
        endpoint = client.get(
            f"{stack.control_url}/v1/endpoints/{kept['endpoint_id']}", headers={"Authorization": f"Bearer {key}"}
        ).json()
        assert (endpoint["temporary"], endpoint["expires_at"]) == (False, None)
