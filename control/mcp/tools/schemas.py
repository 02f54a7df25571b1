"""Learned schema tools: shapes learned from traffic, versions, diffs, generated code, correlations."""

from __future__ import annotations

from control.mcp.registry import Call, tool
from control.records.schemas import (
    Correlations,
    GeneratedTypes,
    Schema,
    SchemaDiff,
    SchemaDiffRange,
    SchemaList,
    SchemaVersionList,
    VersionArgument,
)
from control.service import schemas as service


@tool("ListSchemas", read_only=True)
async def list_schemas(call: Call, provider: str | None = None, event_type: str | None = None) -> SchemaList:
    """List the event shapes learned from the account's traffic, with their current fields."""
    return await service.list_schemas(call.ctx, call.principal, provider, event_type)


@tool("GetSchema", read_only=True)
async def get_schema(call: Call, schema_id: str, version: VersionArgument = None) -> Schema:
    """Read a learned schema's fields at a version (`current` by default)."""
    return await service.get_schema(call.ctx, call.principal, schema_id, version)


@tool("ListSchemaVersions", read_only=True)
async def list_schema_versions(call: Call, schema_id: str) -> SchemaVersionList:
    """List a learned schema's versions, newest first."""
    return await service.schema_versions(call.ctx, call.principal, schema_id)


@tool("GetSchemaDiff", read_only=True)
async def get_schema_diff(call: Call, schema_id: str, versions: SchemaDiffRange) -> SchemaDiff:
    """Compare two versions of a learned schema; each change says whether it breaks consumers."""
    return await service.schema_diff(call.ctx, call.principal, schema_id, versions.from_, versions.to)


@tool("GetSchemaTypes", read_only=True)
async def get_schema_types(
    call: Call,
    schema_id: str,
    lang: str | None = None,
    framework: str | None = None,
    version: VersionArgument = None,
    union: bool | None = None,
) -> GeneratedTypes:
    """Generate TypeScript, zod or JSON Schema for a learned schema's event type (`union`: its endpoints' every
    event type of its provider), or a Next.js / Express handler."""
    return await service.schema_types(call.ctx, call.principal, schema_id, lang, framework, version, union)


@tool("GetSchemaCorrelations", read_only=True)
async def get_schema_correlations(call: Call, schema_id: str, version: VersionArgument = None) -> Correlations:
    """Rank a learned schema's id-like fields as correlation keys, with the schemas sharing their values."""
    return await service.schema_correlations(call.ctx, call.principal, schema_id, version)


@tool("ListEndpointSchemas", read_only=True)
async def list_endpoint_schemas(call: Call, endpoint_id: str) -> SchemaList:
    """List the event shapes learned from one endpoint's traffic."""
    return await service.endpoint_schemas(call.ctx, call.principal, endpoint_id)
