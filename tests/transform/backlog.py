"""A backlog of transformed deliveries to one destination: what the tests of the deliver loop's transform stage
(``test_ahead``, ``test_blocked_claims``) start from."""

from __future__ import annotations

from control.db.context import Context
from tests.destination import make_task

TRIVIAL = "function handler(request) { request.headers['x-transformed'] = '1'; return request; }"


async def transformed_backlog(ctx: Context, url: str, count: int) -> list[dict[str, str]]:
    """``count`` due tasks of one endpoint to one destination at ``url`` whose transform is ``TRIVIAL``."""
    first = await make_task(ctx, url)
    async with ctx.pool.acquire() as conn:
        await conn.execute("UPDATE destinations SET transform = $2 WHERE id = $1", first["destination"], TRIVIAL)
    return [first] + [
        await make_task(ctx, url, endpoint_id=first["endpoint"], destination_id=first["destination"])
        for _ in range(count - 1)
    ]
