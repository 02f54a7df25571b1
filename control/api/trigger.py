"""POST /v1/endpoints/{id}/test-webhook: a realistic, signed sample of a provider's webhook, sent through the
endpoint's own ingest URL (``control.service.trigger``; also the MCP ``send_test_webhook`` and ``hookyard
trigger``)."""

from __future__ import annotations

from litestar import Controller, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody
from litestar.types import Dependencies

from control.api.events import provide_wakeups
from control.api.openapi import errors
from control.api.params import EndpointId
from control.db.context import Context, Principal
from control.records.trigger import TriggerOutcome, TriggerSample
from control.service import trigger as service
from control.support.long_poll import Wakeups

__all__ = ("EndpointTriggerController",)


def provide_edge_client(state: State) -> service.EdgeClient:
    """The app's one client for the samples it sends (``control.service.trigger.EdgeClient``)."""
    found: service.EdgeClient = state.edge_client
    return found


class EndpointTriggerController(Controller):
    path = "/endpoints/{endpoint_id:str}/test-webhook"
    tags = ("events",)
    dependencies: Dependencies | None = {  # noqa: RUF012 - Controller's, copied per app
        "wakeups": Provide(provide_wakeups, sync_to_thread=False),
        "edge_client": Provide(provide_edge_client, sync_to_thread=False),
    }

    @post("/", operation_id="SendTestWebhook", status_code=200, responses=errors(400, 401, 403, 404, 410, 429))
    async def send_test_webhook(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        wakeups: NamedDependency[Wakeups],
        edge_client: NamedDependency[service.EdgeClient],
        endpoint_id: EndpointId,
        data: JSONBody[TriggerSample],
    ) -> TriggerOutcome:
        """Posts a realistic sample of `provider`'s `event_type` webhook to the endpoint's ingest URL, with
        that provider's headers and body shape, signed with the secret the endpoint verifies with (the
        provider's own when set through auth-config, else the platform signing secret), so it is captured,
        verified, labelled and routed like real traffic.

        Answers once the event is stored, with its `event_id` and a `cursor`: `events/wait?after=<cursor>`
        (MCP `wait_for_event` with `after`) answers this very event, then, passed each answer's `cursor`, the
        events stored after it. A refusal by the edge (signature, allowlist) is an answer here
        (`accepted: false` with the edge's `status` and `response`), not an error; an expired endpoint is 410
        before anything is sent. 429 `rate_limited` (with `Retry-After`) once the account's outbound sends are
        spent: replays, destination tests, test webhooks and retries share one limit per account."""
        return await service.send_test_webhook(ctx, wakeups, edge_client, principal, endpoint_id, data)
