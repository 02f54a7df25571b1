"""The columns that hold sealed secrets (``control.db.keyring``), read and re-sealed row by row.

One list names them all, so re-sealing (``hookyard migrate``, ``hookyard rotate-encryption-key``) cannot
miss a column that the service layer seals. Each replacement is a compare-and-set on the stored value: a
secret rotated meanwhile through the API is never overwritten by a re-seal of its previous value.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import NamedTuple

from control.db.connection import Connection

__all__ = (
    "ALERT_DESTINATION",
    "COLUMNS",
    "DESTINATION",
    "DESTINATION_AUTH",
    "DESTINATION_PREVIOUS",
    "INSTANCE_KEY",
    "SealedColumn",
    "replace",
    "rows",
)


class SealedColumn(NamedTuple):
    table: str
    key: str
    column: str

    @property
    def purpose(self) -> str:
        """The associated data's column part: a value sealed for one column never opens in another."""
        return f"{self.table}.{self.column}"


DESTINATION = SealedColumn("destinations", "id", "signing_secret")
"""A destination's own signing secret (migration 0013), which signs its rule deliveries."""
DESTINATION_PREVIOUS = SealedColumn("destinations", "id", "previous_signing_secret")
"""The signing secret a rotation replaced, while its overlap lasts (migration 0031)."""
DESTINATION_AUTH = SealedColumn("destinations", "id", "auth_sealed")
"""How deliveries authenticate to the destination, secrets included, as JSON (migration 0031)."""
INSTANCE_KEY = SealedColumn("instance_keys", "name", "secret")
"""A deployment's own key by name (migration 0015): the inbox link key, which signs links and page cookies."""
ALERT_DESTINATION = SealedColumn("alert_destinations", "id", "signing_secret")
"""An alert destination's own signing secret (migration 0022), which signs the alerts sent to it."""
COLUMNS: tuple[SealedColumn, ...] = (
    SealedColumn("endpoints", "id", "signing_secret"),
    SealedColumn("auth_configs", "endpoint_id", "secret"),
    DESTINATION,
    INSTANCE_KEY,
    ALERT_DESTINATION,
    DESTINATION_PREVIOUS,
    DESTINATION_AUTH,
)

_BATCH = 500


async def rows(conn: Connection, column: SealedColumn) -> AsyncIterator[tuple[str, str]]:
    """(row key, stored value) of every row with a value, in key order, in batches (keyset pagination)."""
    after = ""
    while True:
        batch = await conn.fetch(
            f"SELECT {column.key} AS k, {column.column} AS v FROM {column.table} "
            f"WHERE {column.column} IS NOT NULL AND {column.key} > $1 ORDER BY {column.key} LIMIT {_BATCH}",
            after,
        )
        for row in batch:
            yield row["k"], row["v"]
        if len(batch) < _BATCH:
            return
        after = batch[-1]["k"]


async def replace(conn: Connection, column: SealedColumn, key: str, old: str, new: str) -> bool:
    """Sets the value when it is still ``old``; False when it changed meanwhile (or the row is gone)."""
    status = await conn.execute(
        f"UPDATE {column.table} SET {column.column} = $3 WHERE {column.key} = $1 AND {column.column} = $2",
        key,
        old,
        new,
    )
    return status.endswith(" 1")
