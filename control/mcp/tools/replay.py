"""Replay and destination-test tools: one outbound request each, answered with its outcome and recorded as a
delivery. Both reach a URL outside hookyard (open world)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.deliveries import Delivery
from control.records.forwards import ForwardReport
from control.records.replay import ReplayRequest, SendOutcome
from control.service import forwards
from control.service import replay as service


@tool("ReplayEvent", open_world=True)
async def replay_event(call: Call, event_id: str, data: ReplayRequest) -> SendOutcome:
    """Re-send a captured event to any `url`, verbatim or changed and re-signed; answers what came back."""
    return await service.replay_event(call.ctx, call.principal, event_id, data)


@tool("TestDestination", open_world=True)
async def test_destination(call: Call, destination_id: str) -> SendOutcome:
    """Send a small signed test event to a destination; answers what came back."""
    return await service.test_destination(call.ctx, call.principal, destination_id)


@tool("RecordForward")
async def record_forward(call: Call, event_id: str, data: ForwardReport) -> Delivery:
    """Record a forward of an event that you made yourself (as `hookyard listen` does): listed with its attempts."""
    return await forwards.record_forward(call.ctx, call.principal, event_id, data)
