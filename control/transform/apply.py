"""A request to send, as a transform sees it and as it comes back: the one mapping rule deliveries, replays
and the dry run share.

In: ``{method, path, query, headers, body}`` (the path and query of the URL the request goes to; header
names lowercased; ``body`` parsed when the request is JSON, else text) and ``context`` (:func:`event_context`).
Out: the returned object, checked field by field (a wrong one is the transform's failure, named like a field
of a request body; a field left out keeps its value; ``body: null`` sends none), or null to skip.

What comes back unchanged is sent as it was, exactly: a body equal to the one handed in goes out as the
original bytes (not re-serialised: a signature over them still holds, and a number past 2^53 keeps its
digits), a header value equal to the one handed in goes out as the captured bytes, and an unchanged path
and query leave the URL as it was. A changed path or query goes to the same origin (scheme, host, port):
a transform reshapes a request, it does not choose where it goes.

The mapping runs in the sandbox process (``payload_of`` before the call, ``mapped`` after it), not in the
caller's: the caller sends the request as it is (``Input``: the captured body's bytes, never decoded or
encoded there) and gets back only what changed (``Sent``), so a delivery worker's own CPU per transformed
delivery is a struct each way (ADR 0060).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec

from control.db.connection import Row
from control.records.destinations import HOP_BY_HOP
from control.records.transforms import TransformError, TransformRecord
from control.transform.wire import Input, Problem, Run, Sent
from shared import json_depth
from shared.bytes_lru import memoize
from shared.errors import NotATransformError

__all__ = (
    "Call",
    "Outgoing",
    "Prepared",
    "Result",
    "apply",
    "event_context",
    "mapped",
    "payload_of",
    "record_of",
    "request_input",
    "result_of",
    "view",
)

Call = Callable[[Input], Awaitable[Run | Problem]]
"""One call of a transform on a request (``control.transform.pool.Pool.run`` with its source bound)."""

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_VALUE = re.compile(r"[\t\x20-\x7e\x80-\ud7ff\ue000-\U0010ffff]*")
_PATH = re.compile(r"/[^\x00-\x20\x7f#?]*")
_QUERY = re.compile(r"[^\x00-\x20\x7f#]*")
_FIELDS = frozenset({"method", "path", "query", "headers", "body"})
_METHODS = frozenset({"POST", "PUT", "PATCH", "GET", "DELETE"})
"""Methods known to be tokens, checked without the regular expression."""
_MAX_HEADERS = 100
PARTS_CACHE_BYTES = 4 * 1024 * 1024
"""What the parsed-URL cache of ``view`` may hold."""


@dataclass(slots=True)
class Outgoing:
    """A request to send."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass(slots=True)
class Result:
    """``request``: what to send (None: skipped or failed, ``record.outcome`` says which)."""

    request: Outgoing | None
    record: TransformRecord
    crashed: bool = False
    """The call ended its sandbox process (``control.transform.pool``)."""
    unrun: bool = False
    """The call never ran (``Run.unrun``): a delivery retries it on its schedule rather than failing for good."""


def event_context(event: Row, destination: Row | None) -> dict[str, Any]:
    """``context``: the event (``id``, ``provider``, ``event_type``, ``received_at``, ``labels``) and the destination
    (``id``, ``name``), the same for a rule delivery, a replay and a dry run (each hands in what it read)."""
    received_at: datetime | None = event["received_at"]
    return {
        "event": {
            "id": event["id"],
            "provider": event["provider"],
            "event_type": event["event_type"],
            "received_at": received_at.isoformat().replace("+00:00", "Z") if received_at else None,
            "labels": event["labels"] or [],
        },
        "destination": {"id": destination["id"], "name": destination["name"]} if destination else None,
    }


class _Wrong(Exception):
    pass


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    known = _JSON_TYPES.get(content_type)
    if known is None:
        kind = content_type.split(";", 1)[0].strip().lower()
        known = kind == "application/json" or kind.endswith("+json")
        if len(content_type) <= 256:  # a worker's sources send few distinct content types: their answers kept
            if len(_JSON_TYPES) >= 256:
                _JSON_TYPES.clear()
            _JSON_TYPES[content_type] = known
    return known


_JSON_TYPES: dict[str, bool] = {}
"""``_is_json`` of content types seen (at most 256 of at most 256 characters: 64 KB)."""


def _text(value: str) -> str:
    """A header value as the transform sees it: a captured byte that is not UTF-8 (carried as a
    surrogate escape) shows as U+FFFD."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return value


def _weight(parts: tuple[str, str]) -> int:
    return sys.getsizeof(parts[0]) + sys.getsizeof(parts[1])


@memoize(PARTS_CACHE_BYTES, size=_weight, max_entry=16 * 1024)
def _parts(url: str) -> tuple[str, str]:
    """The path and query of a URL: a worker sends to few distinct URLs. Bounded in bytes, and a URL past
    16 KB (a transform may return a path of megabytes) is not kept."""
    parts = urlsplit(url)
    return parts.path or "/", parts.query


def view(sent: Outgoing) -> tuple[dict[str, Any], Any]:
    """The request as the transform gets it, and the body as handed in (to tell an unchanged one)."""
    headers = {name: _text(value) for name, value in sent.headers.items()}
    json = bool(sent.body) and _is_json(sent.headers.get("content-type")) and not json_depth.exceeds(sent.body)
    return _view(sent, headers, json)


def _view(sent: Outgoing, headers: dict[str, str], json: bool) -> tuple[dict[str, Any], Any]:
    """``view`` with the headers as shown, and whether the body is JSON to decode (not too deep)."""
    path, query = _parts(sent.url)
    body: Any = None
    if json:
        try:
            body = _decode(sent.body)
        except msgspec.DecodeError:
            body = None
    if body is None:
        body = sent.body.decode("utf-8", "replace")
    request = {"method": sent.method, "path": path, "query": query, "headers": headers, "body": body}
    return request, body


def record_of(run: Run) -> TransformRecord:
    """The record of a run that failed or was stopped (``run.error`` set)."""
    return TransformRecord(
        outcome="failed",
        error=TransformError(message=run.error or "failed", line=run.line),
        logs=run.logs,
        logs_truncated=run.logs_truncated,
        duration_ms=round(run.duration_ms, 3),
    )


_NAMES: dict[str, str] = {}
"""Header names already found valid, and their lower case: a sandbox process sees the same few names in every
call (at most ``_NAMES_KEPT`` of at most 256 characters: under 1 MB)."""
_NAMES_KEPT = 1024


def _header_name(name: str) -> str:
    lower = _NAMES.get(name)
    if lower is not None:
        return lower
    lower = _checked_name(name)
    if len(_NAMES) >= _NAMES_KEPT:
        _NAMES.clear()
    _NAMES[name] = lower
    return lower


def _checked_name(name: str) -> str:
    if not _TOKEN.fullmatch(name) or len(name) > 256:
        raise _Wrong(f"headers: {name[:100]!r} is not a valid header name")
    lower = name.lower()
    if lower in HOP_BY_HOP:
        raise _Wrong(f"headers.{lower}: set by the HTTP connection itself, a transform cannot set it")
    return lower


def _headers(returned: Any, sent: Outgoing, shown: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(returned, dict):
        raise _Wrong("headers: must be an object of header names to string values")
    if len(returned) > _MAX_HEADERS:
        raise _Wrong(f"headers: at most {_MAX_HEADERS} headers")
    out: dict[str, str] = {}
    for name, value in returned.items():
        if value.__class__ is str and value == shown.get(name):  # handed in as it is: already a sendable header
            out[name] = sent.headers[name]  # the captured value, byte for byte
            continue
        lower = _header_name(name)
        if value.__class__ is not str and isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise _Wrong(f"headers.{lower}: must be a string, not {type(value).__name__}")
        if value == shown.get(lower):
            value = sent.headers[lower]  # unchanged: the captured value, byte for byte
        elif not (value.isascii() and value.isprintable()) and not _VALUE.fullmatch(value):  # printable ASCII: valid
            raise _Wrong(f"headers.{lower}: control characters (CR, LF, NUL...) are not allowed")
        out[lower] = value
    return out


def _url(sent: Outgoing, path: object, query: object, shown: Mapping[str, Any]) -> str:
    if path == shown["path"] and query == shown["query"]:
        return sent.url
    if not isinstance(path, str) or not _PATH.fullmatch(path):
        raise _Wrong("path: must be a string starting with / without spaces, control characters, ? or #")
    if not isinstance(query, str):
        raise _Wrong("query: must be a string (the query without ?)")
    query = query.removeprefix("?")
    if not _QUERY.fullmatch(query):
        raise _Wrong("query: must not contain spaces, control characters or #")
    parts = urlsplit(sent.url)
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


def _outgoing(returned: dict[str, Any], sent: Outgoing, shown: dict[str, Any]) -> Outgoing:
    """The request to send for what a delivery's transform returned: a body the runner left out (the
    transform's own left as handed in, or none returned) is the captured one, byte for byte."""
    if not _FIELDS.issuperset(returned):
        unknown = sorted(set(returned) - _FIELDS)
        raise _Wrong(f"{unknown[0]}: not a field of a request (method, path, query, headers, body)")
    method = returned.get("method", sent.method)
    if method not in _METHODS and (not isinstance(method, str) or not _TOKEN.fullmatch(method) or len(method) > 32):
        raise _Wrong("method: must be an HTTP method such as POST")
    headers = _headers(returned.get("headers", shown["headers"]), sent, shown["headers"])
    url = _url(sent, returned.get("path", shown["path"]), returned.get("query", shown["query"]), shown)
    if "body" not in returned:
        data = sent.body
    elif (body := returned["body"]) is None:
        data = b""
    elif isinstance(body, str):
        try:
            data = body.encode("utf-8")
        except UnicodeEncodeError:
            raise _Wrong("body: must not contain lone UTF-16 surrogates") from None
    else:
        data = _encode(body)
        if headers.get("content-type") == shown["headers"].get("content-type") and not _is_json(
            headers.get("content-type")
        ):
            headers["content-type"] = "application/json"
    return Outgoing(method=method.upper(), url=url, headers=headers, body=data)


class Prepared(msgspec.Struct, kw_only=True, frozen=True):
    """In the sandbox process: a call's request, and what its transform was shown of it but the body (to
    tell what it left). A Struct: a frozen slots dataclass is made through ``object.__setattr__``, 0.3 µs a
    call here."""

    sent: Outgoing
    shown: dict[str, Any]


def _too_deep() -> Run:
    # Stored as sent, but no transform gets it: decoding and re-encoding it would recurse past Python's
    # limit (a RecursionError was a 500 in the dry run and an attempt retried without end).
    return Run(
        error=f"the request body nests deeper than {json_depth.MAX_DEPTH} levels, more than a transform "
        "is given; nothing was sent"
    )


def payload_of(item: Input) -> tuple[str, str, Prepared] | Run:
    """In the sandbox process: the JSON payload a call gets for ``item`` and its body's text, or the failed
    run when its body nests too deep to be given.

    The body goes as its text beside the payload (``Sandbox.run_many``'s ``bodies``; ``"n"``: its length in
    UTF-16 code units, as JavaScript slices it), with ``"json"`` when its content type says JSON: the runner
    parses it there, once (``JSON.parse``; what does not parse, or parses to null, is given as the text), and
    leaves it out of its answer when the transform left it as handed in (``control.transform.prelude``).
    Decoding it here, encoding it again for V8 and decoding what came back to compare it cost more than
    V8's parse (ADR 0060). A body that is not UTF-8 is text (U+FFFD for what is not), never JSON."""
    headers: dict[str, str] = item.headers
    shown = headers
    if not all(map(str.__instancecheck__, headers.values())):  # bytes: a captured value not UTF-8
        given: dict[str, Any] = item.headers
        headers = {k: v if isinstance(v, str) else v.decode("utf-8", "surrogateescape") for k, v in given.items()}
        shown = {k: v if isinstance(v, str) else v.decode("utf-8", "replace") for k, v in given.items()}
    sent = Outgoing(item.method, item.url, headers, item.body)
    json = bool(sent.body) and _is_json(headers.get("content-type"))
    if json and json_depth.exceeds(sent.body):
        return _too_deep()
    try:
        text = sent.body.decode("utf-8")
    except UnicodeDecodeError:
        text, json = sent.body.decode("utf-8", "replace"), False
    units = len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2
    path, query = _parts(sent.url)
    request = {"method": sent.method, "path": path, "query": query, "headers": shown}
    payload = _encode({"request": request, "context": item.context, "n": units, "json": json})
    return payload.decode(), text, Prepared(sent=sent, shown=request)


def mapped(run: Run, prepared: Prepared) -> Run:
    """In the sandbox process: ``run`` with the request it returned checked and made the request to send,
    only what differs from the input (``Sent``); a request that cannot be sent fails the run, saying why."""
    returned = run.request
    if run.error is not None or not isinstance(returned, dict):
        return run
    sent = prepared.sent
    try:
        out = _outgoing(returned, sent, prepared.shown)
    except _Wrong as exc:
        run.request = None
        run.error = f"the returned request cannot be sent: {exc}"
        run.line = None
        return run
    headers, kept = _sent_headers(out.headers, sent.headers)
    run.request = Sent(
        method=out.method,
        url=None if out.url is sent.url else out.url,
        headers=headers,
        body=None if out.body is sent.body else out.body,
        kept=kept,
    )
    return run


def _sent_headers(headers: dict[str, str], captured: dict[str, str]) -> tuple[dict[str, str | None], bool]:
    """``Sent``'s ``headers`` (and ``kept``) for the returned ``headers``: when they begin with every captured
    header in its order, only those changed or added (``kept``); otherwise each, None where unchanged. A value
    is unchanged when it is the captured string itself (``_headers`` hands those back as they were)."""
    if len(headers) >= len(captured) and all(map(str.__eq__, headers, captured)):
        changed: dict[str, str | None] = {k: v for k, v in headers.items() if v is not captured.get(k)}
        return changed, True
    return {name: None if value is captured.get(name) else value for name, value in headers.items()}, False


def _wire_headers(headers: dict[str, str]) -> dict[str, Any]:
    """Header values as msgpack carries them: a captured byte that is not UTF-8 (a surrogate escape) as
    bytes."""
    if "".join(headers.values()).isascii():  # one pass in C, not a generator per header: nearly always so
        return headers
    out: dict[str, Any] = {}
    for name, value in headers.items():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            out[name] = value.encode("utf-8", "surrogateescape")
        else:
            out[name] = value
    return out


def request_input(sent: Outgoing, context: Mapping[str, Any]) -> Input:
    """What a sandbox process is handed for a call on the request ``sent`` would be (``payload_of`` maps it
    there)."""
    return Input(method=sent.method, url=sent.url, headers=_wire_headers(sent.headers), body=sent.body, context=context)


def result_of(run: Run | Problem, sent: Outgoing) -> Result:
    """The request to send instead of ``sent`` after the call ``run``, or why none is; NotATransformError when
    the source did not compile."""
    if isinstance(run, Problem):
        raise NotATransformError(run.message, run.line)
    if run.error is not None:
        return Result(None, record_of(run), crashed=run.crashed, unrun=run.unrun)
    returned = run.request
    if returned is None:
        return Result(None, _done(run, "skipped"))
    assert isinstance(returned, Sent)  # an Input's answer
    captured = sent.headers
    if returned.kept:  # every captured header in its place: a copy, and what changed or was added
        headers = captured.copy()
        headers.update(returned.headers)  # type: ignore[arg-type]  # only changed or added values when kept
    else:
        headers = {name: captured[name] if value is None else value for name, value in returned.headers.items()}
    outgoing = Outgoing(
        returned.method,
        sent.url if returned.url is None else returned.url,
        headers,
        sent.body if returned.body is None else returned.body,
    )
    return Result(outgoing, _done(run, "applied"))


async def apply(call: Call, sent: Outgoing, context: Mapping[str, Any]) -> Result:
    """Runs the transform on the request ``sent`` would be; the request to send instead, or why none is.
    NotATransformError when its source does not compile."""
    return result_of(await call(request_input(sent, context)), sent)


def _done(
    run: Run, outcome: Literal["applied", "skipped", "failed"], error: TransformError | None = None
) -> TransformRecord:
    """The record of a run that returned (its logs and duration), with what became of what it returned."""
    return TransformRecord(
        outcome=outcome,
        error=error,
        logs=run.logs,
        logs_truncated=run.logs_truncated,
        duration_ms=round(run.duration_ms, 3),
    )
