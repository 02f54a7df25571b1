"""Retrying deliveries: POST /v1/deliveries/{id}/retry (one), POST /v1/endpoints/{id}/deliveries/retry (a
bulk job) and GET /v1/delivery-retries/{id} (the job's progress)."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, Response, get, post
from litestar.di import NamedDependency, Provide
from litestar.openapi import ResponseSpec
from litestar.params import PathParameter
from litestar.types import Dependencies

from control.api.events import provide_filters
from control.api.openapi import errors
from control.api.params import EndpointId, boolean, query
from control.db.context import Context, Principal
from control.records.deliveries import DeliveryRetry, DeliveryRetryJob
from control.records.text import id_pattern
from control.service import retries as service
from control.service.events.read import EventFilters

__all__ = ("DeliveryRetryController", "DeliveryRetryJobController", "EndpointDeliveryRetryController")

DeliveryId = Annotated[
    str, PathParameter(description="The delivery's id (`dlv_` and a ULID)", schema_extra={"pattern": id_pattern("dlv")})
]
RetryId = Annotated[
    str,
    PathParameter(
        description="The bulk retry's id (`retry_` and a ULID)",
        schema_extra={"pattern": id_pattern(service.JOB_PREFIX)},
    ),
]


class DeliveryRetryController(Controller):
    path = "/deliveries"
    tags = ("deliveries",)

    @post(
        "/{delivery_id:str}/retry",
        operation_id="RetryDelivery",
        status_code=202,
        responses=errors(400, 401, 403, 404, 409, 410, 429),
    )
    async def retry_delivery(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], delivery_id: DeliveryId
    ) -> DeliveryRetry:
        """Schedules one more attempt of a rule delivery, due now, with the next attempt number, and answers
        at once (202): the deliver worker makes the attempt, within the destination's concurrency cap and once
        its circuit lets it, and it appears in the deliveries list and on the event.

        Any attempt of the delivery may be named. A delivery the schedule gave up on gets one attempt more
        (if it fails, the delivery is failed again); one waiting for a scheduled retry has it now; a
        succeeded one is sent again (a deliberate resend). A replay or a destination test is not a rule
        delivery: 400 (replay the event instead). 409 `attempt_in_flight` while an attempt is being made;
        404 when the destination was deleted or the event is no longer stored; 429 `rate_limited` once the
        account's outbound sends are spent (a retry is one, as a replay is)."""
        return await service.retry_delivery(ctx, principal, delivery_id)


class EndpointDeliveryRetryController(Controller):
    path = "/endpoints/{endpoint_id:str}/deliveries/retry"
    tags = ("deliveries",)
    dependencies: Dependencies | None = {"filters": Provide(provide_filters, sync_to_thread=False)}  # noqa: RUF012 - Controller's, copied per app

    @post(
        "/",
        operation_id="RetryDeliveries",
        status_code=202,
        responses={
            200: ResponseSpec(
                data_container=DeliveryRetryJob,
                description="A bulk retry with the same filters is still running: that job (nothing new starts)",
                generate_examples=False,
            ),
            **errors(400, 401, 403, 404, 409, 410, 429),
        },
    )
    async def retry_deliveries(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        filters: NamedDependency[EventFilters],
        destination_id: Annotated[
            str | None, query("Only deliveries to this destination of the endpoint", pattern=id_pattern("dst"))
        ] = None,
        # Read as text, as the deliveries list reads it: only `false` is documented, and taken.
        success: Annotated[
            str | None,
            query(
                "`false`: deliveries whose latest attempt failed (the only kind retried in bulk)",
                kind="boolean",
                enum=[False],
            ),
        ] = None,
    ) -> Response[DeliveryRetryJob]:
        """Retries, in the background, every delivery of the endpoint whose latest attempt failed (failed for
        good, or waiting for a scheduled retry) and whose event matches the shared event filters, to
        `destination_id` if given. Answers 202 with the job at once; read its progress with
        `GET /v1/delivery-retries/{retry_id}`. While a job with the same filters is unfinished, the same
        request answers 200 with that job instead of starting another.

        The job pages through the deliveries, re-queueing each page for the deliver worker, so the
        destinations' concurrency caps and circuits pace it; each new attempt carries the next attempt
        number. Deliveries that failed after the job started are not part of it. Starting it is one of the
        account's outbound sends (429 `rate_limited` once they are spent)."""
        job, created = await service.retry_deliveries(
            ctx,
            principal,
            endpoint_id,
            filters,
            destination_id=destination_id,
            success=boolean(success, "success"),
        )
        return Response(job, status_code=202 if created else 200)


class DeliveryRetryJobController(Controller):
    path = "/delivery-retries"
    tags = ("deliveries",)

    @get("/{retry_id:str}", operation_id="GetDeliveryRetry", responses=errors(401, 404, 410, 429))
    async def get_delivery_retry(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], retry_id: RetryId
    ) -> DeliveryRetryJob:
        """A bulk retry's progress: `state` (`scanning`, `delivering`, `completed`) and the counts `matched`,
        `queued`, `done` (new attempt succeeded) and `failed`."""
        return await service.get_delivery_retry(ctx, principal, retry_id)
