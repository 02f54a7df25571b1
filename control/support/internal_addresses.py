"""Which addresses ``HOOKYARD_EGRESS=public`` refuses, and which URL hosts reveal one as written.

One classification for both moments: ``control.delivery.egress`` refuses at connect time the address a
name resolved to (the real guard), and ``control.support.url_checks`` refuses at write time a host that is
already such an address (an IP literal, ``localhost``), so the tenant hears at create, not after its events
fail. Saying why at write time tells the caller only what it wrote: no name is resolved here.

Refused: loopback, private (RFC 1918, ULA), link-local, CGNAT 100.64/10, multicast, unspecified, reserved
and every other non-global range, cloud metadata (169.254.169.254, fd00:ec2::254), and IPv6 forms that embed
such an IPv4 address (mapped, 6to4, NAT64).
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ("refusal", "written_refusal")

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


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


def written_refusal(host: str) -> str | None:
    """Why ``public`` egress will refuse a URL with this host (as ``httpx.URL(...).host`` gives it), when the
    host alone says so; None for any other name, which only resolving it could tell (at connect time)."""
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return f"{name} is a loopback name (RFC 6761)"
    try:
        return refusal(host)
    except ValueError:
        pass
    try:  # the older IPv4 forms the resolver reads as numbers too: 127.1, 2130706433, 0x7f.1
        packed = socket.inet_aton(host)
    except OSError:
        return None
    ip = socket.inet_ntoa(packed)
    reason = refusal(ip)
    return None if reason is None else reason.replace(ip, f"{host} ({ip})", 1)
