"""The composite type the recorder's rows travel as (``delivery_record``, migration 0038) is
``delivery_records.COLUMNS`` with ``_TYPES``, attribute by attribute: a column added to one and not the other
would shift every value after it, or be refused only once a worker writes."""

from __future__ import annotations

import pytest

from control.db import delivery_records
from control.db.context import Context


async def test_the_type_is_the_columns_with_their_types(ctx: Context) -> None:
    async with ctx.pool.acquire() as conn:
        attributes = await conn.fetch(
            """SELECT a.attname, a.atttypid::regtype::text AS type FROM pg_attribute a
                WHERE a.attrelid = 'delivery_record'::regclass AND a.attnum > 0 AND NOT a.attisdropped
                ORDER BY a.attnum"""
        )
        wanted = [(c, await conn.fetchval("SELECT $1::regtype::text", t)) for c, t in
                  zip(delivery_records.COLUMNS, delivery_records._TYPES, strict=True)]  # fmt: skip
    assert [(a["attname"], a["type"]) for a in attributes] == wanted


def test_a_row_that_is_a_list_or_of_another_length() -> None:
    """A row given as a list is still one record (asyncpg would read a list as a nested array); one of another
    length is refused by name before anything is sent."""
    width = len(delivery_records.COLUMNS)
    assert delivery_records._records([[None] * width]) == [(None,) * width]
    with pytest.raises(ValueError, match="COLUMNS"):
        delivery_records._records([(None,) * (width - 1)])
