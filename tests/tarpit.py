"""A tarpit: a loopback server that accepts every connection and reads what is sent, never answering. The
hostile tenant's destination in the fairness tests (alerts, deliveries): its sends hold their slot until the
sender's timeout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ("tarpit",)


@contextlib.asynccontextmanager
async def tarpit() -> AsyncIterator[str]:
    """The server's base URL while the block lasts; its connections are closed at the end."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()
