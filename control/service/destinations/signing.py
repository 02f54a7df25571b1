"""A destination's signing secret: made on create, rotated with an overlap.

``hmac`` destinations sign with a ``whsec_`` secret shown on create and rotation; ``ed25519`` ones with a
``whsk_`` secret key that never leaves hookyard, their receivers verifying with the ``whpk_`` public key
every read shows (``control.delivery.signing``). A rotation keeps the replaced secret for ``overlap_s``
(default a day): until then every delivery carries both signatures, so each receiver moves to the new secret
at its own pace; 0 drops it at once. The replaced secret is sealed again for its own column (a sealed value
opens only in the column it was sealed for).
"""

from __future__ import annotations

import msgspec

from control.db import destinations as db_destinations
from control.db.context import Context, Principal
from control.delivery.signing import new_ed25519
from control.records.destinations import DestinationCreated, SecretRotation, SigningScheme
from control.service.destinations.view import destination_record
from control.service.endpoints import require_owned, require_write
from control.support import sealing
from shared import ids

__all__ = ("new_signing_secret", "rotate_destination_secret")


def new_signing_secret(scheme: SigningScheme) -> tuple[str, str | None]:
    """(secret, public key): ``whsec_`` and None for ``hmac``, ``whsk_`` and ``whpk_`` for ``ed25519``."""
    if scheme == "ed25519":
        return new_ed25519()
    return ids.signing_secret(), None


async def rotate_destination_secret(
    ctx: Context, principal: Principal, destination_id: str, data: SecretRotation | None = None
) -> DestinationCreated:
    """A new signing secret (of ``data.signing_scheme``, else the current scheme), effective for the next
    attempt; the previous one signs beside it for ``data.overlap_s``. An ``hmac`` secret is returned once."""
    require_write(principal)
    data = data or SecretRotation()
    async with ctx.pool.acquire() as conn, conn.transaction():
        current = await require_owned(
            conn, principal, destination_id, kind="dst", noun="destination", get=db_destinations.signing_for_rotation
        )
        scheme = data.signing_scheme or ("ed25519" if current["signing_public_key"] else "hmac")
        secret, public = new_signing_secret(scheme)
        previous = None
        if data.overlap_s > 0:
            clear = sealing.open_destination_secret(ctx, destination_id, current["signing_secret"])
            previous = sealing.seal_destination_previous(ctx, destination_id, clear)
        row = await db_destinations.rotate_secret(
            conn,
            destination_id,
            signing_secret=sealing.seal_destination_secret(ctx, destination_id, secret),
            signing_public_key=public,
            previous_secret=previous,
            previous_public_key=current["signing_public_key"],
            overlap_s=data.overlap_s,
        )
    shown = None if public is not None else secret
    return DestinationCreated(**msgspec.structs.asdict(destination_record(row)), signing_secret=shown)
