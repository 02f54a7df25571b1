"""Where outbound requests may go: ``HOOKYARD_EGRESS=public`` refuses internal addresses, ``any`` allows all.

The check runs on the address a connection is actually made to, not on the URL's host name: the network
backend resolves the name itself, refuses if any usable address is internal, connects to the checked IP
literal (so nothing resolves the name a second time: DNS rebinding has no second answer to swap in), and
checks the socket's peer address once more before a byte is sent. TLS still verifies the host name, which
httpcore passes separately from the address it connects to. Connections use the asyncio backend of
``control.delivery.netstream`` in both modes. Proxies from the environment are ignored
(``trust_env=False``): through a proxy the connected address would be the proxy's.

Refused (``public``): loopback, private (RFC 1918, ULA), link-local, CGNAT 100.64/10, multicast,
unspecified, reserved and every other non-global range, cloud metadata (169.254.169.254,
fd00:ec2::254), and IPv6 forms that embed such an IPv4 address (mapped, 6to4, NAT64).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from control.delivery.netstream import AsyncioBackend

__all__ = ("EgressRefusedError", "client", "refusal")

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class EgressRefusedError(Exception):
    """The destination resolves to an address the egress policy forbids; a permanent failure."""


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(address: str) -> str | None:
    """Why ``public`` egress refuses this IP address, or None when it may be connected to."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address) and (v4 := _embedded_v4(ip)) is not None:
        reason = refusal(str(v4))
        return None if reason is None else f"{reason} (embedded in {ip})"
    if ip in _METADATA:
        kind = "a cloud metadata address"
    elif ip.is_loopback:
        kind = "a loopback address"
    elif ip.is_unspecified:
        kind = "the unspecified address"
    elif ip.is_link_local:
        kind = "a link-local address"
    elif ip.is_multicast:
        kind = "a multicast address"
    elif isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        kind = "a CGNAT (100.64/10) address"
    elif ip.is_private:
        kind = "a private address"
    elif ip.is_reserved or not ip.is_global:
        kind = "a reserved or non-global address"
    else:
        return None
    return f"{ip} is {kind}"


def _refused(address: str) -> EgressRefusedError:
    return EgressRefusedError(f"egress refused: {refusal(address)} (HOOKYARD_EGRESS=public)")


class _Backend(httpcore.AsyncNetworkBackend):
    """The asyncio backend, behind a resolve-check-connect-check step when ``public``."""

    def __init__(self, *, public: bool) -> None:
        self._inner = AsyncioBackend()
        self._public = public

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if not self._public:
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        try:
            async with asyncio.timeout(timeout):
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout}s") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            if refusal(address) is not None:
                # One internal answer refuses the name: picking only the public ones would let a name that
                # mixes both probe whether the internal one is up.
                raise _refused(address)
        last: Exception = httpcore.ConnectError(f"{host} resolved to no address")
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            peer = stream.get_extra_info("server_addr")
            if peer is None or refusal(str(peer[0])) is not None:
                await stream.aclose()
                raise _refused(str(peer[0]) if peer else address)
            return stream
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise EgressRefusedError("egress refused: Unix sockets are never a destination")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _Transport(httpx.AsyncHTTPTransport):
    """httpx's own transport (request mapping, exception mapping, response streams) over a connection pool
    with our backend. httpx 0.28 has no ``network_backend`` argument yet (encode/httpx#3749), so the pool
    it built is replaced by an identical one that has it."""

    def __init__(self, *, limits: httpx.Limits, public: bool, ssl_context: ssl.SSLContext | None) -> None:
        super().__init__(limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Backend(public=public),
        )


def client(
    egress: str,
    *,
    timeout_s: float,
    connect_timeout_s: float,
    max_connections: int,
    ssl_context: ssl.SSLContext | None = None,
) -> httpx.AsyncClient:
    """The outbound client: pooled, no redirects, no proxies from the environment, egress checked.

    ``timeout_s`` bounds each read and write; callers bound the whole exchange themselves (httpx has no
    total timeout). ``ssl_context`` replaces the default verification (certifi's CAs), for tests.
    """
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx.AsyncClient(
        transport=_Transport(limits=limits, public=egress == "public", ssl_context=ssl_context),
        timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
        follow_redirects=False,
        trust_env=False,
    )
