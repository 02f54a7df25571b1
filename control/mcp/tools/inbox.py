"""Inbox tools: the signed link an agent hands its human to watch an endpoint's events live, and its revocation."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.inbox import InboxLink
from control.service import inbox_links as service


@tool("CreateInboxLink")
async def create_inbox_link(call: Call, endpoint_id: str) -> InboxLink:
    """A browser link to the endpoint's live inbox page (events as they arrive, headers, bodies, deliveries,
    replay), valid 15 minutes, for a human to open: it works for whoever holds it until then, so give it only
    to the person who should see the events. A temporary endpoint's `inbox_url` (from /api/start) is such a
    link already, valid as long as the endpoint."""
    return await service.create_inbox_link(call.ctx, call.principal, endpoint_id)


@tool("RotateInboxLinks", destructive=True)
async def rotate_inbox_links(call: Call, endpoint_id: str) -> InboxLink:
    """Revokes every inbox link of the endpoint, a temporary endpoint's `inbox_url` included, and answers a
    new one."""
    return await service.rotate_inbox_links(call.ctx, call.principal, endpoint_id)
