"""/v1/endpoints/{id}/events (list, latest, wait) and /v1/events/{id}: reading captured requests."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi import ResponseSpec
from litestar.params import QueryParameter
from litestar.types import Dependencies, Receive, Scope, Send

from control.api.openapi import errors
from control.api.params import Cursor, EndpointId, EventId, boolean, instant_schema, query, text_schema
from control.api.wait_answers import park, unless_disconnected
from control.db.context import Context, Principal
from control.records.events import EventList, EventWait, EventWithDeliveries
from control.service.events import read as service
from control.service.events.follow import NOW, follow_events
from control.service.events.read import WAIT_TIMEOUT_S, EventFilters
from control.support.long_poll import Wakeups
from control.support.parameter_messages import PAGE_SIZE

__all__ = ("CURSOR_HEADER", "EndpointEventController", "EventController")

CURSOR_HEADER = "hookyard-cursor"


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
            "Case-insensitive substring of the event's body (UTF-8 text), content type, method, event type, path, "
            "query (as sent and percent-decoded), a header value (text) or a label value; `%` and `_` match "
            "themselves",
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


async def _nothing(scope: Scope, receive: Receive, send: Send) -> None:
    """What Litestar sends for a parked wait: nothing (``WaitAnswers`` answers it once Litestar is done)."""


class _Parked(Response[Any]):
    """The handler's return for a wait left to ``WaitAnswers``: Litestar sends no response of its own."""

    def to_asgi_response(self, app: Any, request: Request[Any, Any, Any], **kwargs: Any) -> Any:
        return _nothing


def _no_content(headers: dict[str, str] | None = None) -> Response[Any]:
    """A 204: no body, in a route whose annotation names its 200's body (for the OpenAPI document)."""
    return Response(content=None, status_code=204, headers=headers)


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
        limit: Annotated[int, QueryParameter(ge=1, le=100, description=PAGE_SIZE)] = 20,
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
        """Long poll: blocks until a matching event arrives or `timeout` seconds pass. /v1 answers 200
        `{event}`, or 204 with no body when the time is up. With `since`, a match already stored at or after
        it returns at once; without, only events arriving during the call count. Non-matching events do not
        end the wait; when several match, the earliest received is returned.

        With `after` (what `hookyard listen` uses), nothing is missed between calls: pass each answer's
        `cursor` back and every match is answered once, in the order the events were stored, across
        disconnects and restarts of either side."""
        if after is not None:
            followed = await unless_disconnected(
                request.receive,
                follow_events(ctx, wakeups, principal, endpoint_id, filters, after=after, timeout_s=timeout),
            )
            if followed is None:  # the client left
                return _no_content()
            headers = {CURSOR_HEADER: followed.cursor}
            if followed.event is None:
                return _no_content(headers)
            return Response(EventWait(event=followed.event, cursor=followed.cursor), headers=headers)
        pending = await service.begin_wait(ctx, wakeups, principal, endpoint_id, filters, timeout_s=timeout)
        if park(request.scope, pending):  # answered by ``WaitAnswers``, outside Litestar's request path
            return _Parked(None)
        event = await unless_disconnected(request.receive, pending.result())
        if event is None:
            return _no_content()
        return Response(EventWait(event=event))


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
