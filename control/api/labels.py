"""/v1/endpoints/{id}/labels and /v1/labels/{id}: which value of every new event becomes a searchable tag."""

from __future__ import annotations

from litestar import Controller, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import EndpointId, LabelId
from control.db.context import Context, Principal
from control.records import Deleted
from control.records.labels import LabelRule, LabelRuleCreate, LabelRuleList, LabelRuleUpdate
from control.service import labels as service

__all__ = ("EndpointLabelController", "LabelController")


class EndpointLabelController(Controller):
    path = "/endpoints/{endpoint_id:str}/labels"
    tags = ("labels",)

    @get("/", operation_id="ListLabelRules", responses=errors(401, 404, 410, 429))
    async def list_labels(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> LabelRuleList:
        """The endpoint's label rules, oldest first (the order labels appear on an event)."""
        return await service.list_labels(ctx, principal, endpoint_id)

    @post("/", operation_id="CreateLabelRule", responses=errors(400, 401, 403, 404, 410, 429))
    async def create_label(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        data: JSONBody[LabelRuleCreate],
    ) -> LabelRule:
        """Labels every event the endpoint stores from now on (not the ones already stored) with the value at
        `path`: strings as they are, numbers and booleans as JSON, objects and arrays as compact JSON, cut at
        200 characters; a missing path or a null adds no label. Conditions can test it as
        `meta.label.<output_key>`, and `q` searches label values."""
        return await service.create_label(ctx, principal, endpoint_id, data)


class LabelController(Controller):
    path = "/labels"
    tags = ("labels",)

    @get("/{label_id:str}", operation_id="GetLabelRule", responses=errors(401, 404, 410, 429))
    async def get_label(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], label_id: LabelId
    ) -> LabelRule:
        """One label rule."""
        return await service.get_label(ctx, principal, label_id)

    @patch("/{label_id:str}", operation_id="UpdateLabelRule", responses=errors(400, 401, 403, 404, 410, 429))
    async def update_label(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        label_id: LabelId,
        data: JSONBody[LabelRuleUpdate],
    ) -> LabelRule:
        """Changes the given fields, for events stored from now on."""
        return await service.update_label(ctx, principal, label_id, data)

    @delete(
        "/{label_id:str}", operation_id="DeleteLabelRule", status_code=200, responses=errors(401, 403, 404, 410, 429)
    )
    async def delete_label(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], label_id: LabelId
    ) -> Deleted:
        """Stops labelling new events; the labels of stored events stay."""
        return await service.delete_label(ctx, principal, label_id)
