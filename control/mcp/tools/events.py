"""Event tools: captured requests, the latest match, one event, and the long poll (``events``, ``events/wait``).

The shared filters are one record here, checked by the service exactly as the /v1 query parameters are.
"""

from __future__ import annotations

import msgspec

from control.mcp.registry import Call, tool
from control.records.events import Event, EventList, EventWithDeliveries
from control.service.events import read as service
from control.service.events.follow import follow_events
from control.service.events.read import EventFilters
from control.support.long_poll import Wakeups


class Filters(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The shared event filters (docs/reference/events.md), named as the /v1 query parameters are (``type``
    included)."""

    since: str | None = None
    until: str | None = None
    provider: str | None = None
    type: str | None = None
    method: str | None = None
    signature_valid: bool | None = None
    q: str | None = None

    def checked(self) -> EventFilters:
        return service.event_filters(
            since=self.since,
            until=self.until,
            provider=self.provider,
            event_type=self.type,
            method=self.method,
            signature_valid=self.signature_valid,
            q=self.q,
        )


class EventWaited(msgspec.Struct, kw_only=True):
    """What ``wait_for_event`` answers: the event, or that none matched in time (not an error)."""

    event: Event | None
    """The first matching event; null when none arrived within `timeout` seconds."""
    timed_out: bool
    message: str
    cursor: str | msgspec.UnsetType = msgspec.UNSET
    """With `after` only: the position to pass as `after` next (after `event`, or as far as the wait looked)."""


@tool("ListEvents", read_only=True)
async def list_events(
    call: Call, endpoint_id: str, filters: Filters, limit: int = 20, cursor: str | None = None
) -> EventList:
    """List an endpoint's captured requests, newest first, filtered; page with `next_cursor`."""
    return await service.list_events(
        call.ctx, call.principal, endpoint_id, filters.checked(), limit=limit, cursor=cursor
    )


@tool("GetLatestEvent", read_only=True)
async def get_latest_event(call: Call, endpoint_id: str, filters: Filters) -> EventWithDeliveries:
    """Read the most recent matching event of an endpoint with its delivery attempts (not_found when none)."""
    return await service.latest_event(call.ctx, call.principal, endpoint_id, filters.checked())


@tool("GetEvent", read_only=True)
async def get_event(call: Call, event_id: str) -> EventWithDeliveries:
    """Read one captured request (method, headers, body, signature check) with every delivery attempt."""
    return await service.get_event(call.ctx, call.principal, event_id)


@tool("WaitForEvent", read_only=True)
async def wait_for_event(
    call: Call,
    endpoint_id: str,
    filters: Filters,
    timeout: int = 30,  # noqa: ASYNC109
    after: str | None = None,
) -> EventWaited:
    """Block until a matching event arrives at an endpoint, or `timeout` seconds (1-55) pass without one.

    No event in time is not an error: `event` is null and `timed_out` true; call again to keep waiting (with
    `after`, from the answer's `cursor`)."""
    wakeups: Wakeups = call.state.wakeups
    checked = filters.checked()
    if after is not None:
        followed = await follow_events(
            call.ctx, wakeups, call.principal, endpoint_id, checked, after=after, timeout_s=timeout
        )
        if followed.event is None:
            message = f"no event matched within {timeout} s; call again with after={followed.cursor}"
            return EventWaited(event=None, timed_out=True, message=message, cursor=followed.cursor)
        arrived = followed.event
        return EventWaited(
            event=arrived, timed_out=False, message=f"event {arrived.id} arrived", cursor=followed.cursor
        )
    event = await service.wait_for_event(call.ctx, wakeups, call.principal, endpoint_id, checked, timeout_s=timeout)
    if event is None:
        message = f"no event matched within {timeout} s; call wait_for_event again to keep waiting"
        return EventWaited(event=None, timed_out=True, message=message)
    return EventWaited(event=event, timed_out=False, message=f"event {event.id} arrived")
