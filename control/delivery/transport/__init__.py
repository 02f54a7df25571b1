"""The outbound HTTP/1.1 transport: httpx's public transport interface over asyncio protocols.

Why our own: httpcore's pool looked at every connection on every request and every response close, and h11
sent a request in three writes; at a few thousand deliveries a second over a hundred kept-alive connections
that was most of the deliver worker's CPU. What delivery needs from HTTP is small: one request at a time per
connection, keep-alive per origin, Content-Length, chunked and read-until-close response bodies, no
redirects, no upgrades, and a connection made by a given ``Connector`` (the egress policy's, see
``control.delivery.egress``). It uses only httpx's public API (``AsyncBaseTransport``, ``Request``,
``Response``, ``AsyncByteStream`` and its exceptions), so no private internals pin the httpx version.

One module per idea, as httpx's ``_transports/`` has its interface and its default transport apart:

- ``http11``: :class:`Transport`, one exchange (connection, request, interim responses, response) and the
  timeouts that bound each step;
- ``connection``: one TCP or TLS connection as an asyncio protocol (buffer, waits with timers, backpressure);
- ``pool``: kept-alive connections per origin under one bound;
- ``body``: a response body streamed off its connection, which it returns to the pool or closes;
- ``messages``: HTTP/1.1 syntax (request head, response head, body framing), pure.

A response body left unread (a capped read, an error) closes its connection unless the rest of it has
already arrived, so a reused connection never starts in the middle of an old body.
"""

from __future__ import annotations

from control.delivery.transport.connection import MAX_HEAD, Connector, TlsProfile
from control.delivery.transport.http11 import Transport

__all__ = ("MAX_HEAD", "Connector", "TlsProfile", "Transport")
