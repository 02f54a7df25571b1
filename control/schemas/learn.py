"""The flush's learning step: the shapes of a stored batch's new events, added to their schemas.

Called by the flush worker right after ``store_batch``, in the same transaction and on the same
connection, with the rows and what the insert reported as new. So an event is learned exactly once: a
re-processed stream entry (its events already stored) teaches nothing again, and a batch whose transaction
rolls back is learned again when it is retried. Learning never stops ingestion: it runs under a savepoint,
and a failure of its own (anything but the infrastructure's, which retries the batch as any flush failure
does) is logged and skipped for that batch.

What is learned: JSON object bodies of events that were not refused (a failed signature or a blocked
address could be anyone's shape). The schema is the account's (provider, event type); traffic with no
provider has one schema per endpoint. Per event the cost is a decode, a signature walk and dict lookups
(``control.schemas.shape``); per batch and schema one merge (``control.schemas.state``), and for the
batch a few statements (``control.db.schemas``). Each worker process caches the schemas' states, keyed by
the random revision of their last write, so a state is read from Postgres only when another process wrote
it since.
"""

from __future__ import annotations

import logging
import random
import zlib
from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec

from control.db import schemas as db
from control.db.faults import is_record_fault
from control.db.flush import COLUMNS, Stored
from control.schemas.shape import Shapes
from control.schemas.state import Batch, State, decode_state, encode_state, fields, merge, next_version
from shared.ids import new_id

__all__ = ("Learner", "hash_value", "scope_key")

log = logging.getLogger("hookyard.schemas")

_ID, _ENDPOINT, _RECEIVED, _BODY, _PROVIDER, _TYPE, _SIG, _IP = (
    COLUMNS.index(c)
    for c in ("id", "endpoint_id", "received_at", "body", "provider", "event_type", "signature_valid", "ip_allowed")
)
_decode = msgspec.json.Decoder().decode
_json = msgspec.json.Encoder()
_MAX_CACHED = 50_000


def scope_key(provider: str | None, event_type: str | None, endpoint_id: str) -> str:
    """What makes a schema unique in its account (``schemas.scope_key``)."""
    if provider is None:
        return f"e:{endpoint_id}"
    return f"p:{provider}" if event_type is None else f"p:{provider}:{event_type}"


def hash_value(value: Any) -> int:
    """A stable 32-bit hash of an id-like value (the same in every process: sketches are merged and compared).
    CRC-32: spread evenly enough for a 256-value sketch, and a few times cheaper than a cryptographic hash."""
    if isinstance(value, str):
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    return zlib.crc32(b"#%d" % value)


class Learner:
    """One per worker process, shared by its flush lanes."""

    def __init__(self) -> None:
        self.shapes = Shapes()
        self._accounts: dict[str, str] = {}
        self._ids: dict[tuple[str, str], str] = {}
        self._states: dict[str, tuple[int, State]] = {}

    async def learn(self, conn: asyncpg.Connection, rows: Sequence[tuple], stored: Stored) -> None:
        if not stored.by_endpoint:
            return
        new: set[str] = set()
        for _, event_ids in stored.by_endpoint:
            new.update(event_ids.split(","))
        try:
            async with conn.transaction():
                await self._learn(conn, [r for r in rows if r[_ID] in new])
        except Exception as exc:
            self._states.clear()  # a state may be half merged: read them all again
            infrastructure = isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError)
            if infrastructure and not is_record_fault(exc):
                raise  # the infrastructure's: the flush retries the batch
            log.exception("schemas: learning from %d new events failed; they are stored, not learned", len(new))

    async def _schema_ids(
        self, conn: asyncpg.Connection, batches: dict[tuple[str, str], tuple[Batch, tuple]]
    ) -> dict[str, tuple[Batch, tuple]]:
        """Schema id → batch; creates the schemas not seen before (unless the account is at its limit)."""
        missing = [k for k in batches if k not in self._ids]
        if missing:
            await db.create_missing(conn, [(new_id("sch"), a, s, *batches[(a, s)][1]) for a, s in missing])
            if len(self._ids) > _MAX_CACHED:
                self._ids.clear()
            self._ids.update(await db.ids_for(conn, missing))
        return {self._ids[k]: batch for k, batch in batches.items() if k in self._ids}

    async def _learn(self, conn: asyncpg.Connection, rows: list[tuple]) -> None:
        accounts = self._accounts
        unknown = list({r[_ENDPOINT] for r in rows} - accounts.keys())
        if unknown:
            if len(accounts) > _MAX_CACHED:
                accounts.clear()
            accounts.update(await db.accounts_of(conn, unknown))
        gathered = self._gather(rows, accounts)
        if gathered:
            batches = {}
            for (account_id, provider, which), batch in gathered.items():
                scope = (provider, which, None) if provider is not None else (None, None, which)
                batches[(account_id, scope_key(provider, scope[1], which))] = (batch, scope)
            await self._apply(conn, batches)

    def _gather(self, rows: list[tuple], accounts: dict[str, str]) -> dict[tuple[str, Any, Any], Batch]:
        """The cheap per-event part: (account, provider, event type) or (account, None, endpoint) → batch."""
        batches: dict[tuple[str, Any, Any], Batch] = {}
        shape_of = self.shapes.of
        for row in rows:
            body = row[_BODY]
            if not body or row[_SIG] is False or row[_IP] is False:
                continue
            if body[0] != 123 and body.lstrip()[:1] != b"{":  # 123: "{"
                continue
            try:
                doc = _decode(body)
            except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                continue
            if type(doc) is not dict:
                continue
            try:
                shape = shape_of(doc)
            except RecursionError:  # nested deeper than any event a provider sends
                continue
            endpoint_id = row[_ENDPOINT]
            account_id = accounts.get(endpoint_id)
            if account_id is None:
                continue
            provider = row[_PROVIDER]
            key = (account_id, provider, row[_TYPE]) if provider is not None else (account_id, None, endpoint_id)
            batch = batches.get(key)
            if batch is None:
                batch = batches[key] = Batch()
                batch.first_at = row[_RECEIVED]
            batch.count += 1
            shapes = batch.shapes
            shapes[shape] = shapes.get(shape, 0) + 1
            endpoints = batch.endpoints
            endpoints[endpoint_id] = endpoints.get(endpoint_id, 0) + 1
            batch.last_at = row[_RECEIVED]
            id_values = shape.id_values
            if id_values is not None:  # strings and integers only (control.schemas.shape)
                found = batch.values.get(shape)
                if found is None:
                    found = batch.values[shape] = []
                found.append(id_values(doc))
        return batches

    async def _apply(self, conn: asyncpg.Connection, batches: dict[tuple[str, str], tuple[Batch, tuple]]) -> None:
        by_id = await self._schema_ids(conn, batches)
        revisions = await db.lock(conn, sorted(by_id))
        if len(revisions) < len(by_id):  # cached ids of schemas created in a transaction that rolled back
            self._ids.clear()
            by_id = await self._schema_ids(conn, batches)
            revisions = await db.lock(conn, sorted(by_id))
        stale = [i for i, rev in revisions.items() if self._states.get(i, (None,))[0] != rev]
        loaded = await db.states(conn, stale) if stale else {}
        updates: list[tuple[Any, ...]] = []
        endpoints: list[tuple[Any, ...]] = []
        versions: list[tuple[str, int, int, str]] = []
        for schema_id in revisions:
            state = decode_state(loaded[schema_id]) if schema_id in loaded else self._states[schema_id][1]
            batch, _ = by_id[schema_id]
            start = state.total + 1
            merge(state, batch, hash_value)
            field_list = fields(state)
            cut = next_version(state, field_list, start)
            if cut is not None:
                version, is_new = cut
                versions.append((schema_id, version, start - 1 if is_new else 0, _json.encode(field_list).decode()))
            revision = random.getrandbits(62)
            self._states[schema_id] = (revision, state)
            updates.append(
                (schema_id, encode_state(state), revision, state.version, batch.count, batch.first_at, batch.last_at)
            )
            endpoints.extend((schema_id, e, n, batch.first_at, batch.last_at) for e, n in batch.endpoints.items())
        if len(self._states) > _MAX_CACHED:
            self._states.clear()
        if not updates:
            return
        await db.store(conn, updates, endpoints)
        if versions:
            await db.write_versions(conn, versions)
