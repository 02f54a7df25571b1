"""Logging for every process: plain lines (the default, what ``hookyard up`` shows) or one JSON object a
line (``HOOKYARD_LOG_FORMAT=json``) for log shippers.

A JSON line has ``time``, ``level``, ``logger``, ``message`` and, where the line has them, ``request_id``,
``event_id``, ``endpoint_id``, ``delivery_id``, and ``trace_id`` and ``span_id`` (of the webhook's trace,
when tracing is on: ``shared.tracing``): from the ``log_context`` of the code that is running (a control
request, an ingest, a delivery attempt, a replay) or from a call's ``extra=``. Both formats pass every message through
``redact``, which replaces anything shaped like a secret hookyard hands out or checks (``whsec_`` signing
secrets, ``hy_live_``/``hy_tmp_`` keys, sealed values, signature header values) by a marker: the code logs
no secret on purpose, and a value that reaches a log by accident (an exception quoting a header) still
does not (tests/test_logs.py greps the logs of a whole run for every secret it used).

A URL that hookyard sends to (a destination's, a replay's) is named in logs, metric labels and error
messages by ``safe_url`` only: scheme, host and port. Its user info, path and query are where webhook URLs
carry their secrets (a chat incoming-webhook path, an ``access_token`` parameter, ``user:password@``), so
they never leave the record that stores the URL; ``redact`` also drops the user info of any URL that
reaches a line by accident (an exception quoting one), and tests/security/test_url_redaction.py greps a run
with such a URL in both formats.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import msgspec

__all__ = (
    "IDS",
    "JsonFormatter",
    "PlainFormatter",
    "bind",
    "configure",
    "granian_config",
    "log_context",
    "redact",
    "safe_url",
)

IDS = ("request_id", "event_id", "endpoint_id", "delivery_id", "trace_id", "span_id")
_context: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("hookyard_log_context", default={})  # noqa: B039 - never mutated, only replaced

_SECRET = re.compile(
    r"whsec_[A-Za-z0-9+/=_-]{8,}"  # signing secrets (platform, destination, provider)
    r"|hy_(?:live|tmp)_[A-Za-z0-9]{8,}"  # API keys and temporary tokens
    r"|hyenc:v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+"  # sealed secrets (control.db.keyring)
    r"|\bv1,[A-Za-z0-9+/=]{16,}"  # Standard Webhooks signatures
    r"|\bv[01]=[0-9a-f]{32,}"  # payments-style signatures
    r"|\bsha256=[0-9a-f]{32,}"  # code-host signatures
    r"|(?<=://)[^\s/?#'\"]+(?=@)"  # the user info of a URL (user:password@, up to its last @)
)
_PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def redact(text: str) -> str:
    return _SECRET.sub("[redacted]", text)


def safe_url(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, nothing else: how a URL is named wherever it is not the data
    itself (logs, metric labels, error messages). Never raises; a URL without a usable host says so."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # an unbalanced IPv6 bracket
        return "(an invalid URL)"
    if not host:
        return "(a URL without a host)"
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: not shown, it may be a misplaced password
        port = None
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme.lower()}://{shown}" + (f":{port}" if port is not None else "")


@contextlib.contextmanager
def log_context(**ids: str | None) -> Iterator[None]:
    """Ids (``IDS``) every line logged inside carries; nested contexts add to the outer one."""
    token = _context.set({**_context.get(), **{k: v for k, v in ids.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def bind(**ids: str | None) -> None:
    """Adds ids to the current context until the enclosing ``log_context`` ends (a request's, a task's)."""
    _context.set({**_context.get(), **{k: v for k, v in ids.items() if v is not None}})


class PlainFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(_PLAIN)

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object a line; the exception, if any, as text in ``exc``."""

    _encoder = msgspec.json.Encoder()

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        line.update(_context.get())
        for name in IDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = str(value)
        if record.exc_info:
            line["exc"] = redact(self.formatException(record.exc_info))
        return self._encoder.encode(line).decode()


_NOISY = ("pgserver", "httpx", "httpcore")
"""One line per command or request at INFO: WARNING and above only."""


def configure(level: str, log_format: str) -> None:
    """The root logger writes to stderr in the chosen format; like ``logging.basicConfig``, a root logger
    that already has a handler (a test's capture) is left as it is, but for its level."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter() if log_format == "json" else PlainFormatter())
        root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def granian_config(level: str, log_format: str) -> dict[str, object]:
    """The ``--log-config`` of a granian server: its own loggers and the app's (root) in the chosen format."""
    formatter = f"shared.logs.{'JsonFormatter' if log_format == 'json' else 'PlainFormatter'}"
    handler = {"class": "logging.StreamHandler", "formatter": "hookyard", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"hookyard": {"()": formatter}},
        "handlers": {"console": handler},
        "loggers": {
            "_granian": {"handlers": ["console"], "level": "INFO", "propagate": False},
            "granian.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
            # as in ``configure``: a line per outbound request (a test webhook sent to the edge) is noise
            **{noisy: {"level": "WARNING"} for noisy in _NOISY},
        },
        "root": {"handlers": ["console"], "level": level.upper()},
    }
