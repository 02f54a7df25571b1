"""A destination's authentication opened for sending: what ``Authenticator`` loads on a miss.

The sealed ``auth`` and the clear ``tls_ca`` are read and opened here, under delivery, because both senders
need them: the deliver worker's attempts and the control plane's replays (``control.service.replay``). The
service layer checks, seals and shows the configuration (``control.service.destinations.auth``); opening it
again for a send is delivery's, so the worker needs nothing from the layer above it.
"""

from __future__ import annotations

import msgspec

from control.db import destinations as db_destinations
from control.db.context import Context
from control.delivery.auth.authenticator import AuthMaterial
from control.records.destination_auth import DestinationAuth
from control.support import sealing

__all__ = ("load_material",)

_decode_auth = msgspec.json.Decoder(DestinationAuth).decode


async def load_material(ctx: Context, destination_id: str) -> AuthMaterial | None:
    """The destination's authentication, opened (for ``control.delivery.auth.Authenticator``); None when it
    has neither ``auth`` nor ``tls_ca`` (or is gone)."""
    async with ctx.pool.acquire() as conn:
        row = await db_destinations.auth_material(conn, destination_id)
    if row is None or row["auth_version"] is None:
        return None
    auth = None
    if row["auth_sealed"] is not None:
        auth = _decode_auth(sealing.open_destination_auth(ctx, destination_id, row["auth_sealed"]))
    return AuthMaterial(digest=row["auth_version"], auth=auth, tls_ca=row["tls_ca"])
