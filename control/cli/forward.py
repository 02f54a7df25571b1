"""One event sent to the local app by ``hookyard listen``, and recorded in hookyard (``control.cli.listen``
follows the endpoint and calls these).

The request is the captured one (its method, its headers less hop-by-hop ones, its exact body), or re-signed
with ``--resign-with`` by ``shared.signatures.resign`` (the event's own scheme and message id, a fresh
timestamp). What came back is printed by ``listen`` and recorded on the event
(``POST /v1/events/{id}/forwards``, a delivery of source ``listen``:
docs/adr/0056-listen-records-its-forwards-and-keeps-its-secret.md). A forward that looks like the wrong target
gets one hint with the ``replay`` command that sends the event again.
"""

from __future__ import annotations

import base64
import shlex
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import httpx

from control.cli.remote import Remote
from control.delivery.send import forwardable, merge
from control.records.forwards import MAX_FORWARD_RESPONSE
from control.support.client_tls import verify_for
from shared.errors import ApiError, Unreachable
from shared.signatures import HEADERS, resign

__all__ = ("Forwarded", "forward", "forwarding_client", "hint", "record", "request_of")

_RECORD_TIMEOUT_S = 5.0


def forwarding_client(timeout_s: float, url: str) -> httpx.AsyncClient:
    """A client that sends the captured headers and nothing of its own: httpx's defaults (``Accept``,
    ``Accept-Encoding``, ``Connection``, ``User-Agent``) would fill in what the provider did not send, and the
    app would see headers the recorded forward does not list. Only ``Host`` and the body's framing are added,
    as any HTTP client must. ``url``: where it forwards; TLS trust is built only for an https one
    (``control.support.client_tls``)."""
    client = httpx.AsyncClient(timeout=timeout_s, trust_env=False, follow_redirects=False, verify=verify_for(url))
    for name in list(client.headers):
        del client.headers[name]
    return client


def request_of(event: dict[str, Any], resign_with: str | None, url: str = "") -> tuple[str, dict[str, Any], bytes]:
    """The captured request as it arrived (headers minus hop-by-hop ones), or re-signed for ``url``, where it
    goes (a provider such as Twilio signs the URL it posts to)."""
    body_text = event.get("body") or ""
    body = base64.b64decode(body_text) if event.get("body_encoding") == "base64" else body_text.encode()
    encodings = event.get("header_encodings") or {}
    text = forwardable({k: v for k, v in event["headers"].items() if k not in encodings})
    headers: dict[str, Any] = dict(text)
    for name in encodings:
        if name in forwardable({name: ""}):
            headers[name] = base64.b64decode(event["headers"][name])
    if resign_with is not None:
        signed, replaced = resign(text, event.get("provider"), body, resign_with, url=url, method=event["method"])
        if replaced is not None:
            headers.pop(replaced, None)
        headers = {**merge(headers, _standard_too(signed))}
    return event["method"], headers, body


def _standard_too(signed: dict[str, str]) -> dict[str, str]:
    """An identity re-signature also under the Standard Webhooks names (``webhook-*``): the ``svix`` library
    reads ``svix-*`` first, ``standardwebhooks`` only ``webhook-*``, and the local app may use either. The
    signature covers id, timestamp and body, not the names, so the values are the same."""
    standard = HEADERS["identity"]["standard"]
    for names in HEADERS["identity"].values():
        values = [signed.get(name or "") for name in names]
        if all(values):
            return {**signed, **{str(name): str(value) for name, value in zip(standard, values, strict=True)}}
    return signed


class Forwarded(NamedTuple):
    status: int | None
    latency_ms: int
    error: str | None
    server: str | None
    """The answer's ``Server`` header: which program answered, for the hint when it looks like another one."""
    refused: bool
    sent: dict[str, str]
    """The headers sent that are text (a captured value that is not is sent as its bytes, and not reported)."""
    answer: str | None
    """The start of the app's answer, as text, for the record."""


async def forward(client: httpx.AsyncClient, url: str, event: dict[str, Any], resign_with: str | None) -> Forwarded:
    method, headers, body = request_of(event, resign_with, url)
    started = time.perf_counter()
    server, refused, answer = None, False, None
    try:
        resp = await client.request(method, url, headers=headers, content=body)
        status, error, server = resp.status_code, None, resp.headers.get("server")
        answer = resp.content[:MAX_FORWARD_RESPONSE].decode("utf-8", "replace")
    except httpx.HTTPError as exc:
        status, error, refused = None, f"{type(exc).__name__}: {exc}"[:120], isinstance(exc, httpx.ConnectError)
    sent = {name: value for name, value in headers.items() if isinstance(value, str)}
    return Forwarded(status, round((time.perf_counter() - started) * 1000), error, server, refused, sent, answer)


async def record(remote: Remote, url: str, event: dict[str, Any], done: Forwarded) -> str | None:
    """Records the forward on its event (a delivery of source ``listen``), so ``hookyard tail``, the inbox and the
    deliveries list show what reached the app; None once recorded, else why not. Best effort: a control plane
    that cannot record it (away, or older than the route) costs ``listen`` one line, and forwarding goes on."""
    report: dict[str, object] = {"url": url, "status": done.status, "latency_ms": done.latency_ms, "error": done.error}
    report |= {"sent_headers": done.sent, "response_body": done.answer}
    try:
        await remote.record_forward(event["id"], report, _RECORD_TIMEOUT_S)
    except (ApiError, Unreachable) as exc:
        return str(exc)
    return None


def hint(forward_to: str, event: dict[str, Any], done: Forwarded, replay_flags: Sequence[str]) -> str | None:
    """One line for a forward that looks like the wrong target: nothing listening, or something that has no
    such route (another program on the port, or the app at another path). listen moves on either way (the
    event stays stored), so the hint says how to send it again."""
    again = f"`{shlex.join(['hookyard', 'replay', event['id'], '--to', forward_to, *replay_flags])}` sends it again"
    if done.refused:
        return f"  hint: nothing is listening at {forward_to}; start your app there ({again})"
    if done.status in (404, 405, 501):  # 501: a server that takes no such method at all (python -m http.server)
        by = f" from {done.server!r}" if done.server else ""
        method = str(event.get("method") or "POST")
        return (
            f"  hint: {forward_to} answered {done.status}{by}: is that your app, and does it take {method} at that "
            f"path? ({again})"
        )
    return None
