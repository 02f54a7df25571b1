"""What the routes outside /v1 share: no API key, so a per-address rate limit (their responses are documented
with the codes these routes really send: ``control.api.openapi.described``).

The client address is the socket peer, or the ``X-Forwarded-For`` hop that ``HOOKYARD_TRUSTED_PROXIES``
vouches for, read exactly as the edge reads it (``shared.clientip``): walking right to left past trusted
proxies, the first untrusted hop is the client. Without trusted proxies the header is ignored, so a caller
cannot pick its own bucket by sending one. An IPv6 client is limited by its /64, the block one subscriber
usually holds, so rotating addresses inside it does not escape the limit.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.openapi.spec import Operation

from control.support.token_buckets import Limit
from shared.clientip import ClientIP
from shared.settings import Settings

__all__ = ("AddressLimits", "OptionalBody", "charge_address", "client_address")


@dataclass(frozen=True, slots=True)
class AddressLimits:
    """Held in the app's state for the process's life (``control.app``)."""

    client_ip: ClientIP
    limit: Limit

    @classmethod
    def create(cls, settings: Settings) -> AddressLimits:
        per_min = settings.start_rate_per_min
        return cls(
            client_ip=ClientIP(settings.trusted_proxies),
            limit=Limit(rate_per_s=per_min / 60, burst=per_min, subject="this client address"),
        )


def client_address(request: Request[Any, Any, Any], client_ip: ClientIP) -> str:
    """The rate-limit bucket of the request's client: an IPv4 address or an IPv6 /64."""
    client = request.scope.get("client")
    peer = client[0] if client else None
    address = client_ip.resolve(peer, request.scope["headers"]) if client_ip.trusts_proxies else peer
    if address is None:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:100]  # not an IP (a test client's name, a Unix socket)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


async def charge_address(request: Request[Any, Any, Any], route: str) -> None:
    """Takes one token from the client address's bucket of ``route``; 429 ``rate_limited`` with Retry-After."""
    limits: AddressLimits = request.app.state.address_limits
    ctx = request.app.state.ctx
    await limits.limit.charge(ctx.redis, ctx.keys.address_rate_limit(route, client_address(request, limits.client_ip)))


class OptionalBody(Operation):
    """Documents the request body as optional: Litestar marks every body required, and a client (schemathesis)
    would then expect a request without one to be refused. The handler's ``data`` has a default."""

    def to_schema(self) -> dict[str, Any]:
        schema = super().to_schema()
        if "requestBody" in schema:
            schema["requestBody"]["required"] = False
        return schema
