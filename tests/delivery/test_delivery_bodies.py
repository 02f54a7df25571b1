"""Delivery records hold any body exactly (bytea, shown as text or base64) and any descriptive text (made
storable: NUL and lone surrogates become U+FFFD); migration 0004 converts existing rows losslessly."""

from __future__ import annotations

import base64
import hashlib

import asyncpg
from litestar.testing import AsyncTestClient

from control.db import delivery_records
from control.db.context import Context
from control.db.migrate import available, migrate
from control.delivery.send import Outcome, delivery_row
from control.records.storable import storable
from control.support.body_encoding import shown_body
from shared import ids
from tests.conftest import Account
from tests.destination import (
    Destination,
    Reply,
    add_endpoint,
    deliveries_of,
    make_task,
    running,
    settled,
)

NUL_TEXT = "caf\u00e9 \x00 nul".encode()
NOT_UTF8 = b"\xff\xfe\x00binary\x80"


def test_the_storable_rule_replaces_nul_and_lone_surrogates_only() -> None:
    assert storable("plain ascii") == "plain ascii"
    assert storable("a\x00b") == "a\ufffdb"
    assert storable("caf\u00e9 \ud800 \udfff \U0001f600 \x00") == "caf\u00e9 \ufffd \ufffd \U0001f600 \ufffd"
    assert storable({"x-\x00": ["v\ud83d", {"k": "\x00"}], "n": 1}) == {
        "x-\ufffd": ["v\ufffd", {"k": "\ufffd"}],
        "n": 1,
    }
    assert storable(None) is None
    assert storable(b"\x00") == b"\x00"  # bodies are bytes and never pass through it


def test_shown_body_is_never_lossy() -> None:
    assert shown_body(None) == (None, "utf8")
    assert shown_body(b"") == ("", "utf8")
    assert shown_body(NUL_TEXT) == (NUL_TEXT.decode(), "utf8")
    assert shown_body(NOT_UTF8) == (base64.b64encode(NOT_UTF8).decode(), "base64")
    assert shown_body(b"ascii", utf8=False) == ("YXNjaWk=", "base64")  # the caller knows better


async def test_every_row_delivery_row_builds_is_storable(ctx: Context) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn)
    outcome = Outcome(
        status=None,
        latency_ms=3,
        sent_headers={"x-a\x00": "v\x00", "x-b": "lone \udc80", "x-c": "caf\u00e9"},
        error="refused: \x00 and \ud800",
    )
    row = delivery_row(
        outcome,
        NOT_UTF8,
        endpoint_id=endpoint_id,
        event_id=ids.new_id("evt"),
        task_id=None,
        destination_id=None,
        destination_name="name \x00",
        destination_url="http://example.com/\udc80",
        rule_id=None,
        source="replay",
        attempt=1,
    )
    async with ctx.pool.acquire() as conn:
        await delivery_records.insert(conn, row)
        await delivery_records.insert(conn, row)  # idempotent: a batch written again after a lost COMMIT
        stored = await conn.fetch("SELECT * FROM deliveries WHERE id = $1", row[0])
    (stored,) = stored
    assert stored["request_headers"] == {"x-a\ufffd": "v\ufffd", "x-b": "lone \ufffd", "x-c": "caf\u00e9"}
    assert (stored["destination_name"], stored["destination_url"]) == ("name \ufffd", "http://example.com/\ufffd")
    assert stored["error"] == "refused: \ufffd and \ufffd"
    assert stored["request_body"] == NOT_UTF8
    assert stored["response_body"] is None


async def test_response_bodies_with_nul_or_not_utf8_are_recorded_exactly(
    ctx: Context, destination: Destination, client: AsyncTestClient, account: Account
) -> None:
    async with ctx.pool.acquire() as conn:
        endpoint_id = await add_endpoint(conn, account_id=account.id)
    destination.reply(Reply(status=500, body=NUL_TEXT), Reply(status=200, body=NOT_UTF8))
    task = await make_task(ctx, destination.url, endpoint_id=endpoint_id, body=NUL_TEXT)
    async with running(ctx):
        await settled(ctx, task["task"], "succeeded")
    rows = await deliveries_of(ctx, task["event"])
    assert [(r["response_status"], r["response_body"], r["request_body"]) for r in rows] == [
        (500, NUL_TEXT, NUL_TEXT),
        (200, NOT_UTF8, NUL_TEXT),
    ]
    listed = await client.get(f"/v1/endpoints/{endpoint_id}/deliveries", headers=account.headers)
    assert listed.status_code == 200, listed.text
    second, first = listed.json()["deliveries"]  # newest first
    assert (first["request_body"], first["request_body_encoding"]) == (NUL_TEXT.decode(), "utf8")
    assert (first["response_body"], first["response_body_encoding"]) == (NUL_TEXT.decode(), "utf8")
    assert (second["response_body"], second["response_body_encoding"]) == (
        base64.b64encode(NOT_UTF8).decode(),
        "base64",
    )
    event = (await client.get(f"/v1/events/{task['event']}", headers=account.headers)).json()
    assert [d["response_body_encoding"] for d in event["deliveries"]] == ["utf8", "base64"]


async def test_migration_0004_turns_text_bodies_into_their_utf8_bytes(empty_database: str) -> None:
    before = [(v, sql) for v, sql in available() if v < "0004"]
    conn = await asyncpg.connect(empty_database)
    try:
        # The schema as it was before 0004, recorded as `hookyard migrate` records it.
        await conn.execute(
            """CREATE TABLE hy_schema_migrations (version text PRIMARY KEY, checksum text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        for version, sql in before:
            await conn.execute(sql)
            await conn.execute(
                "INSERT INTO hy_schema_migrations (version, checksum) VALUES ($1, $2)",
                version,
                hashlib.sha256(sql.encode()).hexdigest(),
            )
        await conn.execute(
            """INSERT INTO accounts (id) VALUES ('acct_1');
               INSERT INTO endpoints (id, account_id, name, environment, ingest_token, signing_secret)
               VALUES ('ep_1', 'acct_1', 'e', 'production', 'tok', 'whsec_x');
               INSERT INTO deliveries (id, endpoint_id, event_id, source, attempt_number, success,
                                       request_body, response_body)
               VALUES ('dlv_1', 'ep_1', 'evt_1', 'rule', 1, true, 'caf\u00e9 {"a": 1}', 'ok \u2713'),
                      ('dlv_2', 'ep_1', 'evt_1', 'rule', 2, false, NULL, '')"""
        )
        assert "0004_delivery_bodies" in await migrate(empty_database)
        rows = await conn.fetch("SELECT id, request_body, response_body FROM deliveries ORDER BY id")
    finally:
        await conn.close()
    assert [tuple(r) for r in rows] == [
        ("dlv_1", 'caf\u00e9 {"a": 1}'.encode(), "ok \u2713".encode()),
        ("dlv_2", None, b""),
    ]
