"""Sealing and opening the secrets the service layer stores, and re-sealing what is stored.

Every write of an endpoint signing secret, a provider secret, a (alert) destination signing secret or a deployment
key (``instance_keys``) goes through ``seal_*`` and every read that needs the clear value through
``open_*``; ``control.db.keyring`` says how and why. ``reseal`` brings every stored value under the current
(first) key: clear values left from before encryption, and values of an older key after a rotation.
``hookyard migrate`` runs it after the SQL migrations, so an upgraded deployment with a key configured is
sealed at its first migration (``hookyard up`` runs both on start); ``hookyard rotate-encryption-key`` runs
it on its own and says how many values it changed.
"""

from __future__ import annotations

import base64
import binascii

from control.db import sealed as db_sealed
from control.db.connection import Connection
from control.db.context import Context
from control.db.keyring import Keyring, keyring_for
from shared.errors import ConfigError

__all__ = (
    "OpenedDestinationSecrets",
    "keyring",
    "keyring_of",
    "open_alert_destination_secret",
    "open_destination_auth",
    "open_destination_previous",
    "open_destination_secret",
    "open_endpoint_secret",
    "open_instance_key",
    "open_provider_secret",
    "reseal",
    "seal_alert_destination_secret",
    "seal_destination_auth",
    "seal_destination_previous",
    "seal_destination_secret",
    "seal_endpoint_secret",
    "seal_instance_key",
    "seal_provider_secret",
)

_ENDPOINT, _PROVIDER = db_sealed.COLUMNS[0].purpose, db_sealed.COLUMNS[1].purpose
_DESTINATION = db_sealed.DESTINATION.purpose
_INSTANCE_KEY = db_sealed.INSTANCE_KEY.purpose
_ALERT_DESTINATION = db_sealed.ALERT_DESTINATION.purpose
_DESTINATION_PREVIOUS = db_sealed.DESTINATION_PREVIOUS.purpose
_DESTINATION_AUTH = db_sealed.DESTINATION_AUTH.purpose


def keyring_of(entries: tuple[str, ...]) -> Keyring:
    """The keyring of the configured keys; a malformed key list stops the process naming the setting."""
    try:
        return keyring_for(entries)
    except ValueError as exc:
        raise ConfigError(f"HOOKYARD_ENCRYPTION_KEYS: {exc}") from None


def keyring(ctx: Context) -> Keyring:
    return keyring_of(ctx.settings.encryption_keys)


def seal_endpoint_secret(ctx: Context, endpoint_id: str, secret: str) -> str:
    return keyring(ctx).seal(secret, _ENDPOINT, endpoint_id)


def open_endpoint_secret(ctx: Context, endpoint_id: str, stored: str) -> str:
    return keyring(ctx).open(stored, _ENDPOINT, endpoint_id)


def seal_provider_secret(ctx: Context, endpoint_id: str, secret: str | None) -> str | None:
    return None if secret is None else keyring(ctx).seal(secret, _PROVIDER, endpoint_id)


def open_provider_secret(ctx: Context, endpoint_id: str, stored: str | None) -> str | None:
    return None if stored is None else keyring(ctx).open(stored, _PROVIDER, endpoint_id)


def seal_destination_secret(ctx: Context, destination_id: str, secret: str) -> str:
    return keyring(ctx).seal(secret, _DESTINATION, destination_id)


def open_destination_secret(ctx: Context, destination_id: str, stored: str) -> str:
    return keyring(ctx).open(stored, _DESTINATION, destination_id)


def seal_destination_previous(ctx: Context, destination_id: str, secret: str) -> str:
    return keyring(ctx).seal(secret, _DESTINATION_PREVIOUS, destination_id)


def open_destination_previous(ctx: Context, destination_id: str, stored: str) -> str:
    return keyring(ctx).open(stored, _DESTINATION_PREVIOUS, destination_id)


def seal_destination_auth(ctx: Context, destination_id: str, config: str) -> str:
    """A destination's ``auth`` as JSON, secrets included (``control.service.destinations.auth``)."""
    return keyring(ctx).seal(config, _DESTINATION_AUTH, destination_id)


def open_destination_auth(ctx: Context, destination_id: str, stored: str) -> str:
    return keyring(ctx).open(stored, _DESTINATION_AUTH, destination_id)


class OpenedDestinationSecrets:
    """Destination secrets opened once per stored value, for a worker that signs thousands of sends a second
    (an AES-GCM open per send was 3-4% of a drain's CPU). A rotated secret is another stored value, so it is
    opened anew; the oldest values are simply forgotten past ``kept``."""

    def __init__(self, ctx: Context, kept: int = 4096) -> None:
        self.ctx, self.kept = ctx, kept
        self._opened: dict[tuple[str, str], str] = {}

    def open(self, destination_id: str, stored: str, *, previous: bool = False) -> str:
        """``previous``: a rotation's replaced secret (``previous_signing_secret``), sealed for its own column."""
        key = (destination_id, stored)
        if (clear := self._opened.get(key)) is None:
            if len(self._opened) >= self.kept:
                self._opened.clear()
            opener = open_destination_previous if previous else open_destination_secret
            clear = self._opened[key] = opener(self.ctx, destination_id, stored)
        return clear


def seal_alert_destination_secret(ctx: Context, alert_destination_id: str, secret: str) -> str:
    return keyring(ctx).seal(secret, _ALERT_DESTINATION, alert_destination_id)


def open_alert_destination_secret(ctx: Context, alert_destination_id: str, stored: str) -> str:
    return keyring(ctx).open(stored, _ALERT_DESTINATION, alert_destination_id)


def seal_instance_key(ctx: Context, name: str, key: bytes) -> str:
    """The stored form of a deployment key: its base64, sealed (clear base64 without encryption keys)."""
    return keyring(ctx).seal(base64.b64encode(key).decode(), _INSTANCE_KEY, name)


def open_instance_key(ctx: Context, name: str, stored: str) -> bytes:
    """The key's bytes; ConfigError when it does not open, or when what opens is no base64 (an edited row)."""
    clear = keyring(ctx).open(stored, _INSTANCE_KEY, name)
    try:
        return base64.b64decode(clear, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"instance_keys: the stored key {name!r} is not base64 (edited by hand?)") from None


async def reseal(conn: Connection, ring: Keyring) -> dict[str, int]:
    """Re-seals every stored secret not under the current key; returns the changed count per column.

    Without a key it changes nothing (sealed values stay sealed: removing the keys never writes a secret
    back in clear). A value sealed under a key no longer configured raises ConfigError naming the key.
    """
    changed: dict[str, int] = {}
    if not ring.enabled:
        return changed
    for column in db_sealed.COLUMNS:
        count = 0
        async for key, stored in db_sealed.rows(conn, column):
            if ring.is_current(stored):
                continue
            fresh = ring.seal(ring.open(stored, column.purpose, key), column.purpose, key)
            count += await db_sealed.replace(conn, column, key, stored, fresh)
        changed[column.purpose] = count
    return changed
