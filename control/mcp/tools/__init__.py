"""The tools, one module per resource; importing this package registers them all (``control.mcp.registry``).

A new resource's tools: a module here with ``@tool`` adapters, imported below. A /v1 route without a tool
fails ``tests/test_mcp_catalog.py``.
"""

from __future__ import annotations

from control.mcp.tools import (
    alerts,
    deliveries,
    destinations,
    endpoints,
    erasures,
    events,
    inbox,
    labels,
    replay,
    retries,
    rules,
    schemas,
    stats,
    transforms,
    trigger,
    trust,
)

__all__ = (
    "alerts",
    "deliveries",
    "destinations",
    "endpoints",
    "erasures",
    "events",
    "inbox",
    "labels",
    "replay",
    "retries",
    "rules",
    "schemas",
    "stats",
    "transforms",
    "trigger",
    "trust",
)
