"""The benches' destination: answers every request 200 at once and, when given a file, appends each request's
``x-hookyard-event-id`` to it, one line per request (``-`` when the header is missing).

``python -m bench.sink --port N [--file F]``; ``command(port, file)`` builds that argv.

Why not granian, as the benches used before (ADR 0047): the sink shares the two cores with what a bench
measures, so its CPU is taken from the worker and Postgres. Measured in the same run, one request at a time
on each of 32 connections: granian's raw-ASGI app spent 48-50 µs of CPU per request under wrk and 108-136 µs
per delivery under ``bench delivery`` (its Rust runtime hands every request to the Python thread and back),
this server 9-10 µs and 24-28 µs. A receiver is on another machine in use; here it should cost as little
as it can, and each bench prints what it cost.

The HTTP parsing is httptools' (llhttp, the parser uvicorn uses): Content-Length and chunked bodies, pipelined
requests, keep-alive as the request asks. A request it cannot parse gets a 400 and the connection closes.
The file is written with one ``write`` per line on an ``O_APPEND`` descriptor, before the answer is sent, so a
sink killed and started again (the "destination down" fault) keeps every line of a request it answered.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import httptools
import uvloop

_OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
_OK_CLOSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"
_BAD = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_EVENT_ID = b"x-hookyard-event-id"


def command(port: int, file: Path | None = None) -> list[str]:
    """The argv that runs this sink on ``127.0.0.1:port``."""
    argv = [sys.executable, "-m", "bench.sink", "--port", str(port)]
    return [*argv, "--file", str(file)] if file is not None else argv


class _Connection(asyncio.Protocol):
    """One connection: httptools calls back per header and per complete request."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self._event_id = b"-"
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._transport is not None and not self._transport.is_closing():
                self._transport.write(_BAD)
                self._transport.close()

    def on_message_begin(self) -> None:
        self._event_id = b"-"

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == len(_EVENT_ID) and name.lower() == _EVENT_ID:
            self._event_id = value

    def on_message_complete(self) -> None:
        if self._fd is not None:
            os.write(self._fd, self._event_id + b"\n")
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._parser.should_keep_alive():
            transport.write(_OK)
        else:
            transport.write(_OK_CLOSE)
            transport.close()


async def serve(port: int, file: Path | None = None, host: str = "127.0.0.1") -> None:
    """Serve until cancelled."""
    fd = os.open(file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if file is not None else None
    try:
        server = await asyncio.get_running_loop().create_server(lambda: _Connection(fd), host, port, backlog=1024)
        async with server:
            await server.serve_forever()
    finally:
        if fd is not None:
            os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sink")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", type=Path, help="append each request's x-hookyard-event-id here")
    args = parser.parse_args()
    uvloop.run(serve(args.port, args.file))


if __name__ == "__main__":
    main()
