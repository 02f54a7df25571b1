"""``hookyard dead-letters``: the records the flush could not store, listed, shown and retried.

They live in Redis (``control.support.dead_letters``): ``REDIS_URL``, else the Redis of the ``hookyard up``
running on the data dir (``--data-dir``, else ``HOOKYARD_DATA_DIR``), as its record names it
(``control.cli.instance``).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from control.cli.commands import clients
from control.cli.runtime import command_settings, run
from shared.errors import ConfigError, HookyardError
from shared.settings import Settings

__all__ = ("add_parsers",)


def add_parsers(commands: Any) -> None:
    dead = commands.add_parser("dead-letters", help="records the flush could not store: list, show, retry")
    dead_commands = dead.add_subparsers(dest="dead_command", required=True, metavar="ACTION")
    listing = dead_commands.add_parser("list", help="one line per dead letter, oldest first")
    listing.add_argument("--limit", type=int, default=100, help="at most this many per shard (default 100)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(handler=_dead_letters)
    clients.add_data_dir(listing)
    show = dead_commands.add_parser("show", help="one dead letter with the request as captured, as JSON")
    show.add_argument("id", help="as `list` prints it, e.g. 0:1764000000000-0")
    show.set_defaults(handler=_dead_letters)
    clients.add_data_dir(show)
    retry = dead_commands.add_parser("retry", help="put dead letters back through the flush (idempotent)")
    retry.add_argument("ids", nargs="*", metavar="ID")
    retry.add_argument("--all", action="store_true", help="every dead letter")
    retry.set_defaults(handler=_dead_letters)
    clients.add_data_dir(retry)


def _dead_letters(args: argparse.Namespace) -> int:
    if args.dead_command == "retry" and bool(args.ids) == bool(args.all):
        raise ConfigError("dead-letters retry: name the ids to retry, or --all (not both)")
    settings = command_settings(data_dir=clients.data_dir(args))
    found = clients.redis_url(settings)
    import redis as redis_errors  # here, not above: the other commands' start-up does not pay for it

    try:
        print(run(lambda: _dead_letters_command(args, settings, found.url)))
    except (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError) as exc:
        where = f"{clients.redacted(found.url)} (from {found.source})"
        raise HookyardError(f"cannot reach Redis at {where}: {type(exc).__name__}: {exc}") from exc
    return 0


async def _dead_letters_command(args: argparse.Namespace, settings: Settings, redis_url: str) -> str:
    import msgspec

    from control.support import dead_letters
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
