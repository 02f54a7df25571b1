"""The ``hookyard`` command: ``up``, ``edge``, ``control``, ``worker``, ``migrate``, ``account create``,
``dead-letters``, ``rotate-encryption-key``, and the webhook commands ``listen``, ``trigger`` and ``tail``.

Expected failures end as one line on stderr, ``hookyard: <message>``, never a traceback: exit 2 for a bad
setting (the message names the variable), 1 for anything else that stopped the command. Each command's
parser and handler live in ``control.cli.commands``; this module only puts them together.
"""

from __future__ import annotations

import argparse
import logging
import sys

import asyncpg
import redis

from control.cli.commands import admin, dead_letters, serve, webhooks
from control.cli.commands import open as open_command
from shared.errors import ConfigError, HookyardError

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
    serve.add_parsers(commands)  # up, edge, control, worker
    webhooks.add_parsers(commands)  # listen, trigger, tail
    admin.add_parsers(commands)  # migrate, rotate-encryption-key, account
    open_command.add_parser(commands)
    dead_letters.add_parsers(commands)
    return parser


def command_names() -> tuple[str, ...]:
    """The top-level commands, for checks that deploy files only run commands that exist."""
    (commands,) = (a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return tuple(commands.choices)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hookyard")
    except PackageNotFoundError:
        return "unknown"
