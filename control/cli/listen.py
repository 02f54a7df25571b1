"""``hookyard listen``: an endpoint's traffic forwarded to a local app (``tail``, ``control.cli.tail``, shows it).

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

The follow, its outage lines and its moves are ``tail``'s too (``control.cli.tail``). After an outage in which
the edge moved (``hookyard up`` back on other ports), the endpoint's new ingest URL is said, and the "Ready"
line names the URL of the moment it is printed, even when the edge moved during the wait before it.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from shared.errors import ApiError, Unreachable

__all__ = ("listen",)

T = TypeVar("T")
_WAIT_S = 25
_BASELINE_WAIT_S = 1  # the shortest wait events/wait takes: its answer carries the position of "now"
_BACKOFF_S = (0.2, 5.0)
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

    def line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


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


async def _ingest_said(
    remote: Remote, endpoint: dict[str, Any], out: _Out, epoch: int, whose: str = "", *, say: bool = True
) -> None:
    """After an outage (``out.outage.epoch`` has moved on from ``epoch``, its count before the call), when the
    edge has moved (``Remote.ingest_moved``): ``endpoint``'s ingest URL as the control plane reports it now,
    kept in ``endpoint`` and said in one line; not said (``say=False``) before the "Ready" line, which names it."""
    if out.outage.epoch == epoch or not (moved := await remote.ingest_moved(endpoint)):
        return
    if say:
        out.line(out.paint(f"{_now()}  Send webhooks to {moved} now (was {endpoint['ingest_url']}{whose})", "33"))
    endpoint["ingest_url"] = moved


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
        epoch = out.outage.epoch
        ok, pinned = await _patiently(stop, out, lambda: follow.next(_BASELINE_WAIT_S), follow.remote)
        if not ok or pinned is None:
            out.line("stopped")
            return 0
        event, cursor = pinned
        # The edge moved during that wait (``up`` back on other ports): "Ready" names where it is now.
        await _ingest_said(follow.remote, endpoint, out, epoch, say=False)
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
            await _ingest_said(follow.remote, endpoint, out, epoch)
            if not ok or answer is None:
                break
            event, cursor = answer
    out.line("stopped")
    return 0
