"""The ``hookyard`` command: ``up``, ``edge``, ``control``, ``worker``, ``migrate``, ``account create``,
``dead-letters``, ``rotate-encryption-key``, and the webhook commands ``listen``, ``trigger`` and ``tail``.

Expected failures end as one line on stderr, ``hookyard: <message>``, never a traceback: exit 2 for a bad
setting (the message names the variable), 1 for anything else that stopped the command.

``edge`` and ``control`` validate the settings here and then replace this process with granian's CLI
(``os.execve``) rather than embedding ``granian.Granian``: the process a supervisor or container runtime
signals is then granian itself, with its own tested signal and worker handling and no Python layer in
between, and every granian flag stays reachable through ``GRANIAN_*`` variables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import redis

from control.cli.commands import open as open_command
from control.cli.commands import webhooks
from shared.errors import ConfigError, HookyardError
from shared.settings import Settings, env_name, load_settings

__all__ = ("build_parser", "command_names", "main")

log = logging.getLogger("hookyard.cli")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as exc:
        print(f"hookyard: {exc}", file=sys.stderr)
        return 2
    except HookyardError as exc:
        print(f"hookyard: {exc}", file=sys.stderr)
        return 1
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, redis.RedisError) as exc:
        log.debug("failed", exc_info=True)
        print(f"hookyard: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hookyard",
        description="Webhook capture, routing and replay. Settings come from HOOKYARD_* variables, "
        "DATABASE_URL and REDIS_URL; flags override them.",
    )
    parser.add_argument("--version", action="version", version=f"hookyard {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = commands.add_parser("up", help="run everything in the foreground (embedded Postgres/Redis when unset)")
    up.add_argument("--data-dir", help="where embedded data and the api_key file live (default .hookyard)")
    _add_host(up)
    up.add_argument("--edge-port", type=int, help="edge port (default 8080)")
    up.add_argument("--control-port", type=int, help="control plane port (default 8000)")
    up.set_defaults(handler=_up)

    for name, default_port in (("edge", 8080), ("control", 8000)):
        what = "edge (ingest)" if name == "edge" else "control plane (API)"
        serve = commands.add_parser(name, help=f"serve the {what} with granian (default port {default_port})")
        _add_host(serve)
        serve.add_argument("--port", type=int, help=f"port (default {default_port})")
        serve.add_argument("--workers", type=int, default=1, help="granian worker processes (default 1)")
        _add_parent_pid(serve)
        serve.set_defaults(handler=_serve)

    worker = commands.add_parser("worker", help="run worker loops (all of them when none is named)")
    worker.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="loops to run: flush, deliver, sweep, retries (bulk delivery retries) (default: all)",
    )
    worker.add_argument("--burst", action="store_true", help="return once every loop has nothing to do")
    _add_parent_pid(worker)
    worker.set_defaults(handler=_worker)

    webhooks.add_parsers(commands)

    migrate = commands.add_parser("migrate", help="apply database migrations (idempotent)")
    migrate.set_defaults(handler=_migrate)
    rotate = commands.add_parser(
        "rotate-encryption-key", help="re-seal every stored secret under the first HOOKYARD_ENCRYPTION_KEYS key"
    )
    rotate.set_defaults(handler=_rotate_encryption_key)

    account = commands.add_parser("account", help="manage accounts")
    account_commands = account.add_subparsers(dest="account_command", required=True, metavar="ACTION")
    create = account_commands.add_parser("create", help='print {"account_id", "api_key"} as JSON')
    create.add_argument("--email", required=True)
    create.add_argument("--read-only", action="store_true", help="the key can read but not change anything")
    create.set_defaults(handler=_account_create)

    open_command.add_parser(commands)

    dead = commands.add_parser("dead-letters", help="records the flush could not store: list, show, retry")
    dead_commands = dead.add_subparsers(dest="dead_command", required=True, metavar="ACTION")
    listing = dead_commands.add_parser("list", help="one line per dead letter, oldest first")
    listing.add_argument("--limit", type=int, default=100, help="at most this many per shard (default 100)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(handler=_dead_letters)
    show = dead_commands.add_parser("show", help="one dead letter with the request as captured, as JSON")
    show.add_argument("id", help="as `list` prints it, e.g. 0:1764000000000-0")
    show.set_defaults(handler=_dead_letters)
    retry = dead_commands.add_parser("retry", help="put dead letters back through the flush (idempotent)")
    retry.add_argument("ids", nargs="*", metavar="ID")
    retry.add_argument("--all", action="store_true", help="every dead letter")
    retry.set_defaults(handler=_dead_letters)
    return parser


def command_names() -> tuple[str, ...]:
    """The top-level commands, for checks that deploy files only run commands that exist."""
    (commands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return tuple(commands.choices)


def _add_host(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to bind (default 127.0.0.1; 0.0.0.0 in containers)")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hookyard")
    except PackageNotFoundError:
        return "unknown"


def _add_parent_pid(parser: argparse.ArgumentParser) -> None:
    # Set by `hookyard up` for its children: they exit when it dies (see supervisor.bind_to_parent).
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)


def _settings(**overrides: object) -> Settings:
    settings = load_settings(None, **overrides)
    from shared.logs import configure

    configure(settings.log_level, settings.log_format)
    return settings


def _run(coro_fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """uvloop where installed: the worker loops are I/O bound and it is measurably faster there."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro_fn())
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro_fn())


def _up(args: argparse.Namespace) -> int:
    from control.cli.up import up

    # Locally, destinations are usually other programs on this machine: egress defaults to "any" under `up`.
    egress = None if "HOOKYARD_EGRESS" in os.environ else "any"
    settings = _settings(
        host=args.host, edge_port=args.edge_port, control_port=args.control_port, data_dir=args.data_dir, egress=egress
    )
    return up(settings, os.environ)


def _serve(args: argparse.Namespace) -> int:
    edge = args.command == "edge"
    port_field = "edge_port" if edge else "control_port"
    settings = _settings(host=args.host, **{port_field: args.port})
    if not settings.redis_url or not (edge or settings.database_url):
        needed = "REDIS_URL" if edge else "DATABASE_URL and REDIS_URL"
        raise ConfigError(f"{needed} must be set for `hookyard {args.command}` (`hookyard up` sets them)")
    if args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, not {args.workers}")
    if args.parent_pid is not None:
        from control.cli.up import bind_to_parent

        bind_to_parent(args.parent_pid)
    port = getattr(settings, port_field)
    # The app reads its settings from the environment; make it agree with the flags.
    env = {**os.environ, env_name("host"): settings.host, env_name(port_field): str(port)}
    # One metrics directory per server start, shared by its granian workers (shared.metrics).
    from shared.metrics import metrics_dir

    env[env_name("metrics_dir")] = metrics_dir(settings.metrics_dir, args.command)
    argv = [sys.executable, "-m", "granian", "--interface", "asgi", "--factory"]
    argv += ["--host", settings.host, "--port", str(port), "--workers", str(args.workers), "--loop", "uvloop"]
    argv += ["--log-level", settings.log_level, "--log-config", _granian_log_config(settings)]
    argv += ["--http", "1", "--no-ws", "edge.app:create_app"] if edge else ["control.app:create_app"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)  # noqa: S606 - becoming granian is the point
    return 0  # not reached: execve replaced this process


def _granian_log_config(settings: Settings) -> str:
    """A file for granian's ``--log-config``: the app's lines in ``HOOKYARD_LOG_FORMAT`` in every worker."""
    import tempfile

    from shared.logs import granian_config

    fd, path = tempfile.mkstemp(prefix="hookyard-log-", suffix=".json")
    with os.fdopen(fd, "w") as out:
        json.dump(granian_config(settings.log_level, settings.log_format), out)
    return path


def _worker(args: argparse.Namespace) -> int:
    from control import workers

    settings = _settings()
    if args.parent_pid is not None:
        from control.cli.up import bind_to_parent

        bind_to_parent(args.parent_pid)
    _run(lambda: workers.run(settings, tuple(args.names), burst=args.burst))
    return 0


def _database_url(settings: Settings) -> str:
    """DATABASE_URL, else the embedded Postgres of a ``hookyard up`` running on the same data dir."""
    if settings.database_url:
        return settings.database_url
    from control.cli.embedded import running_database_url

    found = running_database_url(Path(settings.data_dir).resolve() / "postgres")
    if found is None:
        raise ConfigError(f"DATABASE_URL: not set, and no `hookyard up` is running on data dir {settings.data_dir}")
    return found


def _with_postgres(coro_fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    try:
        return _run(coro_fn)
    except OSError as exc:  # refused, unknown host, timeout: say which setting to look at
        raise HookyardError(f"cannot reach Postgres (DATABASE_URL): {type(exc).__name__}: {exc}") from exc


def _migrate(args: argparse.Namespace) -> int:
    from control.db.migrate import migrate
    from control.service.sealed import keyring_of

    settings = _settings()
    dsn = _database_url(settings)
    keys = _encryption_keys(settings)
    keyring_of(keys)  # a malformed key stops here, before any migration
    applied = _with_postgres(lambda: migrate(dsn))
    print("\n".join(f"applied {version}" for version in applied) if applied else "up to date")
    resealed = _with_postgres(lambda: _reseal(dsn, keys))
    if any(resealed.values()):
        print("sealed " + ", ".join(f"{count} {column}" for column, count in resealed.items()))
    return 0


def _rotate_encryption_key(args: argparse.Namespace) -> int:
    settings = _settings()
    dsn = _database_url(settings)
    keys = _encryption_keys(settings)
    if not keys:
        raise ConfigError("HOOKYARD_ENCRYPTION_KEYS: not set; list the new key first, then the old ones")
    print(json.dumps(_with_postgres(lambda: _reseal(dsn, keys))))
    return 0


def _encryption_keys(settings: Settings) -> tuple[str, ...]:
    """HOOKYARD_ENCRYPTION_KEYS, else (no DATABASE_URL: a `hookyard up` instance) the keys in its data dir."""
    if settings.encryption_keys or settings.database_url:
        return settings.encryption_keys
    from control.db.keyring import data_dir_keys

    return data_dir_keys(Path(settings.data_dir).resolve(), create=False)


async def _reseal(database_url: str, keys: tuple[str, ...]) -> dict[str, int]:
    from control.db import connect
    from control.service.sealed import keyring_of, reseal

    ring = keyring_of(keys)
    conn = await connect(database_url)
    try:
        return await reseal(conn, ring)
    finally:
        await conn.close()


def _account_create(args: argparse.Namespace) -> int:
    if "@" not in args.email or args.email.strip() != args.email:
        raise ConfigError(f"--email: {args.email!r} is not an email address")
    settings = _settings()
    dsn = _database_url(settings)
    account_id, key = _with_postgres(lambda: _create_account(dsn, args.email, args.read_only))
    print(json.dumps({"account_id": account_id, "api_key": key}))
    return 0


async def _create_account(database_url: str, email: str, read_only: bool) -> tuple[str, str]:
    from control.db import connect
    from control.service.accounts import create_account

    conn = await connect(database_url)
    try:
        return await create_account(conn, email=email, read_only=read_only)
    except asyncpg.UniqueViolationError:
        raise HookyardError(f"an account with email {email} already exists") from None
    finally:
        await conn.close()


def _redis_url(settings: Settings) -> str:
    """REDIS_URL, else the embedded Redis of a ``hookyard up`` running on the same data dir."""
    if settings.redis_url:
        return settings.redis_url
    from control.cli.embedded import running_redis_url

    found = running_redis_url(Path(settings.data_dir).resolve() / "redis")
    if found is None:
        raise ConfigError(f"REDIS_URL: not set, and no `hookyard up` is running on data dir {settings.data_dir}")
    return found


def _dead_letters(args: argparse.Namespace) -> int:
    if args.dead_command == "retry" and bool(args.ids) == bool(args.all):
        raise ConfigError("dead-letters retry: name the ids to retry, or --all (not both)")
    settings = _settings()
    redis_url = _redis_url(settings)
    print(_run(lambda: _dead_letters_command(args, settings, redis_url)))
    return 0


async def _dead_letters_command(args: argparse.Namespace, settings: Settings, redis_url: str) -> str:
    import msgspec

    from control.service import dead_letters
    from shared import redis_client
    from shared.keys import Keys

    redis = await redis_client.open_client(redis_url)
    keys = Keys(settings.redis_prefix, settings.stream_shards, cluster=redis_client.is_cluster_client(redis))
    try:
        if args.dead_command == "show":
            return msgspec.json.format(msgspec.json.encode(await dead_letters.show(redis, keys, args.id))).decode()
        if args.dead_command == "retry":
            done = await dead_letters.retry(redis, keys, None if args.all else args.ids)
            missing = sorted(set(args.ids) - set(done))
            said = [f"re-driven through the flush: {len(done)}", *done]
            if missing:
                said.append(f"not found (already retried, or unknown): {', '.join(missing)}")
            return "\n".join(said)
        letters = await dead_letters.list_dead_letters(redis, keys, limit=args.limit)
        if args.json:
            return "\n".join(msgspec.json.encode(d).decode() for d in letters)
        if not letters:
            return "no dead letters"
        rows = [("ID", "DEAD SINCE", "EVENT", "ENDPOINT", "ERROR")]
        for d in letters:
            when = datetime.fromtimestamp(d.dead_at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            rows.append((d.id, when, d.event_id or "-", d.endpoint_id or "-", d.error[:100]))
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[4]]) for r in rows)
    finally:
        await redis.aclose()
