"""A TCP relay on loopback in front of a test Redis, for what a client sees of Redis without changing Redis:
commands that reach Redis late and replies that come back late (``request_delay_s``, ``reply_delay_s``,
changeable while connections are open) and a Redis that goes away (``cut``: open connections reset, new ones
refused).

One relay for every test that needs one (the edge's 503s, the throttle's clock, refusal counts cut short at
shutdown); ``url`` keeps the credentials and database of the URL relayed to.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from urllib.parse import urlsplit

__all__ = ("RedisRelay",)


class RedisRelay:
    def __init__(self, url: str, *, reply_delay_s: float = 0.0, request_delay_s: float = 0.0) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self._path = parts.path
        self._credentials = parts.netloc.rpartition("@")[0]  # the embedded Redis has a password
        self.reply_delay_s = reply_delay_s
        """Each chunk of a reply waits this long before it is passed on (0: at once)."""
        self.request_delay_s = request_delay_s
        """Each chunk of a command likewise."""
        self.url = ""
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self, port: int = 0) -> str:
        """Listens on ``port`` (0: a free one); the URL that reaches Redis through it. A port chosen before
        the relay starts is a Redis that comes up where a process was already told to look."""
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", port)
        port = self._server.sockets[0].getsockname()[1]
        credentials = f"{self._credentials}@" if self._credentials else ""
        self.url = f"redis://{credentials}127.0.0.1:{port}{self._path}"
        return self.url

    async def __aenter__(self) -> RedisRelay:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.cut()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        self._writers += [writer, up_writer]
        for source, sink, replies in ((reader, up_writer, False), (up_reader, writer, True)):
            task = asyncio.create_task(self._pump(source, sink, replies))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, replies: bool) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await source.read(65536):
                delay = self.reply_delay_s if replies else self.request_delay_s
                if delay > 0:
                    await asyncio.sleep(delay)
                sink.write(data)
                await sink.drain()
        with contextlib.suppress(OSError):
            sink.close()

    async def cut(self) -> None:
        """Redis goes away: new connections are refused, open ones reset."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()
        for task in list(self._pumps):
            task.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        if server is not None:  # after the resets: from Python 3.12 on it also waits for open connections
            await server.wait_closed()
