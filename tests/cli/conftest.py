"""The ``hookyard`` command as a user runs it: ``up`` with its embedded servers, ``listen``, ``trigger``, ``tail``
and ``open``, as subprocesses against real servers. The webhook commands' modules share a stack per module
(``shared_stack``) and an account per test (``stack_cli_and_api``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from shared.settings import Settings
from tests.conftest import make_account
from tests.helpers import module_settings_fixture  # noqa: F401 - the fixture module_settings
from tests.onboarding.clirun import procs  # noqa: F401 - the fixture procs
from tests.stack import Stack


@pytest.fixture
def private_dir() -> Iterator[Path]:
    """A 0700 directory (Postgres's system user must be let through it) outside pytest's temp root, which
    any pytest session starting meanwhile tightens back to 0700, cutting a running Postgres off its files."""
    path = Path(tempfile.mkdtemp(prefix="hookyard-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_stack(module_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One edge, control and worker for the module's tests, which each use their own account and endpoints."""
    stack = Stack(module_settings, tmp_path_factory.mktemp("cli-webhooks"))
    try:
        stack.start_edge()
        stack.start_control()
        stack.env["HOOKYARD_LOG_ACTIVITY"] = "true"  # the worker's log says what it stored and delivered
        stack.start_worker()
        yield stack
    finally:
        stack.stop_all()


@pytest.fixture
async def stack_cli_and_api(
    shared_stack: Stack, module_settings: Settings, tmp_path: Path
) -> AsyncIterator[tuple[Stack, dict[str, str], httpx.Client]]:
    if "control" not in shared_stack.procs:  # a test that restarts it failed before it could
        shared_stack.start_control()
    account = await make_account(module_settings.database_url)
    env = {**shared_stack.env, "HOOKYARD_API_KEY": account.key, "HOOKYARD_DATA_DIR": str(tmp_path / "cli")}
    with httpx.Client(base_url=shared_stack.control_url, headers=account.headers, timeout=30) as api:
        yield shared_stack, env, api
