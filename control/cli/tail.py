"""``hookyard tail``: one line per arriving event (following each endpoint from now) and per delivery attempt
(the endpoint's deliveries list, polled every second; only attempts made after it started).

Where "now" is and which attempts were already there are both asked before it says "Following": whatever
happens after that line is printed (one short wait per endpoint, at most ``_BASELINE_WAIT_S``, pins the
events' position). With no endpoint named, endpoints made later are followed too (``_new_endpoints``). It
follows as ``listen`` does (``control.cli.listen``: the same follow, outage lines and moves), and, as listen
does, says an endpoint's new ingest URL when ``hookyard up`` came back with its edge on another port.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from datetime import datetime
from typing import Any, TextIO

from control.cli.listen import (
    _BASELINE_WAIT_S,
    _Follow,
    _ingest_said,
    _now,
    _Out,
    _patiently,
    _signals,
    _until,
)
from control.cli.remote import Remote
from control.records.verdict import verdict_text
from shared.errors import ApiError

__all__ = ("tail",)

_NEW_ENDPOINTS_S = 2.0  # how often ``tail`` with no endpoint named asks for endpoints made since it started


async def tail(remote: Remote, *, endpoint_ref: str | None, stream: TextIO = sys.stdout) -> int:
    """Ends as ``listen`` does on an error answer (a revoked key's 401: one line, exit 1): the first
    ``ApiError`` of its tasks is raised alone, not in the task group's ``ExceptionGroup`` (a traceback)."""
    out, stop = _Out(stream), asyncio.Event()
    _signals(stop)
    if endpoint_ref is not None:
        endpoints = [await remote.endpoint(endpoint_ref)]
    else:
        endpoints = await remote.endpoints()
    follows = [_Follow(remote, endpoint["id"], None) for endpoint in endpoints]
    try:
        async with asyncio.TaskGroup() as pinning:
            arrived = [pinning.create_task(_events_baseline(follow, out, stop)) for follow in follows]
            seen = [pinning.create_task(_deliveries_seen(remote, endpoint, out, stop)) for endpoint in endpoints]
        if not stop.is_set():
            out.line(f"Following {len(endpoints)} endpoint(s): events and delivery attempts. Ctrl-C stops.")
            async with asyncio.TaskGroup() as group:
                for i, endpoint in enumerate(endpoints):
                    group.create_task(_tail_events(endpoint, follows[i], arrived[i].result(), out, stop))
                    group.create_task(_tail_deliveries(remote, endpoint, seen[i].result(), out, stop))
                if endpoint_ref is None:  # every endpoint: also those made after this line
                    group.create_task(_new_endpoints(remote, {e["id"] for e in endpoints}, group, out, stop))
    except* ApiError as refused:
        raise refused.exceptions[0] from None
    out.line("stopped")
    return 0


async def _new_endpoints(
    remote: Remote, known: set[str], group: asyncio.TaskGroup, out: _Out, stop: asyncio.Event
) -> None:
    """Follows the endpoints made after ``tail`` started (the list asked again every ``_NEW_ENDPOINTS_S``):
    a trial user's endpoint made after "Following 3 endpoint(s)" was never followed. Everything such an
    endpoint has is newer than that line, so all of it is printed: its position is pinned first, then the
    events it already has are listed (oldest first) and the follow skips those it answers again."""
    while not stop.is_set():
        await _until(stop, asyncio.sleep(_NEW_ENDPOINTS_S))
        ok, listed = await _patiently(stop, out, remote.endpoints, remote)
        if not ok or listed is None:
            return
        for endpoint in listed:
            if endpoint["id"] in known:
                continue
            known.add(endpoint["id"])
            follow = _Follow(remote, endpoint["id"], None)
            arrived = await _events_baseline(follow, out, stop)
            listing = functools.partial(remote.events, endpoint["id"], 100)
            ok, had = await _patiently(stop, out, listing, remote)
            if not ok or had is None:
                return
            out.line(f"{_now()}  following new endpoint {endpoint['id']}")
            printed = {event["id"] for event in had}
            for event in reversed(had):
                _event_line(endpoint, event, out)
            if arrived is not None and arrived["id"] in printed:
                arrived = None
            group.create_task(_tail_events(endpoint, follow, arrived, out, stop, printed))
            group.create_task(_tail_deliveries(remote, endpoint, set(), out, stop))


async def _events_baseline(follow: _Follow, out: _Out, stop: asyncio.Event) -> dict[str, Any] | None:
    """Pins "now" to a position (the cursor of one short wait); the event that arrived meanwhile, if one did."""
    ok, answer = await _patiently(stop, out, lambda: follow.next(_BASELINE_WAIT_S), follow.remote)
    if not ok or answer is None:
        return None
    event, cursor = answer
    follow.save(cursor)
    return event


async def _deliveries_seen(remote: Remote, endpoint: dict[str, Any], out: _Out, stop: asyncio.Event) -> set[str]:
    """The attempts already listed, which ``tail`` does not print."""
    ok, listed = await _patiently(stop, out, lambda: remote.deliveries(endpoint["id"], 100), remote)
    return {d["id"] for d in listed} if ok and listed is not None else set()


def _event_line(endpoint: dict[str, Any], event: dict[str, Any], out: _Out) -> None:
    valid = event.get("signature_valid")
    verdict = verdict_text(valid, event.get("signature_failure_reason"))
    verdict = out.paint(verdict, "32" if valid else "31") if valid is not None else verdict
    out.line(
        f"{_now()}  {out.paint('event', '36')}     {endpoint['id']}  {event.get('provider') or '-':<9}  "
        f"{event.get('event_type') or '-':<32}  {event['method']} {verdict}  {event['id']}"
    )


async def _tail_events(
    endpoint: dict[str, Any],
    follow: _Follow,
    event: dict[str, Any] | None,
    out: _Out,
    stop: asyncio.Event,
    printed: set[str] | None = None,
) -> None:
    """Prints ``event`` and each one the follow answers after it, except those already ``printed``."""
    while True:
        if event is not None and (printed is None or event["id"] not in printed):
            _event_line(endpoint, event, out)
        epoch = out.outage.epoch
        ok, answer = await _patiently(stop, out, follow.next, follow.remote)
        await _ingest_said(follow.remote, endpoint, out, epoch, f"; endpoint {endpoint['id']}")
        if not ok or answer is None:
            return
        event, cursor = answer
        follow.save(cursor)


async def _tail_deliveries(
    remote: Remote, endpoint: dict[str, Any], seen: set[str], out: _Out, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        await _until(stop, asyncio.sleep(1.0))
        ok, page = await _patiently(stop, out, lambda: remote.deliveries(endpoint["id"], 100), remote)
        if not ok or page is None:
            return
        for d in reversed([d for d in page if d["id"] not in seen]):
            # A record that sent nothing (a skipped copy) has no latency and is no attempt (stats.md).
            sent = "" if _sent_nothing(d) else f"{d.get('latency_ms') or 0:>5} ms  attempt {d['attempt_number']}  "
            out.line(
                f"{_now()}  {out.paint('delivery', '35')}  {endpoint['id']}  {d['source']:<9}  "
                f"{d.get('destination_url') or '-':<32}  → {_outcome(out, d)}  {sent}{d['event_id']}{_retry_note(d)}"
            )
        seen |= {d["id"] for d in page}


def _outcome(out: _Out, delivery: dict[str, Any]) -> str:
    """A delivery record's outcome: its status, or why nothing was sent. A deduplicated copy and a delivery
    its transform skipped are successes without a request (``docs/reference/delivery.md``): not errors."""
    if delivery.get("duplicate_of"):
        return out.paint(f"skipped, duplicate of {delivery['duplicate_of']}", "32")
    if _sent_nothing(delivery):
        return out.paint("skipped by its transform", "32")
    return out.status(delivery.get("response_status"), delivery.get("error"))


def _sent_nothing(delivery: dict[str, Any]) -> bool:
    """A success recorded without a request: a deduplicated copy, or a delivery its transform skipped."""
    transform = delivery.get("transform") or {}
    return bool(delivery.get("duplicate_of")) or transform.get("outcome") == "skipped"


def _retry_note(delivery: dict[str, Any]) -> str:
    """What comes of a failed attempt (the record's ``retry``, docs/reference/delivery.md), as the inbox page
    says it: a failure whose retry is scheduled is not the delivery's end. Empty when nothing is to be said."""
    retry = delivery.get("retry")
    if retry == "scheduled" and delivery.get("next_attempt_at"):
        due = datetime.fromisoformat(delivery["next_attempt_at"]).astimezone()
        return f"  retry at {due:%H:%M:%S}"
    return {"in_flight": "  retrying now", "held": "  held: destination disabled", "gave_up": "  gave up"}.get(
        retry or "", ""
    )
