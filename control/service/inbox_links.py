"""Signed inbox links: how a human opens an endpoint's inbox page in any browser.

A browser cannot send a Bearer key, and only the browser that called /api/start has a session cookie. So
a link carries a token that says "endpoint E of account A, until T, read-only or not", signed with
HMAC-SHA256: the ``inbox_url`` of /api/start is one, valid as long as its temporary endpoint
(``lifetime_link``), and ``POST /v1/endpoints/{id}/inbox-link`` (the MCP tool ``create_inbox_link``, which
temporary tokens may call too; ``hookyard open``) hands out one valid ``LINK_LIFETIME``. Opening it trades
the token for a cookie of the same form (a different purpose in the MAC, so neither passes for the other)
scoped to ``/inbox/{id}``, valid at least ``COOKIE_LIFETIME`` and at most as long as the link, and
redirects to the clean URL, so the token leaves the address bar and the history.

Nothing is stored per link: the key (``instance_keys``, made once per deployment) is what all control
processes share. Whoever has that key makes a link or cookie for any endpoint, so it is stored sealed like
every other secret (``control.support.sealing``): a dump of the database alone does not give it away.
Revocation is per endpoint: its ``inbox_generation`` (migration 0016) is signed in, and
``rotate_inbox_links`` raises it, which ends every link and cookie of that endpoint at once (one link
cannot be revoked alone); deleting the endpoint (or the key row) ends them too. Every use checks that the
endpoint exists and belongs to the account. A link is not single-use on purpose: chat apps fetch a URL to
preview it, which would spend a single-use link before its human clicks it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg

from control.db import inbox_links as db_links
from control.db import instance_keys
from control.db.context import Context, Principal
from control.records.inbox import InboxLink
from control.records.storable import check_text
from control.service.endpoints import require_endpoint, require_write
from control.support.parameter_messages import text_length
from control.support.sealing import open_instance_key, seal_instance_key
from shared import ids
from shared.errors import UnauthorizedError, ValidationError

__all__ = (
    "COOKIE_LIFETIME",
    "LINK_COOKIE",
    "LINK_LIFETIME",
    "LINK_PARAMETER",
    "MAX_LINK",
    "Redeemed",
    "cookie_principal",
    "create_inbox_link",
    "lifetime_link",
    "page_url",
    "redeem_link",
    "rotate_inbox_links",
)

LINK_LIFETIME = timedelta(minutes=15)
"""Long enough to paste a link into a chat and click it; short enough that a transcript read later is stale."""
COOKIE_LIFETIME = timedelta(hours=12)
"""A working day in front of the page; then the link again (or a new one)."""
LINK_COOKIE = "hy_inbox"
LINK_PARAMETER = "link"
MAX_LINK = 200
"""Longer than any token this module signs (about 110 characters)."""
_KEY_NAME = "inbox-links"
_TOKEN = re.compile(r"(acct_[0-9A-Za-z]{1,40})\.([0-9]{1,12})\.([rw])\.([A-Za-z0-9_-]{43})")

_cached: tuple[asyncpg.Pool, bytes] | None = None
"""The key of the last pool asked (one per process in production; tests make one per app)."""


async def _key(ctx: Context) -> bytes:
    global _cached
    cached = _cached
    if cached is not None and cached[0] is ctx.pool:
        return cached[1]
    candidate = seal_instance_key(ctx, _KEY_NAME, secrets.token_bytes(32))
    async with ctx.pool.acquire() as conn:
        stored = await instance_keys.get_or_create(conn, _KEY_NAME, candidate)
    key = open_instance_key(ctx, _KEY_NAME, stored)
    _cached = (ctx.pool, key)
    return key


def _mac(key: bytes, purpose: str, endpoint_id: str, account_id: str, expires: int, mode: str, generation: int) -> str:
    message = f"hookyard inbox {purpose} v1\n{endpoint_id}\n{account_id}\n{expires}\n{mode}"
    if generation:  # an endpoint never rotated keeps the form links had before rotation existed
        message += f"\n{generation}"
    return base64.urlsafe_b64encode(hmac.digest(key, message.encode(), hashlib.sha256)).decode().rstrip("=")


def _sign(
    key: bytes, purpose: str, endpoint_id: str, principal: Principal, expires: datetime, generation: int = 0
) -> str:
    at, mode = int(expires.timestamp()), "r" if principal.read_only else "w"
    mac = _mac(key, purpose, endpoint_id, principal.account_id, at, mode, generation)
    return f"{principal.account_id}.{at}.{mode}.{mac}"


def _verify(
    key: bytes, purpose: str, endpoint_id: str, token: str | None, generation: int
) -> tuple[Principal, datetime] | None:
    """Who a token of ``purpose`` stands for on ``endpoint_id``, and until when; None when forged, expired,
    of an earlier generation, or garbage."""
    found = _TOKEN.fullmatch(token or "")
    if found is None:
        return None
    account_id, at, mode, mac = found.groups()
    if not ids.is_id(account_id, "acct") or int(at) <= datetime.now(UTC).timestamp():
        return None
    if not hmac.compare_digest(mac, _mac(key, purpose, endpoint_id, account_id, int(at), mode, generation)):
        return None
    principal = Principal(account_id=account_id, key_id="", kind="temporary", read_only=mode == "r")
    return principal, datetime.fromtimestamp(int(at), UTC)


async def _generation(ctx: Context, endpoint_id: str) -> int:
    """The generation signed into the endpoint's links now (0 for an unknown endpoint: its use is a 404 later)."""
    if not ids.is_id(endpoint_id, "ep"):
        return 0
    async with ctx.pool.acquire() as conn:
        return await db_links.generation(conn, endpoint_id) or 0


def page_url(ctx: Context, endpoint_id: str) -> str:
    """The inbox page itself, without a link: what the page's address bar shows once a link was traded."""
    return f"{ctx.settings.control_url}/inbox/{endpoint_id}"


async def _link(ctx: Context, principal: Principal, endpoint_id: str, expires: datetime, generation: int) -> InboxLink:
    expires = expires.astimezone(UTC).replace(microsecond=0)
    token = _sign(await _key(ctx), "link", endpoint_id, principal, expires, generation)
    return InboxLink(url=f"{page_url(ctx, endpoint_id)}?{LINK_PARAMETER}={token}", expires_at=expires)


async def create_inbox_link(ctx: Context, principal: Principal, endpoint_id: str) -> InboxLink:
    """A link to the endpoint's inbox for whoever holds it, valid ``LINK_LIFETIME``, read-only when the
    caller's key is."""
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        generation = await db_links.generation(conn, endpoint_id) or 0
    return await _link(ctx, principal, endpoint_id, datetime.now(UTC) + LINK_LIFETIME, generation)


async def lifetime_link(ctx: Context, account_id: str, endpoint_id: str, expires_at: datetime) -> str:
    """The ``inbox_url`` of /api/start: a link for the endpoint's whole life, as the ingest URL is, so the
    agent that provisioned the endpoint can hand it to its human. The same URL on every call until the
    endpoint's links are rotated (its expiry and generation are what is signed)."""
    principal = Principal(account_id=account_id, key_id="", kind="temporary")
    return (await _link(ctx, principal, endpoint_id, expires_at, await _generation(ctx, endpoint_id))).url


async def rotate_inbox_links(ctx: Context, principal: Principal, endpoint_id: str) -> InboxLink:
    """Ends every link and page cookie of the endpoint handed out so far, and answers the link that replaces
    them: for a temporary endpoint one valid as long as the endpoint (its new ``inbox_url``), else one valid
    ``LINK_LIFETIME``."""
    require_write(principal)
    async with ctx.pool.acquire() as conn:
        row = await require_endpoint(conn, principal, endpoint_id)
        generation = await db_links.rotate(conn, principal.account_id, endpoint_id)
    if generation is None:  # deleted between the two statements
        return await create_inbox_link(ctx, principal, endpoint_id)
    lasting = row["temporary"] and row["expires_at"] is not None
    expires = row["expires_at"] if lasting else datetime.now(UTC) + LINK_LIFETIME
    return await _link(ctx, principal, endpoint_id, expires, generation)


@dataclass(frozen=True, slots=True)
class Redeemed:
    cookie: str
    """The value of the ``hy_inbox`` cookie to set (path ``/inbox/{id}``)."""
    max_age_s: int


async def redeem_link(ctx: Context, endpoint_id: str, token: str) -> Redeemed:
    """Trades a valid link for the cookie that opens the page; 401 for a forged, expired or rotated one, 404
    when the endpoint is gone; 400 for a value no link could hold (too long, NUL), like any other text
    parameter. The cookie lasts ``COOKIE_LIFETIME``, or as long as the link when that is longer (a lifetime
    link opens the page for the endpoint's life, also after the token left the address bar)."""
    if len(token) > MAX_LINK:
        raise ValidationError(text_length(LINK_PARAMETER, None, MAX_LINK, token))
    check_text(token, LINK_PARAMETER)
    key = await _key(ctx)
    generation = await _generation(ctx, endpoint_id)
    verified = _verify(key, "link", endpoint_id, token, generation)
    if verified is None:
        raise UnauthorizedError(
            f"{LINK_PARAMETER}: this inbox link is not valid: it has expired, or the endpoint's inbox links were "
            "rotated; ask whoever gave it to you for a new one"
        )
    principal, link_expires = verified
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
    now = datetime.now(UTC).replace(microsecond=0)
    expires = max(now + COOKIE_LIFETIME, link_expires)
    cookie = _sign(key, "cookie", endpoint_id, principal, expires, generation)
    return Redeemed(cookie=cookie, max_age_s=int((expires - now).total_seconds()))


async def cookie_principal(ctx: Context, endpoint_id: str, cookie: str | None) -> Principal | None:
    """Who the ``hy_inbox`` cookie stands for on this endpoint; None without a valid one (not an error: the
    caller may hold another credential). Ownership of the endpoint is checked by the caller."""
    if not cookie:
        return None
    verified = _verify(await _key(ctx), "cookie", endpoint_id, cookie, await _generation(ctx, endpoint_id))
    return None if verified is None else verified[0]
