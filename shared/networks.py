"""Whether an address is in a set of networks, an IPv4-mapped IPv6 address counting as the IPv4 address it is.

A dual-stack socket reports an IPv4 peer as ``::ffff:203.0.113.7``, and a proxy may write either form in
``X-Forwarded-For``, while configured ranges are usually IPv4 (``203.0.113.0/24``). An IPv6 address is never
in an IPv4 network, so without unmapping the two never meet and an allowed sender is refused. Shared because
the edge's allowlist (``edge.trust``) and the trusted proxies of both planes (``shared.clientip``) must read
an address the same way.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

__all__ = ("IPNetwork", "address", "covers", "network")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def network(cidr: str) -> IPNetwork:
    """The range ``cidr`` names (host bits cleared); an IPv4-mapped IPv6 range (``::ffff:10.0.0.0/104``) is
    the IPv4 range it covers (``10.0.0.0/8``), so it matches the addresses :func:`address` unmaps."""
    net = ipaddress.ip_network(cidr, strict=False)
    if isinstance(net, ipaddress.IPv6Network) and net.network_address.ipv4_mapped is not None:
        mapped = net.network_address.ipv4_mapped
        return ipaddress.ip_network(f"{mapped}/{max(0, net.prefixlen - 96)}", strict=False)
    return net


def address(text: str) -> IPAddress | None:
    """The address ``text`` names, an IPv4-mapped one as its IPv4 address; None when it names none."""
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def covers(networks: Iterable[IPNetwork], text: str) -> bool:
    """Whether the address ``text`` (as a socket or a header gives it) is in one of ``networks``; False when
    ``text`` is not an address."""
    addr = address(text)
    return addr is not None and any(addr in net for net in networks)
