"""The local account's API key, which ``hookyard up`` keeps in the data dir's ``api_key`` for the client
commands (``control.cli.remote.saved_key``).

The file holds one key, and a data dir can be run on more than one database: ``up`` embedded, then ``up`` with
``DATABASE_URL`` on the same directory. The second database does not know the first one's key, so it issues
its own; the key it replaces is moved aside to ``api_key.replaced-<UTC time>`` (0600) and ``up`` says where,
rather than overwriting a key that still works on the first database (a trial lost it so). Run on the first
database again, ``up`` finds its key among those set aside and puts it back, issuing none
(docs/adr/0084-up-keeps-a-replaced-key.md).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import msgspec

from control.db import accounts as db_accounts
from control.db import connect
from control.service.accounts import create_account, hash_key, issue_key

__all__ = ("LOCAL_EMAIL", "LocalKey", "ensure_local_key")

LOCAL_EMAIL = "local@hookyard"
_ASIDE = ".replaced-"


class LocalKey(msgspec.Struct, frozen=True, kw_only=True):
    value: str
    new: bool
    """Issued by this run: ``up`` shows it once."""
    set_aside: Path | None = None
    """Where the key the file held is now: a key this database does not know (another database's, perhaps)."""
    restored: Path | None = None
    """The file this database's key was set aside in, by an earlier run on another database."""


async def ensure_local_key(database_url: str, key_file: Path) -> LocalKey:
    """The local account's API key, saved in ``key_file``. "First run" is decided by the database, not by the
    file alone: a key file whose key the database does not know (another database's, or the database was reset)
    gets the key this database had, if one was set aside, else a new key, issued to the existing local account
    if there is one, so the account and its endpoints are never duplicated. The key it held is set aside."""
    conn = await connect(database_url)
    try:
        key = _read_key(key_file)
        if key and await db_accounts.find_key(conn, hash_key(key)) is not None:
            return LocalKey(value=key, new=False)
        restored = None
        for aside in sorted(key_file.parent.glob(key_file.name + _ASIDE + "*"), reverse=True):
            if await db_accounts.find_key(conn, hash_key(kept := _read_key(aside))) is not None:
                restored = aside
                break
        if restored is not None:
            new = False
        elif (account_id := await db_accounts.account_id_by_email(conn, LOCAL_EMAIL)) is None:
            _, kept = await create_account(conn, email=LOCAL_EMAIL)
            new = True
        else:
            kept = await issue_key(conn, account_id)
            new = True
    finally:
        await conn.close()
    set_aside = _set_aside(key_file) if key else None
    _write_key(key_file, kept)
    if restored is not None:
        restored.unlink()
    return LocalKey(value=kept, new=new, set_aside=set_aside, restored=restored)


def _set_aside(key_file: Path) -> Path:
    """The key file renamed to ``api_key.replaced-<UTC time>``: sorted by name, the newest comes first."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = key_file.with_name(f"{key_file.name}{_ASIDE}{stamp}")
    n = 1
    while aside.exists():  # two runs within a second
        n += 1
        aside = key_file.with_name(f"{key_file.name}{_ASIDE}{stamp}-{n}")
    os.replace(key_file, aside)
    return aside


def _read_key(key_file: Path) -> str:
    return key_file.read_text().strip() if key_file.exists() else ""


def _write_key(key_file: Path, key: str) -> None:
    """Created 0600 from the first byte and renamed into place: never readable by others, never half written."""
    tmp = key_file.with_name(key_file.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key + "\n")
    os.replace(tmp, key_file)
