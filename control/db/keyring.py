"""Secrets at rest: endpoint, provider and destination signing secrets and the deployment's own keys (the
inbox link key) are sealed (AES-256-GCM) before they reach Postgres, so a dump of the database alone reveals
none of them (``control.db.sealed`` lists the columns).

Keys come from ``HOOKYARD_ENCRYPTION_KEYS`` (``kid:base64-of-32-bytes``, comma separated). The first key
seals; every listed key opens, so a key rotates without downtime: add the new key in front, restart, run
``hookyard rotate-encryption-key`` (it re-seals every value under the first key), then drop the old key.
``hookyard up`` makes one key on its first run and keeps it in its data dir.

A sealed value is text, ``hyenc:v1:<kid>:<base64url(nonce || ciphertext || tag)>``, in the same ``text``
columns that held the clear value. The associated data binds it to its column and row (``purpose`` and
``row_id``), so a sealed value copied into another row or column does not open. Values without the prefix
are clear text from before encryption (or from a deployment without a key): they open as they are, and
``hookyard migrate`` / ``rotate-encryption-key`` seal them. With no key configured, ``seal`` leaves values
clear (logged as a warning once per process): the edge and signing keep working, the dump is not protected.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
import os
import re
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.errors import ConfigError

__all__ = (
    "KEY_FILE",
    "PREFIX",
    "Keyring",
    "data_dir_keys",
    "generate_key",
    "keyring_for",
    "parse_keys",
    "warn_if_clear",
)

log = logging.getLogger("hookyard.control.keyring")

PREFIX = "hyenc:v1:"
KEY_FILE = "encryption_keys"
"""Under ``hookyard up``'s data dir: the key list, one ``kid:base64`` entry a line, first one current."""
_KID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_NONCE_BYTES = 12


def parse_keys(entries: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """``kid:base64`` entries as (kid, 32-byte key); the error names the entry by its kid, never the key."""
    keys: list[tuple[str, bytes]] = []
    for position, entry in enumerate(entries, start=1):
        kid, sep, encoded = entry.partition(":")
        if not sep or not _KID.fullmatch(kid):
            raise ValueError(f"entry {position} must be kid:base64key with a kid of 1-32 letters, digits, _ or -")
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=False)
        except (binascii.Error, ValueError):
            raise ValueError(f"key {kid!r} is not base64") from None
        if len(key) != 32:
            raise ValueError(f"key {kid!r} must be 32 bytes (base64 of 32 random bytes), not {len(key)}")
        if any(kid == seen for seen, _ in keys):
            raise ValueError(f"key id {kid!r} is listed twice")
        keys.append((kid, key))
    return keys


def generate_key(kid: str = "k1") -> str:
    """A new ``kid:base64`` entry for ``HOOKYARD_ENCRYPTION_KEYS``."""
    return f"{kid}:{base64.b64encode(os.urandom(32)).decode()}"


class Keyring:
    """Seals with the first key, opens with any. Immutable; one per distinct key list (``keyring_for``)."""

    __slots__ = ("_ciphers", "current")

    def __init__(self, entries: tuple[str, ...]) -> None:
        keys = parse_keys(entries)
        self._ciphers = {kid: AESGCM(key) for kid, key in keys}
        self.current: str | None = keys[0][0] if keys else None

    @property
    def enabled(self) -> bool:
        return self.current is not None

    def seal(self, plain: str, purpose: str, row_id: str) -> str:
        """The stored form of ``plain``: sealed under the first key, or ``plain`` itself without keys."""
        if self.current is None:
            _warn_clear()
            return plain
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(nonce, plain.encode(), _aad(purpose, row_id))
        return f"{PREFIX}{self.current}:{base64.urlsafe_b64encode(nonce + sealed).decode().rstrip('=')}"

    def open(self, stored: str, purpose: str, row_id: str) -> str:
        """The clear value; ConfigError when its key is not configured or the value does not open."""
        if not stored.startswith(PREFIX):
            return stored  # clear text from before encryption; the next re-seal seals it
        kid, _, encoded = stored[len(PREFIX) :].partition(":")
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise ConfigError(
                f"HOOKYARD_ENCRYPTION_KEYS: a stored secret ({purpose} of {row_id}) is sealed with key {kid!r}, "
                f"which is not configured in this process: add {kid}'s entry to HOOKYARD_ENCRYPTION_KEYS on every "
                "control and worker process and restart them"
            )
        try:
            raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            return cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _aad(purpose, row_id)).decode()
        except (InvalidTag, binascii.Error, ValueError, UnicodeDecodeError):
            raise ConfigError(
                f"HOOKYARD_ENCRYPTION_KEYS: the stored secret {purpose} of {row_id} does not open with key {kid!r} "
                "(altered, or moved from another row)"
            ) from None

    def is_current(self, stored: str) -> bool:
        """True when ``stored`` needs no re-seal: sealed under the first key, or clear with no key at all."""
        if self.current is None:
            return not stored.startswith(PREFIX)
        return stored.startswith(f"{PREFIX}{self.current}:")


def _aad(purpose: str, row_id: str) -> bytes:
    return f"{purpose}\x00{row_id}".encode()


def warn_if_clear(ring: Keyring) -> None:
    """Said at start by control and the worker (a deployment without keys is told before anything is stored,
    not at its first sealed secret, which may be days later); the lazy warning then stays silent."""
    if not ring.enabled:
        _warn_clear()


@functools.cache
def _warn_clear() -> None:
    log.warning(
        "secrets are stored in clear text: set HOOKYARD_ENCRYPTION_KEYS to seal them "
        '(on every control and worker; make one with: echo "k1:$(openssl rand -base64 32)" and keep it safe)'
    )


@functools.lru_cache(maxsize=8)
def keyring_for(entries: tuple[str, ...]) -> Keyring:
    """The keyring of a key list (``settings.encryption_keys``); built once per process and list."""
    return Keyring(entries)


def data_dir_keys(data_dir: Path, *, create: bool) -> tuple[str, ...]:
    """The keys ``hookyard up`` keeps in its data dir; with ``create``, a first key is made (mode 0600)."""
    path = data_dir / KEY_FILE
    if not path.exists():
        if not create:
            return ()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(generate_key("k1") + "\n")
    return tuple(line.strip() for line in path.read_text().splitlines() if line.strip())
