"""The edge's step for a catalog provider beyond the four kinds: attribution, its scheme's check and its
handshake.

Off the four kinds' path: ``edge.ingest`` comes here only for an endpoint whose ``provider`` is set or a
request that the four kinds' attribution left unattributed and whose headers name a catalog provider (one
set intersection and one dict lookup, ``shared.providers.recognise``). A handshake that providers send
unsigned (a GET challenge, Asana's first POST, Microsoft Graph's validation) is answered without a check;
a signed one (Slack, Zoom, Twitch, Discord) only when its signature is not refused.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from edge.trust import ServedEndpoint
from shared.attribution import Attribution
from shared.headers import RawHeaders, header_text
from shared.providers.handshake import Answer, answer
from shared.providers.model import Provider
from shared.providers.recognise import attribute_as
from shared.providers.values import Body
from shared.providers.verify import Request
from shared.signatures import MALFORMED_HEADER
from shared.uri import uri_text

__all__ = ("REFUSED", "Settled", "public_url", "send_answer", "send_custom", "settle")

_UNSIGNED: Final = frozenset(
    {
        "meta_hub_challenge",
        "graph_validation_token",
        "dropbox_challenge",
        "x_crc",
        "asana_hook_secret",
        "okta_verification",
    }
)


REFUSED: Final = Answer("refused", (), b"")
"""The answer of a signed handshake whose signature failed: stored (never routed), then 401."""


class Settled(NamedTuple):
    attribution: Attribution
    signature_valid: bool | None
    reason: str | None
    answer: Answer | None
    """The handshake's answer, sent once the request is stored; None for an ordinary request."""


def public_url(scope: dict[str, Any], headers: RawHeaders, base: str | None = None) -> str:
    """The URL the sender posted to, as schemes that sign it (Twilio, Square, HubSpot, Trello) see it: under
    ``base`` (``HOOKYARD_PUBLIC_EDGE_URL``) when the deployment sets it, else the proxy's
    ``x-forwarded-proto``/``-host`` when present, else the request's own scheme and ``host``."""
    query = scope.get("query_string", b"")
    if base:
        url = base
    else:
        proto = headers.get(b"x-forwarded-proto") or scope.get("scheme", "http").encode()
        host = headers.get(b"x-forwarded-host") or headers.get(b"host") or b""
        url = f"{header_text(proto.split(b',')[0].strip())}://{header_text(host.split(b',')[0].strip())}"
    url += uri_text(scope["raw_path"])
    return url + ("?" + uri_text(query) if query else "")


def settle(
    served: ServedEndpoint,
    provider: Provider,
    scope: dict[str, Any],
    headers: RawHeaders,
    raw: bytes,
    now: float,
    base: str | None = None,
) -> Settled:
    """``provider``'s attribution, check and handshake for one request; ``base`` is the public edge URL."""
    body = Body(headers, raw)
    attribution = attribute_as(provider, headers, body)
    method = scope["method"]
    found = answer(provider, method, scope.get("query_string", b""), headers, body, served.secret, served.verify_token)
    if found is not None:
        attribution = Attribution(provider.name, found.kind, attribution.idempotency_key)
        if found.kind in _UNSIGNED:
            return Settled(attribution, None, None, found)
    if served.secret is None:
        return Settled(attribution, None, None, found)
    check = served.catalog_check(provider)
    reason: str | None
    if len(scope["headers"]) != len(headers) and _repeats_a_signed_header(provider, scope["headers"]):
        # The stored event joins both copies: no single copy may decide (as for the four kinds).
        valid, reason = False, MALFORMED_HEADER
    else:
        url = public_url(scope, headers, base) if check.needs_url else ""
        valid, reason, _ = check(Request(headers, body, method, url), now)
    if not valid and found is not None:
        # A signed handshake that fails its check is never answered as one, whatever on_failure says: a
        # provider (Discord) probes with a bad signature and registers the URL only if that is refused.
        return Settled(attribution, False, reason, REFUSED)
    if not valid and not served.checks:  # verification off: only a proof is recorded
        return Settled(attribution, None, None, found)
    return Settled(attribution, valid, reason, found)


def _repeats_a_signed_header(provider: Provider, pairs: list[tuple[bytes, bytes]]) -> bool:
    """Whether a header the provider's check reads (signature, timestamp, id) arrived more than once."""
    scheme = provider.scheme
    read = {name.encode() for name in (scheme.header, scheme.timestamp_header, scheme.id_header) if name}
    seen: set[bytes] = set()
    for name, _ in pairs:
        if name in read and name in seen:
            return True
        seen.add(name)
    return False


async def send_answer(send: Any, found: Answer, event_id: bytes) -> None:
    """A handshake's answer: 200, its own headers and body, and the stored event's id like every 2xx."""
    headers = [*found.headers, (b"content-length", str(len(found.body)).encode()), (b"x-hookyard-event-id", event_id)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": found.body})


async def send_custom(send: Any, response: tuple[int, tuple[bytes, bytes], bytes], event_id: bytes) -> None:
    """The endpoint's own answer to a stored request (a 2xx, its content type and body), with the event's id."""
    status, content_type, body = response
    headers = [content_type, (b"content-length", str(len(body)).encode()), (b"x-hookyard-event-id", event_id)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
