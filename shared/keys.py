"""Every Redis key and channel name hookyard uses, in one place.

Names start with the settings' ``redis_prefix`` (default ``hy:``) so several deployments, or every test,
can share one Redis. The ingest stream shards carry a Redis Cluster hash tag so a cluster spreads them over
nodes; an endpoint always maps to the same shard, and a shard's dead letters share its tag (one slot).

On one Redis the tag is ``{ingest:N}``. On a Redis Cluster (``cluster=True``: every process asks the server,
so all agree) the slots of ``{ingest:0}``, ``{ingest:1}``, ... bunch up (three shards: two on one master of
an evenly split cluster), so shard N's tag is the first of ``ingest:N``, ``ingest:N:1``, ``ingest:N:2``, ...
whose slot lies in the middle of the N-th of ``shards`` equal parts of the slot range: with the even split
``redis-cli --cluster create`` and managed clusters make, any ``shards`` >= masters puts a shard on every
master, as evenly as the counts allow. The names depend on ``shards`` there: change it only with the
streams drained (docs/SCALING.md).
"""

from __future__ import annotations

import zlib
from functools import cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

__all__ = ("CONFIGS_COMPLETE", "FLUSH_GROUP", "Keys")

FLUSH_GROUP = "flush"
"""Consumer group of the flush workers on every ingest shard."""

CONFIGS_COMPLETE = b"complete"
"""The value of ``Keys.config_marker`` once every endpoint's edge config is in Redis."""


@cache
def _spread_tag(shard: int, shards: int) -> str:
    """The first tag of shard ``shard`` whose slot is in the middle half of its part of the slot range."""
    low = (4 * shard + 1) * REDIS_CLUSTER_HASH_SLOTS // (4 * shards)
    high = max(low + 1, (4 * shard + 3) * REDIS_CLUSTER_HASH_SLOTS // (4 * shards))
    candidate, n = f"ingest:{shard}", 0
    while not low <= key_slot(candidate.encode()) < high:
        n += 1
        candidate = f"ingest:{shard}:{n}"
    return candidate


class Keys:
    __slots__ = ("cluster", "prefix", "shards")

    def __init__(self, prefix: str, shards: int = 1, *, cluster: bool = False) -> None:
        if not prefix:
            raise ValueError("redis prefix must not be empty")
        if shards < 1:
            raise ValueError("stream shards must be >= 1")
        self.prefix = prefix
        self.shards = shards
        self.cluster = cluster

    # -- ingest ----------------------------------------------------------------------------------
    def shard_for(self, endpoint_id: str) -> int:
        return zlib.crc32(endpoint_id.encode()) % self.shards

    def _tag(self, shard: int) -> str:
        return _spread_tag(shard, self.shards) if self.cluster else f"ingest:{shard}"

    def ingest_stream(self, shard: int) -> str:
        return f"{self.prefix}{{{self._tag(shard)}}}"

    def ingest_streams(self) -> list[str]:
        return [self.ingest_stream(s) for s in range(self.shards)]

    def dead_letter_stream(self, shard: int) -> str:
        return f"{self.prefix}{{{self._tag(shard)}}}:dead"

    # -- edge configuration ----------------------------------------------------------------------
    def endpoint_config(self, ingest_token: str) -> str:
        """String key holding the msgspec-encoded ``EdgeEndpoint`` the edge serves a token with."""
        return f"{self.prefix}ep:{ingest_token}"

    def endpoint_config_pattern(self) -> str:
        return f"{self.prefix}ep:*"

    @property
    def config_channel(self) -> str:
        """Pub/sub channel carrying a ``shared.wire.ConfigNotice``: the ingest tokens whose config changed
        (edge cache invalidation) and the key on which each edge listener confirms it (``config_ack``)."""
        return f"{self.prefix}config"

    def config_ack(self, change_id: str) -> str:
        """List that every edge listener RPUSHes to once it dropped the tokens of one change; short-lived."""
        return f"{self.prefix}config:ack:{change_id}"

    @property
    def config_marker(self) -> str:
        """The edge configs' state: ``CONFIGS_COMPLETE`` once a sweep wrote every endpoint's config, a
        rebuild's own token while it runs, absent when Redis lost its data (or before the first sweep). The
        edge calls a token unknown (404) only while this reads complete; otherwise it answers 503."""
        return f"{self.prefix}config:marker"

    # -- stats -----------------------------------------------------------------------------------
    def edge_refusals(self, endpoint_id: str, hour: int) -> str:
        """Hash of the requests the edges refused for one endpoint in one UTC hour (``hour``: Unix time // 3600),
        field ``<minute of the hour>:<reason>`` (``shared.refusals``). The endpoint id is the hash tag, so a
        window's keys share a slot on a Redis Cluster."""
        return f"{self.prefix}refused:{{{endpoint_id}}}:{hour}"

    @property
    def signature_refusals_recent(self) -> str:
        """Sorted set: endpoint id -> the last minute (Unix time // 60) in which an edge refused a signature of
        it. The alert evaluator reads the endpoints refused in the last five minutes from it, instead of
        every endpoint's hashes (``control.workers.alerts.signature_refusals``)."""
        return f"{self.prefix}refused:signatures"

    # -- wakeups and limits ----------------------------------------------------------------------
    def event_channel(self, endpoint_id: str) -> str:
        """Pub/sub channel published after events of an endpoint are committed (long-poll wakeups)."""
        return f"{self.prefix}ev:{endpoint_id}"

    def rate_limit(self, credential: str) -> str:
        """Token bucket of one credential on the authenticated surfaces: an API key's or temporary token's id
        (``key_...``), ``inbox:<endpoint id>`` for that endpoint's inbox links, ``session:<hash>`` for a
        browser session (``control.service.callers``)."""
        return f"{self.prefix}rl:{credential}"

    def send_rate_limit(self, account_id: str) -> str:
        """Token bucket of one account's outbound sends on demand (replays, tests, retries)."""
        return f"{self.prefix}rl:send:{account_id}"

    def address_rate_limit(self, route: str, address: str) -> str:
        """Token bucket of one client address (an IPv4 address or an IPv6 /64) on an unauthenticated route
        (``start``, ``register``); apart from the API keys' buckets, which are named by key id."""
        return f"{self.prefix}rl:ip:{route}:{address}"

    def delivery_rate(self, destination_id: str) -> str:
        """The rate limit of one destination's deliveries (``control.delivery.throttle``): when its next send
        may start, shared by every deliver worker. Tagged by destination, so on a Redis Cluster each
        destination's key is one slot and the limiter's script touches nothing else."""
        return f"{self.prefix}{{dst:{destination_id}}}:rate"

    def replay_target(self, endpoint_id: str) -> str:
        """String: the URL an endpoint's events were last sent to by hand (a replay) or by ``hookyard listen``
        (a recorded forward), which the inbox's replay box starts with; it expires with the records."""
        return f"{self.prefix}replay-target:{endpoint_id}"

    def worker_health(self, name: str) -> str:
        return f"{self.prefix}health:{name}"
