"""The ``hookyard`` command: ``up``, ``edge``, ``control``, ``worker``, ``migrate``, ``account create``,
``dead-letters``, ``rotate-encryption-key``, and the webhook commands ``listen``, ``trigger``, ``replay``
and ``tail``.

Expected failures end as one line on stderr, ``hookyard: <message>``, never a traceback: exit 2 for a bad
setting (the message names the variable), 1 for anything else that stopped the command. Each command's
parser and handler live in ``control.cli.commands``; this module only puts them together.
"""

from __future__ import annotations

import argparse
import logging
import sys

from control.cli.commands import admin, dead_letters, serve, webhooks
from control.cli.commands import open as open_command
from shared.errors import ConfigError, HookyardError

__all__ = ("build_parser", "command_names", "main")

log = logging.getLogger("hookyard.cli")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        found: int = args.handler(args)
        return found
    except ConfigError as exc:
        print(f"hookyard: {exc}", file=sys.stderr)
        return 2
    except HookyardError as exc:
        print(f"hookyard: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not _expected(exc):
            raise
        log.debug("failed", exc_info=True)
        print(f"hookyard: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _expected(exc: Exception) -> bool:
    """An OSError, or an error of Postgres or Redis: one line, not a traceback. Their classes are looked up
    only if their module was imported (an error of a module never imported cannot have been raised), so the
    client commands do not import asyncpg and redis at start-up just to be able to catch them."""
    kinds: list[type[BaseException]] = [OSError]
    if (asyncpg := sys.modules.get("asyncpg")) is not None:
        kinds += [asyncpg.PostgresError, asyncpg.InterfaceError]
    if (redis := sys.modules.get("redis")) is not None:
        kinds.append(redis.RedisError)
    return isinstance(exc, tuple(kinds))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hookyard",
        description="Webhook capture, routing and replay. Settings come from HOOKYARD_* variables, "
        "DATABASE_URL and REDIS_URL; flags override them.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.add_parsers(commands)  # up, edge, control, worker
    webhooks.add_parsers(commands)  # listen, trigger, tail
    admin.add_parsers(commands)  # migrate, rotate-encryption-key, account
    open_command.add_parser(commands)
    dead_letters.add_parsers(commands)
    return parser


class _Version(argparse.Action):
    """``--version``, read when asked: argparse's own action wants the text while the parser is built, and
    ``importlib.metadata`` is a noticeable part of a command's start-up. It names the newest migration shipped
    too: the package version is not bumped for every change, the schema is what an upgrade must reach (``hookyard
    migrate`` prints the same name when the database is up to date)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from control.db.migrate import available

        # on stdout, as argparse's own action prints it
        print(f"hookyard {_version()} (schema {available()[-1][0]})")
        parser.exit()


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
