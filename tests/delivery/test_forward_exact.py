"""A captured header whose value is not UTF-8 text is stored as base64 (``header_encodings``) and still goes
out as its exact bytes: forwarded by a rule, and replayed. Real edge, workers, control and destination."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
import pytest

from tests.conftest import make_account
from tests.destination import Destination
from tests.helpers import wait_for
from tests.stack import Stack

pytestmark = pytest.mark.slow

RAW_VALUE = b"caf\xe9 \xff\x80 ok"  # Latin-1 and stray bytes: what some senders do put in a header


async def _send_raw(url: str, body: bytes) -> dict[str, Any]:
    """An HTTP/1.1 request written by hand: no client library would send these header bytes."""
    target = httpx.URL(url)
    reader, writer = await asyncio.open_connection(target.host, target.port)
    head = f"POST {target.raw_path.decode()} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n".encode()
    head += b"x-legacy: " + RAW_VALUE + b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
    writer.write(head + body)
    await writer.drain()
    response = await reader.read(4096)
    writer.close()
    status_line, _, rest = response.partition(b"\r\n")
    assert b" 200 " in status_line, response
    return httpx.Response(200, content=rest.split(b"\r\n\r\n", 1)[1]).json()


async def test_non_utf8_header_bytes_are_forwarded_and_replayed_exactly(
    stack: Stack, database_url: str, destination: Destination
) -> None:
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush", "deliver")
    account = await make_account(database_url)
    async with httpx.AsyncClient(base_url=stack.control_url, headers=account.headers, timeout=30) as api:
        endpoint = (await api.post("/v1/endpoints", json={"name": "exact"})).json()
        created = await api.post(
            f"/v1/endpoints/{endpoint['id']}/destinations", json={"url": destination.url, "forward_all": True}
        )
        assert created.status_code == 201, created.text
        ack = await _send_raw(endpoint["ingest_url"], b'{"n":1}')

        (forwarded,) = await destination.wait_for(1)
        assert dict(forwarded.wire_headers)["x-legacy"] == RAW_VALUE

        async def stored() -> dict[str, Any] | None:
            resp = await api.get(f"/v1/events/{ack['id']}")
            return resp.json() if resp.status_code == 200 else None

        event = await wait_for(stored)
        assert event["header_encodings"] == {"x-legacy": "base64"}
        assert base64.b64decode(event["headers"]["x-legacy"]) == RAW_VALUE
        assert event["headers"]["content-type"] == "application/json"

        replayed = await api.post(f"/v1/events/{ack['id']}/replay", json={"url": destination.url})
        assert replayed.status_code == 200, replayed.text
        assert replayed.json()["success"] is True
        _, again = await destination.wait_for(2)
        assert dict(again.wire_headers)["x-legacy"] == RAW_VALUE
