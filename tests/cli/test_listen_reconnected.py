"""The "reconnected" line names the ``up`` that answered, read after it answered. A listen that found no
``up`` at its last failure, then slept its backoff while a new ``up`` wrote its record and came up, used to
print the stale "where no hookyard up is running now" on reconnecting (`test_instance_moved` failed on it
once in a full run). Here the moment is exact: the record is written and the server started only after the
failure's line, whose record read comes before it, so no read falls between the write and the answer.

A real loopback HTTP server, a real instance record in a data dir, the real ``relocation``."""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path

from bench.ports import free_port
from control.cli.instance import Target, instance_of_this_process, relocation, write_instance
from control.cli.listen import _Out, _patiently
from control.cli.remote import Remote
from shared.settings import Settings
from tests.helpers import wait_for

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}"


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(OK)
    await writer.drain()
    writer.close()


async def test_the_reconnected_line_names_the_up_that_answered(settings: Settings, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    relocate = relocation(Target(url, "the default"), Settings(data_dir=str(data_dir)))
    assert relocate is not None
    remote = Remote(url, "hy_live_x", source="the default", relocate=relocate)
    lines = io.StringIO()
    stop = asyncio.Event()
    patient = asyncio.create_task(_patiently(stop, _Out(lines), lambda: remote.call("GET", "/healthz"), remote))
    server = None
    try:
        await wait_for(lambda: _said(lines, "no hookyard up is running now"))  # read, then said
        write_instance(
            data_dir,
            instance_of_this_process(
                control_url=url, edge_url=url, database_url=settings.database_url, redis_url=settings.redis_url
            ),
        )
        server = await asyncio.start_server(_answer, "127.0.0.1", port)
        answered, _ = await asyncio.wait_for(patient, 10)
    finally:
        stop.set()
        await remote.aclose()
        if server is not None:
            server.close()
            await server.wait_closed()
    assert answered
    reconnected = [line for line in lines.getvalue().splitlines() if ": reconnected to " in line]
    assert len(reconnected) == 1, lines.getvalue()
    assert f"pid {os.getpid()}" in reconnected[0], reconnected[0]
    assert "no hookyard up is running now" not in reconnected[0], reconnected[0]


async def _said(lines: io.StringIO, text: str) -> bool:
    return text in lines.getvalue()
