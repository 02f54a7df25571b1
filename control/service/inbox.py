"""Who may open ``/inbox/{endpoint_id}`` (the page a human follows from ``inbox_url``), and what it shows.

The owner, two ways: the browser that called /api/start (its ``hy_session`` cookie, while its account is
anonymous: once registered, the account is reached with its keys), or any usable key of the endpoint's
account in ``Authorization`` (``hy_tmp_`` tokens included, never on /v1). Like /v1, no credentials (or bad
ones) is 401 and another account's endpoint is the same 404 as an unknown one.
"""

from __future__ import annotations

from control.db import accounts as db_accounts
from control.records.endpoints import Endpoint
from control.service import Context, Principal
from control.service.accounts import authenticate
from control.service.anonymous import session_hash
from control.service.endpoints import get_endpoint
from shared.errors import UnauthorizedError

__all__ = ("inbox_endpoint",)


async def inbox_endpoint(ctx: Context, endpoint_id: str, *, authorization: str | None, session: str | None) -> Endpoint:
    if authorization:
        principal = await authenticate(ctx, authorization, allow_temporary=True)
    else:
        principal = await _session_principal(ctx, session)
    return await get_endpoint(ctx, principal, endpoint_id)


async def _session_principal(ctx: Context, session: str | None) -> Principal:
    stored = session_hash(session)
    account = None
    if stored is not None:
        async with ctx.pool.acquire() as conn:
            account = await db_accounts.session_account(conn, stored, lock=False)
    if account is None or account["kind"] != "anonymous":
        raise UnauthorizedError(
            "open the inbox from the browser that called /api/start, or send `Authorization: Bearer <api_token>`"
        )
    return Principal(account_id=account["id"], key_id="", kind="temporary", read_only=True)
