"""Handshakes answered at the edge: the requests a provider sends before it agrees to deliver to a URL.

Pure: given the request and the endpoint's secret and verify token, the answer the provider expects, or
None when the request is not that provider's handshake (or a keyed one whose key is not set or does not
match: it is then captured as any request, and the provider sees the ordinary answer). The edge stores the
request first, marked as a handshake, and answers only once it is durable, like every acknowledgement.

Echoed values are bounded (:data:`MAX_ECHO`) and go back as ``text/plain`` with ``nosniff`` or inside
JSON encoded by msgspec, so a challenge can never become markup in a browser.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Final, NamedTuple, TypeGuard
from urllib.parse import parse_qsl

import msgspec

from shared.headers import RawHeaders
from shared.providers.model import Provider
from shared.providers.values import Body

__all__ = ("MAX_ECHO", "Answer", "answer")

MAX_ECHO: Final = 2048
"""The longest challenge echoed; a longer one is not a handshake."""
_TEXT: Final = ((b"content-type", b"text/plain; charset=utf-8"), (b"x-content-type-options", b"nosniff"))
_JSON: Final = ((b"content-type", b"application/json"),)


class Answer(NamedTuple):
    kind: str
    """The handshake kind (``shared.providers.model.HANDSHAKES``): the event type it is stored under."""
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


def _query(query: bytes) -> dict[str, str]:
    return dict(parse_qsl(query.decode("latin-1"), keep_blank_values=True))


def _ok(text: object) -> TypeGuard[str]:
    return isinstance(text, str) and 0 < len(text) <= MAX_ECHO


def _text(kind: str, text: str, extra: tuple[tuple[bytes, bytes], ...] = ()) -> Answer:
    return Answer(kind, _TEXT + extra, text.encode("utf-8", "surrogatepass"))


def _json(kind: str, value: object) -> Answer:
    return Answer(kind, _JSON, msgspec.json.encode(value))


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def _mac(secret: str, message: str) -> bytes:
    return hmac.new(
        secret.encode("utf-8", "surrogatepass"), message.encode("utf-8", "surrogatepass"), "sha256"
    ).digest()


def answer(
    provider: Provider,
    method: str,
    query: bytes,
    headers: RawHeaders,
    body: Body,
    secret: str | None,
    verify_token: str | None,
) -> Answer | None:
    """The answer to ``provider``'s handshake, or None when this request is not one (see the module)."""
    kind = provider.handshake
    if kind is None:
        return None
    value = body.value if method == "POST" else None
    fields = value if isinstance(value, dict) else {}
    if kind == "slack_url_verification":
        challenge = fields.get("challenge")
        if fields.get("type") == "url_verification" and _ok(challenge):
            return _text(kind, challenge)
    elif kind == "body_challenge_echo":
        challenge = fields.get("challenge")
        if _ok(challenge):
            return _json(kind, {"challenge": challenge})
    elif kind == "zoom_url_validation":
        payload = fields.get("payload")
        plain = payload.get("plainToken") if isinstance(payload, dict) else None
        if fields.get("event") == "endpoint.url_validation" and _ok(plain) and secret:
            return _json(kind, {"plainToken": plain, "encryptedToken": _mac(secret, plain).hex()})
    elif kind == "discord_ping":
        if fields.get("type") == 1:
            return _json(kind, {"type": 1})
    elif kind == "twitch_callback_verification":
        challenge = fields.get("challenge")
        if headers.get(b"twitch-eventsub-message-type") == b"webhook_callback_verification" and _ok(challenge):
            return _text(kind, challenge)
    elif kind == "asana_hook_secret":
        hook_secret = headers.get(b"x-hook-secret")
        if hook_secret and len(hook_secret) <= MAX_ECHO:
            return Answer(kind, ((b"x-hook-secret", hook_secret),), b"")
    elif kind == "okta_verification":
        challenge = headers.get(b"x-okta-verification-challenge")
        if method == "GET" and challenge and len(challenge) <= MAX_ECHO:
            return _json(kind, {"verification": challenge.decode("latin-1")})
    else:
        return _query_handshake(kind, method, _query(query), secret, verify_token)
    return None


def _query_handshake(
    kind: str, method: str, params: dict[str, str], secret: str | None, token: str | None
) -> Answer | None:
    if kind == "meta_hub_challenge":
        challenge, given = params.get("hub.challenge"), params.get("hub.verify_token", "")
        asked = method == "GET" and params.get("hub.mode") == "subscribe" and _ok(challenge) and bool(token)
        if asked and _ok(challenge) and hmac.compare_digest(_digest(given), _digest(token or "")):
            return _text(kind, challenge)
    elif kind == "graph_validation_token":
        challenge = params.get("validationToken")
        if _ok(challenge):
            return _text(kind, challenge)
    elif kind == "dropbox_challenge":
        challenge = params.get("challenge")
        if method == "GET" and _ok(challenge):
            return _text(kind, challenge)
    elif kind == "x_crc":
        crc = params.get("crc_token")
        if method == "GET" and _ok(crc) and secret:
            return _json(kind, {"response_token": "sha256=" + base64.b64encode(_mac(secret, crc)).decode()})
    return None
