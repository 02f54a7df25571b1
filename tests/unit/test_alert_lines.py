"""An alert's sentence (a `slack` alert's text, the inbox banner) names what to call with the ids it has: a
disabled destination's line gave `POST /v1/destinations/{id}/enable` with `{id}` as written, leaving the reader
to find the id earlier in the line and paste it in."""

from __future__ import annotations

from control.support.alert_lines import line_of


def _of_billing(kind: str, count: int, **data: str) -> str:
    """The line of an alert of destination ``billing`` (dst_01XYZ) of endpoint ep_01ABC."""
    alert = {"type": kind, "endpoint_id": "ep_01ABC", "destination_id": "dst_01XYZ", "count": count}
    return line_of({**alert, "data": {**data, "destination_name": "billing"}})


def test_a_disabled_destinations_line_names_its_own_enable_route() -> None:
    line = _of_billing("destination.disabled", 2, reason="the destination answered 410 Gone")
    assert "POST /v1/destinations/dst_01XYZ/enable" in line
    assert "{id}" not in line
    assert line.startswith("destination billing (dst_01XYZ) of endpoint ep_01ABC is disabled")


def test_the_endpoint_is_named_by_its_name_and_id() -> None:
    """Endpoint alerts read `endpoint payments (ep_…)` when the alert's data has the name (the evaluator puts
    it there), as destinations already did; an alert fired before that names the id alone."""
    alert = {"type": "endpoint.silent", "endpoint_id": "ep_01ABC", "destination_id": None, "count": 0}
    named = line_of({**alert, "data": {"endpoint_name": "payments", "expect_event_within_s": 60}})
    assert named.startswith("endpoint payments (ep_01ABC) received nothing for 60 s")
    assert line_of({**alert, "data": {"expect_event_within_s": 60}}).startswith("endpoint ep_01ABC received")


def test_an_exhausted_line_names_a_failed_transform_not_only_used_up_retries() -> None:
    """A transform that fails (or is not run after crashing its sandbox) fails the delivery for good on its first
    attempt and fires ``delivery.exhausted`` too; the banner said the events "used up their delivery retries",
    which sent a new user looking for retries that never ran."""
    line = _of_billing("delivery.exhausted", 4, hour="2026-12-04T09:00:00Z")
    assert "4 event(s) failed for good" in line
    assert "a transform that failed or was not run" in line
    assert line.endswith("in the hour from 2026-12-04T09:00:00Z")
