"""End to end through real processes (``tests.stack``): edge, control and workers together on the test's database
and Redis prefix: capture, scale-out, faults, logs, metrics, a Redis Cluster, MCP over HTTP, schemathesis and
a real browser."""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from control.support.client_tls import verify_for
from shared.settings import Settings
from tests.conftest import Account, make_account
from tests.helpers import module_settings_fixture  # noqa: F401 - the fixture module_settings
from tests.inbox_browser import browser  # noqa: F401 - a fixture, used by the inbox page's tests
from tests.stack import Stack


@pytest.fixture
async def capture_stack(stack: Stack, database_url: str) -> tuple[Stack, Account]:
    """Control, an edge and a flush (and learn) worker as real processes, and an account: the capture path
    whole."""
    stack.start_control()
    stack.start_edge()
    stack.start_worker("worker", "flush", "learn")
    return stack, await make_account(database_url)


def new_endpoint(stack: Stack, account: Account, **body: object) -> dict:
    """An endpoint created over the running control plane's /v1."""
    response = httpx.post(f"{stack.control_url}/v1/endpoints", json={"name": "e2e", **body}, headers=account.headers)
    assert response.status_code == 201, response.text
    return response.json()


def stored_events(stack: Stack, account: Account, endpoint_id: str, want: int, timeout_s: float = 10) -> list[dict]:
    """Every event of the endpoint once ``want`` are stored (paging through the whole list), polled through one
    client (``tests.stack.Stack.wait_healthy`` says why)."""
    deadline = time.monotonic() + timeout_s
    verify = verify_for(stack.control_url)  # TLS trust only for https (control.support.client_tls)
    with httpx.Client(base_url=stack.control_url, headers=account.headers, trust_env=False, verify=verify) as api:
        while True:
            events, cursor = [], None
            while True:
                params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
                page = api.get(f"/v1/endpoints/{endpoint_id}/events", params=params)
                if page.status_code == 429:  # pages of many events, 20 polls a second: past the key's rate
                    time.sleep(float(page.headers["retry-after"]))  # waited as the docs tell a client to
                    continue
                assert page.status_code == 200, page.text
                events += page.json()["events"]
                cursor = page.json()["next_cursor"]
                if not cursor:
                    break
            if len(events) >= want or time.monotonic() > deadline:
                return events
            time.sleep(0.05)


@pytest.fixture(scope="module")
def module_stack(module_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Control, an edge and a flush worker started once for a module whose tests each use an account and
    endpoints of their own (``shared_stack`` puts back what a test added)."""
    stack = Stack(module_settings, tmp_path_factory.mktemp("module-stack"))
    try:
        stack.start_control()
        stack.start_edge()
        stack.start_worker("worker", "flush", "learn")
        yield stack
    finally:
        stack.stop_all()


@pytest.fixture
async def shared_stack(module_stack: Stack, module_settings: Settings) -> AsyncIterator[tuple[Stack, Account]]:
    """The module's stack and a fresh account; processes a test starts on it are stopped, and the environment
    it changed for them restored, when it ends."""
    env, procs = dict(module_stack.env), set(module_stack.procs)
    yield module_stack, await make_account(module_settings.database_url)
    for name in set(module_stack.procs) - procs:
        module_stack.kill(name, signal.SIGTERM)
    module_stack.env.clear()
    module_stack.env.update(env)
