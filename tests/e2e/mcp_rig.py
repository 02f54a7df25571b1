"""The rig of tests/e2e/test_mcp.py (and test_mcp_documented.py): one database, one stack (a control plane with
two granian workers, an edge, a worker) and one destination server per module, and the inputs that /v1 and the
MCP tools must refuse alike. Fixtures here are module-scoped and bound by name in each test module."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from shared.settings import Settings, load_settings
from tests.conftest import Servers, forget_prefix
from tests.destination import Destination, serving
from tests.e2e.mcp_support import NO_SUCH_EVENT
from tests.helpers import module_database_url
from tests.stack import Stack

database_url = module_database_url  # one database for the module: every test uses accounts of its own


@pytest.fixture(scope="module")
def module_settings(servers: Servers, database_url: str) -> Iterator[Settings]:
    prefix = f"hyt:{uuid.uuid4().hex[:12]}:"
    yield load_settings({}, database_url=database_url, redis_url=servers.redis_url, redis_prefix=prefix, egress="any")

    asyncio.run(forget_prefix(servers.redis_url, prefix))


@pytest.fixture(scope="module")
def sink() -> Iterator[Destination]:
    with serving() as server:
        yield server


@pytest.fixture(scope="module")
def mcp_stack(
    module_settings: Settings, sink: Destination, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Stopped before the sink (which it depends on for that): the worker's kept-alive connections to the
    sink close with the worker, not under the sink's feet."""
    stack = Stack(module_settings, tmp_path_factory.mktemp("mcp-stack"))
    try:
        port = stack.control_port
        stack.start("control", "control", "--port", str(port), "--workers", "2", port=port)
        stack.start_edge()
        stack.start_worker()
        yield stack
    finally:
        stack.stop_all()


def refused_by_both(ep: str) -> list[tuple[str, dict[str, Any], str, str, Any]]:
    """(tool, its arguments, method, /v1 path, body): the same input refused by the tool and by /v1 (not an
    unknown field: a tool lists its arguments, tests/control/test_mcp_agent_frictions.py)."""
    return [
        ("create_endpoint", {"name": 5}, "POST", "/v1/endpoints", {"name": 5}),
        ("create_endpoint", {"name": ""}, "POST", "/v1/endpoints", {"name": ""}),
        ("get_event", {"event_id": NO_SUCH_EVENT}, "GET", f"/v1/events/{NO_SUCH_EVENT}", None),
        ("get_endpoint", {"endpoint_id": "nonsense"}, "GET", "/v1/endpoints/nonsense", None),
        (
            "update_auth_config",
            {"endpoint_id": ep, "secret": "short"},
            "PATCH",
            f"/v1/endpoints/{ep}/auth-config",
            {"secret": "short"},
        ),
        (
            "create_rule",
            {
                "endpoint_id": ep,
                "name": "r",
                "condition_tree": {"op": "XOR", "children": []},
                "destination_ids": ["dst_01KAAAAAAAAAAAAAAAAAAAAAAA"],
            },
            "POST",
            f"/v1/endpoints/{ep}/rules",
            {
                "name": "r",
                "condition_tree": {"op": "XOR", "children": []},
                "destination_ids": ["dst_01KAAAAAAAAAAAAAAAAAAAAAAA"],
            },
        ),
        (
            "list_events",
            {"endpoint_id": ep, "since": "yesterday"},
            "GET",
            f"/v1/endpoints/{ep}/events?since=yesterday",
            None,
        ),
        (
            "replay_event",
            {"event_id": NO_SUCH_EVENT, "url": "ftp://x"},
            "POST",
            f"/v1/events/{NO_SUCH_EVENT}/replay",
            {"url": "ftp://x"},
        ),
    ]
