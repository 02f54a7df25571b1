"""Who may open ``/inbox/{endpoint_id}`` (the page a human follows from ``inbox_url``), and what its data
routes answer.

The owner, three ways: a signed-link cookie for this very endpoint (``hy_inbox``, from
``control.service.inbox_links``), the browser that called /api/start (its ``hy_session`` cookie, while its
account is anonymous: once registered, the account is reached with its keys or links), or any usable key of
the endpoint's account in ``Authorization`` (``hy_tmp_`` tokens included, never on /v1). Like /v1, no
credentials (or bad ones) is 401 and another account's endpoint is the same 404 as an unknown one.

The session and the link cookie may replay (the page's replay button) unless the link was made with a
read-only key: they are the owner in a browser, as the token is the owner in an agent.

The data functions are the /v1 ones (``control.service.events.read``, ``control.service.replay``) narrowed to
the endpoint the page is about: a cookie scoped to ``/inbox/A`` must not read or replay an event of the
account's endpoint B, although its principal is the whole account.

Every request is charged to its credential's rate limit (``control.service.callers``), and a replay to the
account's outbound sends as well (``control.service.replay``), exactly as over /v1 and /mcp.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from control.db import alerts as db_alerts
from control.db.context import Context, Principal
from control.records.endpoints import Endpoint
from control.records.events import Event, EventWithDeliveries
from control.records.inbox import InboxAlert, InboxAlertList, InboxEvent, InboxEventList, InboxReplayTarget
from control.records.replay import ReplayRequest, SendOutcome
from control.records.transforms import TransformTest, TransformTestResult
from control.service import replay as service_replay
from control.service import transforms as service_transforms
from control.service.alerts import open_alerts_for_endpoint
from control.service.callers import inbox_caller
from control.service.endpoints import get_endpoint, require_endpoint
from control.service.events import read as service_events
from control.service.events.read import EventFilters
from control.service.forwards import replay_target
from control.support.alert_lines import line_of
from shared.errors import NotFoundError

__all__ = (
    "body_bytes",
    "inbox_alerts",
    "inbox_body",
    "inbox_endpoint",
    "inbox_event",
    "inbox_events",
    "inbox_principal",
    "inbox_replay",
    "inbox_transform_test",
)


async def inbox_principal(
    ctx: Context, endpoint_id: str, *, authorization: str | None, session: str | None, link: str | None
) -> Principal:
    """The caller, once it is known to own the endpoint (401 without credentials, 404 for another's)."""
    return (await _owner(ctx, endpoint_id, authorization=authorization, session=session, link=link))[0]


async def inbox_endpoint(
    ctx: Context, endpoint_id: str, *, authorization: str | None, session: str | None, link: str | None = None
) -> Endpoint:
    return (await _owner(ctx, endpoint_id, authorization=authorization, session=session, link=link))[1]


async def _owner(
    ctx: Context, endpoint_id: str, *, authorization: str | None, session: str | None, link: str | None
) -> tuple[Principal, Endpoint]:
    """Resolved, and charged to the credential's rate limit, by ``control.service.callers``, as on /v1."""
    principal = await inbox_caller(ctx, endpoint_id, authorization=authorization, session=session, link=link)
    return principal, await get_endpoint(ctx, principal, endpoint_id)


def body_bytes(event: Event) -> bytes:
    """The captured body's exact bytes (``Event.body`` is text or base64, never lossy)."""
    if event.body is None:
        return b""
    return base64.b64decode(event.body) if event.body_encoding == "base64" else event.body.encode()


def _row(event: Event) -> InboxEvent:
    return InboxEvent(
        id=event.id,
        method=event.method,
        path=event.path,
        query=event.query,
        content_type=event.content_type,
        provider=event.provider,
        event_type=event.event_type,
        signature_valid=event.signature_valid,
        signature_failure_reason=event.signature_failure_reason,
        ip_allowed=event.ip_allowed,
        source_ip=event.source_ip,
        received_at=event.received_at,
        size=len(body_bytes(event)),
        body_encoding=event.body_encoding,
        labels=event.labels,
        handshake=event.handshake,
    )


async def inbox_events(
    ctx: Context, principal: Principal, endpoint_id: str, filters: EventFilters, *, limit: int, cursor: str | None
) -> InboxEventList:
    """The list of /v1 ``ListEvents``, each event without its headers and body."""
    page = await service_events.list_events(ctx, principal, endpoint_id, filters, limit=limit, cursor=cursor)
    return InboxEventList(events=[_row(e) for e in page.events], next_cursor=page.next_cursor)


async def inbox_event(ctx: Context, principal: Principal, endpoint_id: str, event_id: str) -> EventWithDeliveries:
    """/v1 ``GetEvent``, 404 for an event of another endpoint."""
    event = await service_events.get_event(ctx, principal, event_id)
    if event.endpoint_id != endpoint_id:
        raise NotFoundError(f"event {event_id!r} not found")
    return event


async def inbox_body(ctx: Context, principal: Principal, endpoint_id: str, event_id: str) -> tuple[Event, bytes]:
    event = await inbox_event(ctx, principal, endpoint_id, event_id)
    return event, body_bytes(event)


async def inbox_transform_test(
    ctx: Context, principal: Principal, endpoint_id: str, event_id: str, data: TransformTest
) -> TransformTestResult:
    """/v1 ``TestTransformation`` on this endpoint's event (the page's editor runs it on the event shown)."""
    await inbox_event(ctx, principal, endpoint_id, event_id)
    checked = msgspec.structs.replace(data, event_id=event_id, request=None, destination_id=None)
    return await service_transforms.test_transform(ctx, principal, checked)


async def inbox_replay(
    ctx: Context, principal: Principal, endpoint_id: str, event_id: str, data: ReplayRequest
) -> SendOutcome:
    """/v1 ``ReplayEvent``, once the event is known to be this endpoint's."""
    await inbox_event(ctx, principal, endpoint_id, event_id)
    return await service_replay.replay_event(ctx, principal, event_id, data)


async def inbox_replay_target(ctx: Context, principal: Principal, endpoint_id: str) -> InboxReplayTarget:
    """Where the page's replay box starts (``control.service.forwards.replay_target``)."""
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
    return InboxReplayTarget(url=await replay_target(ctx, endpoint_id))


async def inbox_alerts(ctx: Context, principal: Principal, endpoint_id: str) -> InboxAlertList:
    """The endpoint's open alerts, newest first, for the page's banner (the caller owns the endpoint:
    ``inbox_principal``)."""
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        alerts = await open_alerts_for_endpoint(ctx, conn, endpoint_id)
        names = await db_alerts.destination_names(conn, [a.destination_id for a in alerts if a.destination_id])
    out = []
    for a in alerts:
        name = names.get(a.destination_id) if a.destination_id in names else a.data.get("destination_name")
        described: dict[str, Any] = {"type": a.type, "data": {**a.data, "destination_name": name}, "count": a.count}
        described |= {"destination_id": a.destination_id, "endpoint_id": a.endpoint_id}
        out.append(
            InboxAlert(
                id=a.id,
                type=a.type,
                since=a.fired_at,
                destination_id=a.destination_id,
                destination_name=name,
                count=a.count,
                text=line_of(described),
            )
        )
    return InboxAlertList(alerts=out)
