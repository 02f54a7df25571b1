"""An endpoint's trust settings as the edge serves them: allowlist and signature check.

``ServedEndpoint`` is an endpoint's config compiled once per cache fill (CIDRs parsed into networks, the
signature check of :func:`~shared.signatures.verifier` with its keyed MAC states), so the per-request work is a
membership test and, when verification is on, one HMAC.
"""

from __future__ import annotations

from shared.keys import Keys
from shared.networks import IPNetwork, covers, network
from shared.signatures import verifier
from shared.wire import EdgeEndpoint

__all__ = ("ServedEndpoint",)


class ServedEndpoint:
    """Also what the hot path would otherwise recompute per request: the shard, whether to verify."""

    __slots__ = ("config", "networks", "rejects", "shard", "verifier")

    def __init__(self, config: EdgeEndpoint, keys: Keys) -> None:
        self.config = config
        self.networks: tuple[IPNetwork, ...] = tuple(network(c) for c in config.allowlist)
        self.shard = keys.shard_for(config.endpoint_id)
        auth = config.auth
        self.verifier = (
            verifier(auth.secret, tolerance_s=auth.tolerance_seconds, header_name=auth.header_name)
            if auth.hmac_enabled and auth.secret
            else None
        )
        """None when nothing is checked (``signature_valid`` stays null)."""
        self.rejects = auth.on_failure == "reject"

    def ip_allowed(self, ip: str | None) -> bool | None:
        """None when the endpoint has no allowlist (nothing was checked); else whether an entry covers ip."""
        if not self.networks:
            return None
        return ip is not None and covers(self.networks, ip)
