"""schemathesis hooks for tests/e2e/test_schemathesis.py (loaded by the schemathesis process, not by pytest).

Each hook covers something the OpenAPI document cannot state, narrowly, with the reason:

- ``cidr`` and ``re2`` are our own string formats (an address or a range without host bits; an RE2
  pattern): schemathesis cannot know them, so they are registered here with strategies of valid values.
- ``destination_ids`` of a rule must name destinations of the rule's endpoint: a reference to stored state,
  which no schema can state. A well-formed list is replaced by the one real destination (as path parameters
  are replaced by real ids), so valid requests reach the rule logic instead of a 400.
- A replay's ``url`` is where the control plane sends a request: one the server would send to (its own
  ``check_url``) is replaced by a local sink, so the suite never sends requests to the hosts schemathesis
  makes up. Any other is left for the server to refuse, so a negative case stays negative.
- A replay's ``destination_id`` must name a destination of the event's endpoint (stored state): a
  well-formed one is dropped and the replay goes to the sink, as a ``url`` would.
- A destination's ``auth`` and ``tls_ca`` are checked by parsing (a PEM certificate and key that match, a CA
  bundle), against the URL (TLS settings need https) and against the headers hookyard sets: cryptography's
  and the relation's to say, not a schema's; those refusals are not counted against the document
  (``filter_failure``).
- ``until`` earlier than ``since`` is refused (400): a relation between two parameters, which OpenAPI cannot
  state. Such cases are not generated.
- A label rule's ``path`` is a dot path when ``source`` is ``body`` and a header name (an HTTP token) when it
  is ``header``: a relation between two fields of one body. The document states the body form; a header
  rule whose path is not a header name is not generated (the server's own check decides).
- A PATCH giving a destination an ``ordering_key`` is refused unless it is, or becomes, a FIFO destination:
  what is stored decides, so that refusal is not counted against the document (``filter_failure``).
- The stateful phase feeds ids from one answer into another operation's parameters without checking them
  against that parameter's documented pattern: an alert destination's ``adst_`` id reached the bulk retry's
  ``destination_id`` (pattern ``^dst_…``), a request the document itself says is invalid. Such a value is
  replaced by the real destination's id (in every phase: the hook cannot tell a link from a negative case,
  so that one parameter's malformed values are left to the server's own check and its unit tests).

The real ids come in the environment (``HOOKYARD_ST_*``), set by the test.
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import Any

import schemathesis
from hypothesis import strategies as st

from control.routing import conditions
from control.service.events.read import event_filters
from control.service.labels import check_path
from control.support.url_checks import check_url
from shared.errors import ValidationError

_DESTINATION_ID = re.compile(r"^dst_[0-7][0-9A-HJKMNP-TV-Z]{25}$")


def _network(version: int, address: int, prefix: int) -> str:
    """The range of ``prefix`` bits that ``address`` is in, host bits cleared."""
    bits = 32 if version == 4 else 128
    return str(ipaddress.ip_network((address >> (bits - prefix) << (bits - prefix), prefix), strict=True))


_cidr = st.one_of(
    st.ip_addresses().map(str),
    st.builds(_network, st.just(4), st.integers(0, 2**32 - 1), st.integers(0, 32)),
    st.builds(_network, st.just(6), st.integers(0, 2**128 - 1), st.integers(0, 128)),
)


def _is_re2(text: str) -> bool:
    """Whether the server takes ``text`` as the pattern of a regex leaf."""
    try:
        conditions.validate({"field": "body", "operator": "regex", "value": text})
    except conditions.InvalidConditionTree:
        return False
    return True


_re2 = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30).filter(_is_re2)

schemathesis.openapi.format("cidr", _cidr)
schemathesis.openapi.format("re2", _re2)


def _operation_id(context: Any) -> str | None:
    operation = context.operation
    return None if operation is None else operation.definition.raw.get("operationId")


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    operation_id = _operation_id(context)
    query = case.query
    if operation_id == "RetryDeliveries" and isinstance(query, dict):
        linked = query.get("destination_id")
        if isinstance(linked, str) and not _DESTINATION_ID.match(linked):
            query["destination_id"] = os.environ["HOOKYARD_ST_DESTINATION_ID"]
    body = case.body
    if not isinstance(body, dict):
        return case
    if operation_id in ("CreateRule", "UpdateRule"):
        ids = body.get("destination_ids")
        well_formed = (
            isinstance(ids, list)
            and 1 <= len(ids) <= 100
            and len(set(map(str, ids))) == len(ids)
            and all(isinstance(i, str) and _DESTINATION_ID.match(i) for i in ids)
        )
        if well_formed:
            body["destination_ids"] = [os.environ["HOOKYARD_ST_DESTINATION_ID"]]
    elif operation_id == "ReplayEvent":
        named = body.get("destination_id")
        if isinstance(named, str) and _DESTINATION_ID.match(named):
            del body["destination_id"]
            if body.get("url") is None:  # the destination was where it went; a url given stays as generated
                body["url"] = os.environ["HOOKYARD_ST_SINK_URL"]
        if _sent_to(body.get("url")):
            body["url"] = os.environ["HOOKYARD_ST_SINK_URL"]
    return case


def _sent_to(url: object) -> bool:
    """Whether the server would send a replay to ``url``: the length its record allows, then the URL check
    of the replay service."""
    if not isinstance(url, str) or not 1 <= len(url) <= 2048:
        return False
    try:
        check_url(url)
    except ValidationError:
        return False
    return True


def _header_label_ok(body: object) -> bool:
    """False for a label rule body naming ``source: header`` with a path the server's check refuses as a
    header name (any other body is left as generated, negative cases included)."""
    if not isinstance(body, dict) or body.get("source") != "header" or not isinstance(body.get("path"), str):
        return True
    try:
        check_path("header", body["path"])
    except ValidationError as exc:
        return "is not a header name" not in exc.message
    return True


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    if _operation_id(context) in ("CreateLabelRule", "UpdateLabelRule"):
        return _header_label_ok(case.body)
    if _operation_id(context) not in ("ListEvents", "GetLatestEvent", "WaitForEvent", "RetryDeliveries"):
        return True
    query = case.query or {}
    since, until = query.get("since"), query.get("until")
    if not (isinstance(since, str) and isinstance(until, str)):
        return True
    try:
        event_filters(since=since, until=until)
    except ValidationError as exc:
        return not exc.message.startswith("until: must not be earlier than since")
    return True


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """False drops a failure. Only "a valid request was refused" (ST202) is ever dropped, and only for the
    refusal below, recognised by the error message the server gave."""
    if type(failure).__name__ != "RejectedPositiveData" or response.status_code != 400:
        return True
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return True
    # Per-endpoint caps (100 destinations, 100 rules, 256 allowlist entries, 50 label rules) and keys unique
    # per endpoint (a label rule's output_key) depend on what is stored, which no schema states; they are
    # 400s (docs/reference/limits.md). The suite's many creations reach them.
    # A PATCH may give a destination an ordering_key only if it is (or becomes) a FIFO destination: whether it
    # is depends on what is stored. Whether a transform's source compiles and defines handler() is
    # JavaScript's to say, not a schema's. An endpoint's rules share one budget of RE2 instructions (ADR 0094):
    # whether one more fits depends on the rules stored before it; a tree's own budget (2,000) is RE2's to count.
    stored_ordering = _operation_id(context) == "UpdateDestination" and message.startswith("ordering_key: only with")
    destination = _operation_id(context) in ("CreateDestination", "UpdateDestination")
    parsed = destination and message.startswith(("auth", "tls_ca:", "url: has user:password@"))
    if (
        stored_ordering
        or parsed
        or message.endswith((", the most it can have", "already has a label rule for it"))
        or message.startswith("transform: ")
        or "with the patterns of the endpoint's other rules" in message
        or "RE2 instructions with this one" in message
    ):
        if log := os.environ.get("HOOKYARD_ST_DROPPED_LOG"):
            with open(log, "a") as out:
                out.write(f"{_operation_id(context)}: {message}\n")
        return False
    return True
