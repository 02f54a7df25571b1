"""Records that cross Redis between control, workers and the edge.

``EdgeEndpoint`` is what control writes under ``Keys.endpoint_config(token)`` and the edge reads to serve
that token: everything the hot path needs, nothing it must look up elsewhere. It is rebuilt from Postgres
(the source of truth) on every change and by the sweep, so losing Redis never loses configuration. It
carries the endpoint's config version, and writers replace it only with a newer one; a deleted endpoint
leaves a tombstone (``deleted``), so a writer that read before the delete cannot bring it back.
``ConfigNotice`` is what control publishes on ``Keys.config_channel`` after writing one.

>>> cfg = EdgeEndpoint(endpoint_id="ep_1", account_id="acct_1", environment="production")
>>> decode_edge_endpoint(encode(cfg)) == cfg
True
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = (
    "ConfigNotice",
    "EdgeAuth",
    "EdgeEndpoint",
    "EdgeResponse",
    "IngestRecord",
    "decode_config_notice",
    "decode_edge_endpoint",
    "decode_records",
    "encode",
    "encode_records",
)


class EdgeAuth(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    hmac_enabled: bool = False
    secret: str | None = None
    header_name: str | None = None
    tolerance_seconds: int = 300
    on_failure: Literal["reject", "accept_log"] = "reject"
    log_blocked_ips: bool = False
    provider: str | None = None
    """A catalog provider's own name (``shared.providers``): its scheme checks and its handshake is answered
    without recognising it from the headers; None recognises it per request."""
    verify_token: str | None = None
    """What the provider echoes in a keyed GET challenge (Meta's ``hub.verify_token``)."""


class EdgeResponse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The endpoint's own answer to a stored request (``Endpoint.response``): a 2xx, its type and body."""

    status: int = 200
    content_type: str = "text/plain; charset=utf-8"
    body: str = ""


class EdgeEndpoint(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    endpoint_id: str
    account_id: str
    environment: str
    expires_at: float | None = None
    """Unix seconds after which the edge answers 410 (temporary endpoints)."""
    auth: EdgeAuth = EdgeAuth()
    allowlist: tuple[str, ...] = ()
    """CIDRs; empty allows every source, non-empty denies by default."""
    version: int = 0
    """``endpoints.config_version`` this was built from (0: written before versions existed). The write is a
    compare-and-set on it (``control.support.edge_config``); read at the top level by a Lua script."""
    deleted: bool = False
    """A tombstone: the endpoint is gone and the edge serves its token as unknown (404)."""
    response: EdgeResponse | None = None
    """What the sender gets once its request is stored; None: ``{"ok": true, "id"}``."""


class ConfigNotice(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Drop these tokens (``*``: every token), then RPUSH to ``ack`` when one is given."""

    tokens: tuple[str, ...]
    ack: str | None = None


_encoder = msgspec.json.Encoder()
_edge_endpoint_decoder = msgspec.json.Decoder(EdgeEndpoint)
_config_notice_decoder = msgspec.json.Decoder(ConfigNotice)


def encode(obj: msgspec.Struct) -> bytes:
    return _encoder.encode(obj)


def decode_edge_endpoint(data: bytes | str) -> EdgeEndpoint:
    return _edge_endpoint_decoder.decode(data)


def decode_config_notice(data: bytes) -> ConfigNotice:
    """Also reads a bare token, what control published before notices had acks (a rolling deploy).

    >>> decode_config_notice(b"abc")
    ConfigNotice(tokens=('abc',), ack=None)
    """
    if data[:1] != b"{":
        return ConfigNotice(tokens=(data.decode(),))
    return _config_notice_decoder.decode(data)


class IngestRecord(msgspec.Struct, array_like=True, gc=False):
    """One captured request, as the edge writes it to the ingest stream (msgpack, positional fields).

    The stream entry's field ``r`` holds a msgpack array of these: every request that arrived while the
    previous write was in flight goes out in one XADD, which is what lets the edge keep up at high volume.
    Append new fields at the end with defaults, so older entries still decode during a rolling deploy.
    """

    id: str
    endpoint_id: str
    received_at_us: int
    """Unix time in microseconds, taken by the edge when the request arrived."""
    method: str
    path: str
    """Sub-path after the ingest token ('' when none), without the leading slash, as the sender wrote it
    (ASGI ``raw_path``: percent escapes kept, never decoded); any byte outside printable ASCII is
    percent-encoded (``shared.uri.uri_text``), so it is always text Postgres can hold. The flush stores
    the event's path with the slash, ``"/" + path`` (the edge's hot path does not pay for it, and entries
    written by any edge version read the same)."""
    query: str
    """Query string without the ``?`` ('' when none), as the sender wrote it (ASGI ``query_string``), with
    the same encoding as ``path``."""
    headers: list[tuple[bytes, bytes]]
    """Raw, in arrival order, names lowercased (as ASGI delivers them), repeats kept; decoded by the worker,
    not on the edge's hot path."""
    body: bytes
    source_ip: str | None
    provider: str | None = None
    event_type: str | None = None
    idempotency_key: str | None = None
    signature_valid: bool | None = None
    signature_failure_reason: str | None = None
    ip_allowed: bool | None = None
    traceparent: str | None = None  # traced
    """The W3C ``traceparent`` of the edge's ingest span (its trace is the event's: ``shared.tracing``); None
    when the edge does not trace, and in records of edges before it did."""
    handshake: bool = False
    """A provider's handshake the edge answered (``shared.providers.handshake``): stored, never delivered."""


_records_encoder = msgspec.msgpack.Encoder()
_records_decoder = msgspec.msgpack.Decoder(list[IngestRecord])


def encode_records(records: list[IngestRecord]) -> bytes:
    return _records_encoder.encode(records)


def decode_records(data: bytes) -> list[IngestRecord]:
    """Raises ``msgspec.DecodeError``/``ValidationError`` on a malformed entry (the worker dead-letters it)."""
    return _records_decoder.decode(data)
