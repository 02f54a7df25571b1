"""/v1/endpoints/{id}/events (list, latest, wait) and /v1/events/{id}: reading captured requests."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Annotated, Any, ClassVar, TypeVar

from litestar import Controller, Request, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, QueryParameter
from litestar.types import Receive

from control.api.openapi import errors
from control.db.events import EventFilters
from control.records.events import EventList, EventWait, EventWithDeliveries, Provider
from control.service import Context, Principal
from control.service import events as service
from control.service.waiters import Wakeups

__all__ = ("EndpointEventController", "EventController")

T = TypeVar("T")


def provide_filters(
    since: Annotated[
        str | None,
        QueryParameter(
            description="Events received at or after this instant: ISO 8601 date-time (UTC when it has no "
            "zone) or a bare date (its start, UTC)"
        ),
    ] = None,
    until: Annotated[
        str | None,
        QueryParameter(description="Events received at or before this instant; a bare date means its whole day"),
    ] = None,
    provider: Annotated[Provider | None, QueryParameter(description="Attributed provider")] = None,
    event_type: Annotated[
        str | None, QueryParameter(name="type", description="The provider's own event name, exact match")
    ] = None,
    method: Annotated[str | None, QueryParameter(description="HTTP method, any case")] = None,
    signature_valid: Annotated[bool | None, QueryParameter(description="Signature check outcome")] = None,
    q: Annotated[
        str | None,
        QueryParameter(
            description="Case-insensitive substring of the body, content type, method, event type or a label "
            "value; `%` and `_` match themselves",
            max_length=service.MAX_TEXT,
        ),
    ] = None,
) -> EventFilters:
    return service.event_filters(
        since=since,
        until=until,
        provider=provider,
        event_type=event_type,
        method=method,
        signature_valid=signature_valid,
        q=q,
    )


def provide_wakeups(state: State) -> Wakeups:
    return state.wakeups


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (after the request body, ASGI receive blocks until then)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _unless_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T | None:
    """Runs ``work`` but cancels it as soon as the client disconnects, so an abandoned long poll frees
    its waiter at once instead of at its deadline. None when the client left."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (gone, task):
            pending.cancel()
        await asyncio.wait({task, gone})
    return None if task.cancelled() else task.result()


class EndpointEventController(Controller):
    path = "/endpoints/{endpoint_id:str}/events"
    tags: ClassVar[list[str]] = ["events"]
    dependencies: ClassVar[dict[str, Provide]] = {
        "filters": Provide(provide_filters, sync_to_thread=False),
        "wakeups": Provide(provide_wakeups, sync_to_thread=False),
    }

    @get("/", operation_id="ListEvents", responses=errors(400, 401, 404, 429))
    async def list_events(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: FromPath[str],
        filters: NamedDependency[EventFilters],
        limit: Annotated[int, QueryParameter(ge=1, le=100, description="Page size")] = 20,
        cursor: Annotated[
            str | None, QueryParameter(description="`next_cursor` of the previous page, unchanged")
        ] = None,
    ) -> EventList:
        """Captured requests, newest first, filtered. Page with `next_cursor` (null on the last page):
        pages are keyset-based, so events arriving meanwhile neither shift nor repeat later pages."""
        return await service.list_events(ctx, principal, endpoint_id, filters, limit=limit, cursor=cursor)

    @get("/latest", operation_id="GetLatestEvent", responses=errors(400, 401, 404, 429))
    async def latest_event(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: FromPath[str],
        filters: NamedDependency[EventFilters],
    ) -> EventWithDeliveries:
        """The most recent matching event with every delivery attempt made for it (oldest first);
        404 `not_found` when nothing matches."""
        return await service.latest_event(ctx, principal, endpoint_id, filters)

    @get(
        "/wait",
        operation_id="WaitForEvent",
        responses={
            204: ResponseSpec(data_container=None, description="The timeout elapsed without a match; no body"),
            **errors(400, 401, 404, 429),
        },
    )
    async def wait_for_event(
        self,
        request: Request,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        wakeups: NamedDependency[Wakeups],
        endpoint_id: FromPath[str],
        filters: NamedDependency[EventFilters],
        # The HTTP query parameter, named as SPEC.md names it (Litestar's errors use the Python name).
        timeout: Annotated[int, QueryParameter(ge=1, le=55, description="Seconds to wait")] = 30,  # noqa: ASYNC109
    ) -> Response[EventWait]:
        """Long poll: blocks until a matching event arrives (200 `{event}`) or `timeout` seconds pass
        (204, no body). With `since`, a match already stored at or after it returns at once; without, only
        events arriving during the call count. Non-matching events do not end the wait; when several
        match, the earliest received is returned."""
        event = await _unless_disconnected(
            request, service.wait_for_event(ctx, wakeups, principal, endpoint_id, filters, timeout_s=timeout)
        )
        if event is None:
            return Response(content=None, status_code=204)
        return Response(EventWait(event=event))


class EventController(Controller):
    path = "/events"
    tags: ClassVar[list[str]] = ["events"]

    @get("/{event_id:str}", operation_id="GetEvent", responses=errors(401, 404, 429))
    async def get_event(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], event_id: FromPath[str]
    ) -> EventWithDeliveries:
        """One captured request of any of the account's endpoints, with every delivery attempt made for it
        (oldest first)."""
        return await service.get_event(ctx, principal, event_id)
