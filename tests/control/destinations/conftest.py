"""Each destination-API module gets a database of its own (``database_url`` is module-scoped, as it was for
the single module these were split from)."""

from __future__ import annotations

from tests.helpers import module_database_url  # noqa: F401 - fixture
