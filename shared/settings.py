"""Process settings: one frozen Struct, read once from the environment when a process starts.

Nothing reads the environment at import time. ``load_settings()`` converts the strings with msgspec
(``strict=False`` turns ``"8080"`` into ``8080``) and turns any failure into a ``ConfigError`` that names
the environment variable, so a typo stops the process before it serves anything.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec

from shared.errors import ConfigError

__all__ = (
    "API_KEY_VARIABLE",
    "CLIENT_VARIABLES",
    "CONTROL_URL_VARIABLE",
    "URLS_FROM_UP",
    "Settings",
    "env_name",
    "known_variables",
    "load_settings",
)

Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
Positive = Annotated[int, msgspec.Meta(ge=1)]

# Variables without the HOOKYARD_ prefix: the ones every hosting platform already sets.
_UNPREFIXED = {"database_url": "DATABASE_URL", "redis_url": "REDIS_URL"}
# Settings given as comma-separated lists in the environment, and what their entries are (said when one is empty).
_LISTS = {
    "trusted_proxies": "IPs or CIDRs",
    "retry_schedule_s": "waits in seconds",
    "encryption_keys": "kid:base64key entries",
}
# The client commands' own variables (which key, which control plane): no server setting, but no typo either,
# so a shell that exports them for `hookyard listen` can still run `hookyard up`. Named here, where both the
# settings and the CLI (``control.cli``) can import them, so the CLI reads exactly the names accepted here.
API_KEY_VARIABLE = "HOOKYARD_API_KEY"
CONTROL_URL_VARIABLE = "HOOKYARD_CONTROL_URL"
CLIENT_VARIABLES = frozenset({API_KEY_VARIABLE, CONTROL_URL_VARIABLE})
# Said when DATABASE_URL or REDIS_URL is unset for a server run alone: where a user who ran `up` finds them
# (``control.cli.instance`` writes the record; it exists while that `up` runs). Here, so the edge can say it too.
URLS_FROM_UP = (
    "`hookyard up` sets them; while it runs, they are in its data dir's instance.json, .hookyard/instance.json "
    "by default"
)
# Set by the serving commands for granian's workers (``shared.parent``), never by a user: no setting either.
_INTERNAL_VARIABLES = frozenset({"HOOKYARD_SERVER_PID"})


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    database_url: str | None = None
    """Postgres DSN. Unset under ``hookyard up`` means: start the embedded Postgres."""
    redis_url: str | None = None
    """Redis URL. Unset under ``hookyard up`` means: start the embedded Redis."""
    host: str = "127.0.0.1"
    """Address the edge and control servers bind to (``0.0.0.0`` in containers)."""
    edge_port: Port = 8080
    control_port: Port = 8000
    public_edge_url: str | None = None
    """Base of the ingest URLs handed to users; defaults to ``http://{host}:{edge_port}``."""
    public_control_url: str | None = None
    data_dir: str = ".hookyard"
    """Where ``hookyard up`` keeps the embedded servers' data and the bootstrap ``api_key`` file."""
    redis_prefix: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] = "hy:"
    """Prefix of every Redis key and channel; tests give each test its own."""
    stream_shards: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 1
    flush_lanes: Annotated[int, msgspec.Meta(ge=1, le=32)] = 2
    """Concurrent flush consumers per worker process: one prepares a batch while another waits on Postgres."""
    schema_learning: bool = True
    """Whether the flush learns event shapes (learned schemas, ``control.schemas``)."""
    flush_claim_idle_ms: Annotated[int, msgspec.Meta(ge=100)] = 60_000
    """How long an ingest entry stays with a silent consumer before another takes it over; longer than a
    flush can take, so a live consumer is never robbed (it would only cost a repeat, never a duplicate)."""
    max_body_bytes: Positive = 1_048_576
    body_read_timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """How long the edge waits for a sender's body to arrive in full before answering 408."""
    stream_high_water: Positive = 20_000
    """Ingest stream entries (each one batch of requests) waiting per shard above which the edge answers
    503 with Retry-After instead of growing Redis without bound while the workers catch up."""
    retention_days: Positive = 30
    trusted_proxies: tuple[str, ...] = ()
    """CIDRs whose ``X-Forwarded-For`` the edge believes, and control for the per-address limit of
    ``/api/start`` and ``/api/register``."""
    egress: Literal["public", "any"] = "public"
    """Outbound policy of deliveries, replays and destination tests: ``public`` refuses loopback, private,
    link-local, CGNAT, multicast, unspecified and cloud-metadata addresses (checked on the address actually
    connected to); ``any`` allows every address."""
    endpoint_quota: Annotated[int, msgspec.Meta(ge=0)] = 1000
    """Endpoints a registered account may have when its own ``endpoint_quota`` is unset (0: no default
    quota). Alert volume follows from it (an alert per condition: per endpoint and per destination)."""
    deliver_concurrency: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 128
    """Outbound requests in flight per deliver worker process."""
    deliver_per_destination: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 32
    """Outbound requests in flight to one destination per deliver worker process."""
    deliver_account_share: Annotated[float, msgspec.Meta(gt=0, le=1)] = 0.75
    """The share of ``deliver_concurrency`` one account may hold per deliver worker (in flight and claimed
    ahead), so that another account always finds free slots: one account's hanging destinations cannot take
    the whole worker (docs/adr/0093-a-fair-share-of-the-deliver-loop.md)."""
    deliver_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 15.0
    """Longest one outbound exchange may take, connect to the end of the (bounded) response."""
    deliver_connect_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 5.0
    """Longest wait for the connection (resolution, TCP and TLS) to a destination."""
    deliver_lease_s: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """How long a claimed task belongs to its worker; after that (the worker died) it is due again. Must
    exceed ``deliver_timeout_s`` so a live worker's slow request is never sent twice."""
    deliver_poll_s: Annotated[float, msgspec.Meta(gt=0, le=60)] = 1.0
    """Longest wait between looks at the task table when no notification arrives (a lost NOTIFY, a
    LISTEN connection that is reconnecting)."""
    deliver_sweep_s: Annotated[float, msgspec.Meta(gt=0)] = 5.0
    """How often a deliver worker returns tasks with an expired lease to the queue."""
    deliver_drain_s: Annotated[float, msgspec.Meta(ge=0)] = 10.0
    """On SIGTERM, how long in-flight requests may take to finish; the rest are handed back for retry."""
    retry_schedule_s: tuple[Annotated[float, msgspec.Meta(ge=0)], ...] = (
        5.0,
        30.0,
        120.0,
        600.0,
        1800.0,
        3600.0,
        10800.0,
        21600.0,
        43200.0,
    )
    """Waits after failed attempts 1, 2, ... (±20% jitter); a task gets one attempt more than there are
    waits. Comma-separated in the environment (tests shorten it)."""
    circuit_failure_threshold: Annotated[int, msgspec.Meta(ge=1)] = 10
    """Consecutive failed attempts to one destination that open its circuit (its tasks then wait)."""
    circuit_cooldown_s: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """How long an open circuit waits before one probe attempt may test the destination again."""
    config_ack_timeout_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 2.0
    """How long a configuration change waits for every edge listener to confirm it dropped its cached copy
    before answering anyway (with a warning in the log naming how many did not); 0 does not wait."""
    rate_limit_per_s: Positive = 50
    """Requests a second per credential on every authenticated surface: ``/v1``, ``/mcp``, the inbox page and
    its data routes (events, bodies, replay, stream) and the redemption of an inbox link. A credential is an
    API key, a temporary token (each its own bucket), an inbox link (every link and link cookie of one
    endpoint: one bucket, as a link can be redeemed again and again), or a browser session of
    ``/api/start``. Over it: 429 ``rate_limited`` with ``Retry-After``; bad credentials are 401 first and
    spend nothing."""
    rate_limit_burst: Positive = 100
    """Requests one credential may make at once before ``rate_limit_per_s`` paces it."""
    send_rate_per_min: Positive = 60
    """Outbound requests made on demand, per account whichever credential and surface asks: replays (/v1, MCP,
    the inbox), destination tests, test webhooks (``send_test_webhook``, ``hookyard trigger``), delivery
    retries (one each, a bulk retry one per job). Charged on top of ``rate_limit_per_s``, so a key's budget
    for reads cannot be turned into as many requests to a third party; over it: 429 ``rate_limited`` with
    ``Retry-After`` (over MCP: a tool error saying when to retry). Rule deliveries are paced by the
    deliver workers (``deliver_concurrency``, ``deliver_per_destination``), not by this."""
    send_rate_burst: Positive = 20
    """Outbound sends one account may make at once before ``send_rate_per_min`` paces it."""
    registration: Literal["open", "closed"] = "open"
    """``open``: anyone may get a temporary endpoint (``POST /api/start``) and a free account
    (``POST /api/register``); ``closed``: both answer 403 ``registration_closed`` (accounts then come from
    ``hookyard account create``)."""
    expired_grace_s: Annotated[float, msgspec.Meta(ge=0)] = 86_400.0
    """How long an expired temporary endpoint keeps answering 410 ``endpoint_expired`` (a sender learns it
    expired, rather than that it never existed) and keeps its events, before the sweep removes it."""
    start_rate_per_min: Positive = 10
    """Requests a minute from one client address (an IPv6 client: its /64) to ``/api/start``, and as many to
    ``/api/register``, each in its own bucket, with bursts of as many; over it: 429 with Retry-After."""
    db_pool_max: Annotated[int, msgspec.Meta(ge=2, le=200)] = 10
    encryption_keys: tuple[str, ...] = ()
    """``kid:base64-of-32-bytes`` keys sealing secrets at rest (AES-256-GCM): the first seals, all open, so
    a key rotates by adding one in front and running ``hookyard rotate-encryption-key``. Unset: secrets
    are stored in clear (``hookyard up`` makes a key in its data dir)."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_activity: bool = False
    """One line at ``info`` per event stored and per delivery attempt (logger ``hookyard.activity``);
    ``hookyard up`` turns it on, a busy production worker would rather not."""
    log_format: Literal["plain", "json"] = "plain"
    """``json``: one JSON object a line (time, level, logger, message, and request_id, event_id, endpoint_id,
    delivery_id where the line has them), for log shippers; ``plain`` stays the default for ``hookyard up``."""
    metrics_dir: str | None = None
    """Where the granian workers of one edge or control server leave their metric totals for each other
    (``/metrics`` on any worker sums them); unset: ``hookyard edge``/``control`` make a fresh one per start."""
    worker_metrics_port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 0
    """Port of ``hookyard worker``'s ``/metrics`` (on ``host``); 0: none."""
    control_metrics_port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 0
    """Port of ``hookyard control``'s ``/metrics`` (on ``host``), apart from the API port tenants use: its gauges
    name every account's destinations (ADR 0095); 0: none."""
    sandbox_processes: Annotated[int, msgspec.Meta(ge=0, le=256)] = 0
    """Sandbox processes transforms run in, per control plane and per deliver worker (started as calls need
    them); 0: as many as the machine has cores."""
    sandbox_per_account: Annotated[int, msgspec.Meta(ge=0, le=256)] = 0
    """Sandbox processes one account's calls may hold at once (the rest wait their turn, round robin); 0: half
    of ``sandbox_processes``, at least 1."""
    sandbox_memory_mb: Annotated[int, msgspec.Meta(ge=1024, le=65536)] = 1536
    """OS limit (``RLIMIT_DATA``) on each sandbox process's memory, beside V8's 64 MB heap limit per call;
    V8 takes about 540 MB of it (address space it writes to, mostly not resident); 1024 at least."""

    def __post_init__(self) -> None:
        if self.database_url is not None and not self.database_url.startswith(("postgres://", "postgresql://")):
            raise ValueError("must start with postgres:// or postgresql:// - at `$.database_url`")
        if self.redis_url is not None and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix:// - at `$.redis_url`")
        for url, field in ((self.public_edge_url, "public_edge_url"), (self.public_control_url, "public_control_url")):
            if url is not None and not url.startswith(("http://", "https://")):
                raise ValueError(f"must be an http(s) URL - at `$.{field}`")
        if self.deliver_lease_s <= self.deliver_timeout_s:
            raise ValueError("must be greater than deliver_timeout_s - at `$.deliver_lease_s`")
        if not self.retry_schedule_s:
            raise ValueError("must list at least one wait - at `$.retry_schedule_s`")
        for cidr in self.trusted_proxies:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"{cidr!r} is not an IP or CIDR - at `$.trusted_proxies`") from None

    @property
    def edge_url(self) -> str:
        return (self.public_edge_url or f"http://{_url_host(self.host)}:{self.edge_port}").rstrip("/")

    @property
    def control_url(self) -> str:
        return (self.public_control_url or f"http://{_url_host(self.host)}:{self.control_port}").rstrip("/")


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def env_name(field: str) -> str:
    return _UNPREFIXED.get(field) or "HOOKYARD_" + field.upper()


_FIELDS = {env_name(f): f for f in Settings.__struct_fields__}
_OPTIONAL = {f: d is None for f, d in zip(Settings.__struct_fields__, Settings.__struct_defaults__, strict=True)}


def known_variables() -> list[str]:
    """Every ``HOOKYARD_*`` name a user may export: the settings' and the client commands' (sorted). The CLI's are
    in it because a shell exporting them must still run every command, and a list without them sent a user
    who read it to conclude ``HOOKYARD_API_KEY`` was invalid."""
    return sorted({n for n in _FIELDS if n.startswith("HOOKYARD_")} | CLIENT_VARIABLES)


def _suggestion(name: str) -> str:
    """`` - did you mean HOOKYARD_EDGE_PORT?`` for a misspelt name, else the list of known ones."""
    known = known_variables()
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return f"; did you mean {close[0]}?" if close else f" (known: {', '.join(known)})"


def _entries(name: str, field: str, value: str) -> list[str]:
    """A list setting's entries. An empty entry (``,``, ``1,,5`` or a trailing comma) is refused: in the
    encryption keys it was read as "no keys" or a key silently missing (secrets then stored in clear), and in
    the trusted proxies or the retry schedule an entry dropped unread (a proxy not trusted, a wait missing)."""
    entries = [v.strip() for v in value.split(",")]
    if value.strip() and "" in entries:
        position = entries.index("") + 1
        raise ConfigError(f"{name}: entry {position} of {len(entries)} is empty (a stray comma?); give {_LISTS[field]}")
    return entries if value.strip() else []


def load_settings(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build the settings from ``environ`` (default ``os.environ``); ``overrides`` win (CLI flags)."""
    env = os.environ if environ is None else environ
    raw: dict[str, object] = {}
    for name, value in env.items():
        if name in _FIELDS:
            field = _FIELDS[name]
            if value == "" and _OPTIONAL[field]:
                continue  # VAR= (as compose's ${X:-} writes it) means unset, not an invalid value
            raw[field] = _entries(name, field, value) if field in _LISTS else value
        elif name.startswith("HOOKYARD_") and name not in CLIENT_VARIABLES | _INTERNAL_VARIABLES:
            raise ConfigError(f"{name}: unknown setting{_suggestion(name)}")
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return msgspec.convert(raw, Settings, strict=False)
    except msgspec.ValidationError as exc:
        text = str(exc)
        failed = text.rsplit("`$.", 1)[-1].split("`")[0].split("[")[0] if "`$." in text else None
        name = env_name(failed) if failed in Settings.__struct_fields__ else "settings"
        raise ConfigError(f"{name}: {text.split(' - at ')[0]}") from None
