"""The edge's floor: a raw-ASGI app that does nothing per request but what the edge cannot skip.

It reads the body, appends one fixed record to the real ``StreamWriter`` (batched XADD over the edge's RESP
connection, answered only once Redis holds it) and returns 200: no endpoint lookup, no attribution, no
signature, no id. The edge bench runs it in the same rounds as the edge and the bare app, so the gap to the
bare app splits into the durable write (bare → floor) and the edge's own per-request work (floor → edge).
"""

from __future__ import annotations

import os
from typing import Any

from edge.resp import RespConnection
from edge.stream import StreamWriter
from shared.keys import Keys
from shared.wire import IngestRecord

__all__ = ("app",)

_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"11")]
_RECORD = IngestRecord(
    id="evt_01JD0000000000000000000000",
    endpoint_id="ep_floor",
    received_at_us=0,
    method="POST",
    path="",
    query="",
    headers=[],
    body=b"",
    source_ip=None,
)
_writer: StreamWriter | None = None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _writer
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.startup":
            pass
        keys = Keys(os.environ["HOOKYARD_REDIS_PREFIX"] + "floor:", 1)
        _writer = StreamWriter(RespConnection(os.environ["REDIS_URL"]), keys, high_water=1 << 62)
        await send({"type": "lifespan.startup.complete"})
        await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    message = await receive()
    await _writer.append(0, _RECORD)  # type: ignore[union-attr]
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": message.get("body", b"")[:0] + b'{"ok":true}'})
