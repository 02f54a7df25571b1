"""An endpoint's trust settings as the edge serves them: allowlist and signature check.

``ServedEndpoint`` is an endpoint's config compiled once per cache fill (CIDRs parsed into networks, the
signature check of :func:`~shared.signatures.verifier` with its keyed MAC states), so the per-request work is a
membership test and one HMAC.

With verification off the edge still proves a signature made with the endpoint's own secret
(:func:`~shared.signatures.prover`): what hookyard signs itself (``hookyard trigger``, ``send_test_webhook``)
then reads "verified" wherever it is shown, while anything it cannot prove stays "not checked" (null),
never a failure and never refused: nobody asked for the check.
"""

from __future__ import annotations

from shared.keys import Keys
from shared.networks import IPNetwork, covers, network
from shared.providers import CATALOG, Provider
from shared.providers.verify import CatalogCheck, check_for
from shared.signatures import prover, verifier
from shared.wire import EdgeEndpoint

__all__ = ("ServedEndpoint",)


class ServedEndpoint:
    """Also what the hot path would otherwise recompute per request: the shard, whether to verify."""

    __slots__ = (
        "checks",
        "config",
        "networks",
        "provider",
        "rejects",
        "response",
        "secret",
        "shard",
        "verifier",
        "verify_token",
    )

    def __init__(self, config: EdgeEndpoint, keys: Keys) -> None:
        self.config = config
        self.networks: tuple[IPNetwork, ...] = tuple(network(c) for c in config.allowlist)
        self.shard = keys.shard_for(config.endpoint_id)
        auth = config.auth
        self.checks = auth.hmac_enabled
        """Whether a failed check counts; with verification off only a proof is recorded (see ``prover``)."""
        check = verifier if auth.hmac_enabled else prover
        self.verifier = (
            check(auth.secret, tolerance_s=auth.tolerance_seconds, header_name=auth.header_name)
            if auth.secret
            else None
        )
        """None when nothing is checked (``signature_valid`` stays null)."""
        self.rejects = auth.hmac_enabled and auth.on_failure == "reject"
        catalog = CATALOG.get(auth.provider) if auth.provider else None
        self.provider: Provider | None = catalog if catalog is not None and catalog.kind is None else None
        """The endpoint's catalog provider beyond the four kinds (checked by ``edge.providers``); None: a
        provider is recognised per request from its headers."""
        self.secret = auth.secret or None
        self.verify_token = auth.verify_token
        custom = config.response
        self.response = (
            None
            if custom is None
            else (custom.status, (b"content-type", custom.content_type.encode("latin-1")), custom.body.encode())
        )
        """The endpoint's own answer, ready to send: (status, content-type header, body); None: the usual one."""

    def catalog_check(self, provider: Provider) -> CatalogCheck:
        """``provider``'s check with this endpoint's secret (cached per provider and secret, as MAC states)."""
        return check_for(provider.name, self.secret or "")

    def ip_allowed(self, ip: str | None) -> bool | None:
        """None when the endpoint has no allowlist (nothing was checked); else whether an entry covers ip."""
        if not self.networks:
            return None
        return ip is not None and covers(self.networks, ip)
