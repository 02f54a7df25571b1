"""The administration commands: ``migrate``, ``rotate-encryption-key`` and ``account create``.

They need only Postgres: ``DATABASE_URL``, else the Postgres of the ``hookyard up`` running on the data dir
(``--data-dir``, else ``HOOKYARD_DATA_DIR``; its record, ``control.cli.instance``) and that data dir's
encryption keys, so they work beside a laptop's ``hookyard up`` with no setup.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from control.cli.commands import clients
from control.cli.instance import Target
from control.cli.runtime import command_settings, run
from shared.errors import ConfigError, HookyardError
from shared.settings import Settings

__all__ = ("add_parsers",)


_DATABASE = "whose database to use (and its keys when HOOKYARD_ENCRYPTION_KEYS is unset)"
_ROTATE = """Re-seals every stored secret under the first key of HOOKYARD_ENCRYPTION_KEYS (new first, old kept:
k2:...,k1:...). Before running it, give every running control and worker process that same key list and
restart them: a process without the new key cannot open what this seals, and its deliveries fail until it
has it. Drop the old key only afterwards (docs/reference/security.md, rotation steps)."""


def add_parsers(commands: Any) -> None:
    migrate = commands.add_parser("migrate", help="apply database migrations (idempotent)")
    migrate.set_defaults(handler=_migrate)
    clients.add_data_dir(migrate, _DATABASE)
    rotate = commands.add_parser(
        "rotate-encryption-key",
        help="re-seal every stored secret under the first HOOKYARD_ENCRYPTION_KEYS key (running control and "
        "workers need the new key list first)",
        description=_ROTATE,
    )
    rotate.set_defaults(handler=_rotate_encryption_key)
    clients.add_data_dir(rotate, _DATABASE)

    account = commands.add_parser(
        "account", help="manage accounts", description="create --email EMAIL [--read-only]: a new account and key"
    )
    account_commands = account.add_subparsers(dest="account_command", required=True, metavar="ACTION")
    create = account_commands.add_parser(
        "create", help='--email EMAIL (required): print {"account_id", "api_key"} as JSON'
    )
    create.add_argument("--email", required=True, help="the account's e-mail address (required)")
    create.add_argument("--read-only", action="store_true", help="the key can read but not change anything")
    create.set_defaults(handler=_account_create)
    clients.add_data_dir(create, _DATABASE)


def _with_postgres(found: Target, coro_fn: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    try:
        return run(coro_fn)
    except OSError as exc:  # refused, unknown host, timeout: say which Postgres, found where
        where = f"{clients.redacted(found.url)} (from {found.source})"
        raise HookyardError(f"cannot reach Postgres at {where}: {type(exc).__name__}: {exc}") from exc


def _migrate(args: argparse.Namespace) -> int:
    from control.db.migrate import available, migrate
    from control.support.sealing import keyring_of

    settings = command_settings(data_dir=clients.data_dir(args))
    found = clients.database_url(settings)
    keys = _encryption_keys(settings)
    keyring_of(keys)  # a malformed key stops here, before any migration
    applied = _with_postgres(found, lambda: migrate(found.url))
    # "up to date" names the newest migration, so an upgrade can be checked against the release's files.
    print("\n".join(f"applied {version}" for version in applied) if applied else f"up to date ({available()[-1][0]})")
    resealed = _with_postgres(found, lambda: _reseal(found.url, keys))
    if any(resealed.values()):
        print("sealed " + ", ".join(f"{count} {column}" for column, count in resealed.items()))
    return 0


def _rotate_encryption_key(args: argparse.Namespace) -> int:
    settings = command_settings(data_dir=clients.data_dir(args))
    found = clients.database_url(settings)
    keys = _encryption_keys(settings)
    if not keys:
        raise ConfigError("HOOKYARD_ENCRYPTION_KEYS: not set; list the new key first, then the old ones")
    print(json.dumps(_with_postgres(found, lambda: _reseal(found.url, keys))))
    return 0


def _encryption_keys(settings: Settings) -> tuple[str, ...]:
    """HOOKYARD_ENCRYPTION_KEYS, else (no DATABASE_URL: a `hookyard up` instance) the keys in its data dir."""
    if settings.encryption_keys or settings.database_url:
        return settings.encryption_keys
    from control.db.keyring import data_dir_keys

    return data_dir_keys(Path(settings.data_dir).resolve(), create=False)


async def _reseal(database_url: str, keys: tuple[str, ...]) -> dict[str, int]:
    from control.db import connect
    from control.support.sealing import keyring_of, reseal

    ring = keyring_of(keys)
    conn = await connect(database_url)
    try:
        return await reseal(conn, ring)
    finally:
        await conn.close()


def _account_create(args: argparse.Namespace) -> int:
    if "@" not in args.email or args.email.strip() != args.email:
        raise ConfigError(f"--email: {args.email!r} is not an email address")
    settings = command_settings(data_dir=clients.data_dir(args))
    found = clients.database_url(settings)
    account_id, key = _with_postgres(found, lambda: _create_account(found.url, args.email, args.read_only))
    print(json.dumps({"account_id": account_id, "api_key": key}))
    return 0


async def _create_account(database_url: str, email: str, read_only: bool) -> tuple[str, str]:
    import asyncpg

    from control.db import connect
    from control.service.accounts import create_account

    conn = await connect(database_url)
    try:
        return await create_account(conn, email=email, read_only=read_only)
    except asyncpg.UniqueViolationError:
        raise HookyardError(f"an account with email {email} already exists") from None
    finally:
        await conn.close()
