"""Signed inbox links: how a permanent account's human (or the human an agent works for) opens an inbox page.

A browser cannot send a Bearer key, and only the browser that called /api/start has a session cookie. So
``POST /v1/endpoints/{id}/inbox-link`` (and the MCP tool ``create_inbox_link``, which temporary tokens may
call too) hands out a URL carrying a token that says "endpoint E of account A, until T, read-only or not",
signed with HMAC-SHA256. Opening it trades the token for a cookie of the same form (a longer lifetime, a
different purpose in the MAC, so neither passes for the other) scoped to ``/inbox/{id}`` and redirects to the
clean URL, so the token leaves the address bar and the history.

Nothing is stored per link: the key (``instance_keys``, made once per deployment) is what all control
processes share. Whoever has that key makes a link or cookie for any endpoint, so it is stored sealed like
every other secret (``control.service.sealed``): a dump of the database alone does not give it away. The
price of storing nothing per link is that one link cannot be revoked alone; it lives ``LINK_LIFETIME``, its
cookie ``COOKIE_LIFETIME``, and deleting the endpoint (or the key row) ends both. Every use still checks that
the endpoint exists and belongs to the account. A link is not single-use on purpose: chat apps fetch a URL to
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

from control.db import instance_keys
from control.records.inbox import InboxLink
from control.records.storable import check_text
from control.service import Context, Principal
from control.service.anonymous import inbox_url
from control.service.endpoints import require_endpoint
from control.service.sealed import open_instance_key, seal_instance_key
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
    "redeem_link",
)

LINK_LIFETIME = timedelta(minutes=15)
"""Long enough to paste a link into a chat and click it; short enough that a transcript read later is stale."""
COOKIE_LIFETIME = timedelta(hours=12)
"""A working day in front of the page; then a new link."""
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


def _mac(key: bytes, purpose: str, endpoint_id: str, account_id: str, expires: int, mode: str) -> str:
    message = f"hookyard inbox {purpose} v1\n{endpoint_id}\n{account_id}\n{expires}\n{mode}".encode()
    return base64.urlsafe_b64encode(hmac.digest(key, message, hashlib.sha256)).decode().rstrip("=")


def _sign(key: bytes, purpose: str, endpoint_id: str, principal: Principal, expires: datetime) -> str:
    at, mode = int(expires.timestamp()), "r" if principal.read_only else "w"
    return f"{principal.account_id}.{at}.{mode}.{_mac(key, purpose, endpoint_id, principal.account_id, at, mode)}"


def _verify(key: bytes, purpose: str, endpoint_id: str, token: str | None) -> Principal | None:
    """The principal a token of ``purpose`` stands for on ``endpoint_id``; None when forged, expired or garbage."""
    found = _TOKEN.fullmatch(token or "")
    if found is None:
        return None
    account_id, at, mode, mac = found.groups()
    if not ids.is_id(account_id, "acct") or int(at) <= datetime.now(UTC).timestamp():
        return None
    if not hmac.compare_digest(mac, _mac(key, purpose, endpoint_id, account_id, int(at), mode)):
        return None
    return Principal(account_id=account_id, key_id="", kind="temporary", read_only=mode == "r")


async def create_inbox_link(ctx: Context, principal: Principal, endpoint_id: str) -> InboxLink:
    """A link to the endpoint's inbox for whoever holds it, read-only when the caller's key is."""
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
    expires = datetime.now(UTC).replace(microsecond=0) + LINK_LIFETIME
    token = _sign(await _key(ctx), "link", endpoint_id, principal, expires)
    return InboxLink(url=f"{inbox_url(ctx, endpoint_id)}?{LINK_PARAMETER}={token}", expires_at=expires)


@dataclass(frozen=True, slots=True)
class Redeemed:
    cookie: str
    """The value of the ``hy_inbox`` cookie to set (path ``/inbox/{id}``)."""
    max_age_s: int


async def redeem_link(ctx: Context, endpoint_id: str, token: str) -> Redeemed:
    """Trades a valid link for the cookie that opens the page; 401 for a forged or expired one, 404 when the
    endpoint is gone; 400 for a value no link could hold (too long, NUL), like any other text parameter."""
    if len(token) > MAX_LINK:
        raise ValidationError(f"{LINK_PARAMETER}: at most {MAX_LINK} characters")
    check_text(token, LINK_PARAMETER)
    key = await _key(ctx)
    principal = _verify(key, "link", endpoint_id, token)
    if principal is None:
        raise UnauthorizedError(
            "this inbox link is not valid or has expired (links last "
            f"{int(LINK_LIFETIME.total_seconds() // 60)} minutes): ask for a new one"
        )
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
    expires = datetime.now(UTC).replace(microsecond=0) + COOKIE_LIFETIME
    return Redeemed(
        cookie=_sign(key, "cookie", endpoint_id, principal, expires), max_age_s=int(COOKIE_LIFETIME.total_seconds())
    )


async def cookie_principal(ctx: Context, endpoint_id: str, cookie: str | None) -> Principal | None:
    """Who the ``hy_inbox`` cookie stands for on this endpoint; None without a valid one (not an error: the
    caller may hold another credential). Ownership of the endpoint is checked by the caller."""
    if not cookie:
        return None
    return _verify(await _key(ctx), "cookie", endpoint_id, cookie)
