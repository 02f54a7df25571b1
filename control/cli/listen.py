"""``hookyard listen`` and ``hookyard tail``: an endpoint's traffic in a terminal.

``listen`` forwards every new event of an endpoint to a local URL, as ``stripe listen`` does, verbatim (the
provider's method, headers and body, so its signature still verifies) or re-signed with ``--resign-with``
(``shared.signatures.resign``: the event's own scheme and message id, a fresh timestamp). It follows the
endpoint with ``events/wait?after=`` (``control.service.events.follow``) and writes the cursor after each event
to a state file in the data dir, keyed by control URL, endpoint and target. So it misses nothing and
forwards nothing twice across dropped connections, control-plane restarts and its own restart: a new run
resumes after the last event the previous one forwarded. (Killed with SIGKILL between a forward and the
write, that one event is forwarded again: at least once, like every webhook.) Ctrl-C lets the forward in
progress finish, saves, and exits 0. ``--events`` skips other types on this side; the cursor moves past
them all the same. A first run pins "now" to a position (one short wait, as ``tail`` does) before it
prints "Ready", so an event sent as that line appears is forwarded, once. The first forward that looks like
the wrong target (refused, or a 404/405, perhaps from another program on the port: its ``Server`` header is
named) prints one hint with the ``replay`` command that sends that event again. Each forward is made and
recorded on its event by ``control.cli.forward``; ``--resign-with`` is kept with the cursor (0600), so a restart
re-signs as the run before did (docs/adr/0056-listen-records-its-forwards-and-keeps-its-secret.md).

``tail`` prints one line per arriving event (following each endpoint from now) and per delivery attempt
(the endpoint's deliveries list, polled every second; only attempts made after it started). Where "now" is
and which attempts were already there are both asked before it says "Following": whatever happens after
that line is printed (one short wait per endpoint, at most ``_BASELINE_WAIT_S``, pins the events' position).
With no endpoint named, endpoints made later are followed too (``_new_endpoints``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO, TypeVar

from control.cli.forward import forward, forwarding_client, hint, record
from control.cli.last import private_write, remember
from control.cli.remote import Remote
from control.records.verdict import verdict_text
from shared.errors import ApiError, Unreachable

__all__ = ("listen", "tail")

T = TypeVar("T")
_WAIT_S = 25
_BASELINE_WAIT_S = 1  # the shortest wait events/wait takes: its answer carries the position of "now"
_BACKOFF_S = (0.2, 5.0)
_NEW_ENDPOINTS_S = 2.0  # how often ``tail`` with no endpoint named asks for endpoints made since it started
_FORWARD_TIMEOUT_S = 30.0


class _Outage:
    """Whether an unreachable control plane has been said, shared by the calls of one command: each of
    ``tail``'s tasks (two per endpoint) met the same outage and said it, three lines within a second. The first
    call to meet an outage says it; the first answered after it says "reconnected". ``epoch`` counts those
    reconnections: a call that started before the last one belongs to an outage already over, and says nothing."""

    def __init__(self) -> None:
        self.told, self.epoch = False, 0


class _Out:
    """One line per thing that happened; colours only on a terminal (and never under ``NO_COLOR``). An outage
    of the control plane is said once, however many of the command's calls meet it (``outage``)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.colour = stream.isatty() and "NO_COLOR" not in os.environ
        self.outage = _Outage()

    def paint(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def status(self, status: int | None, error: str | None = None) -> str:
        if status is None:
            return self.paint(f"ERR {error or ''}".strip(), "31")
        return self.paint(str(status), "32" if 200 <= status < 300 else "33" if status < 500 else "31")

    def outcome(self, delivery: dict[str, Any]) -> str:
        """A delivery record's outcome: its status, or why nothing was sent. A deduplicated copy and a delivery
        its transform skipped are successes without a request (``docs/reference/delivery.md``): not errors."""
        if delivery.get("duplicate_of"):
            return self.paint(f"skipped, duplicate of {delivery['duplicate_of']}", "32")
        if _sent_nothing(delivery):
            return self.paint("skipped by its transform", "32")
        return self.status(delivery.get("response_status"), delivery.get("error"))

    def line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


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


def _now() -> str:
    return datetime.now().strftime("%H:%M:%S")


async def _until(stop: asyncio.Event, work: Awaitable[T]) -> T | None:
    """``work``'s result, or None (``work`` cancelled) once ``stop`` is set. Cancelled itself (``tail``'s task
    group ending on another task's error), it cancels ``work``: left running, its failure as the connection
    closed was printed as "Task exception was never retrieved" with a traceback."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        stopper.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return None


def _signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


class _Follow:
    """One endpoint followed by position; ``state`` keeps the cursor between runs (None: from now), and the
    secret ``listen`` re-signs with (``secret``), so a restart on the same endpoint and target re-signs as the
    run before did. The file is 0600 (``private_write``)."""

    def __init__(self, remote: Remote, endpoint_id: str, state: Path | None) -> None:
        self.remote, self.endpoint_id, self.state = remote, endpoint_id, state
        self.cursor, self.secret = "now", None
        self.lost = False  # the last call could not reach the control plane
        if state is not None and state.exists():
            saved = json.loads(state.read_text())
            self.cursor, self.secret = saved["cursor"], saved.get("resign_with")

    def save(self, cursor: str) -> None:
        self.cursor = cursor
        if self.state is not None:
            saved = {"endpoint_id": self.endpoint_id, "cursor": cursor}
            private_write(self.state, json.dumps(saved | ({"resign_with": self.secret} if self.secret else {})))

    async def next(self, wait_s: int = _WAIT_S) -> tuple[dict[str, Any] | None, str]:
        """(event or None on a timeout, the cursor after it); raises Unreachable and ApiError. After an
        unreachable control plane the first call is a short wait: a long one would say "reconnected" only when
        it ends (25 s after the control plane came back, when no event arrives)."""
        wait_s = _BASELINE_WAIT_S if self.lost else wait_s
        try:
            answer = await self.remote.wait(self.endpoint_id, self.cursor, wait_s)
        except Unreachable:
            self.lost = True
            raise
        self.lost = False
        return answer


async def _patiently(
    stop: asyncio.Event,
    out: _Out,
    call: Callable[[], Awaitable[T]],
    remote: Remote | None = None,
) -> tuple[bool, T | None]:
    """(True, result) once ``call`` answers; (False, None) when stopped. Waits out an unreachable control
    plane and 429s with backoff, saying so once per outage (``out.outage``: all of a command's calls meet the
    same one, so the line that it ended names the control plane, not whichever call answered first: ``tail``
    said "deliveries: reconnected"); any other error is raised. Before each retry, ``remote`` is asked whether
    its instance has moved (``Remote.moved``): if so, the next try goes there at once, and that is said once
    per move."""
    delay, outage = _BACKOFF_S[0], out.outage
    while not stop.is_set():
        epoch, during = outage.epoch, outage.told
        try:
            result = await _until(stop, call())
        except Unreachable as exc:
            moved = remote.moved() if remote is not None else None
            if not outage.told and epoch == outage.epoch:
                # What was tried, named as what runs there now (the same ports: a new up, or none yet).
                said = remote.unreachable(exc) if remote is not None and moved is None else str(exc)
                out.line(out.paint(f"{_now()}  {said}; retrying", "33"))
                outage.told = True
            if moved is not None:
                out.line(out.paint(f"{_now()}  control plane moved to {moved}", "33"))
                delay = _BACKOFF_S[0]
                continue
        except ApiError as exc:
            if not exc.rate_limited:
                raise
        else:
            if during and outage.told and epoch == outage.epoch and not stop.is_set():
                outage.told, outage.epoch = False, outage.epoch + 1
                if remote is not None:
                    remote.reconnected()
                back = f" to {remote.base_url} (from {remote.source})" if remote is not None and remote.source else ""
                out.line(out.paint(f"{_now()}  control plane: reconnected{back}", "32"))
            return (not stop.is_set()), result
        await _until(stop, asyncio.sleep(delay))
        delay = min(delay * 2, _BACKOFF_S[1])
    return False, None


def state_file(data_dir: str, control_url: str, endpoint_id: str, forward_to: str) -> Path:
    """Keyed by endpoint and target, not by URL: an endpoint id is unique, and the same instance restarted on
    other ports keeps its cursors. A cursor saved under the earlier key (with the URL) is carried over."""
    folder = Path(data_dir) / "listen"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{endpoint_id}-{_digest(endpoint_id, forward_to)}.json"
    earlier = folder / f"{endpoint_id}-{_digest(control_url, endpoint_id, forward_to)}.json"
    if not path.exists() and earlier.exists():
        os.replace(earlier, path)
    return path


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


async def listen(
    remote: Remote,
    *,
    data_dir: str,
    endpoint_ref: str | None,
    forward_to: str,
    events: frozenset[str],
    resign_with: str | None,
    verbatim: bool = False,
    again: list[str] | None = None,
    replay_flags: Sequence[str] = (),
    stream: TextIO = sys.stdout,
) -> int:
    """``again``: the flags the "restart with:" line repeats (default: ``--forward-to`` alone); ``replay_flags``:
    those the hint's ``replay`` line adds (the same instance).

    ``resign_with`` re-signs each event and is kept (0600) in the data dir: a restart on the same endpoint and
    target re-signs with it unless ``verbatim``, and ``hookyard replay`` re-signs with it too, so the secret is
    typed once and never printed. Where "now" is, is pinned before "Ready" is printed (as ``tail`` does): an
    event sent as that line appears is forwarded, once. The endpoint is recorded as the one later commands
    default to first."""
    out, stop = _Out(stream), asyncio.Event()
    _signals(stop)
    if endpoint_ref is None:
        endpoint = await remote.create_temporary_endpoint("hookyard listen")
    else:
        endpoint = await remote.endpoint(endpoint_ref)
    follow = _Follow(remote, endpoint["id"], state_file(data_dir, remote.base_url, endpoint["id"], forward_to))
    kept = follow.secret if resign_with is None and not verbatim else None
    follow.secret = resign_with or kept
    remember(data_dir, remote.base_url, endpoint["id"], forward_to, follow.secret)
    resign_with = follow.secret
    resumed = "resuming after the last event forwarded" if follow.cursor != "now" else "new events from now"
    event, cursor = None, None
    if follow.cursor == "now":  # one short wait: its answer carries the position of "now"
        ok, pinned = await _patiently(stop, out, lambda: follow.next(_BASELINE_WAIT_S), follow.remote)
        if not ok or pinned is None:
            out.line("stopped")
            return 0
        event, cursor = pinned
    if endpoint_ref is None:
        out.line(f"Ready. Send webhooks to {endpoint['ingest_url']}")
        out.line(f"  endpoint {endpoint['id']} (temporary, expires {endpoint['expires_at']})")
        again = ["--forward-to", forward_to] if again is None else again
        out.line(f"  restart with: {shlex.join(['hookyard', 'listen', endpoint['id'], *again])}")
    else:
        out.line(f"Ready. Send webhooks to {endpoint['ingest_url']} (endpoint {endpoint['id']})")
    out.line(f"Forwarding to {forward_to}, {resumed}. Ctrl-C stops.")
    if resign_with is not None:
        which = "the secret of the run before" if kept else "the secret given"
        out.line(
            f"Re-signing each event in its provider's own header with {which} (kept 0600 in "
            f"{Path(data_dir).name}/ for `hookyard replay` and restarts; --verbatim: as captured)."
        )
    async with forwarding_client(_FORWARD_TIMEOUT_S, forward_to) as client:
        # Once per run and kind: nothing listening, then another program on the port, each says so once.
        hinted: set[bool] = set()
        unrecorded = False  # said once per run too: the control plane could not record a forward
        while True:
            if event is not None and (not events or event.get("event_type") in events):
                done = await forward(client, forward_to, event, resign_with)
                out.line(
                    f"{_now()}  {event.get('provider') or '-':<9}  {event.get('event_type') or '-':<32}  "
                    f"→ {out.status(done.status, done.error)}  {done.latency_ms:>5} ms  {event['id']}"
                )
                told = None if done.refused in hinted else hint(forward_to, event, done, replay_flags)
                if told is not None:
                    out.line(told)
                    hinted.add(done.refused)
                problem = await record(follow.remote, forward_to, event, done)
                if problem is not None and not unrecorded:
                    out.line(out.paint(f"{_now()}  this forward is not recorded in hookyard ({problem})", "33"))
                    unrecorded = True
            if cursor is not None:
                follow.save(cursor)  # after the forward: at least once, never skipped
            epoch = out.outage.epoch
            ok, answer = await _patiently(stop, out, follow.next, follow.remote)
            if out.outage.epoch != epoch and (moved := await follow.remote.ingest_moved(endpoint)):
                out.line(out.paint(f"{_now()}  Send webhooks to {moved} now (was {endpoint['ingest_url']})", "33"))
                endpoint["ingest_url"] = moved
            if not ok or answer is None:
                break
            event, cursor = answer
    out.line("stopped")
    return 0


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
        ok, answer = await _patiently(stop, out, follow.next, follow.remote)
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
                f"{d.get('destination_url') or '-':<32}  → {out.outcome(d)}  {sent}{d['event_id']}{_retry_note(d)}"
            )
        seen |= {d["id"] for d in page}
