"""/v1/schemas and /v1/endpoints/{id}/schemas: the shapes learned from traffic, their versions, diffs,
generated types and correlation keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from litestar import Controller, Response, get
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, Operation
from litestar.openapi.spec import Schema as OpenAPISchema
from litestar.params import PathParameter

from control.api.openapi import errors
from control.api.params import EndpointId, boolean, query, text_schema
from control.db.context import Context, Principal
from control.records.schemas import Correlations, Schema, SchemaDiff, SchemaList, SchemaVersionList
from control.records.text import id_pattern
from control.service import schemas as service

__all__ = ("EndpointSchemaController", "SchemaController")

SchemaId = Annotated[
    str,
    PathParameter(description="The schema's id (`sch_` and a ULID)", schema_extra={"pattern": id_pattern("sch")}),
]
_VERSION = "^(?:current|[1-9][0-9]{0,8})$"
Version = Annotated[str | None, query("A version number, or `current` (the default)", name="version", pattern=_VERSION)]


@dataclass
class _TypesOperation(Operation):
    """Documents the two content types the generated code comes in (one ``ResponseSpec`` names only one)."""

    def __post_init__(self) -> None:
        ok = (self.responses or {}).get("200")
        if ok is not None and not isinstance(ok, str) and hasattr(ok, "content"):
            ok.content = {
                "application/typescript": OpenAPIMediaType(schema=OpenAPISchema(type=OpenAPIType.STRING)),
                "application/schema+json": OpenAPIMediaType(schema=OpenAPISchema(type=OpenAPIType.OBJECT)),
            }


class SchemaController(Controller):
    path = "/schemas"
    tags = ("schemas",)

    @get("/", operation_id="ListSchemas", responses=errors(401, 429))
    async def list_schemas(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        provider: Annotated[str | None, query("Attributed provider", enum=list(service.PROVIDERS))] = None,
        event_type: Annotated[
            str | None, query("The provider's event type, exact", **text_schema(service.MAX_EVENT_TYPE))
        ] = None,
    ) -> SchemaList:
        """The shapes learned from the account's traffic: one per (provider, event type), one per endpoint for
        traffic with no provider; each with its current fields. Kept after the events and endpoints go."""
        return await service.list_schemas(ctx, principal, provider, event_type)

    @get("/{schema_id:str}", operation_id="GetSchema", responses=errors(401, 404, 429))
    async def get_schema(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        schema_id: SchemaId,
        version: Version = None,
    ) -> Schema:
        """Fields (dot paths, array items as `items[]`) with their types, optionality, nullability and
        presence, at a version (`current` by default)."""
        return await service.get_schema(ctx, principal, schema_id, version)

    @get("/{schema_id:str}/versions", operation_id="ListSchemaVersions", responses=errors(401, 404, 429))
    async def list_versions(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], schema_id: SchemaId
    ) -> SchemaVersionList:
        """The evolution timeline, newest first. A version is cut only on a real change: a field added,
        removed (absent from its recent window), of a new type, newly nullable or newly required."""
        return await service.schema_versions(ctx, principal, schema_id)

    @get("/{schema_id:str}/diff", operation_id="GetSchemaDiff", responses=errors(400, 401, 404, 429))
    async def diff_schema(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        schema_id: SchemaId,
        from_: Annotated[
            str | None,
            query("A version number; defaults to the one before `to`", name="from", pattern="^[1-9][0-9]{0,8}$"),
        ] = None,
        to: Annotated[str | None, query("A version number or `current` (default)", pattern=_VERSION)] = None,
    ) -> SchemaDiff:
        """The changes between two versions: `added`, `removed`, `type_changed`, `became_nullable`,
        `became_required`, each flagged `breaking` from the consumer's side (removed, type_changed and
        became_nullable are)."""
        return await service.schema_diff(ctx, principal, schema_id, from_, to)

    @get(
        "/{schema_id:str}/types",
        operation_id="GetSchemaTypes",
        operation_class=_TypesOperation,
        responses={
            200: ResponseSpec(data_container=str, media_type="application/typescript", description="The code"),
            **errors(400, 401, 404, 429),
        },
    )
    async def get_types(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        schema_id: SchemaId,
        lang: Annotated[str | None, query("Output language (default typescript)", enum=list(service.LANGS))] = None,
        framework: Annotated[
            str | None, query("A ready webhook handler for this framework", enum=list(service.FRAMEWORKS))
        ] = None,
        version: Version = None,
        union: Annotated[
            str | None,
            query(
                "`true`: every event type of the provider the schema's endpoints receive, with the discriminated "
                "union over them (default: this schema's event type alone)",
                kind="boolean",
            ),
        ] = None,
    ) -> Response[str]:
        """TypeScript interfaces, zod schemas or JSON Schema (2020-12) of the version's event type, made for
        the exact learned structure and cached by it (`union` widens it to the endpoints' other event types).
        With `framework`, a handler that
        verifies the provider's signature on the raw body, validates with zod and switches on the event type
        (with `framework`, `lang` is not read). `application/typescript`, or `application/schema+json` for
        JSON Schema."""
        out = await service.schema_types(ctx, principal, schema_id, lang, framework, version, boolean(union, "union"))
        return Response(out.text, media_type=out.content_type)

    @get("/{schema_id:str}/correlations", operation_id="GetSchemaCorrelations", responses=errors(400, 401, 404, 429))
    async def get_correlations(
        self,
        ctx: NamedDependency[Context],
        principal: NamedDependency[Principal],
        schema_id: SchemaId,
        version: Version = None,
    ) -> Correlations:
        """Id-like fields ranked by how consistently they appear (`score`, `presence`, `distinct_ratio`), each
        with the account's schemas whose id-like fields carried the same values."""
        return await service.schema_correlations(ctx, principal, schema_id, version)


class EndpointSchemaController(Controller):
    path = "/endpoints/{endpoint_id:str}/schemas"
    tags = ("schemas",)

    @get("/", operation_id="ListEndpointSchemas", responses=errors(401, 404, 410, 429))
    async def list_endpoint_schemas(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> SchemaList:
        """The shapes learned from this endpoint's traffic."""
        return await service.endpoint_schemas(ctx, principal, endpoint_id)
