"""POST /v1/events/{id}/replay and POST /v1/destinations/{id}/test: one outbound request, answered with its
outcome and recorded as a delivery; POST /v1/events/{id}/forwards: a forward ``hookyard listen`` made, recorded
as one."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import DestinationId, EventId
from control.db.context import Context, Principal
from control.records.deliveries import Delivery
from control.records.forwards import ForwardReport
from control.records.replay import ReplayRequest, SendOutcome
from control.service import forwards
from control.service import replay as service

__all__ = ("DestinationTestController", "ReplayController")


class ReplayController(Controller):
    path = "/events"
    tags = ("events",)

    @post(
        "/{event_id:str}/replay",
        operation_id="ReplayEvent",
        status_code=200,
        responses=errors(400, 401, 403, 404, 410, 429),
    )
    async def replay_event(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        event_id: EventId,
        data: JSONBody[ReplayRequest],
    ) -> SendOutcome:
        """Re-sends a captured event to `url` (any, within the egress policy) and records it as a delivery
        with `source: "replay"` (its `destination_id` is set only when `url` is one of the endpoint's
        destinations).

        By default the captured method, body and headers go out verbatim, the provider's signature
        included, but for the headers of the connection itself. `headers` adds or overrides headers;
        `preserve_headers: false` sends only the captured `content-type` plus `headers`; `body` replaces the
        body. `resign_with` recomputes the signature over what is actually sent, in the event's provider
        scheme with a fresh timestamp (Standard Webhooks for unattributed events, with `webhook-id` and
        `webhook-timestamp`), placed in `signature_header`, where the provider's own library reads it by
        default; the captured signature header it replaces is not sent.

        The outcome is always 200: a refused connection, a timeout or a refused egress is `success: false`
        with `error`. 429 `rate_limited` (with `Retry-After`) once the account's outbound sends are spent:
        replays, destination tests, test webhooks and retries share one limit per account."""
        return await service.replay_event(ctx, principal, event_id, data)

    @post(
        "/{event_id:str}/forwards",
        operation_id="RecordForward",
        status_code=201,
        responses=errors(400, 401, 403, 404, 410, 429),
    )
    async def record_forward(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        event_id: EventId,
        data: JSONBody[ForwardReport],
    ) -> Delivery:
        """Records a forward of the event that the caller made itself, as `hookyard listen` does after sending
        each event to a local app: a delivery with `source: "listen"` (no destination, no request body, never
        retried), listed with the event's other attempts. hookyard sends nothing. The URL becomes the one the
        inbox's replay box starts with."""
        return await forwards.record_forward(ctx, principal, event_id, data)


class DestinationTestController(Controller):
    path = "/destinations"
    tags = ("destinations",)

    @post(
        "/{destination_id:str}/test",
        operation_id="TestDestination",
        status_code=200,
        responses=errors(401, 403, 404, 410, 429),
    )
    async def test_destination(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], destination_id: DestinationId
    ) -> SendOutcome:
        """Sends a small synthetic JSON event (`{"id", "type": "hookyard.test", "created_at", "data"}`) to the
        destination with its headers, signed as rule deliveries are, with the destination's own `signing_secret`
        unless `sign_deliveries` is off (Standard Webhooks:
        `webhook-id`, `webhook-timestamp`, `webhook-signature`), and records a delivery with
        `source: "manual_test"`. Answers the outcome in the same shape as a replay; failures of the request
        are `success: false` with `error`. 429 `rate_limited` once the account's outbound sends are spent, as
        for a replay."""
        return await service.test_destination(ctx, principal, destination_id)
