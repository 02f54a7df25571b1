"""The provider's published example payloads the tests keep (``tests/data/real/code_host``: 329 GitHub webhook
examples over 58 event types, MIT, origin in its README), as the benches send them, and the ingest record the
edge writes for one (used by the types bench and by ``tests/schemas``, which may import bench, never the
other way round)."""

from __future__ import annotations

import gzip
import json
import time
from functools import cache
from pathlib import Path
from typing import Any

from shared import ids
from shared.wire import IngestRecord

__all__ = ("code_host_record", "real_payloads")

EXAMPLES = Path(__file__).resolve().parent.parent / "tests" / "data" / "real" / "code_host" / "examples.json.gz"


@cache
def real_payloads() -> tuple[tuple[str, bytes], ...]:
    """(event type, body: the example as compact JSON) of every example, in their order."""
    with gzip.open(EXAMPLES) as f:
        return tuple(
            (e["event_type"], json.dumps(e["payload"], separators=(",", ":"), ensure_ascii=False).encode())
            for e in json.load(f)
        )


def code_host_record(
    endpoint_id: str, event_type: str, body: bytes, provider: str | None = "code_host", **kw: Any
) -> IngestRecord:
    """What the edge writes for a verified delivery of ``body`` with ``X-GitHub-Event: <event_type>``
    (unattributed, with no event type, when ``provider`` is None)."""
    return IngestRecord(
        id=ids.new_id("evt"),
        endpoint_id=endpoint_id,
        received_at_us=int(time.time() * 1_000_000),
        method="POST",
        path="",
        query="",
        headers=[(b"content-type", b"application/json"), (b"x-github-event", event_type.encode())],
        body=body,
        source_ip="203.0.113.9",
        provider=provider,
        event_type=event_type if provider else None,
        signature_valid=True,
        **kw,
    )
