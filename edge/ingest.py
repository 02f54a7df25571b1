"""THE hot path: ``/h/{token}[/{sub-path}]``, any method.

resolve token → expiry → backpressure → source IP and allowlist → read body (size cap, read timeout) →
attribution and signature → record → batched XADD → 200 ``{"ok": true, "id": "evt_..."}``.
Nothing here touches Postgres; per request it is a few dict lookups, at most one HMAC, one ULID and one
msgspec struct. Every line runs per request on granian's single Python thread, which is what limits the
edge's throughput: helpers are called only where a request needs them (a cache miss, a shard at its mark,
a trusted proxy), and headers are read as bytes (``dict(scope["headers"])``), never decoded to text.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from edge.clientip import ClientIP
from edge.config import EndpointCache
from edge.respond import JSON_HEADER as _JSON
from edge.respond import send_error
from edge.stream import StreamWriter
from shared.attribution import attribute
from shared.ids import ulid
from shared.keys import Keys
from shared.settings import Settings
from shared.wire import IngestRecord

__all__ = ("Ingest",)


class _TooLarge(Exception):
    pass


_OK_LENGTH = (b"content-length", str(len(b'{"ok":true,"id":"evt_' + b"0" * 26 + b'"}')).encode())
"""Every 200 body has the same length: an event id is always ``evt_`` and 26 ULID characters."""


class Ingest:
    def __init__(
        self, settings: Settings, keys: Keys, cache: EndpointCache, writer: StreamWriter, client_ip: ClientIP
    ) -> None:
        self.max_body = settings.max_body_bytes
        self.read_timeout_s = settings.body_read_timeout_s
        self.keys = keys
        self.cache = cache
        self.writer = writer
        self.client_ip = client_ip
        self._too_large = f"body: request body exceeds the limit of {self.max_body} bytes"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        token, _, sub_path = scope["path"][3:].partition("/")
        now = time.time()
        entry = self.cache.entries.get(token)
        served = entry[0] if entry is not None and entry[1] > now else await self.cache.get(token)
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
            await send_error(send, 403, "ip_not_allowed", f"source address {source_ip} is not in the allowlist")
            return

        raw = dict(headers)  # one C call; signatures and attribution read this form (shared.headers)
        declared = raw.get(b"content-length")
        length = int(declared) if declared is not None and declared.isdigit() else -1
        if length > self.max_body:
            await send_error(send, 413, "payload_too_large", self._too_large)
            return
        message = await receive()
        body = message.get("body", b"")
        # Granian ends every body with an empty message; when Content-Length is already met there is
        # nothing left to wait for, which saves a round through the server per request.
        if len(body) != length and message.get("more_body", False):
            try:
                body = await self._read_rest(receive, body)
            except _TooLarge:
                await send_error(send, 413, "payload_too_large", self._too_large)
                return
            except TimeoutError:
                await send_error(send, 408, "request_timeout", "body: the request body did not arrive in time")
                return
        elif len(body) > self.max_body:
            await send_error(send, 413, "payload_too_large", self._too_large)
            return

        attribution = attribute(raw, body)
        verifier = served.verifier
        if verifier is None:  # hmac disabled: nothing checked, signature_valid stays null
            signature_valid = reason = None
        else:
            signature_valid, reason, _ = verifier(raw, body, now)
            # on_failure=reject: 401 and nothing stored (a blocked source logged below is refused anyway)
            if not signature_valid and served.rejects and ip_allowed is not False:
                await send_error(send, 401, "signature_invalid", f"signature verification failed: {reason}")
                return
        event_id = "evt_" + ulid(int(now * 1000))
        record = IngestRecord(
            event_id,
            endpoint.endpoint_id,
            int(now * 1_000_000),
            scope["method"],
            sub_path,
            scope["query_string"].decode("latin-1"),
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
        try:
            await writer.append(shard, record)
        except Exception:  # noqa: BLE001 - Redis unreachable: not stored, so the sender must retry
            await send_error(
                send, 503, "unavailable", "the event could not be stored; retry shortly", [(b"retry-after", b"2")]
            )
            return
        encoded_id = event_id.encode()
        if ip_allowed is False:  # logged because the endpoint asks for it, refused all the same
            await send_error(
                send,
                403,
                "ip_not_allowed",
                f"source address {source_ip} is not in the allowlist",
                [(b"x-hookyard-event-id", encoded_id)],
            )
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [_JSON, _OK_LENGTH, (b"x-hookyard-event-id", encoded_id)],
            }
        )
        await send({"type": "http.response.body", "body": b'{"ok":true,"id":"' + encoded_id + b'"}'})

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
                    raise TimeoutError
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body:
                    raise _TooLarge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
