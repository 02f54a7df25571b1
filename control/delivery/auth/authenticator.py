"""Sending with a destination's authentication: its headers, its OAuth2 token, its TLS settings.

A claimed task carries its destination's ``auth_digest`` (a digest of ``auth`` and ``tls_ca``, null when it
has neither), not the secrets: the worker keeps what it built per (destination, digest) and loads the sealed
material only on a miss (``load``, which the caller gives: ``control.delivery.auth.material.load_material``), as
transforms are kept per digest. A PATCH is a new digest, so the next attempt uses the new credentials. A
destination without either costs one ``None`` check and nothing else.

OAuth2: a cached token is sent; none cached (or expired) fetches one first; a 401 answer to a cached token
fetches a new one and sends once more, within the same attempt and its timeout. Every fetch is listed in the
attempt's record (``auth.token_fetches``), and a failed fetch is the attempt's error (retried on the
schedule, as any failure; permanent only when the egress policy refuses the token endpoint).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import msgspec

from control.delivery.auth.headers import redacted, static_headers
from control.delivery.auth.oauth2 import TokenFetch, TokenFetchError, Tokens
from control.delivery.auth.tls import TlsProfiles
from control.delivery.send import Outcome, merge, send
from control.delivery.transport import TlsProfile, Transport
from control.records.destination_auth import DestinationAuth, HeaderAuth, MtlsAuth, OAuth2ClientCredentials
from shared.bytes_lru import BytesLRU

__all__ = ("AuthMaterial", "Authenticator", "Prepared")

MAX_PREPARED_BYTES = 8 * 1024 * 1024
"""What the prepared destinations of one process may weigh (headers and OAuth2 settings are tenant text)."""


@dataclass(frozen=True, slots=True)
class AuthMaterial:
    """A destination's authentication, opened: what ``load`` returns."""

    digest: str
    auth: DestinationAuth | None
    tls_ca: str | None


@dataclass(frozen=True, slots=True)
class Prepared:
    """What sending to the destination takes, built once per (destination, digest)."""

    key: tuple[str, str]
    auth_type: str | None
    headers: dict[str, str]
    redact: frozenset[str]
    tls: TlsProfile | None
    oauth2: OAuth2ClientCredentials | None


def _weight(prepared: Prepared) -> int:
    """Its own text (headers, OAuth2 settings); the TLS context is weighed where it is kept (``tls``)."""
    text = sum(len(k) + len(v) for k, v in prepared.headers.items())
    if prepared.oauth2 is not None:
        text += len(msgspec.json.encode(prepared.oauth2))
    return 512 + text


Loader = Callable[[str], Awaitable[AuthMaterial | None]]


class Authenticator:
    """Per process: prepared destinations, TLS contexts and OAuth2 tokens, each bounded."""

    def __init__(
        self,
        load: Loader,
        *,
        now: Callable[[], float] = time.monotonic,
        tokens: Tokens | None = None,
        tls: TlsProfiles | None = None,
    ) -> None:
        self.load = load
        self.tokens = tokens or Tokens(now=now)
        self.tls = tls or TlsProfiles()
        self._prepared: BytesLRU[tuple[str, str], Prepared] = BytesLRU(MAX_PREPARED_BYTES, size=_weight)

    async def prepare(self, destination_id: str, digest: str) -> Prepared | None:
        """What sending needs for this version of the destination; None when it has neither ``auth`` nor
        ``tls_ca`` any more (changed or deleted meanwhile: sent as a destination without them)."""
        key = (destination_id, digest)
        found = self._prepared.get(key)
        if found is not None:
            return found
        material = await self.load(destination_id)
        if material is None:
            return None
        prepared = self.build(destination_id, material)
        for k in {key, prepared.key}:
            self._prepared.put(k, prepared)
        return prepared

    def build(self, destination_id: str, material: AuthMaterial) -> Prepared:
        auth = material.auth
        mtls = auth if isinstance(auth, MtlsAuth) else None
        tls = self.tls.get(material.tls_ca, mtls.certificate if mtls else None, mtls.private_key if mtls else None)
        headers = static_headers(auth) if auth is not None else {}
        oauth2 = auth if isinstance(auth, OAuth2ClientCredentials) else None
        redact = {"authorization"} if oauth2 is not None or headers.keys() == {"authorization"} else set()
        if isinstance(auth, HeaderAuth):
            redact.add(auth.name.lower())
        return Prepared(
            key=(destination_id, material.digest),
            auth_type=None if auth is None else type(auth).__struct_config__.tag,  # type: ignore[arg-type]  # str tags
            headers=headers,
            redact=frozenset(redact),
            tls=tls,
            oauth2=oauth2,
        )

    async def send(
        self,
        transport: Transport,
        prepared: Prepared,
        method: str,
        url: str,
        headers: dict[str, str],
        body: bytes,
        *,
        total_timeout_s: float,
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """One authenticated attempt (a second request only after a 401 to a cached OAuth2 token), all of it
        within ``total_timeout_s``: (the outcome with its credentials redacted, what authentication did for the
        record: None unless a token was fetched)."""
        deadline = time.monotonic() + total_timeout_s

        def left() -> float:
            return max(0.001, deadline - time.monotonic())

        sending = merge(headers, prepared.headers)
        fetches: list[TokenFetch] = []
        config, token = prepared.oauth2, None
        if config is not None:
            token, reason = self.tokens.cached(prepared.key)
            if token is None:
                token, failed = await self._fetch(transport, prepared, config, fetches, left(), reason)
                if failed is not None:
                    return failed, _record(prepared, fetches, retried=False)
            sending["authorization"] = f"Bearer {token.value}"
        outcome = await send(transport, method, url, sending, body, total_timeout_s=left(), tls=prepared.tls)
        retried = False
        if outcome.status == 401 and config is not None and token is not None and not fetches:
            self.tokens.forget(prepared.key, token.value)
            reason = "the destination answered 401"
            token, failed = await self._fetch(transport, prepared, config, fetches, left(), reason)
            if failed is not None:
                return failed, _record(prepared, fetches, retried=False)
            sending["authorization"] = f"Bearer {token.value}"
            outcome = await send(transport, method, url, sending, body, total_timeout_s=left(), tls=prepared.tls)
            retried = True
        redacted(outcome.sent_headers, prepared.redact)
        return outcome, _record(prepared, fetches, retried=retried) if config is not None else None

    async def _fetch(
        self,
        transport: Transport,
        prepared: Prepared,
        config: OAuth2ClientCredentials,
        fetches: list[TokenFetch],
        timeout_s: float,
        reason: str,
    ) -> tuple[Any, Outcome | None]:
        """(a token, None), or (None, the attempt's outcome: no token)."""
        started = time.time()
        try:
            token, fetch = await self.tokens.fetch(prepared.key, transport, config, timeout_s=timeout_s, reason=reason)
        except TokenFetchError as exc:
            fetches.append(TokenFetch(reason=reason, status=None, latency_ms=0, error=str(exc)))
            return None, Outcome(status=None, latency_ms=0, sent_headers={}, error=str(exc), permanent=True)
        if fetch is not None:
            fetches.append(fetch)
        if token is None:
            why = fetch.error if fetch is not None else "a concurrent fetch for this destination failed"
            latency = fetch.latency_ms if fetch is not None else 0
            error = f"oauth2: no token from the token endpoint ({why})"
            return None, Outcome(status=None, latency_ms=latency, sent_headers={}, error=error, started_at=started)
        return token, None


def _record(prepared: Prepared, fetches: list[TokenFetch], *, retried: bool) -> dict[str, Any]:
    """The ``deliveries.auth`` value of an OAuth2 attempt (``control.records.deliveries.AuthRecord``)."""
    return {
        "type": prepared.auth_type,
        "token_fetches": [asdict(f) for f in fetches],
        "retried_after_401": retried,
    }
