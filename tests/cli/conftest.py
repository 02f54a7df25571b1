"""The ``hookyard`` command as a user runs it: ``up`` with its embedded servers, ``listen``, ``trigger``, ``tail``
and ``open``, as subprocesses against real servers. The webhook commands' modules share a stack per module
(``shared_stack``) and an account per test (``stack_cli_and_api``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import module_settings_fixture  # noqa: F401 - the fixture module_settings
from tests.onboarding.clirun import procs, shared_stack, stack_cli_and_api  # noqa: F401 - fixtures


@pytest.fixture
def private_dir() -> Iterator[Path]:
    """A 0700 directory (Postgres's system user must be let through it) outside pytest's temp root, which
    any pytest session starting meanwhile tightens back to 0700, cutting a running Postgres off its files."""
    path = Path(tempfile.mkdtemp(prefix="hookyard-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
