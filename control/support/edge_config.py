"""Keeps the edge's view of every endpoint (Redis) in step with Postgres, the source of truth.

Control calls ``sync`` after committing a change and ``remove`` after a delete. Each write is a
compare-and-set on the endpoint's config version (``endpoints.config_version``, bumped by Postgres on every
change, migration 0005), done by one Lua script on the one key: it never replaces a newer config, and a
delete leaves a tombstone (a version above any the endpoint had, kept a day) rather than nothing. So no
writer that read Postgres before a change can undo it: not a sweep racing a delete, not two syncs crossing.

After writing, control publishes a ``ConfigNotice`` on the config channel and waits until every edge
listener (PUBLISH says how many got it; SPUBLISH on a Redis Cluster) confirmed it dropped its cached copy, at most
``config_ack_timeout_s``: once the API answers 2xx, every edge serves the new config. A listener that is not
connected does not serve from its cache at all (``edge.config``), so a missed notice cannot leave it stale.

``resync_all`` rebuilds the whole picture (the sweep, at start, every interval and at once when Redis lost
its data), so a write lost between the commit and Redis heals too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence

import asyncpg
import msgspec
from redis.exceptions import RedisError

from control.db import endpoints as db_endpoints
from control.db.connection import Connection
from control.db.context import Context
from control.support import sealing
from shared import redis_client
from shared.keys import CONFIGS_COMPLETE
from shared.wire import ConfigNotice, EdgeAuth, EdgeEndpoint, EdgeResponse, encode

__all__ = ("TOMBSTONE_TTL_MS", "configs_complete", "rebuild_all", "remove", "resync_all", "sync", "write")

log = logging.getLogger("hookyard.control.edge_config")

TOMBSTONE_TTL_MS = 86_400_000
"""How long a deleted endpoint's tombstone stays: far longer than any writer holds a read of Postgres."""
_ALL_TOKENS_ABOVE = 100
"""A notice naming more tokens than this says ``*`` (drop everything) instead, as after a rebuild."""
_WRITE_CHUNK = 1000

# KEYS[1]: the config key. ARGV: version, encoded config, tombstone TTL in ms ('0' for a live config).
# Writes unless the stored config is newer, is this very one, or is a tombstone that a tombstone would
# only renew (so tombstones expire). Anything unreadable is replaced. Returns 1 when it wrote.
_CAS = """
local current = redis.call('GET', KEYS[1])
if current then
    local ok, stored = pcall(cjson.decode, current)
    if ok and type(stored) == 'table' then
        local stored_version = tonumber(stored['version']) or 0
        local version = tonumber(ARGV[1])
        if stored_version > version then return 0 end
        if stored_version == version and current == ARGV[2] then return 0 end
        if stored['deleted'] == true and ARGV[3] ~= '0' then return 0 end
    end
end
if ARGV[3] ~= '0' then
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
    redis.call('SET', KEYS[1], ARGV[2])
end
return 1
"""


# KEYS[1]: the marker. ARGV: this rebuild's token, the complete value. Marks the configs complete only if
# Redis lost nothing (the key would be gone) and no other rebuild began (its token) since this one did.
_COMPLETE_IF_OURS = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2])
    return 1
end
return 0
"""


def _record(ctx: Context, row: asyncpg.Record) -> EdgeEndpoint:
    # The edge verifies with the clear secret: the config in Redis carries it (what that means for who may
    # read Redis: docs/adr/0027-sealed-secrets-at-rest.md); Postgres holds it sealed.
    provider_secret = sealing.open_provider_secret(ctx, row["id"], row["secret"])
    return EdgeEndpoint(
        endpoint_id=row["id"],
        account_id=row["account_id"],
        environment=row["environment"],
        expires_at=row["expires_at"].timestamp() if row["expires_at"] else None,
        auth=EdgeAuth(
            hmac_enabled=row["hmac_enabled"],
            # The provider's own secret when set; else the platform secret, which verifies what hookyard signed.
            secret=provider_secret or sealing.open_endpoint_secret(ctx, row["id"], row["signing_secret"]),
            header_name=row["header_name"],
            tolerance_seconds=row["tolerance_seconds"],
            on_failure=row["on_failure"],
            log_blocked_ips=row["log_blocked_ips"],
            provider=row["provider"],
            verify_token=row["verify_token"],
        ),
        allowlist=tuple(row["allowlist"]),
        version=row["config_version"],
        response=None if row["response"] is None else msgspec.convert(row["response"], EdgeResponse),
    )


def _tombstone(version: int) -> EdgeEndpoint:
    return EdgeEndpoint(endpoint_id="", account_id="", environment="", version=version, deleted=True)


async def write(ctx: Context, configs: Sequence[tuple[str, EdgeEndpoint]]) -> list[str]:
    """Compare-and-set of each (ingest token, config); returns the tokens whose key it changed."""
    script = ctx.redis.register_script(_CAS)
    cluster = redis_client.is_cluster_client(ctx.redis)
    written: list[str] = []
    for start in range(0, len(configs), _WRITE_CHUNK):
        chunk = configs[start : start + _WRITE_CHUNK]
        async with ctx.redis.pipeline(transaction=False) as pipe:
            for token, config in chunk:
                args: list[int | bytes] = [config.version, encode(config), TOMBSTONE_TTL_MS if config.deleted else 0]
                key = ctx.keys.endpoint_config(token)
                if cluster:  # a cluster pipeline refuses EVALSHA (it cannot load the script per node); EVAL it is
                    pipe.execute_command("EVAL", _CAS, 1, key, *args)
                else:
                    await script(keys=[key], args=args, client=pipe)
            results = await pipe.execute()
        written.extend(token for (token, _), done in zip(chunk, results, strict=True) if done)
    return written


async def sync(ctx: Context, conn: Connection, endpoint_ids: list[str]) -> None:
    """Writes the endpoints' configs as committed now; returns once every edge dropped its old copy."""
    rows = await db_endpoints.edge_rows(conn, endpoint_ids)
    if not rows:  # deleted meanwhile: the delete writes its tombstone itself
        return
    await write(ctx, [(row["ingest_token"], _record(ctx, row)) for row in rows])
    # Announced even when the write found a newer config in place: its writer may not have announced yet.
    await _announce(ctx, [row["ingest_token"] for row in rows], confirm=True)


async def remove(ctx: Context, ingest_token: str, tombstone_version: int) -> None:
    """Replaces the config of a deleted endpoint by a tombstone; returns once every edge answers 404."""
    await write(ctx, [(ingest_token, _tombstone(tombstone_version))])
    await _announce(ctx, [ingest_token], confirm=True)


async def resync_all(ctx: Context) -> tuple[int, int]:
    """Writes every endpoint's config and a tombstone over the configs of endpoints that no longer exist.

    Returns (configs written, tombstones written); a key that already holds what it should is left alone,
    so a quiet resync writes nothing and announces nothing.
    """
    # Redis is scanned before Postgres is read: a config written after the scan (an endpoint created
    # meanwhile) is then never mistaken for stale, while a scanned key whose endpoint is gone by the read is.
    seen = {_text(key) async for key in ctx.redis.scan_iter(match=ctx.keys.endpoint_config_pattern(), count=1000)}
    async with ctx.pool.acquire() as conn:
        rows = await db_endpoints.edge_rows(conn)
        # Drawn after the read: above the version of every delete that made a scanned key stale.
        tombstone_version = await db_endpoints.next_config_version(conn)
    live = [(row["ingest_token"], _record(ctx, row)) for row in rows]
    wanted = {ctx.keys.endpoint_config(token) for token, _ in live}
    prefix = ctx.keys.endpoint_config("")
    gone = [(key.removeprefix(prefix), _tombstone(tombstone_version)) for key in seen if key not in wanted]
    written = await write(ctx, live + gone)
    await _announce(ctx, written, confirm=False)
    buried = len({token for token, _ in gone} & set(written))
    return len(written) - buried, buried


async def configs_complete(ctx: Context) -> bool:
    """Whether Redis holds every endpoint's config (``Keys.config_marker``): false after it lost its data,
    before the first sweep, and while a rebuild runs."""
    return await ctx.redis.get(ctx.keys.config_marker) == CONFIGS_COMPLETE


async def rebuild_all(ctx: Context) -> tuple[int, int]:
    """``resync_all`` when Redis may be missing configs: marked as rebuilding first (an edge then answers a
    token it does not find 503, not 404) and complete after, unless Redis lost its data again meanwhile or
    another rebuild began, which then completes it (or a later sweep sees the marker still rebuilding)."""
    token = b"rebuilding:" + uuid.uuid4().hex.encode()
    await ctx.redis.set(ctx.keys.config_marker, token)
    counts = await resync_all(ctx)
    await ctx.redis.eval(_COMPLETE_IF_OURS, 1, ctx.keys.config_marker, token, CONFIGS_COMPLETE)
    return counts


async def _announce(ctx: Context, tokens: list[str], *, confirm: bool) -> None:
    """Publishes the notice; with ``confirm``, waits for as many acks as PUBLISH reported receivers."""
    if not tokens:
        return
    timeout_s = ctx.settings.config_ack_timeout_s
    ack = ctx.keys.config_ack(uuid.uuid4().hex) if confirm and timeout_s > 0 else None
    notice = ConfigNotice(tokens=("*",) if len(tokens) > _ALL_TOKENS_ABOVE else tuple(tokens), ack=ack)
    receivers = await redis_client.publish_counted(ctx.redis, ctx.keys.config_channel, encode(notice))
    if ack is None or not receivers:
        return
    confirmed = 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    try:
        while confirmed < receivers and (remaining := deadline - loop.time()) > 0:
            # BLPOP's timeout 0 would block for ever: never ask for less than a millisecond.
            if await ctx.redis.blpop([ack], timeout=max(round(remaining, 3), 0.001)) is None:
                break
            confirmed += 1
    except (RedisError, OSError) as exc:
        log.warning("edge config: waiting for the edges' confirmation failed (%s)", exc)
    finally:
        with contextlib.suppress(RedisError, OSError):
            await ctx.redis.delete(ack)
    if confirmed < receivers:
        log.warning(
            "edge config: %d of %d edge listeners did not confirm a change (%d endpoint(s)) within %.1fs; they "
            "may serve the previous config until their cache entry expires",
            receivers - confirmed,
            receivers,
            len(tokens),
            timeout_s,
        )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
