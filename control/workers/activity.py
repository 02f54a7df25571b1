"""What ``hookyard up`` shows while it runs: one concise line per event stored and per delivery attempt.

Logged at ``info`` on the logger ``hookyard.activity`` by the flush and deliver loops, only when the
setting ``log_activity`` is on (``hookyard up`` turns it on; a production worker storing thousands of
events a second would rather not), so ``HOOKYARD_LOG_LEVEL=warning`` silences them like any info line and
they share the process's one log format (``shared.logs``). A delivery line names its destination by id and
``safe_url`` (scheme, host, port): the rest of a destination URL is often its secret.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from control.records.verdict import verdict_text
from shared.logs import safe_url
from shared.wire import IngestRecord

__all__ = ("delivered", "enabled", "stored")

log = logging.getLogger("hookyard.activity")


def enabled(on: bool) -> bool:
    return on and log.isEnabledFor(logging.INFO)


def stored(records: Iterable[IngestRecord], new_ids: set[str]) -> None:
    """One line per event of ``records`` that this batch stored (not those already stored before)."""
    for r in records:
        if r.id in new_ids:
            what = f"{r.provider or '-'} {r.event_type or '-'}"
            blocked = "  blocked by the allowlist" if r.ip_allowed is False else ""
            log.info(
                "event     %s  %s  %s  %s /%s  %s%s",
                r.id,
                r.endpoint_id,
                what,
                r.method,
                r.path,
                verdict_text(r.signature_valid, r.signature_failure_reason),
                blocked,
            )


def delivered(
    event_id: str,
    destination_id: str,
    url: str,
    attempt: int,
    status: int | None,
    latency_ms: int,
    error: str | None,
    retry_in_s: float | None,
) -> None:
    outcome = f"{status}" if status is not None else f"failed: {error}"
    then = f", retry in {retry_in_s:.0f}s" if retry_in_s is not None else ""
    log.info(
        "delivery  %s  -> %s %s  %s in %d ms (attempt %d%s)",
        event_id,
        destination_id,
        safe_url(url),
        outcome,
        latency_ms,
        attempt,
        then,
    )
