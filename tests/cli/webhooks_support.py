"""What the CLI's webhook tests share: the signing secrets of their samples and the identity scheme's headers
under a library's names. The commands as subprocesses (``Proc``, ``cli``, ``until``) are
``tests.onboarding.clirun``'s."""

from __future__ import annotations

import base64

__all__ = ("PROVIDER_SECRET", "RESIGN", "relay_as")

PROVIDER_SECRET = "whsec_" + base64.b64encode(b"provider-secret-for-the-cli-tests").decode()
RESIGN = "whsec_" + base64.b64encode(b"the-local-apps-own-secret-32byte").decode()


def relay_as(prefix: str, headers: dict[str, str]) -> dict[str, str]:
    """The identity scheme's relay-* headers under the names a library reads."""
    return {f"{prefix}-{part}": headers[f"relay-{part}"] for part in ("id", "timestamp", "signature")}
