"""``send_test_webhook``: the MCP form of ``POST /v1/endpoints/{id}/test-webhook`` (``control.service.trigger``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.trigger import TriggerOutcome, TriggerSample
from control.service import trigger as service


@tool("SendTestWebhook")
async def send_test_webhook(call: Call, endpoint_id: str, data: TriggerSample) -> TriggerOutcome:
    """Post a realistic, correctly signed sample of a provider's webhook to an endpoint's ingest URL.

    The sample has the provider's headers (event name, delivery id) and body shape, and is signed with the
    secret the endpoint verifies with, so it is captured, verified, labelled and routed like real traffic.
    Answers the edge's status and the captured `event_id`; follow with `wait_for_event` or `get_event`."""
    return await service.send_test_webhook(call.ctx, call.principal, endpoint_id, data)
