"""What the edge decides about a request before storing it: allowlist, signature, attribution.

``ServedEndpoint`` is an endpoint's config compiled once per cache fill (CIDRs parsed into networks), so
the per-request work is a membership test and, when verification is on, one HMAC.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from shared.attribution import Attribution, attribute
from shared.signatures import verify
from shared.wire import EdgeEndpoint

__all__ = ("Decision", "ServedEndpoint", "decide", "header_map")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class ServedEndpoint:
    __slots__ = ("config", "networks")

    def __init__(self, config: EdgeEndpoint) -> None:
        self.config = config
        self.networks: tuple[IPNetwork, ...] = tuple(_network(c) for c in config.allowlist)

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


class Decision:
    """The trust fields of the record, and whether the sender is refused (and with what)."""

    __slots__ = ("attribution", "reason", "refuse", "signature_valid")

    def __init__(
        self, attribution: Attribution, signature_valid: bool | None, reason: str | None, refuse: bool
    ) -> None:
        self.attribution = attribution
        self.signature_valid = signature_valid
        self.reason = reason
        self.refuse = refuse


def header_map(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in headers}


def decide(config: EdgeEndpoint, headers: Mapping[str, str], body: bytes, now: float) -> Decision:
    """Attribution always; the signature only with ``hmac_enabled`` (else ``signature_valid`` is None).

    ``refuse`` is set when the signature failed and the endpoint rejects failures: nothing is stored.
    """
    auth = config.auth
    attribution = attribute(headers, body)
    if not auth.hmac_enabled or not auth.secret:
        return Decision(attribution, None, None, False)
    verdict = verify(
        headers, body, auth.secret, tolerance_s=auth.tolerance_seconds, header_name=auth.header_name, now=now
    )
    refuse = not verdict.valid and auth.on_failure == "reject"
    return Decision(attribution, verdict.valid, verdict.reason, refuse)
