"""/v1/endpoints/{id}/events (list, latest, wait) and /v1/events/{id}: reading captured requests."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import msgspec
from litestar import Controller, MediaType, Request, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi import ResponseSpec
from litestar.params import QueryParameter
from litestar.types import Dependencies, Receive, Scope, Send

from control.api.openapi import errors
from control.api.params import Cursor, EndpointId, EventId, boolean, instant_schema, query, text_schema
from control.db.context import Context, Principal
from control.records.events import Event, EventList, EventWait, EventWithDeliveries
from control.service.events import read as service
from control.service.events.follow import NOW, follow_events
from control.service.events.read import WAIT_TIMEOUT_S, EventFilters
from control.support.long_poll import Wakeups

__all__ = ("CURSOR_HEADER", "EndpointEventController", "EventController")

CURSOR_HEADER = "hookyard-cursor"

T = TypeVar("T")


def provide_filters(
    since: Annotated[
        str | None,
        query(
            "Events received at or after this instant: an RFC 3339 date-time, or a bare date (its start, UTC); "
            "ISO 8601 forms Python reads are accepted too, a date-time without a zone as UTC. Years 0002 to 9998.",
            **instant_schema(),
        ),
    ] = None,
    until: Annotated[
        str | None,
        query("Events received at or before this instant; a bare date means its whole day", **instant_schema()),
    ] = None,
    # A str, checked by the service: Litestar would take "null" for None.
    provider: Annotated[
        str | None, query("Attributed provider (its catalog name or an alias)", enum=list(service.PROVIDERS))
    ] = None,
    event_type: Annotated[
        str | None,
        query("The provider's own event name, exact match", name="type", **text_schema(service.MAX_TEXT)),
    ] = None,
    method: Annotated[
        str | None,
        query("HTTP method, any case", maxLength=service.MAX_TEXT, pattern="^[A-Za-z]*$"),
    ] = None,
    # Read here, not by Litestar, which would also take "null", "1" or "yes" for a parameter documented boolean.
    signature_valid: Annotated[str | None, query("Signature check outcome", kind="boolean")] = None,
    q: Annotated[
        str | None,
        query(
            "Case-insensitive substring of the body, content type, method, event type or a label value; `%` and "
            "`_` match themselves",
            **text_schema(service.MAX_TEXT),
        ),
    ] = None,
) -> EventFilters:
    return service.event_filters(
        since=since,
        until=until,
        provider=provider,
        event_type=event_type,
        method=method,
        signature_valid=boolean(signature_valid, "signature_valid"),
        q=q,
    )


def provide_wakeups(state: State) -> Wakeups:
    found: Wakeups = state.wakeups
    return found


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (after the request body, ASGI receive blocks until then)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _unless_disconnected(request: Request[Any, Any, Any], work: Coroutine[Any, Any, T]) -> T | None:
    """Runs ``work`` but cancels it as soon as the client disconnects, so an abandoned long poll frees
    its waiter at once instead of at its deadline. None when the client left.

    ``work`` runs in the request's own task, which the watcher cancels (and the handler uncancels, as
    ``asyncio.timeout`` does) only when the client leaves: a second task per call plus two
    ``asyncio.wait`` rounds on the way out doubled the loop steps of every woken waiter."""
    task = asyncio.current_task()
    if task is None:  # not under an asyncio task: nothing to cancel, so no early exit
        return await work
    running, gone = True, False

    def leave(watcher: asyncio.Future[None]) -> None:
        nonlocal gone
        if watcher.cancelled():
            return
        watcher.exception()  # retrieved: a failing receive also means the client is gone
        if running:
            gone = True
            task.cancel()

    watcher = asyncio.ensure_future(_disconnected(request.receive))
    watcher.add_done_callback(leave)
    try:
        return await work
    except asyncio.CancelledError:
        if gone and task.uncancel() == 0:
            return None
        raise
    finally:
        running = False
        watcher.cancel()


class _EncodedBody:
    """The ASGI answer of a woken waiter: the status line, two headers and the body, sent as they are
    (fresh messages per call: middleware may edit a message's headers in place)."""

    __slots__ = ("_body", "_length")

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._length = b"%d" % len(body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", self._length)]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self._body, "more_body": False})


def _no_content(headers: dict[str, str] | None = None) -> Response[Any]:
    """A 204: no body, in a route whose annotation names its 200's body (for the OpenAPI document)."""
    return Response(content=None, status_code=204, headers=headers)


class _WaitAnswer(Response[Any]):
    """A 200 whose body was encoded once for every waiter the same query answered.

    A thousand waiters woken by one event are answered back to back, and Litestar's generic response path
    (header mapping, media type and content-length defaults, cookie encoding) was the largest single item
    of each answer in a profile of the wake. It is skipped only while nothing on the route or the response
    adds to the answer (cookies, headers, background tasks, another status, a HEAD request); otherwise
    the generic path runs as usual."""

    def to_asgi_response(
        self,
        app: Any,
        request: Request[Any, Any, Any],
        *,
        background: Any = None,
        cookies: Any = None,
        encoded_headers: Any = None,
        headers: dict[str, str] | None = None,
        is_head_response: bool = False,
        **kwargs: Any,
    ) -> Any:
        plain = not (background or cookies or encoded_headers or headers or is_head_response)
        mine = not (self.background or self.cookies or self.headers)
        if app is None and plain and mine and (self.status_code or kwargs.get("status_code")) == 200:
            return _EncodedBody(self.content)
        return super().to_asgi_response(
            app,
            request,
            background=background,
            cookies=cookies,
            encoded_headers=encoded_headers,
            headers=headers,
            is_head_response=is_head_response,
            **kwargs,
        )


_encoded: tuple[Event, bytes] | None = None


def _wait_body(event: Event) -> bytes:
    """The 200 body, encoded once per answer: the waiters one query answered get the very same ``Event``
    object (see ``service.wait_for_event``) and are answered back to back, so the last body encoded is
    remembered by the identity of its event (held here, so the identity cannot be reused)."""
    global _encoded
    last = _encoded
    if last is not None and last[0] is event:
        return last[1]
    body = msgspec.json.encode(EventWait(event=event))
    _encoded = (event, body)
    return body


_WAIT_TIMEOUT = QueryParameter(ge=WAIT_TIMEOUT_S[0], le=WAIT_TIMEOUT_S[1], description="Seconds to wait")
"""The range is the service's; a value past it is a 400 that says the whole range (``control.api.errors``)."""


class EndpointEventController(Controller):
    path = "/endpoints/{endpoint_id:str}/events"
    tags = ("events",)
    dependencies: Dependencies | None = {  # noqa: RUF012 - Controller's, copied per app
        "filters": Provide(provide_filters, sync_to_thread=False),
        "wakeups": Provide(provide_wakeups, sync_to_thread=False),
    }

    @get("/", operation_id="ListEvents", responses=errors(400, 401, 404, 410, 429))
    async def list_events(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        filters: NamedDependency[EventFilters],
        limit: Annotated[int, QueryParameter(ge=1, le=100, description="Page size")] = 20,
        cursor: Cursor = None,
    ) -> EventList:
        """Captured requests, newest first, filtered. Page with `next_cursor` (null on the last page):
        pages are keyset-based, so events arriving meanwhile neither shift nor repeat later pages."""
        return await service.list_events(ctx, principal, endpoint_id, filters, limit=limit, cursor=cursor)

    @get("/latest", operation_id="GetLatestEvent", responses=errors(400, 401, 404, 410, 429))
    async def latest_event(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        filters: NamedDependency[EventFilters],
    ) -> EventWithDeliveries:
        """The most recent matching event with every delivery attempt made for it (oldest first);
        404 `not_found` when nothing matches."""
        return await service.latest_event(ctx, principal, endpoint_id, filters)

    @get(
        "/wait",
        operation_id="WaitForEvent",
        responses={
            204: ResponseSpec(
                data_container=None,
                description="The timeout elapsed without a match; no body. With `after`, the header "
                f"`{CURSOR_HEADER}` carries the position to continue from",
            ),
            **errors(400, 401, 404, 410, 429),
        },
    )
    async def wait_for_event(
        self,
        request: Request[Any, Any, Any],
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        wakeups: NamedDependency[Wakeups],
        endpoint_id: EndpointId,
        filters: NamedDependency[EventFilters],
        # The HTTP query parameter, named as the API documents it (Litestar's errors use the Python name).
        timeout: Annotated[int, _WAIT_TIMEOUT] = 30,  # noqa: ASYNC109
        after: Annotated[
            str | None,
            query(
                "Follow the endpoint's events in the order they were stored: `now`, or the `cursor` of a previous "
                "answer (or of `test-webhook`, whose sample is then answered first). The answer is the first match "
                "stored after that position, however long ago, and carries the next `cursor` (also in the header "
                "`hookyard-cursor`, on a 204 too)",
                pattern=f"^(?:{NOW}|[A-Za-z0-9_-]{{1,200}})$",
            ),
        ] = None,
    ) -> Response[EventWait]:
        """Long poll: blocks until a matching event arrives (200 `{event}`) or `timeout` seconds pass
        (204, no body). With `since`, a match already stored at or after it returns at once; without, only
        events arriving during the call count. Non-matching events do not end the wait; when several
        match, the earliest received is returned.

        With `after` (what `hookyard listen` uses), nothing is missed between calls: pass each answer's
        `cursor` back and every match is answered once, in the order the events were stored, across
        disconnects and restarts of either side."""
        if after is not None:
            followed = await _unless_disconnected(
                request,
                follow_events(ctx, wakeups, principal, endpoint_id, filters, after=after, timeout_s=timeout),
            )
            if followed is None:  # the client left
                return _no_content()
            headers = {CURSOR_HEADER: followed.cursor}
            if followed.event is None:
                return _no_content(headers)
            return Response(EventWait(event=followed.event, cursor=followed.cursor), headers=headers)
        event = await _unless_disconnected(
            request, service.wait_for_event(ctx, wakeups, principal, endpoint_id, filters, timeout_s=timeout)
        )
        if event is None:
            return _no_content()
        return _WaitAnswer(_wait_body(event), media_type=MediaType.JSON)


class EventController(Controller):
    path = "/events"
    tags = ("events",)

    @get("/{event_id:str}", operation_id="GetEvent", responses=errors(401, 404, 410, 429))
    async def get_event(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], event_id: EventId
    ) -> EventWithDeliveries:
        """One captured request of any of the account's endpoints, with every delivery attempt made for it
        (oldest first)."""
        return await service.get_event(ctx, principal, event_id)
