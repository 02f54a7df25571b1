"""Where outbound requests may go: ``HOOKYARD_EGRESS=public`` refuses internal addresses, ``any`` allows all.

The check runs on the address a connection is actually made to, not on the URL's host name: the connector
given to ``control.delivery.transport`` resolves the name itself, refuses if any usable address is
internal, connects to the checked IP literal (so nothing resolves the name a second time: DNS rebinding
has no second answer to swap in), and checks the socket's peer address once more before a byte is sent
(the TLS handshake included). TLS still verifies the URL's host name, which the transport passes
separately from the address connected to. Proxies from the environment are ignored (``trust_env=False``):
through a proxy the connected address would be the proxy's.

Refused (``public``): the ranges ``control.support.internal_addresses`` classifies (loopback, private,
link-local, CGNAT, metadata, IPv6 forms embedding those...). A URL whose host is already such an address
(an IP literal, ``localhost``) is refused earlier, when written (``control.support.url_checks``): that
says nothing the caller did not write. A name is only ever judged here.

What the caller learns (``public``): a refused address and a name that does not resolve are one answer,
``REFUSED``, word for word, and both are permanent failures. Anything else (which address a name resolved
to, which range refused it, whether the name exists) would let any account, a temporary token too, map the
internal network through replays and destination tests. The detail goes to the server log instead (host
and port only: the connector never sees a URL's user info, path or query). A connection that fails after a
public address was chosen names the host and port and the system's reason, never the address. A temporary
resolver failure (``EAI_AGAIN``) stays a retryable connection failure, without the address either: making
it permanent would turn every DNS hiccup into a lost delivery.

Under ``any`` nothing is refused, and connection errors keep their detail (the addresses tried): whoever
can send there can already reach every internal address and read its answers, so hiding them would
protect nothing and only slow down the local debugging ``any`` is for.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import ssl
from collections.abc import Callable

import httpx

from control.delivery.transport import Connector, Transport
from control.delivery.transport.timings import mark
from control.support.internal_addresses import refusal
from shared.errors import EgressRefusedError

__all__ = ("REFUSED", "client", "connector", "refusal")

log = logging.getLogger("hookyard.control.egress")

REFUSED = "egress refused: the host does not resolve to a public address (HOOKYARD_EGRESS=public)"
"""The one message of every refusal under ``public``: no host, no address, no reason (see above)."""


def _refused(host: str, port: int, detail: str) -> EgressRefusedError:
    """The caller's ``REFUSED``; the operator's log line with the detail (ids come from the log context)."""
    log.warning("egress refused: %s:%d %s", f"[{host}]" if ":" in host else host, port, detail)
    return EgressRefusedError(REFUSED)


async def _connect_any(
    host: str, port: int, factory: Callable[[], asyncio.Protocol]
) -> tuple[asyncio.Transport, asyncio.Protocol]:
    """What ``create_connection(factory, host, port)`` does (resolve, try each address in turn, the same
    errors), with the resolution apart so that a traced send times it (``transport.timings``)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    mark("resolved")
    if not infos:
        raise OSError("getaddrinfo() returned empty list")
    errors: list[OSError] = []
    for family, _, _, _, address in infos:
        try:
            return await loop.create_connection(factory, address[0], address[1], family=family)  # type: ignore[arg-type]  # an INET address: (host, port, ...)
        except OSError as exc:
            errors.append(exc)
    if len(errors) == 1 or len({str(e) for e in errors}) == 1:
        raise errors[0]
    raise OSError(f"Multiple exceptions: {', '.join(str(e) for e in errors)}")


async def _connect_public(
    host: str, port: int, factory: Callable[[], asyncio.Protocol]
) -> tuple[asyncio.Transport, asyncio.Protocol]:
    """Resolve, refuse if any answer is internal, connect to a checked address, check the peer again."""
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno == socket.EAI_AGAIN:
            log.info("egress: resolving %s failed for now (%s)", host, exc.strerror)
            raise OSError("the host name could not be resolved just now (a temporary DNS failure)") from None
        # Not "does not exist": that would tell an internal name (refused below) from an unknown one.
        raise _refused(host, port, f"does not resolve ({exc.strerror})") from None
    except OSError as exc:  # not an answer about the name: the resolver itself failed
        log.info("egress: resolving %s failed (%s)", host, exc)
        raise OSError("the host name could not be resolved just now (the resolver failed)") from None
    mark("resolved")
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise _refused(host, port, "resolved to no address")
    for address in addresses:
        if (reason := refusal(address)) is not None:
            # One internal answer refuses the name: picking only the public ones would let a name that
            # mixes both probe whether the internal one is up.
            raise _refused(host, port, f"resolved to {reason}")
    failure = "no address answered"
    for address in addresses:
        try:
            transport, protocol = await loop.create_connection(factory, address, port)
        except OSError as exc:
            # The system's reason without the address it quotes ("Connect call failed ('203.0.113.7', 443)").
            failure = os.strerror(exc.errno) if exc.errno else type(exc).__name__
            continue
        peer = transport.get_extra_info("peername")
        reason = refusal(str(peer[0])) if peer is not None else "an unknown peer"
        if reason is not None:
            transport.abort()
            raise _refused(host, port, f"connected to {reason}")
        return transport, protocol
    raise OSError(f"{host}:{port}: {failure}")


def connector(egress: str) -> Connector:
    """How the transport connects under this policy (``public`` or ``any``)."""
    return _connect_public if egress == "public" else _connect_any


@functools.cache
def _default_ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle takes milliseconds: once per process, not per client (replay makes one per call).
    return httpx.create_ssl_context(trust_env=False)


def client(
    egress: str,
    *,
    timeout_s: float,
    connect_timeout_s: float,
    max_connections: int,
    ssl_context: ssl.SSLContext | None = None,
) -> Transport:
    """The outbound transport (see ``control.delivery.send``): pooled, egress checked, no redirects, and no
    proxies from the environment (nothing reads them).

    ``timeout_s`` bounds each read and write and the wait for a free connection; callers bound the whole
    exchange themselves. ``ssl_context`` replaces the default verification (certifi's CAs), for tests.
    """
    return Transport(
        connector(egress),
        ssl_context=ssl_context or _default_ssl_context,
        timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
        max_connections=max_connections,
    )
