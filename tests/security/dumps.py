"""What an attacker holding only a ``pg_dump`` of the database has, and what they would try with it.

``dump`` runs the real ``pg_dump``; ``copied_rows`` reads one table out of it the way a person would (the
``COPY ... FROM stdin`` block, tab-separated text); ``keys_an_attacker_tries`` turns a dumped value into every
key it could stand for, and ``forged_cookie`` signs an inbox page cookie with one, as the audit (issue 23,
item 4) did: the inbox link key signs links and cookies with HMAC-SHA256 (control.service.inbox_links), so
whoever has that key makes a 12-hour cookie for any account's endpoint.
"""

from __future__ import annotations

import base64
import binascii
import importlib.util
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from control.db.context import Principal
from control.service.inbox_links import COOKIE_LIFETIME, _sign
from tests.stack import hookyard_command

__all__ = ("copied_rows", "dump", "encodings", "forged_cookie", "hookyard", "keys_an_attacker_tries")


def _pg_dump() -> str:
    """A pg_dump at least as new as either server the tests may use (the machine's, or pgserver's 16)."""
    spec = importlib.util.find_spec("pgserver")  # located, not imported (its import warns without XDG dirs)
    if spec is not None and spec.submodule_search_locations:
        bundled = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / "pg_dump"
        if bundled.exists():
            return str(bundled)
    return shutil.which("pg_dump") or "pg_dump"


def dump(database_url: str) -> str:
    done = subprocess.run(
        [_pg_dump(), "--no-owner", "--data-only", database_url], capture_output=True, check=True, timeout=60
    )
    return done.stdout.decode()


def hookyard(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The ``hookyard`` command with only the given hookyard settings (the machine's own are dropped)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HOOKYARD_")}
    return subprocess.run([*hookyard_command(), *args], env={**base, **env}, capture_output=True, text=True, timeout=60)


def copied_rows(text: str, table: str) -> list[dict[str, str]]:
    """The rows of ``table`` in a data-only dump, as {column: field as dumped}."""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith(f"COPY public.{table} (") and line.endswith(" FROM stdin;"):
            columns = line[line.index("(") + 1 : line.rindex(")")].split(", ")
            rows = []
            for row in lines:
                if row == "\\.":
                    return rows
                rows.append(dict(zip(columns, row.split("\t"), strict=True)))
    raise AssertionError(f"the dump has no COPY block for {table}")


def keys_an_attacker_tries(dumped: str) -> set[bytes]:
    """Every key a dumped field could be: a bytea's bytes (COPY writes ``\\\\x<hex>``), the text itself, its
    base64 (plain or URL-safe; of the whole value and of what follows its last ``:``) and every 32-byte
    window of what that decodes to, so a key kept inside a longer value is tried too."""
    keys = {dumped.encode()}
    if dumped.startswith("\\\\x"):
        keys.add(bytes.fromhex(dumped[3:]))
    for part in {dumped, dumped.rsplit(":", 1)[-1]}:
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                raw = decode(part + "=" * (-len(part) % 4))
            except (binascii.Error, ValueError):
                continue
            keys.add(raw)
            keys.update(raw[i : i + 32] for i in range(max(len(raw) - 31, 1)))
    return keys


def encodings(key: bytes) -> set[str]:
    """The ways a key's bytes could be written into a dump."""
    plain, url = base64.b64encode(key).decode(), base64.urlsafe_b64encode(key).decode()
    return {key.hex(), plain, plain.rstrip("="), url, url.rstrip("=")}


def forged_cookie(key: bytes, endpoint_id: str, account_id: str) -> str:
    """An ``hy_inbox`` cookie value for the account's endpoint (write access), signed with ``key``."""
    principal = Principal(account_id=account_id, key_id="", kind="live")
    return _sign(key, "cookie", endpoint_id, principal, datetime.now(UTC).replace(microsecond=0) + COOKIE_LIFETIME)
