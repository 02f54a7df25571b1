"""The two limits of authenticated callers, both token buckets of ``control.support.token_buckets``:

- **per credential**, every request on every authenticated surface (``rate_limit_per_s``,
  ``rate_limit_burst``): charged by ``control.service.callers`` once the credential is verified, the one
  place any surface turns a credential into a caller;
- **per account, outbound sends on demand** (``send_rate_per_min``, ``send_rate_burst``): replays,
  destination tests, test webhooks and delivery retries, charged by those service functions themselves, so
  /v1, MCP and the inbox spend the same bucket whichever credential asks. Each is a request to a URL (or a
  destination) hookyard makes for the caller: the per-credential limit alone would let one key make 50
  of them a second, and many keys of one account as many again.

Limits are read from the settings at each charge (a ``Limit`` is a small value), so a test's settings are
the app's limits without any state to rebuild.
"""

from __future__ import annotations

from control.db.context import Context, Principal
from control.support.token_buckets import Limit

__all__ = ("SENDS_SUBJECT", "charge_credential", "charge_send")

SENDS_SUBJECT = "this account's outbound sends"


async def charge_credential(ctx: Context, credential: str, subject: str) -> None:
    """One request of ``credential`` (its bucket's name: ``Keys.rate_limit``); ``subject`` says what it is
    ("this API key") in the 429 message. 429 ``rate_limited`` with ``Retry-After`` when it is spent."""
    s = ctx.settings
    limit = Limit(rate_per_s=s.rate_limit_per_s, burst=s.rate_limit_burst, subject=subject)
    await limit.charge(ctx.redis, ctx.keys.rate_limit(credential))


async def charge_send(ctx: Context, principal: Principal) -> None:
    """One outbound send of the caller's account, just before it is made (or queued): a request refused
    before (validation, not found) costs nothing of this budget."""
    s = ctx.settings
    limit = Limit(rate_per_s=s.send_rate_per_min / 60, burst=s.send_rate_burst, subject=SENDS_SUBJECT)
    await limit.charge(ctx.redis, ctx.keys.send_rate_limit(principal.account_id))
