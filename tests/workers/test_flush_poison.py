"""Poison in the ingest stream: every byte an edge accepts is stored exactly, and what Postgres still refuses
is one record's fate alone (never its batch's, never another tenant's), dead-lettered and re-drivable."""

from __future__ import annotations

import base64

import pytest

from control.db.context import Context, Principal
from control.records.events import Event
from control.service.events.read import get_event
from control.support import dead_letters
from control.workers.flush import Flush
from shared.errors import NotFoundError
from shared.wire import decode_records, encode_records
from tests.conftest import ingest_record
from tests.workers.conftest import drain, endpoint_row, event_count, xadd


async def _principal(ctx: Context, endpoint_id: str) -> Principal:
    async with ctx.pool.acquire() as conn:
        account_id = await conn.fetchval("SELECT account_id FROM endpoints WHERE id = $1", endpoint_id)
    return Principal(account_id=account_id, key_id="k", kind="live")


STORABLE_POISON = {
    # what an older edge, or a server laxer than granian, could hand the flush: all of it is kept
    "nul_path": {"path": "a\x00b", "query": "x=\x00"},
    "nul_type_and_id": {"provider": "payments", "event_type": "invoice\x00.paid", "idempotency_key": "evt_\x00"},
    "nul_header_value": {"headers": [(b"x-a", b"a\x00b"), (b"content-type", b"application/json")]},
    "latin1_header_value": {"headers": [(b"x-a", b"caf\xe9"), (b"x-a", b"ok")]},
    "nul_header_name": {"headers": [(b"x-\x00a", b"v")]},
    "binary_content_type": {"headers": [(b"content-type", b"text/\xff\x00plain")]},
    "nul_body": {"body": b'{"type":"a\\u0000b","id":"\x00"}\x00\xff'},
}
UNSTORABLE_POISON = {
    # values Postgres refuses whatever we do with them: isolated, one dead letter each
    "bad_source_ip": {"source_ip": "not-an-address"},
    "bad_reason": {"signature_valid": False, "signature_failure_reason": "no_such_reason"},
    "nul_method": {"method": "PO\x00ST"},
}


async def test_poison_in_one_tenants_records_never_touches_another_tenants(ctx: Context, flush: Flush) -> None:
    a, b = await endpoint_row(ctx), await endpoint_row(ctx)
    await flush.ensure_groups()
    good = [ingest_record(a, body=f'{{"n":{i}}}'.encode()) for i in range(40)]
    storable = {name: ingest_record(b, **kw) for name, kw in STORABLE_POISON.items()}
    unstorable = {name: ingest_record(b, **kw) for name, kw in UNSTORABLE_POISON.items()}
    # Interleaved in the SAME stream entries: an entry is many requests of many tenants.
    mixed = [*good[:15], *unstorable.values(), *good[15:30], *storable.values(), *good[30:]]
    await xadd(ctx, mixed[:30])
    await xadd(ctx, mixed[30:])

    assert await drain(flush) == len(mixed)

    assert await event_count(ctx, a) == (40, 40)
    assert await event_count(ctx, b) == (len(storable), len(storable))
    dead = await dead_letters.list_dead_letters(ctx.redis, ctx.keys)
    assert sorted(d.event_id for d in dead) == sorted(r.id for r in unstorable.values())
    for letter in dead:
        shown = await dead_letters.show(ctx.redis, ctx.keys, letter.id)
        assert shown.endpoint_id == b
        assert "rejected by Postgres" in shown.error
        (record,) = decode_records(
            (await ctx.redis.xrange(ctx.keys.dead_letter_stream(0), min=letter.id.split(":")[1]))[0][1][b"r"]
        )
        assert record == next(r for r in unstorable.values() if r.id == record.id)  # the exact record
    assert await ctx.redis.xlen(ctx.keys.ingest_stream(0)) == 0


async def test_storable_poison_comes_back_exactly(ctx: Context, flush: Flush) -> None:
    b = await endpoint_row(ctx)
    await flush.ensure_groups()
    records = {name: ingest_record(b, **kw) for name, kw in STORABLE_POISON.items()}
    await xadd(ctx, list(records.values()))
    await drain(flush)
    principal = await _principal(ctx, b)

    async def event(name: str) -> Event:
        return await get_event(ctx, principal, records[name].id)

    path = await event("nul_path")
    assert (path.path, path.query) == ("/a%00b", "x=%00")
    typed = await event("nul_type_and_id")
    assert (typed.provider, typed.event_type, typed.idempotency_key) == ("payments", None, None)

    nul_header = await event("nul_header_value")
    assert nul_header.header_encodings == {"x-a": "base64"}
    assert base64.b64decode(nul_header.headers["x-a"]) == b"a\x00b"
    assert nul_header.headers["content-type"] == "application/json"
    latin1 = await event("latin1_header_value")
    assert latin1.header_encodings == {"x-a": "base64"}
    assert base64.b64decode(latin1.headers["x-a"]) == b"caf\xe9, ok"  # repeats joined, then encoded
    named = await event("nul_header_name")
    assert named.headers == {"x-%00a": "v"}
    binary_type = await event("binary_content_type")
    assert base64.b64decode(binary_type.headers["content-type"]) == b"text/\xff\x00plain"
    assert binary_type.content_type == "text/\xff\ufffdplain"  # a reading of the header, never NUL

    body = await event("nul_body")
    assert body.body_encoding == "base64"
    assert base64.b64decode(body.body or "") == records["nul_body"].body


async def test_dead_letter_retry_redrives_through_the_flush_idempotently(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    async with ctx.pool.acquire() as conn:  # a constraint that makes one record unstorable, for now
        await conn.execute("ALTER TABLE events ADD CONSTRAINT test_no_poison CHECK (event_type <> 'poison')")
    poison = ingest_record(endpoint_id, event_type="poison")
    await xadd(ctx, [ingest_record(endpoint_id), poison, ingest_record(endpoint_id)])
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (2, 2)
    assert await dead_letters.count(ctx.redis, ctx.keys) == 1
    (letter,) = await dead_letters.list_dead_letters(ctx.redis, ctx.keys)

    async with ctx.pool.acquire() as conn:  # the cause is fixed
        await conn.execute("ALTER TABLE events DROP CONSTRAINT test_no_poison")
    assert await dead_letters.retry(ctx.redis, ctx.keys, [letter.id]) == [letter.id]
    assert await dead_letters.retry(ctx.redis, ctx.keys, [letter.id]) == []  # already re-driven: nothing twice
    assert await dead_letters.count(ctx.redis, ctx.keys) == 0
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (3, 3)

    # the same record re-driven again (say, a dead letter duplicated by a lost EXEC reply) stores nothing twice
    await ctx.redis.xadd(ctx.keys.dead_letter_stream(0), dead_letters.record_fields(poison, "copy", "0-1"))
    assert len(await dead_letters.retry(ctx.redis, ctx.keys)) == 1
    await drain(flush)
    assert await event_count(ctx, endpoint_id) == (3, 3)


async def test_an_undecodable_entry_is_dead_lettered_whole_and_shown(ctx: Context, flush: Flush) -> None:
    await flush.ensure_groups()
    await ctx.redis.xadd(ctx.keys.ingest_stream(0), {"r": b"\xc1 not msgpack"})
    await drain(flush)
    (letter,) = await dead_letters.list_dead_letters(ctx.redis, ctx.keys)
    shown = await dead_letters.show(ctx.redis, ctx.keys, letter.id)
    assert shown.record is None
    assert shown.event_id is None
    assert "undecodable" in shown.error
    assert shown.size == len(b"\xc1 not msgpack")
    with pytest.raises(NotFoundError):
        await dead_letters.show(ctx.redis, ctx.keys, "0:1-0")
    with pytest.raises(NotFoundError):
        await dead_letters.show(ctx.redis, ctx.keys, "nonsense")


async def test_dead_letters_of_a_record_show_what_was_captured(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    bad = ingest_record(endpoint_id, source_ip="nope", body=b"\xff\x00", headers=[(b"x-a", b"\xe9")])
    await xadd(ctx, [bad])
    await drain(flush)
    (letter,) = await dead_letters.list_dead_letters(ctx.redis, ctx.keys)
    shown = await dead_letters.show(ctx.redis, ctx.keys, letter.id)
    assert shown.record is not None
    assert shown.record["body"] == {"base64": base64.b64encode(b"\xff\x00").decode()}
    assert shown.record["headers"] == [["x-a", {"base64": base64.b64encode(b"\xe9").decode()}]]
    assert shown.event_id == bad.id
    assert encode_records([bad]) == (await ctx.redis.xrange(ctx.keys.dead_letter_stream(0)))[0][1][b"r"]


async def test_a_bad_record_alone_in_its_batch_is_dead_lettered(ctx: Context, flush: Flush) -> None:
    endpoint_id = await endpoint_row(ctx)
    await flush.ensure_groups()
    await xadd(ctx, [ingest_record(endpoint_id, method="\x00")])
    assert await drain(flush) == 1
    assert await dead_letters.count(ctx.redis, ctx.keys) == 1
    assert await event_count(ctx, endpoint_id) == (0, 0)
