"""Dead letters: what the flush could not store, kept in Redis, visible, and re-drivable.

Each ingest shard has a dead-letter stream (``Keys.dead_letter_stream``). The flush writes one entry per
record Postgres refused (``control.db.faults`` says when that is the record's fault, never for an outage)
and one per ingest entry it could not decode at all, in the same MULTI that acknowledges the ingest entry.
An entry's fields:

- ``r``: a one-record ingest batch exactly as the edge encodes it (``shared.wire.encode_records``), or the
  undecodable entry's raw bytes;
- ``error`` (why), ``entry`` (the ingest entry it came in), and for a record ``event`` and ``endpoint``.

``retry`` puts ``r`` back on its ingest stream and removes the dead letter in one atomic step (a Lua script;
both keys carry the shard's hash tag, so it also runs on a Redis Cluster), and the normal flush takes it
from there. Storing is idempotent on the event id, so retrying twice, or retrying a record stored meanwhile,
never duplicates an event; a record that still cannot be stored comes back as a new dead letter.

Dead letters are an operator's concern across accounts: the ``hookyard dead-letters`` command and the
control plane's ``/healthz`` details use these functions; there is no /v1 route.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, cast

import msgspec
import redis.asyncio as aioredis

from shared.errors import NotFoundError, ValidationError
from shared.keys import Keys
from shared.wire import IngestRecord, decode_records, encode_records

if TYPE_CHECKING:
    from redis.typing import EncodableT, FieldT

__all__ = ("DeadLetter", "count", "counts", "fields_for", "list_dead_letters", "record_fields", "retry", "show")


class DeadLetter(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    id: str
    """``{shard}:{stream entry id}``: what ``show`` and ``retry`` take."""
    shard: int
    dead_at_ms: int
    error: str
    entry: str
    """The ingest entry the record came in."""
    event_id: str | None = None
    endpoint_id: str | None = None
    size: int
    """Bytes of ``r``."""
    record: dict[str, object] | None = None
    """``show`` only: the record as the edge captured it (body as text or base64), null if undecodable."""


def fields_for(raw: bytes, reason: str, entry_id: str, record: IngestRecord | None = None) -> dict[FieldT, EncodableT]:
    """The dead-letter entry of one refused record (``raw`` is then its own one-record batch) or of a whole
    undecodable ingest entry (``raw`` as read, ``record`` None): str names, bytes values, typed as the fields
    XADD takes (redis-py's ``dict`` of its own unions)."""
    fields: dict[FieldT, EncodableT] = {
        "r": raw,
        "error": reason.encode("utf-8", "replace"),
        "entry": entry_id.encode(),
    }
    if record is not None:
        fields["event"] = record.id.encode("utf-8", "replace")
        fields["endpoint"] = record.endpoint_id.encode("utf-8", "replace")
    return fields


def record_fields(record: IngestRecord, reason: str, entry_id: str) -> dict[FieldT, EncodableT]:
    return fields_for(encode_records([record]), reason, entry_id, record)


async def count(redis: aioredis.Redis, keys: Keys) -> int:
    """Dead letters over all shards."""
    return (await counts(redis, keys))[0]


async def counts(redis: aioredis.Redis, keys: Keys) -> tuple[int, int]:
    """(dead letters, ingest entries not yet flushed), over all shards: one pipelined round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for shard in range(keys.shards):
            pipe.xlen(keys.dead_letter_stream(shard))
            pipe.xlen(keys.ingest_stream(shard))
        lengths = await pipe.execute()
    return sum(lengths[0::2]), sum(lengths[1::2])


async def entries(
    redis: aioredis.Redis, keys: Keys, shard: int, *, after: str = "-", last: str = "+", count: int | None = None
) -> list[tuple[str, dict[bytes, bytes]]]:
    """Entries of a shard's dead-letter stream from ``after`` (``(id`` excludes it) to ``last``, oldest first,
    ids as text: the one reader of the stream, so its callers (listing, retry, retention, erasure) neither
    repeat the decoding nor the loose types redis-py gives a stream read."""
    found = await redis.xrange(keys.dead_letter_stream(shard), min=after, max=last, count=count)
    return [
        (entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id), cast("dict[bytes, bytes]", fields))
        # cast: the client does not decode responses, so a field map is bytes to bytes
        for entry_id, fields in found or []
    ]


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "replace")


def _dead_letter(shard: int, eid: str, fields: dict[bytes, bytes], *, detail: bool) -> DeadLetter:
    raw = fields.get(b"r", b"")
    record = None
    if detail:
        try:
            (captured,) = decode_records(raw)
            record = _captured(captured)
        except (msgspec.MsgspecError, ValueError):
            record = None
    return DeadLetter(
        id=f"{shard}:{eid}",
        shard=shard,
        dead_at_ms=int(eid.split("-", 1)[0]),
        error=_text(fields.get(b"error")) or "",
        entry=_text(fields.get(b"entry")) or "",
        event_id=_text(fields.get(b"event")),
        endpoint_id=_text(fields.get(b"endpoint")),
        size=len(raw),
        record=record,
    )


def _captured(record: IngestRecord) -> dict[str, object]:
    def text(raw: bytes) -> dict[str, str]:
        try:
            return {"text": raw.decode()}
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(raw).decode("ascii")}

    return {
        "id": record.id,
        "endpoint_id": record.endpoint_id,
        "received_at_us": record.received_at_us,
        "method": record.method,
        "path": record.path,
        "query": record.query,
        "headers": [[name.decode("latin-1"), text(value)] for name, value in record.headers],
        "body": text(record.body),
        "source_ip": record.source_ip,
        "provider": record.provider,
        "event_type": record.event_type,
        "idempotency_key": record.idempotency_key,
    }


async def list_dead_letters(redis: aioredis.Redis, keys: Keys, *, limit: int = 100) -> list[DeadLetter]:
    """Oldest first, at most ``limit`` per shard."""
    if not 1 <= limit <= 10_000:
        raise ValidationError("limit: must be between 1 and 10000")
    out: list[DeadLetter] = []
    for shard in range(keys.shards):
        for entry_id, fields in await entries(redis, keys, shard, count=limit):
            out.append(_dead_letter(shard, entry_id, fields, detail=False))
    return out


def _parse_id(keys: Keys, dead_letter_id: str) -> tuple[int, str]:
    shard_text, _, entry_id = dead_letter_id.partition(":")
    ms, _, seq = entry_id.partition("-")
    if not (shard_text.isdigit() and ms.isdigit() and seq.isdigit()) or int(shard_text) >= keys.shards:
        raise NotFoundError(f"no dead letter {dead_letter_id!r} (ids look like 0:1764000000000-0)")
    return int(shard_text), entry_id


async def show(redis: aioredis.Redis, keys: Keys, dead_letter_id: str) -> DeadLetter:
    shard, entry_id = _parse_id(keys, dead_letter_id)
    found = await entries(redis, keys, shard, after=entry_id, last=entry_id)
    if not found:
        raise NotFoundError(f"no dead letter {dead_letter_id!r}")
    return _dead_letter(shard, found[0][0], found[0][1], detail=True)


# Removes the dead letter and re-adds its record to the ingest stream only if it was still there: two
# concurrent retries of one dead letter re-drive it once.
_REDRIVE = """
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return false end
local fields = found[1][2]
for i = 1, #fields, 2 do
  if fields[i] == 'r' then
    local id = redis.call('XADD', KEYS[2], '*', 'r', fields[i + 1])
    redis.call('XDEL', KEYS[1], ARGV[1])
    return id
  end
end
return false
"""


async def retry(redis: aioredis.Redis, keys: Keys, ids: list[str] | None = None) -> list[str]:
    """Re-drives the named dead letters (all of them when ``ids`` is None) through the normal flush; returns
    the ids re-driven (an id already retried or unknown is skipped)."""
    targets: list[tuple[int, str]]
    if ids is None:
        targets = []
        for shard in range(keys.shards):
            targets.extend((shard, eid) for eid, _ in await entries(redis, keys, shard))
    else:
        targets = [_parse_id(keys, i) for i in ids]
    script = redis.register_script(_REDRIVE)
    done = []
    for shard, entry_id in targets:
        streams = [keys.dead_letter_stream(shard), keys.ingest_stream(shard)]
        if await script(keys=streams, args=[entry_id]):
            done.append(f"{shard}:{entry_id}")
    return done
