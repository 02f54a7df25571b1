"""Captured events: the shared filters, the newest-first list, the latest match, one event, the long poll.

Filter values arrive as the caller wrote them (query strings, MCP arguments) and are checked here once, so
every transport rejects the same values with the same ``validation_error`` naming the parameter.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, date, datetime, timedelta

import asyncpg
import msgspec

from control.db import deliveries as db_deliveries
from control.db import events as db_events
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.db.events import EventFilters
from control.records.events import Event, EventList, EventWithDeliveries, Label
from control.records.storable import check_text
from control.service.deliveries import delivery_record
from control.service.endpoints import require_endpoint, require_event
from control.support.body_encoding import BodyEncoding, shown_body
from control.support.long_poll import ENDPOINT_GONE, Wakeups
from control.support.page_cursors import decode_cursor, encode_cursor
from control.support.parameter_messages import check_limit, not_an_instant, out_of_range, shown, text_length
from control.support.provider_checks import provider_name
from shared.errors import NotFoundError, ValidationError
from shared.providers import NAMES
from shared.tracing import trace_id_of

__all__ = (
    "PROVIDERS",
    "WAIT_TIMEOUT_S",
    "EventFilters",
    "PendingWait",
    "begin_wait",
    "check_wait_timeout",
    "event_filters",
    "event_record",
    "get_event",
    "latest_event",
    "list_events",
    "wait_for_event",
)

WAIT_TIMEOUT_S = (1, 55)
"""A long poll's ``timeout`` range, in seconds: under the 60 s after which common proxies and load balancers
drop an idle request. /v1 declares it from here (``control.api.events``), and the message says it whole."""


def check_wait_timeout(timeout_s: float) -> None:
    low, high = WAIT_TIMEOUT_S
    if not low <= timeout_s <= high:
        raise ValidationError(out_of_range("timeout", low, high, "Seconds to wait", timeout_s))


PROVIDERS = tuple(sorted(NAMES))
"""Every name a provider filter takes: the catalog's own names and their aliases (``stripe``...)."""
MAX_TEXT = 200
FILTER_YEARS = (2, 9998)
"""The years ``since`` and ``until`` may name (see ``_instant``)."""
_READY_WAIT_S = 2.0
_MICRO = timedelta(microseconds=1)


def _text(value: str | None, field: str) -> str | None:
    if value is None or value == "":
        return None
    if len(value) > MAX_TEXT:
        raise ValidationError(text_length(field, None, MAX_TEXT, value))
    found: str | None = check_text(value, field)
    return found


_LEAP_SECOND = re.compile(r"(T\d\d:\d\d):60(?=[.Z+-]|$)")
"""RFC 3339 admits second 60 (a leap second), which Python's datetime cannot hold."""


def _instant(value: str | None, field: str, *, upper: bool) -> datetime | None:
    """An ISO 8601 / RFC 3339 date-time (UTC when it has no zone) or a bare date, as a UTC instant. As an
    upper bound it is returned exclusive: a date-time plus one microsecond, a bare date as the start of the
    next day.

    The year must lie in FILTER_YEARS: converted to UTC, an instant in year 1 or 9999 can leave the calendar
    (``9999-12-31T23:59:59-14:00`` is in year 10000), and Python's datetime and Postgres' parameters both
    end there. Refusing the two edge years, rather than only the instants that overflow, is a rule the
    OpenAPI document can state exactly (``control.api.params.FILTER_INSTANT``)."""
    if value is None:
        return None
    text = _text(value, field) or ""
    text = text.upper()  # RFC 3339 allows a lowercase "t" and "z"; Python parses only capitals
    invalid = ValidationError(not_an_instant(field, value))
    leap = _LEAP_SECOND.search(text)
    if leap:  # the leap second counts as the last microsecond of the second before it
        text = text[: leap.start()] + leap.group(1) + ":59.999999" + re.sub(r"^\.\d+", "", text[leap.end() :])
    at: datetime | None
    try:
        day = date.fromisoformat(text)
    except ValueError:
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            raise invalid from None
        local = at.date()
    else:
        local, at = day, None
    if not FILTER_YEARS[0] <= local.year <= FILTER_YEARS[1]:
        raise ValidationError(
            f"{field}: {shown(value)} is out of range; the year must be between {FILTER_YEARS[0]:04d} and "
            f"{FILTER_YEARS[1]} (at the ends of the calendar a UTC offset can move an instant out of it)"
        )
    if at is None:
        start = datetime(local.year, local.month, local.day, tzinfo=UTC)
        return start + timedelta(days=1) if upper else start
    at = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return at + _MICRO if upper else at


def event_filters(
    *,
    since: str | None = None,
    until: str | None = None,
    provider: str | None = None,
    event_type: str | None = None,
    method: str | None = None,
    signature_valid: bool | None = None,
    q: str | None = None,
) -> EventFilters:
    """Validates and normalises the shared event filters (``type`` is ``event_type`` here)."""
    lower, upper = _instant(since, "since", upper=False), _instant(until, "until", upper=True)
    if lower is not None and upper is not None and upper <= lower:
        raise ValidationError("until: must not be earlier than since")
    if provider is not None:
        provider = provider_name(provider)
    method = _text(method, "method")
    if method is not None:
        if not method.isascii() or not method.isalpha():
            raise ValidationError(f"method: {shown(method)} is not an HTTP method (letters only, any case)")
        method = method.upper()
    q = _text(q, "q")
    search = None
    if q is not None:
        # lowercased as search_text is, by the same function (str.lower), so the SQL can use LIKE
        search = "%" + q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    return EventFilters(
        since=lower,
        before=upper,
        provider=provider,
        event_type=_text(event_type, "type"),
        method=method,
        signature_valid=signature_valid,
        search=search,
        q=q,
    )


def _body(raw: bytes, is_utf8: bool) -> tuple[str | None, BodyEncoding]:
    """(body, body_encoding), never lossy (``control.support.body_encoding``); null when empty."""
    return shown_body(raw or None, utf8=is_utf8)


def event_record(row: asyncpg.Record) -> Event:
    """The public shape of an events row."""
    body, encoding = _body(row["body"], row["body_is_utf8"])
    return Event(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        method=row["method"],
        path=row["path"],
        query=row["query"],
        headers=row["headers"],
        header_encodings=dict.fromkeys(row["headers_base64"] or (), "base64"),
        body=body,
        body_encoding=encoding,
        body_size=row["body_size"],
        body_expired=row["body_expired_at"] is not None,
        content_type=row["content_type"],
        source_ip=row["source_ip"],
        provider=row["provider"],
        event_type=row["event_type"],
        idempotency_key=row["idempotency_key"],
        signature_valid=row["signature_valid"],
        signature_failure_reason=row["signature_failure_reason"],
        ip_allowed=row["ip_allowed"],
        received_at=row["received_at"],
        labels=msgspec.convert(row["labels"] or [], list[Label]),
        trace_id=trace_id_of(row["traceparent"]),
        handshake=row["handshake"],
    )


async def _with_deliveries(conn: Connection, row: asyncpg.Record) -> EventWithDeliveries:
    attempts = await db_deliveries.for_event(conn, row["endpoint_id"], row["id"])
    return EventWithDeliveries(
        **msgspec.structs.asdict(event_record(row)), deliveries=[delivery_record(a) for a in attempts]
    )


async def list_events(
    ctx: Context, principal: Principal, endpoint_id: str, filters: EventFilters, *, limit: int, cursor: str | None
) -> EventList:
    check_limit(limit, 100)
    after = decode_cursor("evt", cursor, endpoint_id) if cursor else None
    async with ctx.pool.acquire() as conn:
        await _endpoint(conn, principal, endpoint_id)
        rows = await db_events.page(conn, endpoint_id, filters, limit=limit + 1, after=after)
    more, rows = len(rows) > limit, rows[:limit]
    next_cursor = encode_cursor("evt", rows[-1]["received_at"], rows[-1]["id"], endpoint_id) if more else None
    return EventList(events=[event_record(r) for r in rows], next_cursor=next_cursor)


async def latest_event(
    ctx: Context, principal: Principal, endpoint_id: str, filters: EventFilters
) -> EventWithDeliveries:
    async with ctx.pool.acquire() as conn:
        await _endpoint(conn, principal, endpoint_id)
        rows = await db_events.page(conn, endpoint_id, filters, limit=1)
        if not rows:
            raise NotFoundError(f"no event of endpoint {endpoint_id!r} matches the filters")
        return await _with_deliveries(conn, rows[0])


async def _endpoint(conn: Connection, principal: Principal, endpoint_id: str) -> None:
    await require_endpoint(conn, principal, endpoint_id)


async def get_event(ctx: Context, principal: Principal, event_id: str) -> EventWithDeliveries:
    async with ctx.pool.acquire() as conn:
        return await _with_deliveries(conn, await require_event(conn, principal, event_id))


_inflight: dict[tuple[object, ...], asyncio.Future[Event | None]] = {}


def _first_match(
    ctx: Context, endpoint_id: str, filters: EventFilters, *, received_from: datetime | None, ids: list[str] | None
) -> asyncio.Future[Event | None]:
    """One query per distinct question at a time: the waiters one announcement wakes with the same filters
    (many callers on one endpoint, the common case) share one query instead of sending one each, and get
    the very same ``Event`` object (so the handler encodes it once for all of them).

    Callers attach callbacks to it (``Waiter.first``) and never await it, so a caller that leaves cannot
    cancel the others' answer."""
    key = (ctx.pool, endpoint_id, filters, received_from, tuple(ids or ()))
    shared = _inflight.get(key)
    if shared is None:

        async def query() -> Event | None:
            async with ctx.pool.acquire() as conn:
                row = await db_events.first_match(conn, endpoint_id, filters, received_from=received_from, ids=ids)
            return None if row is None else event_record(row)

        def forget(done: asyncio.Future[Event | None]) -> None:
            if _inflight.get(key) is done:
                del _inflight[key]
            if not done.cancelled():
                done.exception()  # retrieved here, so a failure nobody waits for any more is not logged as lost

        shared = _inflight[key] = asyncio.ensure_future(query())
        shared.add_done_callback(forget)
    return shared


class PendingWait:
    """A long poll whose checks passed (timeout range, endpoint found and the caller's): what is left is the
    wait itself, ``result``. Split from ``wait_for_event`` so /v1 can run the checks inside its framework (their
    errors answered as every other error) and the wait outside it (``control.api.wait_answers``); the logic
    is this one, for every transport. The wait counts from ``begin_wait``: what is stored in between is
    found by the first look (``received_from``)."""

    __slots__ = (
        "_channel",
        "_ctx",
        "_deadline",
        "_endpoint_id",
        "_filters",
        "_principal",
        "_received_from",
        "_wakeups",
    )

    def __init__(
        self,
        ctx: Context,
        wakeups: Wakeups,
        principal: Principal,
        endpoint_id: str,
        filters: EventFilters,
        *,
        deadline: float,
        received_from: datetime | None,
    ) -> None:
        self._ctx, self._wakeups, self._endpoint_id, self._filters = ctx, wakeups, endpoint_id, filters
        self._principal, self._deadline, self._received_from = principal, deadline, received_from
        self._channel = ctx.keys.event_channel(endpoint_id)

    async def _still_there(self) -> None:
        """Raises the endpoint's 404 (deleted) or 410 (expired) as the wait's answer, so a caller waiting on
        an endpoint that went away meanwhile is told so, not handed a 204 as if nothing had arrived."""
        async with self._ctx.pool.acquire() as conn:
            await _endpoint(conn, self._principal, self._endpoint_id)

    async def _gone_or_look(self, resync: bool, ids: list[str]) -> Event | None:
        await self._still_there()
        return await self._look(resync, ids) if resync or ids else None

    def _look(self, resync: bool, ids: list[str]) -> asyncio.Future[Event | None]:
        if ENDPOINT_GONE in ids:  # its delete announced it: answer at once rather than at the deadline
            return asyncio.ensure_future(self._gone_or_look(resync, [i for i in ids if i != ENDPOINT_GONE]))
        if resync:  # may have missed messages: look at everything that counts
            received_from = self._received_from
            bound, announced = received_from, (ids or None) if received_from is not None else None
        else:  # only the announced events are new
            bound, announced = None, ids
        return _first_match(self._ctx, self._endpoint_id, self._filters, received_from=bound, ids=announced)

    async def result(self) -> Event | None:
        """The first matching event that counts, or None once the deadline passes without one."""
        loop = asyncio.get_running_loop()
        with self._wakeups.watch(self._channel) as waiter:
            await waiter.ready(min(_READY_WAIT_S, self._deadline - loop.time()))
            found = await waiter.first(self._look, self._deadline - loop.time())
        if found is None and not waiter.stopped:  # expired meanwhile, or deleted while Redis lost the news
            await self._still_there()
        return found


async def begin_wait(
    ctx: Context,
    wakeups: Wakeups,
    principal: Principal,
    endpoint_id: str,
    filters: EventFilters,
    *,
    timeout_s: float,
) -> PendingWait:
    """``wait_for_event``'s checks, its deadline and its start; the wait is the answer's ``result``."""
    check_wait_timeout(timeout_s)
    deadline = asyncio.get_running_loop().time() + timeout_s
    started = datetime.now(UTC)
    async with ctx.pool.acquire() as conn:
        await _endpoint(conn, principal, endpoint_id)
    received_from = None if filters.since is not None else started
    return PendingWait(ctx, wakeups, principal, endpoint_id, filters, deadline=deadline, received_from=received_from)


async def wait_for_event(
    ctx: Context,
    wakeups: Wakeups,
    principal: Principal,
    endpoint_id: str,
    filters: EventFilters,
    *,
    timeout_s: float,
) -> Event | None:
    """The first matching event that counts, or None when ``timeout_s`` passes without one.

    What counts: with ``since``, any match received at or after it (so a stored one returns at once);
    without, a match received after this call began *or* announced as committed while it waits (so an
    event that reached the edge just before the call but was stored during it is not lost between a
    list and a wait). Non-matching events only cause a re-query. The waiter subscribes before it looks.
    """
    pending = await begin_wait(ctx, wakeups, principal, endpoint_id, filters, timeout_s=timeout_s)
    return await pending.result()
