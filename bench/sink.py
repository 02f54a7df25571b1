"""A destination that keeps count: a bare raw-ASGI app (granian) that appends the ``x-hookyard-event-id`` of
every request it receives to the file named by ``SINK_FILE`` and answers 200.

One line per request, appended with one ``write`` on an ``O_APPEND`` descriptor, so a sink killed and started
again (the "destination down" fault) keeps every line it wrote; the fault ledger counts deliveries and extra
(at-least-once) deliveries from the file.
"""

from __future__ import annotations

import os
from typing import Any

_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"2")]
_fd: int | None = None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _fd
    if scope["type"] != "http":
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    if _fd is None:
        _fd = os.open(os.environ["SINK_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    event_id = next((v for k, v in scope["headers"] if k == b"x-hookyard-event-id"), b"-")
    os.write(_fd, event_id + b"\n")
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": b"{}"})
