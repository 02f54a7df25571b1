"""What the client commands share: which instance they talk to (``--control-url``, ``--data-dir``) and their
settings. A client command is one that talks to a running hookyard (``listen``, ``trigger``, ``tail``,
``open``; ``dead-letters`` and the admin commands, which reach its Redis or Postgres); the order it finds
that instance in is ``control.cli.instance``'s.

Its data dir is ``--data-dir``, else ``HOOKYARD_DATA_DIR``, else the ``.hookyard`` of the current directory or
the nearest parent that has one (as git finds ``.git``): a command typed in a subdirectory of the project
finds the instance and the key that ``hookyard up``, run at the project's top, keeps there."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from control.cli.instance import CONTROL_URL_ENV, Instance, Target, control_target, read_instance
from shared.errors import ConfigError
from shared.settings import Settings, load_settings

if TYPE_CHECKING:
    from control.cli.remote import ApiKey, Remote

__all__ = (
    "add_data_dir",
    "add_target",
    "client_settings",
    "data_dir",
    "database_url",
    "nearest_data_dir",
    "redacted",
    "redis_url",
    "remote",
    "running",
    "target",
)


def add_target(parser: argparse.ArgumentParser) -> None:
    """``--control-url`` and ``--data-dir``, as every command that calls the control plane takes them."""
    parser.add_argument(
        "--control-url",
        metavar="URL",
        help=f"the control plane (default: {CONTROL_URL_ENV}, else the hookyard up running on the data dir, "
        "else http://127.0.0.1:8000)",
    )
    add_data_dir(parser)


def add_data_dir(parser: argparse.ArgumentParser, what: str = "to talk to, and of the saved API key") -> None:
    """``--data-dir``; ``what`` says what the command takes from it (an admin command no API key)."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"the data dir of the hookyard up {what} (default: HOOKYARD_DATA_DIR, else the .hookyard of this "
        "directory or the nearest parent that has one)",
    )


def client_settings(args: argparse.Namespace) -> Settings:
    """The settings with the data dir applied (the client's own variables are none of the servers')."""
    return load_settings(None, data_dir=data_dir(args))


def data_dir(args: argparse.Namespace) -> str | None:
    """``--data-dir``; else None when ``HOOKYARD_DATA_DIR`` is set (the settings read it); else the nearest
    ``.hookyard`` (``nearest_data_dir``)."""
    given = getattr(args, "data_dir", None)
    if given:
        return str(given)
    if os.environ.get("HOOKYARD_DATA_DIR", "").strip():
        return None
    return str(nearest_data_dir(Path.cwd()))


def nearest_data_dir(start: Path, name: str = ".hookyard") -> Path:
    """``name`` in ``start`` or its nearest parent that has it as a directory, up to the filesystem root;
    ``start/name`` when none has (where ``hookyard up`` run here would make it, as the messages say)."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / name).is_dir():
            return folder / name
    return start / name


def target(args: argparse.Namespace, settings: Settings) -> Target:
    return control_target(getattr(args, "control_url", None), settings)


def remote(url: str, key: ApiKey, source: str, relocate: Callable[[], Any] | None = None) -> Remote:
    """The control plane's operations as ``key`` may make them: over /v1 with an API key, over /mcp with a
    temporary ``hy_tmp_`` token from ``POST /api/start`` (which /v1 refuses: ``control.cli.remote_mcp``)."""
    if key.value.startswith("hy_tmp_"):
        from control.cli.remote_mcp import RemoteOverMcp  # here: the MCP client is for temporary tokens only

        return RemoteOverMcp(url, key.value, key_origin=key.origin, source=source, relocate=relocate)
    from control.cli.remote import Remote

    return Remote(url, key.value, key_origin=key.origin, source=source, relocate=relocate)


def running(settings: Settings) -> tuple[Instance | None, Path]:
    """The ``hookyard up`` running on the settings' data dir (None if none), and that data dir."""
    data_dir = Path(settings.data_dir).resolve()
    return read_instance(data_dir), data_dir


def redis_url(settings: Settings) -> Target:
    """``REDIS_URL``, else the Redis of the ``hookyard up`` running on the data dir (its record; else, for an
    ``up`` that was killed and left its embedded Redis running, that server's own files)."""
    return _server(settings, "redis")


def database_url(settings: Settings) -> Target:
    """``DATABASE_URL``, else the Postgres of the ``hookyard up`` running on the data dir (as ``redis_url``)."""
    return _server(settings, "database")


def _server(settings: Settings, kind: str) -> Target:
    variable = "REDIS_URL" if kind == "redis" else "DATABASE_URL"
    given = settings.redis_url if kind == "redis" else settings.database_url
    if given:
        return Target(given, variable)
    instance, data_dir = running(settings)
    if instance is not None:
        return Target(instance.redis_url if kind == "redis" else instance.database_url, instance.describe(data_dir))
    from control.cli.embedded import running_database_url, running_redis_url

    folder = data_dir / ("redis" if kind == "redis" else "postgres")
    found = running_redis_url(folder) if kind == "redis" else running_database_url(folder)
    if found is not None:
        return Target(found, f"the embedded server left running in {folder}")
    raise ConfigError(
        f"{variable}: not set, and no `hookyard up` is running on data dir {data_dir} "
        "(--data-dir or HOOKYARD_DATA_DIR names another)"
    )


def redacted(url: str) -> str:
    """A server URL fit for a message: the password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
