"""Who is calling: the one place any authenticated surface turns a presented credential into a ``Principal``,
and charges that credential's rate limit (``control.support.rate_limits``) as it does.

``/v1`` and ``/mcp`` come here through their Bearer middlewares (``control.api.auth``, ``control.mcp.auth``),
the inbox page, its data routes and the redemption of an inbox link through ``control.service.inbox.page`` and
``control.api.inbox.page``.
Nothing else resolves credentials (``tests/security/test_rate_limits.py`` checks the imports), so a new
surface cannot be outside the limit without going around this module on purpose.

Each credential is a bucket of its own (``Keys.rate_limit``):

- an API key or a temporary token: its key row (``key_...``), so every token of an anonymous account and
  every key of an account has its own budget, as on /v1 since the start;
- an inbox link: ``inbox:<endpoint id>``, every link and link cookie of the endpoint together. A link is
  not single-use (chat previews fetch it) and each redemption signs a fresh cookie; keyed per cookie, one
  link would be worth as many buckets as redemptions. Redeeming a link is charged to the same bucket;
- a browser session of ``/api/start`` (``hy_session``): ``session:<sha-256 of the cookie>``.

The charge follows verification: bad credentials are 401 (or 403) and spend nobody's budget, so a flood
of forged ones cannot lock the owner out.
"""

from __future__ import annotations

from control.db import accounts as db_accounts
from control.db.context import Context, Principal
from control.service.accounts import authenticate
from control.service.anonymous import session_hash
from control.service.inbox_links import Redeemed, cookie_principal, redeem_link
from control.support.rate_limits import charge_credential
from shared.errors import UnauthorizedError

__all__ = ("INBOX_DENIED", "bearer_caller", "inbox_caller", "redeemed_link")

INBOX_DENIED = (
    "open the inbox with an inbox link (a temporary endpoint's inbox_url from /api/start, or a new one from the "
    "MCP tool create_inbox_link, POST /v1/endpoints/{id}/inbox-link or `hookyard open`), or from the browser "
    "that called /api/start, or send `Authorization: Bearer <api_token or API key>`"
)
LINKS = "this endpoint's inbox links"


async def bearer_caller(ctx: Context, authorization: str | None, *, allow_temporary: bool) -> Principal:
    """``Authorization: Bearer <key>``: 401 without a usable key, 403 for a temporary token where none is
    allowed (/v1), 429 once the key's bucket is spent."""
    principal = await authenticate(ctx, authorization, allow_temporary=allow_temporary)
    subject = "this temporary token" if principal.kind == "temporary" else "this API key"
    await charge_credential(ctx, principal.key_id, subject)
    return principal


async def inbox_caller(
    ctx: Context, endpoint_id: str, *, authorization: str | None, session: str | None, link: str | None
) -> Principal:
    """The caller of ``/inbox/{endpoint_id}`` and its data routes: a Bearer key or token when one is sent
    (temporary tokens included), else the link cookie for this endpoint, else the browser session (of an
    anonymous account). Whether the principal owns the endpoint is the caller's check."""
    if authorization:
        return await bearer_caller(ctx, authorization, allow_temporary=True)
    principal = await cookie_principal(ctx, endpoint_id, link)
    if principal is not None:
        await charge_credential(ctx, f"inbox:{endpoint_id}", LINKS)
        return principal
    return await _session_caller(ctx, session)


async def _session_caller(ctx: Context, session: str | None) -> Principal:
    stored = session_hash(session)
    account = None
    if stored is not None:
        async with ctx.pool.acquire() as conn:
            account = await db_accounts.session_account(conn, stored, lock=False)
    if stored is None or account is None or account.kind != "anonymous":
        raise UnauthorizedError(INBOX_DENIED)
    await charge_credential(ctx, f"session:{stored.hex()}", "this browser session")
    return Principal(account_id=account.id, key_id="", kind="temporary")


async def redeemed_link(ctx: Context, endpoint_id: str, token: str) -> Redeemed:
    """Trades a signed inbox link for its cookie (``control.service.inbox_links``), charged to the
    endpoint's links like the cookie's every use."""
    redeemed = await redeem_link(ctx, endpoint_id, token)
    await charge_credential(ctx, f"inbox:{endpoint_id}", LINKS)
    return redeemed
