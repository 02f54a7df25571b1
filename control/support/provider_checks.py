"""The provider catalog as the API sees it: a provider named by a person (its own name or an alias, any
case) checked once here for /v1 and MCP alike, and a public key checked when it is set, not at the first
request it would fail to verify."""

from __future__ import annotations

from shared.errors import ValidationError
from shared.providers import CATALOG, NAMES, canonical
from shared.providers.verify import public_key

__all__ = ("check_public_key", "provider_name")


def provider_name(name: str, field: str = "provider") -> str:
    """The catalog's own name for ``name`` (``stripe`` is ``payments``); a 400 naming ``field`` otherwise."""
    own = canonical(name)
    if own is None:
        raise ValidationError(f"{field}: {name!r} is not a provider; one of {', '.join(sorted(NAMES))}")
    return own


def check_public_key(provider: str | None, secret: str) -> None:
    """For a provider whose scheme is Ed25519 or ECDSA P-256 the secret is its public key: it must load."""
    entry = CATALOG.get(provider or "")
    if entry is None or entry.scheme.kind not in ("ed25519", "ecdsa_p256"):
        return
    try:
        public_key(entry.scheme.kind, secret)
    except ValueError as exc:
        curve = "an Ed25519" if entry.scheme.kind == "ed25519" else "an ECDSA P-256"
        raise ValidationError(
            f"secret: {entry.name} signs with {curve} key, so the secret is its public key (PEM, hex or base64): {exc}"
        ) from None
