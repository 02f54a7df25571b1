"""Erasure tools: remove every event of an endpoint whose field has a value, as a job, and read the job
(``/v1/endpoints/{id}/events/erase``, ``/v1/erasures/{id}``, ``/v1/erasures``)."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.erasures import EraseRequest, Erasure, ErasureList, ErasureValue
from control.service import erasures as service


@tool("EraseEvents", destructive=True)
async def erase_events(call: Call, endpoint_id: str, field: str, value: ErasureValue) -> Erasure:
    """Erase (delete for good) every stored event of an endpoint whose field (condition-tree syntax:
    body.data.object.customer, header.x-user, meta.label.customer) equals the value, with its deliveries and
    its value in learned schemas, as a background job; returns the job. Follow it with get_erasure."""
    return await service.erase_events(call.ctx, call.principal, endpoint_id, EraseRequest(field=field, value=value))


@tool("GetErasure", read_only=True)
async def get_erasure(call: Call, erasure_id: str) -> Erasure:
    """Read an erasure job: state, matched, erased, and when; once done, its audit record."""
    return await service.get_erasure(call.ctx, call.principal, erasure_id)


@tool("ListErasures", read_only=True)
async def list_erasures(
    call: Call, endpoint_id: str | None = None, cursor: str | None = None, limit: int = 20
) -> ErasureList:
    """List the account's erasure jobs, newest first (of one endpoint with endpoint_id)."""
    return await service.list_erasures(call.ctx, call.principal, endpoint_id=endpoint_id, cursor=cursor, limit=limit)
