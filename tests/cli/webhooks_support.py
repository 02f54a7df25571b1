"""What the CLI's webhook tests share: the signing secrets of their samples and the identity scheme's headers
under a library's names. The commands as subprocesses (``Proc``, ``cli``, ``until``) are
``tests.onboarding.clirun``'s."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
from typing import Any

__all__ = ("PROVIDER_SECRET", "RESIGN", "interrupted", "relay_as")

PROVIDER_SECRET = "whsec_" + base64.b64encode(b"provider-secret-for-the-cli-tests").decode()
RESIGN = "whsec_" + base64.b64encode(b"the-local-apps-own-secret-32byte").decode()


def relay_as(prefix: str, headers: dict[str, str]) -> dict[str, str]:
    """The identity scheme's relay-* headers under the names a library reads."""
    return {f"{prefix}-{part}": headers[f"relay-{part}"] for part in ("id", "timestamp", "signature")}


async def interrupted(tailing: asyncio.Task[int], remote: Any) -> int:
    """The exit code of ``tail`` run in this process (``tailing``), ended by Ctrl-C if still running (caught by
    its handler on this loop, which is then removed), with its ``Remote`` closed."""
    if not tailing.done():
        os.kill(os.getpid(), signal.SIGINT)
    try:
        return await asyncio.wait_for(tailing, 30)
    finally:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await remote.aclose()
