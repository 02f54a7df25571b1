"""What the edge decides about a request before storing it: allowlist, signature, attribution.

``ServedEndpoint`` is an endpoint's config compiled once per cache fill (CIDRs parsed into networks), so
the per-request work is a membership test and, when verification is on, one HMAC.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from shared.attribution import Attribution, attribute
from shared.keys import Keys
from shared.signatures import verify
from shared.wire import EdgeEndpoint

__all__ = ("Decision", "ServedEndpoint", "decide", "header_map")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class ServedEndpoint:
    """Also what the hot path would otherwise recompute per request: the shard, whether to verify."""

    __slots__ = ("config", "networks", "shard", "verifies")

    def __init__(self, config: EdgeEndpoint, keys: Keys) -> None:
        self.config = config
        self.networks: tuple[IPNetwork, ...] = tuple(_network(c) for c in config.allowlist)
        self.shard = keys.shard_for(config.endpoint_id)
        self.verifies = bool(config.auth.hmac_enabled and config.auth.secret)

    def ip_allowed(self, ip: str | None) -> bool | None:
        """None when the endpoint has no allowlist (nothing was checked); else whether an entry covers ip."""
        if not self.networks:
            return None
        if ip is None:
            return False
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return any(addr in net for net in self.networks)


def _network(cidr: str) -> IPNetwork:
    net = ipaddress.ip_network(cidr, strict=False)
    if isinstance(net, ipaddress.IPv6Network) and net.network_address.ipv4_mapped is not None:
        mapped = net.network_address.ipv4_mapped
        return ipaddress.ip_network(f"{mapped}/{max(0, net.prefixlen - 96)}", strict=False)
    return net


def header_map(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}


Decision = tuple[Attribution, bool | None, str | None, bool]
"""(attribution, signature_valid, failure reason, refuse): a plain tuple, built once per request."""


def decide(served: ServedEndpoint, headers: Mapping[str, str], body: bytes, now: float) -> Decision:
    """Attribution always; the signature only with ``hmac_enabled`` (else ``signature_valid`` is None).

    ``refuse`` is set when the signature failed and the endpoint rejects failures: nothing is stored.
    """
    attribution = attribute(headers, body)
    if not served.verifies:
        return attribution, None, None, False
    auth = served.config.auth
    valid, reason, _ = verify(
        headers, body, auth.secret, tolerance_s=auth.tolerance_seconds, header_name=auth.header_name, now=now
    )
    return attribution, valid, reason, not valid and auth.on_failure == "reject"
