"""The sender's address: the socket peer, or X-Forwarded-For when (and only when) the peer is trusted.

Shared because the edge (ingest) and control (the per-address limits of ``/api/*``) must believe the same hops.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from shared.networks import IPNetwork, covers

__all__ = ("ClientIP",)


class ClientIP:
    def __init__(self, trusted_proxies: Iterable[str]) -> None:
        # Ranges as written: unlike an allowlist entry (``shared.networks.network``), an IPv4-mapped range here
        # is not read as the IPv4 range it covers, so it matches no peer or hop (both are unmapped).
        self._trusted: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(c, strict=False) for c in trusted_proxies)
        self.trusts_proxies = bool(self._trusted)
        """False: the socket peer is always the sender, and the hot path skips :meth:`resolve`."""

    def _is_trusted(self, host: str) -> bool:
        return covers(self._trusted, host)

    def resolve(self, peer: str | None, headers: Iterable[tuple[bytes, bytes]]) -> str | None:
        """Walks X-Forwarded-For right to left past trusted hops; the first untrusted hop is the sender."""
        if peer is None or not self._trusted or not self._is_trusted(peer):
            return peer
        hops: list[str] = []
        for name, value in headers:
            if name == b"x-forwarded-for":
                hops.extend(h.strip() for h in value.decode("latin-1").split(","))
        for hop in reversed(hops):
            if hop and not self._is_trusted(hop):
                try:
                    return str(ipaddress.ip_address(hop))
                except ValueError:
                    return peer  # a garbled header from behind a trusted proxy: fall back to the proxy
        return peer
