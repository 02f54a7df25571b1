"""Erasure: POST /v1/endpoints/{id}/events/erase (a job that removes every event whose field has a value),
GET /v1/erasures/{id} (its progress, then its audit record) and GET /v1/erasures (the account's)."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, PathParameter, QueryParameter

from control.api.openapi import errors
from control.api.params import Cursor, EndpointId, query
from control.db.context import Context, Principal
from control.records.erasures import EraseRequest, Erasure, ErasureList
from control.records.text import id_pattern
from control.service import erasures as service
from control.support.parameter_messages import PAGE_SIZE

__all__ = ("EndpointErasureController", "ErasureController")

ErasureId = Annotated[
    str,
    PathParameter(
        description="The erasure's id (`erase_` and a ULID)", schema_extra={"pattern": id_pattern(service.JOB_PREFIX)}
    ),
]


class EndpointErasureController(Controller):
    path = "/endpoints/{endpoint_id:str}/events/erase"
    tags = ("erasure",)

    @post("/", operation_id="EraseEvents", status_code=202, responses=errors(400, 401, 403, 404, 410, 429))
    async def erase_events(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        data: JSONBody[EraseRequest],
    ) -> Erasure:
        """Removes, in the background, every stored event of the endpoint whose `field` equals `value` (an
        event whose body is not JSON has no body field), with its deliveries (records, request and response
        bodies), its pending deliveries, its dead letters, and the value in the correlation data of the
        schemas learned on the endpoint. Answers 202 with the job at once; follow it with
        `GET /v1/erasures/{erasure_id}`. The job waits (`pending`) until the flush has stored every request the
        edge acknowledged before it, so those are part of it too.

        `matched` counts the events found, `erased` those removed. Once `completed`, the job is the audit
        record: the field, the counts and when, with `value_sha256` (SHA-256 of `<id>:<value as JSON>`) in
        place of the value, which is dropped; `failed` comes with an `error` naming why."""
        return await service.erase_events(ctx, principal, endpoint_id, data)


class ErasureController(Controller):
    path = "/erasures"
    tags = ("erasure",)

    @get("/", operation_id="ListErasures", responses=errors(400, 401, 404, 410, 429))
    async def list_erasures(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: Annotated[str | None, query("Only this endpoint's erasures", pattern=id_pattern("ep"))] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=service.MAX_LIST, description=PAGE_SIZE)] = 20,
        cursor: Cursor = None,
    ) -> ErasureList:
        """The account's erasures, newest first, those of deleted endpoints included (the audit stays)."""
        return await service.list_erasures(ctx, principal, endpoint_id=endpoint_id, cursor=cursor, limit=limit)

    @get("/{erasure_id:str}", operation_id="GetErasure", responses=errors(401, 404, 410, 429))
    async def get_erasure(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], erasure_id: ErasureId
    ) -> Erasure:
        """An erasure: `state` (`pending`, `running`, `completed`, `failed`), `matched`, `erased` and the rest of
        what it removed, and when it was asked, started and finished."""
        return await service.get_erasure(ctx, principal, erasure_id)
