"""What the flush worker's routing step reads: the config versions of a batch's endpoints, and the active
rules (with their destinations) of those whose version changed."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import asyncpg

from control.db.connection import Connection

__all__ = ("active_rules", "config_versions", "shaping")


async def config_versions(conn: Connection, endpoint_ids: Collection[str]) -> dict[str, int]:
    """``endpoints.config_version`` of each endpoint that exists (migration 0005 bumps it on every change
    routing depends on); one index lookup per endpoint, once per flush batch."""
    rows = await conn.fetch("SELECT id, config_version FROM endpoints WHERE id = ANY($1::text[])", list(endpoint_ids))
    return {row[0]: row[1] for row in rows}


async def active_rules(conn: Connection, endpoint_ids: Sequence[str]) -> list[asyncpg.Record]:
    """One row per endpoint and active rule that has destinations: ``(endpoint_id, environment,
    config_version, rule_id, condition_tree, destination_ids)``; an endpoint without any gets one row with a
    null ``rule_id`` (so "no rules" is cached too). Unknown (deleted) endpoints get no row. One statement, so
    the version and the rules are of the same snapshot."""
    return await conn.fetch(
        """SELECT e.id AS endpoint_id, e.environment, e.config_version, r.id AS rule_id, r.condition_tree,
                  r.destination_ids
             FROM endpoints e
             LEFT JOIN LATERAL (
                  SELECT r.id, r.condition_tree,
                         array_agg(rd.destination_id ORDER BY rd.position, rd.destination_id) AS destination_ids
                    FROM rules r JOIN rule_destinations rd ON rd.rule_id = r.id
                   WHERE r.endpoint_id = e.id AND r.active
                   GROUP BY r.id
             ) r ON true
            WHERE e.id = ANY($1::text[])
            ORDER BY e.id, r.id""",
        list(endpoint_ids),
    )


async def shaping(conn: Connection, endpoint_ids: Sequence[str]) -> list[asyncpg.Record]:
    """The destinations of these endpoints whose tasks carry keys (FIFO ordering or deduplication, migration
    0020): ``(endpoint_id, destination_id, ordering, ordering_key, deduplicate_window_s)``. Read with the
    rules, when an endpoint's config version moved (a change of these columns moves it)."""
    return await conn.fetch(
        """SELECT endpoint_id, id AS destination_id, ordering, ordering_key, deduplicate_window_s
             FROM destinations
            WHERE endpoint_id = ANY($1::text[]) AND (ordering <> 'none' OR deduplicate_window_s IS NOT NULL)""",
        list(endpoint_ids),
    )
