"""The headless browser of the inbox tests, for the transform editor's and the crashed transform's tests, and
the sandbox pool of the pool tests (one process; a module may ask for more: ``pool_size``)."""

from collections.abc import AsyncIterator

import pytest

from control.transform.pool import Pool
from tests.inbox_browser import browser  # noqa: F401 - a fixture, used by test_inbox_editor.py and test_inbox_crash.py


@pytest.fixture
def pool_size() -> int:
    """One sandbox process: what one call does to it, the next call (another account's too) meets."""
    return 1


@pytest.fixture
async def pool(pool_size: int) -> AsyncIterator[Pool]:
    made = Pool(size=pool_size, per_account=1)
    try:
        yield made
    finally:
        await made.close()
