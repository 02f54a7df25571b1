"""The headers that authenticate a request to a destination, and what the delivery record shows of them.

Static kinds (``basic``, ``bearer``, ``header``) are headers computed once per configuration; OAuth2 adds
``authorization: Bearer <token>`` per request (``control.delivery.auth.oauth2``). They are laid over every
other header, after the transform and the signature: tenant code never sees a credential, and a captured
``authorization`` of the provider's never reaches a destination that has its own.

Recorded headers (``deliveries.request_headers``, the replay's ``sent_headers``) carry ``[redacted]`` in their
place: the ``authorization`` scheme word stays (``Basic [redacted]``), so a record still says what was sent.
"""

from __future__ import annotations

import base64
from collections.abc import Collection

from control.records.destination_auth import BasicAuth, BearerAuth, DestinationAuth, HeaderAuth

__all__ = ("REDACTED", "redacted", "static_headers")

REDACTED = "[redacted]"


def static_headers(auth: DestinationAuth) -> dict[str, str]:
    """The headers a static kind sends (names lowercased); none for OAuth2 and mTLS."""
    if isinstance(auth, BasicAuth):
        pair = f"{auth.username}:{auth.password}".encode()
        return {"authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
    if isinstance(auth, BearerAuth):
        return {"authorization": f"Bearer {auth.token}"}
    if isinstance(auth, HeaderAuth):
        return {auth.name.lower(): auth.value}
    return {}


def redacted(sent: dict[str, str], names: Collection[str]) -> dict[str, str]:
    """``sent`` with the values of ``names`` replaced (in place, and returned)."""
    for name in names:
        value = sent.get(name)
        if value is None:
            continue
        scheme, space, _ = value.partition(" ")
        sent[name] = f"{scheme} {REDACTED}" if name == "authorization" and space else REDACTED
    return sent
