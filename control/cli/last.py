"""The endpoint a client command uses when none is named: the one ``hookyard listen`` last followed.

So the first hour needs no id copied by hand: ``hookyard listen --start`` makes an endpoint and records it
(with where it forwards, and the secret it re-signs with, if any) in the data dir, in ``last-endpoint.json``
(0600), under the control URL it was made on and with when; ``trigger``, ``open`` and ``replay`` with no
endpoint then use the entry of their control URL, else the latest entry of the data dir, and ``replay`` sends
to where ``listen`` forwards, re-signed as it re-signs: no step is typed twice. The data dir is the
instance, its URL is not: after ``hookyard up`` restarts on other ports, the default is still the endpoint
``listen`` last followed (an entry of another instance names an endpoint this one does not have, and is
ignored as a deleted one is). Recorded before ``listen`` prints "Ready", so a command typed after that line
finds it.

Without a record for this control plane, or with one whose endpoint has since expired or been deleted, an
account with exactly one endpoint means that one; otherwise the command refuses, listing the endpoints it
could mean and the flag that chooses.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from shared.errors import ApiError, ConfigError

__all__ = ("RECORD", "chosen_endpoint", "last_listened", "private_write", "remember")

RECORD = "last-endpoint.json"
_GONE = frozenset({"not_found", "gone"})
_LISTED = 10


def remember(
    data_dir: str | Path, control_url: str, endpoint_id: str, forward_to: str, resign_with: str | None = None
) -> None:
    """Replaces this control plane's entry; others are kept. ``resign_with``: the secret ``listen`` re-signs
    with, which ``replay`` then re-signs with too. The file holds it, so it is created 0600 from its first byte
    (``private_write``) and renamed into place: never readable by others, never half written."""
    path = Path(data_dir) / RECORD
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    entries = _read(path)
    entry: dict[str, Any] = {"endpoint_id": endpoint_id, "forward_to": forward_to, "at": time.time()}
    if resign_with is not None:
        entry["resign_with"] = resign_with
    entries[control_url] = entry
    private_write(path, json.dumps(entries, indent=2) + "\n")


def private_write(path: Path, text: str) -> None:
    """``text`` into ``path``, mode 0600 (a secret may be in it), through a temporary file renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


def last_listened(data_dir: str | Path, control_url: str) -> dict[str, str] | None:
    """``endpoint_id`` and ``forward_to`` (and ``resign_with`` when it re-signs) of the last ``listen`` on
    ``control_url``, else of the latest ``listen`` from this data dir on any URL (the same instance on other
    ports); None if none ran."""
    entries = {url: e for url, e in _read(Path(data_dir) / RECORD).items() if _valid(e)}
    url = control_url if control_url in entries else max(entries, key=lambda u: _at(entries[u]), default=None)
    if url is None:
        return None
    return {**{k: str(v) for k, v in entries[url].items()}, "control_url": url}


def _at(entry: dict[str, Any]) -> float:
    return float(entry["at"]) if isinstance(entry.get("at"), (int, float)) else 0.0


def _valid(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("endpoint_id"), str)


def _absolute(data_dir: str | Path) -> Path:
    return Path(data_dir).resolve()


def _read(path: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        entries = json.loads(path.read_text())
        if isinstance(entries, dict):
            return entries
    return {}


async def chosen_endpoint(remote: Any, data_dir: str | Path, ref: str | None, flag: str) -> dict[str, Any]:
    """The endpoint ``ref`` names (an id or ``external_ref``); else the last one ``listen`` followed on this
    control plane, if it still exists; else the account's only endpoint. ``flag`` is how the command names
    an endpoint, for the refusal."""
    if ref is not None:
        found: dict[str, Any] = await remote.endpoint(ref)
        return found
    last = last_listened(data_dir, remote.base_url)
    if last is not None:
        try:
            found = await remote.endpoint(last["endpoint_id"])
            return found
        except ApiError as exc:
            if exc.code not in _GONE:
                raise
    endpoints = await remote.endpoints()
    if len(endpoints) == 1:
        found = endpoints[0]
        return found
    where = f"no `hookyard listen` has run on {remote.base_url} from data dir {_absolute(data_dir)}"
    if last is not None:
        where = (
            f"the endpoint `hookyard listen` last followed from data dir {_absolute(data_dir)} "
            f"({last['endpoint_id']}, on {last['control_url']}) is gone"
        )
    if not endpoints:
        raise ConfigError(
            f"{flag}: this account has no endpoint yet; `hookyard listen --start --forward-to URL` makes one "
            "(and later commands use it)"
        )
    listed = ", ".join(f"{e['id']} ({e.get('external_ref') or e['name']})" for e in endpoints[:_LISTED])
    more = f" and {len(endpoints) - _LISTED} more" if len(endpoints) > _LISTED else ""
    raise ConfigError(
        f"{flag}: which endpoint? {where}, and this account has {len(endpoints)}: {listed}{more}; "
        f"name one with {flag} (an id or external_ref), or run `hookyard listen --start` to make and use a new one"
    )
