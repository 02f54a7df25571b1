"""What the flush worker's routing step reads: the active rules of some endpoints with their destinations."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

__all__ = ("active_rules",)


async def active_rules(conn: asyncpg.Connection, endpoint_ids: Sequence[str]) -> list[asyncpg.Record]:
    """One row per endpoint and active rule that has destinations: ``(endpoint_id, environment, rule_id,
    condition_tree, destination_ids)``; an endpoint without any gets one row with a null ``rule_id`` (so
    "no rules" is cached too). Unknown (deleted) endpoints get no row."""
    return await conn.fetch(
        """SELECT e.id AS endpoint_id, e.environment, r.id AS rule_id, r.condition_tree,
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
