"""THE hot path: ``/h/{token}[/{sub-path}]``, any method.

resolve token → expiry → backpressure → source IP and allowlist → read body (size cap, read timeout,
completeness) → attribution and signature → record → batched XADD → 200 ``{"ok": true, "id": "evt_..."}``.
Nothing here touches Postgres; per request it is a few dict lookups, at most one HMAC, one ULID and one
msgspec struct. Every line runs per request on granian's single Python thread, which is what limits the
edge's throughput: helpers are called only where a request needs them (a cache miss, a shard at its mark,
a trusted proxy, a repeated header), and headers are read as bytes (``dict(scope["headers"])``), never
decoded to text.

What the sender gets when something is wrong: 400 ``body_incomplete`` when the body did not arrive in full
(the sender went away first, a malformed chunked body, fewer bytes than Content-Length); 503 ``unavailable``
with Retry-After when Redis fails (the config lookup or the stream write); ``500 internal_error`` in the
envelope for anything unexpected. The ``try`` around the whole handler costs nothing until something raises.
A signature rejected (401) and a source not on the allowlist (403) are counted for the endpoint's stats
(``edge.refusals``: a dict entry in this process, nothing on the path of an accepted request).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from edge.config import EndpointCache
from edge.metrics import LATENCY, REQUESTS
from edge.providers import REFUSED, send_answer, send_custom, settle
from edge.refusals import Refusals
from edge.respond import JSON_HEADER as _JSON
from edge.respond import send_error, send_internal_error
from edge.stream import StreamWriter
from shared.attribution import UNATTRIBUTED, Attribution, attribute
from shared.clientip import ClientIP
from shared.errors import ConfigsIncompleteError
from shared.ids import ulid
from shared.keys import Keys
from shared.providers import RECOGNISING
from shared.providers.handshake import Answer
from shared.providers.recognise import recognise
from shared.refusals import IP_NOT_ALLOWED
from shared.settings import Settings
from shared.signatures import SIGNATURE_MISMATCH, Check, Verdict, repeated_header
from shared.uri import uri_text
from shared.wire import IngestRecord

__all__ = ("Ingest",)

log = logging.getLogger("hookyard.edge")


class _TooLarge(Exception):
    pass


class _Incomplete(Exception):
    """The sender stopped before its body was complete (it went away, or its chunked framing broke)."""


_OK_LENGTH = (b"content-length", str(len(b'{"ok":true,"id":"evt_' + b"0" * 26 + b'"}')).encode())
"""Every 200 body has the same length: an event id is always ``evt_`` and 26 ULID characters."""
_RETRY_SOON = [(b"retry-after", b"2")]
_NOT_LOOKED_UP = "the endpoint could not be looked up; retry shortly"
_REBUILDING = "the endpoint configs are being restored (Redis restarted without its data); retry shortly"
_INCOMPLETE = "body: the request body did not arrive in full; nothing was stored"
_UNAVAILABLE_LOG_EVERY_S = 10.0
_MAX_LENGTH_DIGITS = 18  # any Content-Length longer than this (leading zeros aside) is over every limit


def _content_length(declared: bytes) -> int:
    """A Content-Length too long for ``int()`` (Python refuses over 4,300 digits): leading zeros are legal."""
    digits = declared.lstrip(b"0")
    return int(digits or b"0") if len(digits) <= _MAX_LENGTH_DIGITS else 10**_MAX_LENGTH_DIGITS


class Ingest:
    def __init__(
        self,
        settings: Settings,
        keys: Keys,
        cache: EndpointCache,
        writer: StreamWriter,
        client_ip: ClientIP,
        refusals: Refusals,
    ) -> None:
        self.max_body = settings.max_body_bytes
        self.public_base = settings.public_edge_url.rstrip("/") if settings.public_edge_url else None
        """Where senders post (schemes that sign the URL, edge.providers); None: read from the request."""
        self.read_timeout_s = settings.body_read_timeout_s
        self.keys = keys
        self.cache = cache
        self.writer = writer
        self.client_ip = client_ip
        self.refusals = refusals
        self._too_large = f"body: request body exceeds the limit of {self.max_body} bytes"
        self._lookup_logged_at = -_UNAVAILABLE_LOG_EVERY_S
        self.store: Callable[[int, IngestRecord], Awaitable[None]] = writer.append
        """The durable write of a request's record. With tracing on, ``edge.tracing`` swaps in its own at
        startup, which first gives the record its span's context: off, the handler holds no tracing code
        and does no tracing work per request (docs/adr/0063-edge-ratios-side-by-side.md)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            token, _, sub_path = uri_text(scope["raw_path"])[3:].partition("/")
            now = time.time()
            entry = self.cache.entries.get(token)
            if entry is not None and entry[1] > now:
                served = entry[0]
            else:
                try:
                    served = await self.cache.get(token)
                except Exception as exc:  # noqa: BLE001 - Redis failed: nothing can be decided, so retry later
                    self._lookup_failed(exc)
                    what = _REBUILDING if isinstance(exc, ConfigsIncompleteError) else _NOT_LOOKED_UP
                    await send_error(send, 503, "unavailable", what, _RETRY_SOON)
                    return
            if served is None:
                await send_error(send, 404, "endpoint_not_found", "no endpoint has this ingest URL")
                return
            endpoint = served.config
            if endpoint.expires_at is not None and endpoint.expires_at <= now:
                await send_error(send, 410, "endpoint_expired", "this temporary endpoint has expired")
                return
            shard = served.shard
            writer = self.writer
            if writer.backlog[shard] >= writer.high_water and writer.over_high_water(shard):
                await send_error(
                    send, 503, "backpressure", "ingest is catching up; retry shortly", [(b"retry-after", b"5")]
                )
                return

            headers = scope["headers"]
            client = scope.get("client")
            source_ip = client[0] if client else None
            if self.client_ip.trusts_proxies:
                source_ip = self.client_ip.resolve(source_ip, headers)
            ip_allowed = served.ip_allowed(source_ip) if served.networks else None
            if ip_allowed is False and not endpoint.auth.log_blocked_ips:
                self.refusals.add(endpoint.endpoint_id, IP_NOT_ALLOWED, now)
                await send_error(send, 403, "ip_not_allowed", f"source address {source_ip} is not in the allowlist")
                return

            raw = dict(headers)  # one C call; signatures and attribution read this form (shared.headers)
            declared = raw.get(b"content-length")
            length = -1
            if declared is not None and declared.isdigit():
                try:
                    length = int(declared)
                except ValueError:  # thousands of digits
                    length = _content_length(declared)
            if length > self.max_body:
                await send_error(send, 413, "payload_too_large", self._too_large)
                return
            message = await receive()
            body = message.get("body", b"")
            # Granian ends every body with an empty message; when Content-Length is already met there is
            # nothing left to wait for, which saves a round through the server per request. Anything else
            # (no Content-Length, a body in parts, a body that did not arrive) takes the slow path.
            if len(body) != length:
                try:
                    body = await self._read_body(receive, message, body, length, raw)
                except _TooLarge:
                    await send_error(send, 413, "payload_too_large", self._too_large)
                    return
                except _Incomplete:
                    await send_error(send, 400, "body_incomplete", _INCOMPLETE)
                    return
                except TimeoutError:
                    await send_error(send, 408, "request_timeout", "body: the request body did not arrive in time")
                    return

            attribution = attribute(raw, body)
            answer = catalog = None
            # A catalog provider beyond the four kinds (edge.providers): the endpoint's own, else one its
            # headers name. Lines marked "catalog" are what the four kinds alone do without (bench.four_kinds).
            catalog = served.provider  # catalog
            if catalog is None and attribution is UNATTRIBUTED and not RECOGNISING.isdisjoint(raw):  # catalog
                catalog = recognise(raw)
            if catalog is not None:  # catalog
                attribution, signature_valid, reason, answer = settle(
                    served, catalog, scope, raw, body, now, self.public_base
                )
                if signature_valid is False and served.rejects and ip_allowed is not False:
                    self.refusals.add(endpoint.endpoint_id, reason or SIGNATURE_MISMATCH, now)
                    await send_error(send, 401, "signature_invalid", f"signature verification failed: {reason}")
                    return
            if catalog is None:  # the four kinds' check (shared.signatures)
                verifier = served.verifier
                if verifier is None:  # no secret: nothing checked, signature_valid stays null
                    signature_valid = reason = None
                else:
                    # A repeated header (two copies of any name) is the only way the dict can be shorter.
                    verdict = (
                        verifier(raw, body, now)
                        if len(raw) == len(headers)
                        else _verify_repeated(verifier, headers, raw, body, now, endpoint.auth.header_name)
                    )
                    signature_valid, reason, _ = verdict
                    if not signature_valid and not served.checks:  # verification off: only a proof is recorded
                        signature_valid = reason = None
                    # on_failure=reject: 401 and nothing stored (a blocked source logged below is refused anyway)
                    elif not signature_valid and served.rejects and ip_allowed is not False:
                        self.refusals.add(endpoint.endpoint_id, reason or SIGNATURE_MISMATCH, now)
                        await send_error(send, 401, "signature_invalid", f"signature verification failed: {reason}")
                        return
            event_id = "evt_" + ulid(int(now * 1000))
            record = IngestRecord(
                event_id,
                endpoint.endpoint_id,
                int(now * 1_000_000),
                scope["method"],
                sub_path,
                uri_text(scope["query_string"]),
                headers,
                body,
                source_ip,
                attribution.provider,
                attribution.event_type,
                attribution.idempotency_key,
                signature_valid,
                reason,
                ip_allowed,
            )
            if answer is not None:  # catalog
                record.handshake = True
            try:
                await self.store(shard, record)
            except Exception:  # noqa: BLE001 - Redis unreachable: not stored, so the sender must retry
                await send_error(send, 503, "unavailable", "the event could not be stored; retry shortly", _RETRY_SOON)
                return
            encoded_id = event_id.encode()
            if ip_allowed is False:  # logged because the endpoint asks for it, refused all the same
                self.refusals.add(endpoint.endpoint_id, IP_NOT_ALLOWED, now)
                await send_error(
                    send,
                    403,
                    "ip_not_allowed",
                    f"source address {source_ip} is not in the allowlist",
                    [(b"x-hookyard-event-id", encoded_id)],
                )
                return
            if answer is not None:  # catalog: a provider's handshake, now that the request is durable
                await self._handshake(send, answer, attribution, reason, endpoint.endpoint_id, now, encoded_id)
                return
            if served.response is not None:  # the endpoint's own answer (Endpoint.response)
                await send_custom(send, served.response, encoded_id)
                REQUESTS.inc(("accepted", attribution.provider or ""))
                LATENCY.observe(time.time() - now)
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [_JSON, _OK_LENGTH, (b"x-hookyard-event-id", encoded_id)],
                }
            )
            await send({"type": "http.response.body", "body": b'{"ok":true,"id":"' + encoded_id + b'"}'})
            REQUESTS.inc(("accepted", attribution.provider or ""))
            LATENCY.observe(time.time() - now)
        except Exception as exc:  # noqa: BLE001 - never the server's bare 500
            await send_internal_error(scope, send, exc)

    async def _handshake(
        self,
        send: Any,
        answer: Answer,
        attribution: Attribution,
        reason: str | None,
        endpoint_id: str,
        now: float,
        encoded_id: bytes,
    ) -> None:
        """A stored handshake's answer: its provider's, or 401 for a signed one whose check failed (stored all
        the same, never routed). Off the usual request's path, which checks ``answer`` once."""
        if answer is REFUSED:
            self.refusals.add(endpoint_id, reason or SIGNATURE_MISMATCH, now)
            await send_error(
                send,
                401,
                "signature_invalid",
                f"signature verification failed: {reason}",
                [(b"x-hookyard-event-id", encoded_id)],
            )
            return
        await send_answer(send, answer, encoded_id)
        REQUESTS.inc(("accepted", attribution.provider or ""))

    def _lookup_failed(self, exc: Exception) -> None:
        """Logged once per ``_UNAVAILABLE_LOG_EVERY_S``, not once per refused request of an outage."""
        now = time.monotonic()
        if now - self._lookup_logged_at >= _UNAVAILABLE_LOG_EVERY_S:
            self._lookup_logged_at = now
            log.warning("endpoint config lookup failed (%s: %s); answering 503", type(exc).__name__, exc)

    async def _read_body(
        self, receive: Any, message: dict[str, Any], first: bytes, length: int, raw: dict[bytes, bytes]
    ) -> bytes:
        """Every body the first message did not complete as declared. Raises ``_Incomplete`` for a body that
        did not arrive: an ``http.disconnect`` before its end (granian's answer to a sender that went away
        and to a malformed chunked body, sometimes as the very first message), or a length other than the
        declared one."""
        if message["type"] == "http.disconnect":
            # Complete only when there was no body to wait for: no Content-Length and no chunked framing.
            if length == -1 and b"transfer-encoding" not in raw:
                return b""
            raise _Incomplete
        body = await self._read_rest(receive, first) if message.get("more_body", False) else first
        if length == -1:
            if len(body) > self.max_body:
                raise _TooLarge
        elif len(body) != length:
            raise _Incomplete
        return body

    async def _read_rest(self, receive: Any, first: bytes) -> bytes:
        """A body in several chunks: only now pay for a timer, so a slow sender cannot hold the slot forever."""
        chunks = [first]
        size = len(first)
        if size > self.max_body:
            raise _TooLarge
        async with asyncio.timeout(self.read_timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _Incomplete
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    raise _TooLarge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)


def _verify_repeated(
    verifier: Check,
    headers: list[tuple[bytes, bytes]],
    raw: dict[bytes, bytes],
    body: bytes,
    now: float,
    header_name: str | None,
) -> Verdict:
    """A request with a repeated header: ``malformed_header`` when a header the check reads is the repeated
    one (the stored event joins both copies, so no single copy may decide), else the usual check."""
    return repeated_header(headers, raw, header_name) or verifier(raw, body, now)
