"""Which running hookyard a client command talks to: the record ``hookyard up`` keeps in its data dir.

``up`` writes ``{data dir}/instance.json`` as soon as its children are started: its pid (with the pid's start
time, so a pid the system has since reused is not taken for it), the control and edge URLs, and the Postgres
and Redis it runs on. Atomically (a 0600 temporary file renamed into place: the Redis URL of the embedded
server carries its password) and removed when ``up`` exits; a record whose process is gone (``up`` killed)
is stale and read as no record.

The client commands (``listen``, ``trigger``, ``tail``, ``open``; ``dead-letters`` and the admin commands for
Redis and Postgres) resolve what they talk to in one order: ``--control-url``, else ``HOOKYARD_CONTROL_URL``,
else the record in the data dir (``--data-dir``, else ``HOOKYARD_DATA_DIR``, else the nearest ``.hookyard``
of this directory and its parents), else the default of the settings (``HOOKYARD_PUBLIC_CONTROL_URL``, else
``http://{host}:{control port}``). Each answer carries where it came from, which every "cannot reach"
message names, so a command talking to the wrong instance says so. ``listen`` and ``tail`` read the record
again while they cannot reach it (``relocation``): they follow an ``up`` restarted on other ports.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import msgspec

from shared.errors import ConfigError
from shared.settings import CONTROL_URL_VARIABLE, Settings

__all__ = (
    "CONTROL_URL_ENV",
    "RECORD",
    "Instance",
    "Target",
    "control_target",
    "instance_of_this_process",
    "read_instance",
    "relocation",
    "remove_instance",
    "write_instance",
)

RECORD = "instance.json"
CONTROL_URL_ENV = CONTROL_URL_VARIABLE
"""A client's setting, not a server's: ``shared.settings`` names it (so it accepts it) and leaves it to us."""


class Instance(msgspec.Struct, frozen=True, kw_only=True):
    """Where a ``hookyard up`` serves, and what it runs on."""

    pid: int
    started: float
    """The process's start time (``psutil``): with the pid, the process itself, not a later one given its pid."""
    control_url: str
    edge_url: str
    database_url: str
    redis_url: str
    embedded: tuple[str, ...] = ()
    """The servers it started itself: ``postgres``, ``redis``."""

    @property
    def alive(self) -> bool:
        import psutil

        try:
            proc = psutil.Process(self.pid)
            return proc.status() != psutil.STATUS_ZOMBIE and abs(proc.create_time() - self.started) < 1.0
        except psutil.Error:
            return False

    def describe(self, data_dir: Path) -> str:
        return f"the hookyard up running on data dir {data_dir}, pid {self.pid}"


def instance_of_this_process(**fields: object) -> Instance:
    import psutil

    return msgspec.convert({"pid": os.getpid(), "started": psutil.Process().create_time(), **fields}, Instance)


def write_instance(data_dir: Path, instance: Instance) -> None:
    """Created 0600 from the first byte and renamed into place: never readable by others, never half written."""
    path = data_dir / RECORD
    tmp = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(msgspec.json.format(msgspec.json.encode(instance)) + b"\n")
    os.replace(tmp, path)


def remove_instance(data_dir: Path, pid: int) -> None:
    """Removes the record if it is still the one of process ``pid`` (another ``up`` may have written its own)."""
    found = _read(data_dir)
    if found is not None and found.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            (data_dir / RECORD).unlink()


def read_instance(data_dir: Path) -> Instance | None:
    """The record of the ``hookyard up`` running on ``data_dir``; None when there is none, or it is stale."""
    found = _read(data_dir)
    return found if found is not None and found.alive else None


def _read(data_dir: Path) -> Instance | None:
    try:
        return msgspec.json.decode((data_dir / RECORD).read_bytes(), type=Instance)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


@dataclass(frozen=True)
class Target:
    """A control plane URL and where it came from, as the messages name it."""

    url: str
    source: str

    def __str__(self) -> str:
        return f"{self.url} (from {self.source})"


def control_target(flag: str | None, settings: Settings, environ: Mapping[str, str] | None = None) -> Target:
    """``--control-url``, else ``HOOKYARD_CONTROL_URL``, else the data dir's record, else the settings' default."""
    env = os.environ if environ is None else environ
    if flag:
        return Target(_http_url(flag, "--control-url"), "--control-url")
    if env.get(CONTROL_URL_ENV, "").strip():
        return Target(_http_url(env[CONTROL_URL_ENV].strip(), CONTROL_URL_ENV), CONTROL_URL_ENV)
    data_dir = Path(settings.data_dir).resolve()
    running = read_instance(data_dir)
    if running is not None:
        return Target(running.control_url, running.describe(data_dir))
    if env.get("HOOKYARD_PUBLIC_CONTROL_URL"):
        source = "HOOKYARD_PUBLIC_CONTROL_URL"
    elif env.get("HOOKYARD_CONTROL_PORT") or env.get("HOOKYARD_HOST"):
        source = "HOOKYARD_HOST and HOOKYARD_CONTROL_PORT"
    else:
        source = "the default"
    return Target(
        settings.control_url,
        f"{source}; no hookyard up is running on data dir {data_dir} (--data-dir or HOOKYARD_DATA_DIR names "
        f"another, --control-url or {CONTROL_URL_ENV} a URL)",
    )


def relocation(target: Target, settings: Settings) -> Callable[[], Target] | None:
    """For a long-running client (``listen``, ``tail``) whose URL was not given (by flag or variable): reads
    the data dir's record again, so when ``hookyard up`` restarts on other ports the client follows it
    instead of retrying the old URL forever, and on the same ports its messages name the ``up`` running now,
    not the one that ran before. With no ``up`` running, the target's URL is empty and its source says so.
    None for a given URL: that one is kept whatever runs here."""
    if target.source in ("--control-url", CONTROL_URL_ENV):
        return None
    data_dir = Path(settings.data_dir).resolve()

    def now() -> Target:
        running = read_instance(data_dir)
        if running is None:
            return Target("", f"data dir {data_dir}, where no hookyard up is running now; waiting for one")
        return Target(running.control_url, running.describe(data_dir))

    return now


def _http_url(url: str, name: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{name}: {url!r} is not an http(s) URL")
    return url.rstrip("/")
