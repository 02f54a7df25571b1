"""A destinations row as the API shows it: one shape for every read and write of /v1 and MCP."""

from __future__ import annotations

import asyncpg

from control.records.destinations import Destination
from control.service.destinations.auth import shown_auth, shown_tls_ca
from shared.errors import NotFoundError

__all__ = ("destination_record", "not_found")


def destination_record(row: asyncpg.Record) -> Destination:
    """``row`` has ``control.db.destinations``' columns."""
    return Destination(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        name=row["name"],
        url=row["url"],
        headers=row["headers"],
        sign_deliveries=row["sign_deliveries"],
        propagate_trace=row["propagate_trace"],
        rate_limit_per_s=row["rate_limit_per_s"],
        ordering=row["ordering"],
        ordering_key=row["ordering_key"],
        deduplicate_window_s=row["deduplicate_window_s"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        transform=row["transform"],
        transform_crashed_at=row["transform_crashed_at"],
        transform_crash=row["transform_crash"],
        transform_slowed_at=row["transform_slowed_at"],
        transform_slowed_s=row["transform_slowed_s"],
        auth=shown_auth(row["auth_shown"]),
        tls_ca=shown_tls_ca(row["tls_ca"]),
        signing_scheme="ed25519" if row["signing_public_key"] is not None else "hmac",
        signing_public_key=row["signing_public_key"],
        previous_secret_expires_at=row["previous_secret_expires_at"],
        previous_public_key=row["previous_public_key"],
        state=row["state"],
        disabled_reason=row["disabled_reason"],
        disabled_at=row["disabled_at"],
    )


def not_found(destination_id: str) -> NotFoundError:
    return NotFoundError(f"destination {destination_id!r} not found")
