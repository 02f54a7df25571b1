"""The provider's published example payloads the tests keep (``tests/data/real/code_host``: 329 GitHub webhook
examples over 58 event types, MIT, origin in its README), as the benches send them."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

__all__ = ("real_payloads",)

EXAMPLES = Path(__file__).resolve().parent.parent / "tests" / "data" / "real" / "code_host" / "examples.json.gz"


@cache
def real_payloads() -> tuple[tuple[str, bytes], ...]:
    """(event type, body: the example as compact JSON) of every example, in their order."""
    with gzip.open(EXAMPLES) as f:
        return tuple(
            (e["event_type"], json.dumps(e["payload"], separators=(",", ":"), ensure_ascii=False).encode())
            for e in json.load(f)
        )
