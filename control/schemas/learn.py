"""Schema learning: the shapes of stored events, added to their schemas.

The learn worker (``control.workers.learn``) calls ``learn`` with the events the flush noted as new
(``control.db.learn_queue``), in the transaction that forgets the notes, so an event is learned exactly
once: a note is forgotten only with what was learned from it, and a re-processed stream entry is never
noted twice. Learning never stops ingestion: the flush does not wait for it, and ``learn`` runs under a
savepoint where a failure of its own (anything but the infrastructure's, which retries the notes) is logged
and skipped for those events.

What is learned: JSON object bodies of events that were not refused (a failed signature or a blocked
address could be anyone's shape). The schema is the account's (provider, event type); traffic with no
provider has one schema per endpoint. Per event the cost is one decode: a sender (endpoint, provider,
event type) repeating a shape has its bodies decoded into that shape's Struct, which checks the shape in C
(``control.schemas.typed``); other bodies are decoded to dicts and walked into their signature
(``control.schemas.shape``). Per call and schema there is one merge (``control.schemas.state``), and for
the call a few statements (``control.db.schemas``). Each worker process caches the schemas' states, keyed by
the random revision of their last write, so a state is read from Postgres only when another process wrote
it since.
"""

from __future__ import annotations

import logging
import operator
import random
from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec

from control.db import schemas as db
from control.db.connection import Connection
from control.db.faults import is_record_fault
from control.db.learn_queue import LEARN_COLUMNS, LearnRow
from control.schemas.shape import Shape, Shapes
from control.schemas.state import Batch, State, decode_state, encode_state, fields, merge, next_version
from control.schemas.typed import Typed, shape_weight, typed
from shared.bytes_lru import BytesLRU
from shared.ids import new_id

__all__ = ("Learner", "scope_key")

log = logging.getLogger("hookyard.schemas")

_ID, _ENDPOINT, _RECEIVED, _BODY, _PROVIDER, _TYPE, _SIG, _IP = (
    LEARN_COLUMNS.index(c)
    for c in ("id", "endpoint_id", "received_at", "body", "provider", "event_type", "signature_valid", "ip_allowed")
)
_decode = msgspec.json.Decoder().decode
_body_of = operator.itemgetter(_BODY)
_sender_of = operator.itemgetter(_ENDPOINT, _PROVIDER, _TYPE)
_json = msgspec.json.Encoder()
_MAX_IDS_BYTES = 8 * 1024 * 1024
"""What each of the learner's id maps may weigh (endpoint → account, (account, scope) → schema id): a scope
key holds the sender's event type, so a hostile sender's keys can be long and every one new (once bounded by
count: 50,000 of any length, and emptied all at once when full)."""
_MAX_TYPED_BYTES = 64 * 1024 * 1024
"""What each of the learner's Struct caches (by shape, and by sender) may weigh: a hostile sender's every
body can be a new shape of 2,000 paths, a few MB as a Struct (once bounded by count: 2,000 of any size)."""
_MAX_LAST_BYTES = 32 * 1024 * 1024
"""What the senders' last shapes may weigh (a shape there may be out of ``Shapes``' cache: held only here)."""
_MAX_STATE_BYTES = 128 * 1024 * 1024
"""What the schema states one learner keeps decoded may weigh (a state of 2,000 paths and their sketches is
hundreds of KB; 50,000 of them were once kept by count)."""
_STATE_WEIGHT_PER_BYTE = 8
"""A decoded state's Python objects per byte of its msgpack: 7.8 measured (tracemalloc, 2,000 paths, 20 full
sketches), rounded up."""
_second = operator.itemgetter(1)
_third = operator.itemgetter(2)
_typed_weight = operator.attrgetter("weight")
_Invalid = msgspec.ValidationError
_Undecodable = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def scope_key(provider: str | None, event_type: str | None, endpoint_id: str) -> str:
    """What makes a schema unique in its account (``schemas.scope_key``)."""
    if provider is None:
        return f"e:{endpoint_id}"
    return f"p:{provider}" if event_type is None else f"p:{provider}:{event_type}"


def _by_sender(rows: Sequence[LearnRow]) -> dict[tuple[str, Any, Any], list[LearnRow]]:
    """The rows learning looks at, by sender (endpoint, provider, event type), in arrival order: those with a
    body, of events that were not refused (a failed signature or a blocked address could be anyone's shape)."""
    groups: dict[tuple[str, Any, Any], list[LearnRow]] = {}
    for row in rows:
        if not row[_BODY] or row[_SIG] is False or row[_IP] is False:
            continue
        sender = _sender_of(row)
        group = groups.get(sender)
        if group is None:
            groups[sender] = [row]
        else:
            group.append(row)
    return groups


class Learner:
    """One per worker process, shared by its flush lanes."""

    def __init__(self) -> None:
        self.shapes = Shapes()
        self._accounts: BytesLRU[str, str] = BytesLRU(_MAX_IDS_BYTES)
        """Endpoint id → its account's id (an endpoint never changes account)."""
        self._ids: BytesLRU[tuple[str, str], str] = BytesLRU(_MAX_IDS_BYTES)
        """(account id, scope key) → schema id."""
        self._states: BytesLRU[str, tuple[int, State, int]] = BytesLRU(_MAX_STATE_BYTES, size=_third)
        """Schema id → (revision, state, weight): a state is read again only when another process wrote it."""
        self._typed: BytesLRU[tuple[str, Any, Any], Typed] = BytesLRU(_MAX_TYPED_BYTES, size=_typed_weight)
        """Per sender (endpoint, provider, event type): the Struct decoder tried first on its bodies. Each
        weighs all of its Struct (shared with ``_structs`` or not: the bound errs on the safe side)."""
        self._last: BytesLRU[tuple[str, Any, Any], Shape] = BytesLRU(_MAX_LAST_BYTES, size=shape_weight)
        """Per sender: the shape of its last body that took the general path."""
        self._structs: BytesLRU[Shape, tuple[Typed | None, int]] = BytesLRU(_MAX_TYPED_BYTES, size=_second)
        """Shape → (its Struct decoder or None, weight): senders of one shape share one Struct."""

    def read(self, rows: Sequence[LearnRow]) -> dict[tuple[str, Any, Any], Batch]:
        """The CPU part, without I/O: each sender's (endpoint, provider, event type) learned samples."""
        out: dict[tuple[str, Any, Any], Batch] = {}
        for sender, group in _by_sender(rows).items():
            batch = Batch()
            learned = self._shapes(sender, list(map(_body_of, group)), batch)
            if learned:
                batch.count = learned
                batch.endpoints[sender[0]] = learned
                # The sender's first and last rows in this batch (one of them may be a body not learned).
                batch.first_at, batch.last_at = group[0][_RECEIVED], group[-1][_RECEIVED]
                out[sender] = batch
        return out

    async def learn(self, conn: Connection, rows: Sequence[LearnRow]) -> None:
        """Learns ``rows`` (events in ``LEARN_COLUMNS`` order, each new to learning, in arrival order) in
        ``conn``'s transaction, under a savepoint."""
        try:
            senders = self.read(rows)
            async with conn.transaction():
                await self._learn(conn, senders)
        except Exception as exc:
            self._states.clear()  # a state may be half merged: read them all again
            infrastructure = isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError)
            if infrastructure and not is_record_fault(exc):
                raise  # the infrastructure's: the notes stay, and are learned when retried
            log.exception("schemas: learning from %d new events failed; they are stored, not learned", len(rows))

    async def _schema_ids(
        self, conn: Connection, batches: dict[tuple[str, str], tuple[Batch, tuple[Any, ...]]]
    ) -> dict[str, tuple[Batch, tuple[Any, ...]]]:
        """Schema id → batch; creates the schemas not seen before (unless the account is at its limit). The
        ids read here are used from what was read, not from the cache: a batch of more new keys than the cache
        holds would have evicted its own first ones."""
        known = self._ids.get
        found = {k: i for k in batches if (i := known(k)) is not None}
        missing = [k for k in batches if k not in found]
        if missing:
            await db.create_missing(conn, [(new_id("sch"), a, s, *batches[(a, s)][1]) for a, s in missing])
            read = await db.ids_for(conn, missing)
            for key, schema_id in read.items():
                self._ids.put(key, schema_id)
            found.update(read)
        return {found[k]: batch for k, batch in batches.items() if k in found}

    async def _learn(self, conn: Connection, senders: dict[tuple[str, Any, Any], Batch]) -> None:
        known = self._accounts.get
        accounts: dict[str, str] = {e: a for e in {e for e, _, _ in senders} if (a := known(e)) is not None}
        unknown = [e for e, _, _ in senders if e not in accounts]
        if unknown:
            read = await db.accounts_of(conn, list(dict.fromkeys(unknown)))
            for endpoint, account in read.items():
                self._accounts.put(endpoint, account)
            accounts.update(read)
        batches: dict[tuple[str, str], tuple[Batch, tuple[Any, ...]]] = {}
        for (endpoint_id, provider, event_type), batch in senders.items():
            account_id = accounts.get(endpoint_id)
            if account_id is None:  # the endpoint is gone
                continue
            # The schema: the account's (provider, event type), or the endpoint's for unattributed traffic.
            scope = (provider, event_type, None) if provider is not None else (None, None, endpoint_id)
            key = (account_id, scope_key(provider, event_type, endpoint_id))
            found = batches.get(key)
            if found is None:
                batches[key] = (batch, scope)
            else:
                found[0].absorb(batch)
        if batches:
            await self._apply(conn, batches)

    def _shapes(self, sender: tuple[str, Any, Any], bodies: list[bytes], batch: Batch) -> int:
        """Adds the shapes (and id-like values) of one sender's bodies to ``batch``; how many were learned.

        When the sender has a Struct (``control.schemas.typed``) it decodes them all in one pass, and the
        shape is known. Otherwise, or when it refuses a body, each body is decoded on its own: with the
        Struct first when there is one, else to dicts, walked into a signature."""
        fast = self._typed.get(sender)
        if fast is not None:
            try:
                docs = list(map(fast.decode, bodies))
            except _Undecodable:
                pass  # one of them is another shape, or no JSON: body by body
            else:
                batch.add(fast.shape, len(docs), [list(map(get, docs)) for get in fast.id_getters])
                return len(docs)
        learned: dict[Shape, list[Any]] = {}  # shape → the id-like values of each of its samples
        shape_of = self.shapes.of
        for body in bodies:
            shape = None
            if fast is not None:
                try:
                    doc = fast.decode(body)
                except _Invalid:  # not this shape (or not an object): the general path decides
                    pass
                except _Undecodable:
                    continue
                else:
                    shape, ids = fast.shape, fast.id_values
            if shape is None:
                if body[0] != 123 and body.lstrip()[:1] != b"{":  # 123: "{"
                    continue
                try:
                    doc = _decode(body)
                    if type(doc) is not dict:
                        continue
                    shape = shape_of(doc)
                except _Undecodable:  # RecursionError: nested deeper than any event a provider sends
                    continue
                ids = shape.id_values
                fast = self._seen(sender, shape) or fast
            samples = learned.get(shape)
            if samples is None:
                samples = learned[shape] = []
            samples.append(ids(doc) if ids is not None else None)
        for shape, samples in learned.items():
            batch.add(shape, len(samples), zip(*samples, strict=True) if shape.ids else None)
        return sum(map(len, learned.values()))

    def _seen(self, sender: tuple[str, Any, Any], shape: Shape) -> Typed | None:
        """A general-path shape: the second in a row from one sender makes that shape the sender's Struct
        (returned), when a Struct can state it."""
        if self._last.get(sender) is not shape:
            self._last.put(sender, shape)
            return None
        cached = self._structs.get(shape)
        if cached is None:
            found = typed(shape)
            self._structs.put(shape, (found, shape_weight(shape) if found is None else found.weight))
        else:
            found = cached[0]
        if found is not None:
            self._typed.put(sender, found)
        return found

    async def _apply(self, conn: Connection, batches: dict[tuple[str, str], tuple[Batch, tuple[Any, ...]]]) -> None:
        by_id = await self._schema_ids(conn, batches)
        revisions = await db.lock(conn, sorted(by_id))
        if len(revisions) < len(by_id):  # cached ids of schemas created in a transaction that rolled back
            self._ids.clear()
            by_id = await self._schema_ids(conn, batches)
            revisions = await db.lock(conn, sorted(by_id))
        cached = {i: self._states.get(i) for i in revisions}
        stale = [i for i, rev in revisions.items() if (cached[i] or (None,))[0] != rev]
        loaded = await db.states(conn, stale) if stale else {}
        updates: list[tuple[Any, ...]] = []
        endpoints: list[tuple[Any, ...]] = []
        versions: list[tuple[str, int, int, str]] = []
        for schema_id in revisions:
            state = decode_state(loaded[schema_id]) if schema_id in loaded else cached[schema_id][1]
            batch, _ = by_id[schema_id]
            start = state.total + 1
            cut = next_version(state, start, merge(state, batch))
            if cut is not None:
                version, is_new = cut
                field_json = _json.encode(fields(state)).decode()
                versions.append((schema_id, version, start - 1 if is_new else 0, field_json))
            revision = random.getrandbits(62)
            encoded = encode_state(state)
            self._states.put(schema_id, (revision, state, _STATE_WEIGHT_PER_BYTE * len(encoded)))
            updates.append((schema_id, encoded, revision, state.version, batch.count, batch.first_at, batch.last_at))
            endpoints.extend((schema_id, e, n, batch.first_at, batch.last_at) for e, n in batch.endpoints.items())
        if not updates:
            return
        await db.store(conn, updates, endpoints)
        if versions:
            await db.write_versions(conn, versions)
