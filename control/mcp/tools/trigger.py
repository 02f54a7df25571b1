"""``send_test_webhook``: the MCP form of ``POST /v1/endpoints/{id}/test-webhook`` (``control.service.trigger``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.trigger import TriggerOutcome, TriggerSample
from control.service import trigger as service


@tool("SendTestWebhook")
async def send_test_webhook(call: Call, endpoint_id: str, data: TriggerSample) -> TriggerOutcome:
    """Post a realistic, correctly signed sample of a provider's webhook to an endpoint's ingest URL."""
    wakeups, client = call.state.wakeups, call.state.edge_client
    return await service.send_test_webhook(call.ctx, wakeups, client, call.principal, endpoint_id, data)
