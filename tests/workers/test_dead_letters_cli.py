"""Dead letters as an operator meets them: ``hookyard dead-letters list|show|retry`` and ``/healthz`` details."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from litestar.testing import AsyncTestClient

from control.db.context import Context
from control.workers.flush import Flush
from shared.settings import Settings
from tests.conftest import ingest_record
from tests.workers.conftest import drain, endpoint_row, event_count, xadd

CLI = [sys.executable, "-m", "control.cli"]


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_") and k != "DATABASE_URL"}
    env.update(REDIS_URL=settings.redis_url or "", HOOKYARD_REDIS_PREFIX=settings.redis_prefix)
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
async def dead(ctx: Context) -> tuple[str, list[str]]:
    """An endpoint with two stored events and two dead letters (a constraint refuses them, for now)."""
    endpoint_id = await endpoint_row(ctx)
    flush = Flush(ctx, consumer="c1", block_ms=5, claim_every_s=0)
    async with ctx.pool.acquire() as conn:
        await conn.execute("ALTER TABLE events ADD CONSTRAINT test_refuse CHECK (event_type <> 'refused')")
    refused = [ingest_record(endpoint_id, event_type="refused") for _ in range(2)]
    await xadd(ctx, [ingest_record(endpoint_id), refused[0], ingest_record(endpoint_id), refused[1]])
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (2, 2)
    return endpoint_id, [r.id for r in refused]


async def test_list_show_and_retry(ctx: Context, settings: Settings, dead: tuple[str, list[str]]) -> None:
    endpoint_id, refused = dead
    table = _cli(settings, "dead-letters", "list")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["ID", "DEAD", "SINCE", "EVENT"]
    assert len(lines) == 3
    assert all("rejected by Postgres" in line for line in lines[1:])

    listed = [json.loads(line) for line in _cli(settings, "dead-letters", "list", "--json").stdout.splitlines()]
    assert sorted(d["event_id"] for d in listed) == sorted(refused)
    assert {d["endpoint_id"] for d in listed} == {endpoint_id}

    shown = _cli(settings, "dead-letters", "show", listed[0]["id"])
    assert shown.returncode == 0, shown.stderr
    detail = json.loads(shown.stdout)
    assert detail["record"]["event_type"] == "refused"
    assert detail["record"]["body"] == {"text": '{"a":1}'}

    unknown = _cli(settings, "dead-letters", "show", "0:1-0")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("hookyard: no dead letter")
    bad_call = _cli(settings, "dead-letters", "retry")
    assert bad_call.returncode == 2
    assert "--all" in bad_call.stderr

    async with ctx.pool.acquire() as conn:  # the cause is fixed
        await conn.execute("ALTER TABLE events DROP CONSTRAINT test_refuse")
    one = _cli(settings, "dead-letters", "retry", listed[0]["id"])
    assert one.stdout.splitlines()[0] == "re-driven through the flush: 1"
    again = _cli(settings, "dead-letters", "retry", listed[0]["id"], "--all")
    assert again.returncode == 2  # ids and --all together is a mistake, not a guess
    rest = _cli(settings, "dead-letters", "retry", "--all")
    assert rest.stdout.splitlines()[0] == "re-driven through the flush: 1"
    assert _cli(settings, "dead-letters", "list").stdout.strip() == "no dead letters"
    await drain(Flush(ctx, consumer="c2", block_ms=5, claim_every_s=0))
    assert await event_count(ctx, endpoint_id) == (4, 4)


async def test_healthz_reports_dead_letters_and_backlog(
    client: AsyncTestClient, ctx: Context, dead: tuple[str, list[str]]
) -> None:
    await xadd(ctx, [ingest_record(dead[0])])  # one entry waiting for the flush
    resp = await client.get("/healthz")
    assert resp.status_code == 200
    assert resp.json() == {"ok": True, "details": {"dead_letters": 2, "ingest_backlog": 1}}
