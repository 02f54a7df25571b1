"""An alert in a sentence: what is wrong and where, as a person reads it in a Slack channel (the alert
sender's ``slack`` body) and on the inbox page's banner. One wording for both, so the page and the channel say
the same thing of the same alert."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ("line_of",)


def _named(name: object, id_: str) -> str:
    return f"{name} ({id_})" if name else id_


def _subject(alert: Mapping[str, Any]) -> str:
    """Each by its name and id: a reader knows the name they gave (``billing``, ``payments``), the id finds it."""
    data = alert["data"] or {}
    endpoint = _named(data.get("endpoint_name"), alert["endpoint_id"])
    if alert["destination_id"]:
        return f"destination {_named(data.get('destination_name'), alert['destination_id'])} of endpoint {endpoint}"
    return f"endpoint {endpoint}"


def line_of(alert: Mapping[str, Any]) -> str:
    """What is wrong, in a sentence (a ``slack`` body's line, the inbox's banner)."""
    data, subject, n = alert["data"] or {}, _subject(alert), alert["count"]
    return {
        "destination.circuit_opened": f"{subject} is failing: its circuit is open after "
        f"{data.get('consecutive_failures', n)} consecutive failed deliveries; deliveries wait until it recovers",
        "destination.recovered": f"{subject} recovered: its circuit closed and deliveries resume",
        "destination.disabled": f"{subject} is disabled ({data.get('reason', '?')}): nothing is sent to it and "
        f"{n} deliveries are held until it is enabled (POST /v1/destinations/{alert['destination_id']}/enable)",
        "delivery.exhausted": f"{subject}: {n} event(s) failed for good (retries used up, or a transform that "
        f"failed or was not run) in the hour from {data.get('hour', '?')}",
        "endpoint.signature_failures": f"{subject}: {n} request(s) with a failed signature in the last "
        f"{int(data.get('window_s', 300)) // 60} minutes (threshold {data.get('threshold', '?')})",
        "endpoint.silent": f"{subject} received nothing for {data.get('expect_event_within_s', '?')} s "
        f"(last event: {data.get('last_event_at') or 'none in the last day'})",
        "dead_letter.added": f"{subject}: {n} record(s) could not be stored and wait in the dead letters "
        "(`hookyard dead-letters`)",
    }.get(alert["type"], f"{subject}: {alert['type']}")
