"""Records that cross Redis between control, workers and the edge.

``EdgeEndpoint`` is what control writes under ``Keys.endpoint_config(token)`` and the edge reads to serve
that token: everything the hot path needs, nothing it must look up elsewhere. It is rebuilt from Postgres
(the source of truth) on every change and by the sweep, so losing Redis never loses configuration.

>>> cfg = EdgeEndpoint(endpoint_id="ep_1", account_id="acct_1", environment="production")
>>> decode_edge_endpoint(encode(cfg)) == cfg
True
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ("EdgeAuth", "EdgeEndpoint", "decode_edge_endpoint", "encode")


class EdgeAuth(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    hmac_enabled: bool = False
    secret: str | None = None
    header_name: str | None = None
    tolerance_seconds: int = 300
    on_failure: Literal["reject", "accept_log"] = "reject"
    log_blocked_ips: bool = False


class EdgeEndpoint(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    endpoint_id: str
    account_id: str
    environment: str
    expires_at: float | None = None
    """Unix seconds after which the edge answers 410 (temporary endpoints)."""
    auth: EdgeAuth = EdgeAuth()
    allowlist: tuple[str, ...] = ()
    """CIDRs; empty allows every source, non-empty denies by default."""


_encoder = msgspec.json.Encoder()
_edge_endpoint_decoder = msgspec.json.Decoder(EdgeEndpoint)


def encode(obj: msgspec.Struct) -> bytes:
    return _encoder.encode(obj)


def decode_edge_endpoint(data: bytes) -> EdgeEndpoint:
    return _edge_endpoint_decoder.decode(data)
