"""The inbox page's data routes, under ``/inbox/{endpoint_id}/`` so the link cookie (scoped to that path)
reaches them: the event list, one event, its raw body, a replay and where it goes by default, the open
alerts, and the live stream.

Each is a /v1 operation (``control.service.inbox.page`` narrows the /v1 service functions to the endpoint),
authorised as the page is (``control.service.inbox.page``): a browser cannot send a Bearer key, so the page's
cookies must be able to read. They are the page's own, not an API: undocumented in ``/schema``, /v1 and
/mcp serve every client that is not this page.

Live: ``GET .../stream`` is server-sent events. It subscribes to the endpoint's event channel (the long
poll's ``Wakeups``), says ``sync`` once the subscription is live (and again when the pub/sub connection
comes back, as announcements may have been missed), and ``events`` with the ids of each announced commit.
The page answers ``sync`` by merging its newest page and ``events`` by reading until it has seen every
announced id (``control/static/inbox.js``). Subscribing before the first load is what makes it gapless: a
commit between the page's load and the stream cannot be missed, since the page loads after ``sync``. The
stream ends after ``STREAM_S`` so that a browser re-checks its credentials (``EventSource`` reconnects by
itself and is told ``sync`` again), and at once when the server is asked to stop (``Wakeups.stop``), so a
page left open never holds a shutdown up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import urlsplit

import msgspec
from litestar import Controller, MediaType, Request, Response, get, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody, QueryParameter
from litestar.response import ServerSentEvent, ServerSentEventMessage
from litestar.types import Dependencies

from control.api.events import provide_filters
from control.api.params import Cursor, EndpointId, EventId
from control.db.context import Context, Principal
from control.records.events import EventWithDeliveries
from control.records.inbox import InboxAlertList, InboxEventList, InboxReplayTarget
from control.records.replay import ReplayRequest, SendOutcome
from control.records.transforms import TransformTest, TransformTestResult
from control.service.anonymous import SESSION_COOKIE
from control.service.events.read import EventFilters
from control.service.inbox import page as service
from control.service.inbox_links import LINK_COOKIE
from control.support.long_poll import ENDPOINT_GONE
from control.support.request_decoding import decode_json
from shared.errors import ForbiddenError, ValidationError
from shared.json_depth import check_bytes

__all__ = ("HEADERS", "STREAM_S", "InboxDataController", "inbox_caller", "same_origin")

STREAM_S = 300.0
KEEPALIVE_S = 15.0
"""A comment this often keeps proxies from closing an idle stream."""
_TRANSFORM_TEST = msgspec.json.Decoder(TransformTest, strict=True)
HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}


async def inbox_caller(ctx: Context, request: Request[Any, Any, Any], endpoint_id: str) -> Principal:
    return await service.inbox_principal(
        ctx,
        endpoint_id,
        authorization=request.headers.get("authorization"),
        session=request.cookies.get(SESSION_COOKIE),
        link=request.cookies.get(LINK_COOKIE),
    )


def same_origin(ctx: Context, request: Request[Any, Any, Any]) -> None:
    """A write with the page's cookies must come from the page: SameSite=Lax already keeps them off another
    site's POST; a foreign ``Origin`` is refused as well. Own is the Host asked for or, behind a proxy that
    rewrites it, the public control URL (``HOOKYARD_PUBLIC_CONTROL_URL``)."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    own = {request.headers.get("host"), urlsplit(ctx.settings.control_url).netloc}
    if urlsplit(origin).netloc not in own:
        raise ForbiddenError("origin: the inbox accepts writes from its own page only")


async def _stream(request: Request[Any, Any, Any], ctx: Context, endpoint_id: str) -> AsyncIterator[Any]:
    loop = asyncio.get_running_loop()
    end = loop.time() + STREAM_S
    with request.app.state.wakeups.watch(ctx.keys.event_channel(endpoint_id)) as waiter:
        await waiter.ready(2.0)
        waiter.take()
        yield ServerSentEventMessage(event="sync", data="")
        while (left := end - loop.time()) > 0:
            signalled = await waiter.wait(min(KEEPALIVE_S, left))
            if waiter.stopped:  # the server is stopping: end the stream cleanly; EventSource reconnects
                return
            if signalled:
                resync, ids = waiter.take()
                if resync:  # the pub/sub connection came back: announcements may have been missed
                    yield ServerSentEventMessage(event="sync", data="")
                elif ENDPOINT_GONE in ids:  # deleted: the page's reconnect meets the 404 and says so
                    return
                elif ids:
                    yield ServerSentEventMessage(event="events", data=",".join(ids))
            else:
                yield ServerSentEventMessage(comment="keepalive")


class InboxDataController(Controller):
    path = "/inbox/{endpoint_id:str}"
    dependencies: Dependencies | None = {"filters": Provide(provide_filters, sync_to_thread=False)}  # noqa: RUF012 - Controller's, copied per app

    @get("/events", include_in_schema=False)
    async def events(
        self,
        ctx: NamedDependency[Context],
        request: Request[Any, Any, Any],
        endpoint_id: EndpointId,
        filters: NamedDependency[EventFilters],
        limit: Annotated[int, QueryParameter(ge=1, le=100)] = 50,
        cursor: Cursor = None,
    ) -> Response[InboxEventList]:
        principal = await inbox_caller(ctx, request, endpoint_id)
        page = await service.inbox_events(ctx, principal, endpoint_id, filters, limit=limit, cursor=cursor)
        return Response(page, headers=HEADERS)

    @get("/events/{event_id:str}", include_in_schema=False)
    async def event(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], endpoint_id: EndpointId, event_id: EventId
    ) -> Response[EventWithDeliveries]:
        principal = await inbox_caller(ctx, request, endpoint_id)
        return Response(await service.inbox_event(ctx, principal, endpoint_id, event_id), headers=HEADERS)

    @get("/events/{event_id:str}/body", media_type=MediaType.TEXT, include_in_schema=False)
    async def body(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], endpoint_id: EndpointId, event_id: EventId
    ) -> Response[bytes]:
        """The raw body as an attachment: never rendered, whatever it holds (octet-stream, a sandbox CSP)."""
        principal = await inbox_caller(ctx, request, endpoint_id)
        event, raw = await service.inbox_body(ctx, principal, endpoint_id, event_id)
        json = (event.content_type or "").split(";")[0].strip().lower().endswith("json")
        headers = {
            **HEADERS,
            "content-disposition": f'attachment; filename="{event.id}.{"json" if json else "bin"}"',
            "content-security-policy": "default-src 'none'; sandbox",
        }
        return Response(raw, media_type="application/octet-stream", headers=headers)

    @post("/events/{event_id:str}/replay", status_code=200, include_in_schema=False)
    async def replay(
        self,
        ctx: NamedDependency[Context],
        request: Request[Any, Any, Any],
        endpoint_id: EndpointId,
        event_id: EventId,
        data: JSONBody[ReplayRequest],
    ) -> Response[SendOutcome]:
        same_origin(ctx, request)
        principal = await inbox_caller(ctx, request, endpoint_id)
        return Response(await service.inbox_replay(ctx, principal, endpoint_id, event_id, data), headers=HEADERS)

    @get("/replay-target", include_in_schema=False)
    async def replay_target(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], endpoint_id: EndpointId
    ) -> Response[InboxReplayTarget]:
        """The URL the replay box starts with: where ``hookyard listen`` forwards, or the last replay went."""
        principal = await inbox_caller(ctx, request, endpoint_id)
        return Response(await service.inbox_replay_target(ctx, principal, endpoint_id), headers=HEADERS)

    @post("/events/{event_id:str}/transform", status_code=200, include_in_schema=False)
    async def transform(
        self,
        ctx: NamedDependency[Context],
        request: Request[Any, Any, Any],
        endpoint_id: EndpointId,
        event_id: EventId,
    ) -> Response[TransformTestResult]:
        """The editor's dry run on the event shown (``TestTransformation``); sends and stores nothing. The
        body is read once the page may be used (an expired endpoint is 410 whatever the body)."""
        same_origin(ctx, request)
        principal = await inbox_caller(ctx, request, endpoint_id)
        check_bytes(await request.body())  # before the decoder recurses (``shared.json_depth``)
        try:
            data = decode_json(_TRANSFORM_TEST, await request.body())
        except msgspec.DecodeError as exc:
            raise ValidationError(f"body: not JSON ({exc})") from None
        result = await service.inbox_transform_test(ctx, principal, endpoint_id, event_id, data)
        return Response(result, headers=HEADERS)

    @get("/alerts", include_in_schema=False)
    async def alerts(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], endpoint_id: EndpointId
    ) -> Response[InboxAlertList]:
        """The banner's open alerts of this endpoint (``GET /v1/alerts?endpoint_id=&open=true``, without sends)."""
        principal = await inbox_caller(ctx, request, endpoint_id)
        return Response(await service.inbox_alerts(ctx, principal, endpoint_id), headers=HEADERS)

    @get("/stream", include_in_schema=False)
    async def stream(
        self, ctx: NamedDependency[Context], request: Request[Any, Any, Any], endpoint_id: EndpointId
    ) -> ServerSentEvent:
        await inbox_caller(ctx, request, endpoint_id)
        return ServerSentEvent(_stream(request, ctx, endpoint_id), headers={**HEADERS, "x-accel-buffering": "no"})
