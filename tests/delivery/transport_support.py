"""Loopback peers that answer the outbound transport with exact bytes, and a transport and request to
drive them (shared by the transport modules and test_send_bytes.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from control.delivery import egress
from control.delivery.send import Outcome, send
from control.delivery.transport import Transport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Peer:
    """A TCP server on a loopback port whose every connection runs ``handler`` (real sockets, scripted
    bytes); counts connections and keeps the request heads it read."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []
        self.port = 0
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, or the test is over
        finally:
            self._tasks.discard(task)
            writer.close()

    async def request(self, reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
        """The next request's head and body; None once the client closed."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        self.heads.append(head)
        fields = {n.strip().lower(): v.strip() for n, _, v in (line.partition(b":") for line in head.split(b"\r\n"))}
        if fields.get(b"transfer-encoding") == b"chunked":
            body = b""
            while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                body += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")
        else:
            body = await reader.readexactly(int(fields.get(b"content-length", b"0")))
        self.bodies.append(body)
        return head, body


@contextlib.asynccontextmanager
async def peer(handler: Handler) -> AsyncIterator[Peer]:
    server_peer = Peer(handler)
    server = await asyncio.start_server(server_peer._connection, "127.0.0.1", 0)
    server_peer.port = server.sockets[0].getsockname()[1]
    try:
        yield server_peer
    finally:
        server.close()
        for task in list(server_peer._tasks):
            task.cancel()
        await asyncio.gather(*server_peer._tasks, return_exceptions=True)
        await server.wait_closed()


def answering(*responses: bytes) -> Callable[[Peer], Handler]:
    """A handler answering each request (on any connection) with the next of ``responses`` (the last one
    repeats), keeping the connection open for more."""
    answered = 0

    def make(p: Peer) -> Handler:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal answered
            while await p.request(reader) is not None:
                writer.write(responses[min(answered, len(responses) - 1)])
                answered += 1
                await writer.drain()

        return handle

    return make


@contextlib.asynccontextmanager
async def scripted(make: Callable[[Peer], Handler]) -> AsyncIterator[Peer]:
    holder: list[Peer] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await make(holder[0])(reader, writer)

    async with peer(handler) as p:
        holder.append(p)
        yield p


def transport(**overrides: float) -> Transport:
    timeouts = {"timeout_s": 2.0, "connect_timeout_s": 2.0} | overrides
    return egress.client(
        "any", timeout_s=timeouts["timeout_s"], connect_timeout_s=timeouts["connect_timeout_s"], max_connections=4
    )


async def post(t: Transport, url: str, body: bytes = b"{}", *, method: str = "POST", total_s: float = 5) -> Outcome:
    return await send(t, method, url, {"content-type": "application/json"}, body, total_timeout_s=total_s)


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
