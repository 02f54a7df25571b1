"""/v1/endpoints/{id}/allowlist and /v1/allowlist/{id}: the source IP ranges an endpoint accepts."""

from __future__ import annotations

from litestar import Controller, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.params import JSONBody

from control.api.openapi import errors
from control.api.params import AllowlistEntryId, EndpointId
from control.db.context import Context, Principal
from control.records import Deleted
from control.records.trust import AllowlistCreate, AllowlistEntry, AllowlistList
from control.service import trust as service

__all__ = ("AllowlistController", "EndpointAllowlistController")


class EndpointAllowlistController(Controller):
    path = "/endpoints/{endpoint_id:str}/allowlist"
    tags = ("allowlist",)

    @get("/", operation_id="ListAllowlist", responses=errors(401, 404, 410, 429))
    async def list_allowlist(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> AllowlistList:
        """The endpoint's allowlist, oldest first. Empty: every source is accepted. Non-empty: a source
        outside every entry is refused (403 `ip_not_allowed`)."""
        return await service.list_allowlist(ctx, principal, endpoint_id)

    @post(
        "/",
        operation_id="AddAllowlistEntry",
        responses={
            200: ResponseSpec(
                data_container=AllowlistEntry,
                description="The range was already on the allowlist: the existing entry, nothing changed",
                generate_examples=False,
            ),
            **errors(400, 401, 403, 404, 410, 429),
        },
    )
    async def add_allowlist_entry(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        endpoint_id: EndpointId,
        data: JSONBody[AllowlistCreate],
    ) -> Response[AllowlistEntry]:
        """Adds an entry, in canonical form: IPv4-mapped IPv6 (`::ffff:203.0.113.7`) is stored as IPv4.
        The first entry turns the endpoint to deny-by-default.
        Adding a range already present answers 200 with the existing entry. Applies on the edge within a
        second."""
        entry, created = await service.add_allowlist_entry(ctx, principal, endpoint_id, data.cidr)
        return Response(entry, status_code=201 if created else 200)


class AllowlistController(Controller):
    path = "/allowlist"
    tags = ("allowlist",)

    @delete(
        "/{entry_id:str}",
        operation_id="DeleteAllowlistEntry",
        status_code=200,
        responses=errors(401, 403, 404, 410, 429),
    )
    async def delete_allowlist_entry(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], entry_id: AllowlistEntryId
    ) -> Deleted:
        """Removes the entry. Removing the last one makes the endpoint accept every source again."""
        return Deleted(id=await service.delete_allowlist_entry(ctx, principal, entry_id))
