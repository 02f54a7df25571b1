"""OAuth 2.0 client credentials (RFC 6749 section 4.4): tokens fetched from the destination's token endpoint,
cached until they expire, fetched again when the destination refuses one.

The token request and the parsing of its answer are ``oauthlib``'s (``BackendApplicationClient``: the form
body, the JSON answer, the error answers with their ``error`` and ``error_description``); the request goes
through the delivery transport, so the token endpoint is reached under the egress policy like any
destination, with the same timeouts. The client authenticates with HTTP Basic (``client_auth: basic``, the
RFC's default, id and secret form-encoded first as section 2.3.1 says) or in the form (``body``).

The cache (:class:`Tokens`) is per process, keyed by destination and configuration (a PATCH of the
credentials is a new key), bounded in entries and bytes; a token is used until ``REFRESH_MARGIN`` before its
``expires_in`` ends (``MAX_UNTOLD_S`` when the server does not say). Concurrent deliveries that find no token
share one fetch. What a fetch did (why, status, time, lifetime, error) goes into the delivery record; the
token itself goes nowhere but the request's ``authorization`` header, whose recorded value is redacted.
"""

from __future__ import annotations

import asyncio
import base64
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from control.delivery.send import send
from control.delivery.transport import Transport
from control.records.destination_auth import OAuth2ClientCredentials
from control.records.storable import storable
from shared.errors import TokenFetchError

__all__ = ("MAX_UNTOLD_S", "REFRESH_MARGIN", "Token", "TokenFetch", "TokenFetchError", "Tokens", "fetch_token")

REFRESH_MARGIN = 0.1
"""A token is fetched again once this share of its lifetime is left (at least 1 s, at most 60 s)."""
MAX_UNTOLD_S = 3600.0
"""How long a token whose answer has no ``expires_in`` is used (unless the destination refuses it first)."""
MAX_TOKENS = 4096
MAX_TOKEN_BYTES = 8 * 1024 * 1024


@dataclass(slots=True)
class TokenFetch:
    """One request to the token endpoint, as the delivery record shows it (``auth.token_fetches``)."""

    reason: str
    """``no token cached``, ``token expired`` or ``the destination answered 401``."""
    status: int | None
    latency_ms: int
    expires_in: int | float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    expires_at: float
    """On the cache's clock."""


def _basic(client_id: str, client_secret: str) -> str:
    pair = f"{quote_plus(client_id)}:{quote_plus(client_secret)}"
    return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


async def fetch_token(
    transport: Transport, config: OAuth2ClientCredentials, *, timeout_s: float, reason: str
) -> tuple[str | None, float | None, TokenFetch]:
    """(token, seconds it lives for as the server said, what the fetch did); token None when it failed."""
    # Here, not at the top: oauthlib (62 modules) is only needed by a destination with OAuth2, and every
    # control worker and `hookyard worker` imported it at start (issue 44: start-up CPU).
    from oauthlib.oauth2 import BackendApplicationClient, OAuth2Error

    client = BackendApplicationClient(config.client_id)
    fields: dict[str, Any] = {}
    if config.scope is not None:
        fields["scope"] = config.scope
    if config.audience is not None:
        fields["audience"] = config.audience
    headers = {"content-type": "application/x-www-form-urlencoded", "accept": "application/json"}
    if config.client_auth == "basic":
        headers["authorization"] = _basic(config.client_id, config.client_secret)
        body = client.prepare_request_body(include_client_id=False, **fields)
    else:
        body = client.prepare_request_body(include_client_id=True, client_secret=config.client_secret, **fields)
    outcome = await send(transport, "POST", config.token_url, headers, body.encode("utf-8"), total_timeout_s=timeout_s)
    fetch = TokenFetch(reason=reason, status=outcome.status, latency_ms=outcome.latency_ms)
    if outcome.status is None:
        fetch.error = storable(outcome.error)
        if outcome.permanent:
            raise TokenFetchError(f"oauth2 token endpoint: {outcome.error}", permanent=True)
        return None, None, fetch
    text = (outcome.response_body or b"").decode("utf-8", "replace")
    try:
        token = client.parse_request_body_response(text)
    except OAuth2Error as exc:
        detail = exc.error + (f": {exc.description}" if exc.description else "")  # type: ignore[operator]  # every OAuth2Error names its error
        fetch.error = storable(f"token endpoint answered {outcome.status} ({detail[:300]})")
        return None, None, fetch
    except (ValueError, Warning) as exc:
        fetch.error = storable(f"token endpoint answered {outcome.status} with no usable token ({str(exc)[:200]})")
        return None, None, fetch
    if not outcome.success:
        fetch.error = f"token endpoint answered {outcome.status}"
        return None, None, fetch
    kind = str(token.get("token_type", "bearer")).lower()  # absent: bearer, as most servers mean it
    if kind != "bearer":
        fetch.error = storable(f"token endpoint gave a token of type {kind[:40]!r}; only bearer tokens are sent")
        return None, None, fetch
    told = token.get("expires_in")
    if isinstance(told, bool) or not isinstance(told, int | float) or not 0 < told < math.inf:
        told = None  # absent, not a number (true is not 1 s) or not a lifetime: ``MAX_UNTOLD_S`` applies
    fetch.expires_in = told  # as the endpoint wrote it: 3600 stays 3600 in the record, not 3600.0
    return str(token["access_token"]), None if told is None else float(told), fetch


class Tokens:
    """Tokens by (destination, configuration digest); ``now`` is the clock expiry is judged by."""

    def __init__(
        self,
        *,
        now: Callable[[], float] = time.monotonic,
        max_tokens: int = MAX_TOKENS,
        max_bytes: int = MAX_TOKEN_BYTES,
    ) -> None:
        self.now = now
        self.max_tokens, self.max_bytes = max_tokens, max_bytes
        self._tokens: OrderedDict[tuple[str, str], Token] = OrderedDict()
        self.bytes = 0
        self._fetching: dict[tuple[str, str], tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}

    def cached(self, key: tuple[str, str]) -> tuple[Token | None, str]:
        """The usable token of ``key`` (None: fetch one), and why not when there is none."""
        token = self._tokens.get(key)
        if token is None:
            return None, "no token cached"
        if self.now() >= token.expires_at:
            self._drop(key)
            return None, "token expired"
        self._tokens.move_to_end(key)
        return token, ""

    def forget(self, key: tuple[str, str], value: str) -> None:
        """The destination refused this token: never use it again (a newer one stays)."""
        token = self._tokens.get(key)
        if token is not None and token.value == value:
            self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        token = self._tokens.pop(key, None)
        if token is not None:
            self.bytes -= len(token.value)

    def _keep(self, key: tuple[str, str], value: str, lifetime_s: float | None) -> Token:
        if lifetime_s is None:
            lifetime_s, margin = MAX_UNTOLD_S, 0.0
        else:
            margin = min(60.0, max(1.0, lifetime_s * REFRESH_MARGIN))
        token = Token(value=value, expires_at=self.now() + max(0.0, lifetime_s - margin))
        self._drop(key)
        self._tokens[key] = token
        self.bytes += len(value)
        while len(self._tokens) > self.max_tokens or (self.bytes > self.max_bytes and len(self._tokens) > 1):
            self._drop(next(iter(self._tokens)))
        return token

    async def fetch(
        self,
        key: tuple[str, str],
        transport: Transport,
        config: OAuth2ClientCredentials,
        *,
        timeout_s: float,
        reason: str,
    ) -> tuple[Token | None, TokenFetch | None]:
        """A new token for ``key``; a fetch already under way for it is shared (its caller records it, so
        this one's ``TokenFetch`` is None). TokenFetchError when the egress policy refuses the endpoint."""
        loop = asyncio.get_running_loop()
        running = self._fetching.get(key)
        if running is not None and running[0] is loop:
            token = await asyncio.shield(running[1])
            return token, None
        future: asyncio.Future[Any] = loop.create_future()
        self._fetching[key] = (loop, future)
        try:
            value, lifetime, fetch = await fetch_token(transport, config, timeout_s=timeout_s, reason=reason)
            token = None if value is None else self._keep(key, value, lifetime)
            future.set_result(token)
            return token, fetch
        except BaseException as exc:
            if isinstance(exc, Exception):
                future.set_exception(exc)
            else:
                future.cancel()
            future.exception() if not future.cancelled() else None  # retrieved: no "never retrieved" warning
            raise
        finally:
            if self._fetching.get(key, (None, None))[1] is future:
                del self._fetching[key]
