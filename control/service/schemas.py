"""Learned schemas: the account's shapes, their versions and diffs, generated code and correlation keys.

Everything here reads what the flush learned (``control.schemas.learn``); nothing writes. The current
version's fields are computed from the live learning state, so their presence is up to date; an older
version's are as they were when it was cut. Generated code is made on each request, never cached.
Version parameters take a number or ``current``: anything else is a 400 naming the parameter, a number the
schema never reached a 404. Generated code is of the one event type asked for; the union over the event types
of the schema's endpoints only when asked (``union``): one type's code is what a handler of that type needs,
and an endpoint's every type at once is a file of thousands of lines
(docs/adr/0037-learned-schemas-on-real-traffic.md).
"""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import msgspec

from control.db import schemas as db
from control.db.connection import Connection
from control.db.context import Context, Principal
from control.records.schemas import (
    Correlations,
    GeneratedTypes,
    Schema,
    SchemaDiff,
    SchemaField,
    SchemaList,
    SchemaVersion,
    SchemaVersionList,
)
from control.records.storable import check_text
from control.schemas.codegen.handlers import handler
from control.schemas.codegen.jsonschema import json_schema
from control.schemas.codegen.memo import HEADER, CodeCache
from control.schemas.codegen.tree import Member, build, rows_of, type_name, unique_names
from control.schemas.codegen.typescript import typescript, zod
from control.schemas.correlate import candidates
from control.schemas.diff import diff
from control.schemas.state import (
    State,
    decode_paths,
    decode_state,
    fields,
    stored_digest,
    structure,
    structure_digest,
)
from control.service.endpoints import require_endpoint
from control.support.parameter_messages import not_one_of, shown, text_length
from control.support.provider_checks import provider_name
from shared import ids
from shared.errors import NotFoundError, ValidationError
from shared.providers import NAMES

__all__ = (
    "FRAMEWORKS",
    "LANGS",
    "PROVIDERS",
    "endpoint_schemas",
    "get_schema",
    "list_schemas",
    "schema_correlations",
    "schema_diff",
    "schema_types",
    "schema_versions",
)

PROVIDERS = tuple(sorted(NAMES))
"""Every name a provider filter takes: the catalog's own names and their aliases (``stripe``...)."""
LANGS = ("typescript", "json-schema", "zod")
FRAMEWORKS = ("next", "express")
MAX_EVENT_TYPE = 200
_VERSION = re.compile(r"[1-9][0-9]{0,8}")
_fields_decoder = msgspec.json.Decoder(list[dict[str, Any]])


def _version_param(value: int | str | None, name: str, *, default_current: bool = True) -> int | None:
    """A version number, or None for ``current``: /v1's text (``"3"``) or a tool's integer (``3``, as a
    schema shows its ``version``)."""
    if value is None or value == "current":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 10**9:
        return value
    if not isinstance(value, str) or not _VERSION.fullmatch(value):
        raise ValidationError(f'{name}: must be a version number from 1 (3 or "3") or current, got {shown(value)}')
    return int(value)


def _not_found(schema_id: str) -> NotFoundError:
    return NotFoundError(f"schema {schema_id!r} not found")


def _fields(raw: list[dict[str, Any]]) -> list[SchemaField]:
    return [SchemaField(**f) for f in raw]


def _record(row: asyncpg.Record, version: int, field_list: list[dict[str, Any]]) -> Schema:
    return Schema(
        id=row["id"],
        provider=row["provider"],
        event_type=row["event_type"],
        endpoint_id=row["endpoint_id"],
        current_version=row["current_version"],
        version=version,
        version_count=row["current_version"],
        sample_count=row["sample_count"],
        first_seen_at=row["first_seen_at"],
        last_seen_at=row["last_seen_at"],
        fields=_fields(field_list),
    )


def _current(row: asyncpg.Record) -> Schema:
    return _record(row, row["current_version"], fields(decode_paths(row["state"])))


async def _schema(conn: Connection, principal: Principal, schema_id: str) -> asyncpg.Record:
    row = await db.get(conn, principal.account_id, schema_id) if ids.is_id(schema_id, "sch") else None
    if row is None:
        raise _not_found(schema_id)
    return row


async def _version_fields(conn: Connection, row: asyncpg.Record, version: int | None) -> tuple[int, list[Any]]:
    """(version, its fields): the live ones for the current version."""
    if version is None or version == row["current_version"]:
        return row["current_version"], fields(decode_paths(row["state"]))
    raw = await db.version_fields(conn, row["id"], version)
    if raw is None:
        raise NotFoundError(f"schema {row['id']!r} has no version {version} (its current is {row['current_version']})")
    return version, _fields_decoder.decode(raw)


async def list_schemas(
    ctx: Context, principal: Principal, provider: str | None = None, event_type: str | None = None
) -> SchemaList:
    if provider is not None:
        provider = provider_name(provider)
    if event_type is not None:
        check_text(event_type, "event_type")
        if len(event_type) > MAX_EVENT_TYPE:
            raise ValidationError(text_length("event_type", None, MAX_EVENT_TYPE, event_type))
    async with ctx.pool.acquire() as conn:
        rows = await db.list_for_account(conn, principal.account_id, provider, event_type)
    return SchemaList(schemas=[_current(r) for r in rows])


async def endpoint_schemas(ctx: Context, principal: Principal, endpoint_id: str) -> SchemaList:
    async with ctx.pool.acquire() as conn:
        await require_endpoint(conn, principal, endpoint_id)
        rows = await db.for_endpoint(conn, endpoint_id)
    return SchemaList(schemas=[_current(r) for r in rows])


async def get_schema(ctx: Context, principal: Principal, schema_id: str, version: int | str | None = None) -> Schema:
    number = _version_param(version, "version")
    async with ctx.pool.acquire() as conn:
        row = await _schema(conn, principal, schema_id)
        at, field_list = await _version_fields(conn, row, number)
    return _record(row, at, field_list)


async def schema_versions(ctx: Context, principal: Principal, schema_id: str) -> SchemaVersionList:
    async with ctx.pool.acquire() as conn:
        row = await _schema(conn, principal, schema_id)
        rows = await db.versions(conn, schema_id)
    out, later = [], row["sample_count"]
    for v in rows:  # newest first: each version ran until the next one began
        field_list = fields(decode_paths(row["state"])) if v["version"] == row["current_version"] else None
        out.append(
            SchemaVersion(
                version=v["version"],
                created_at=v["created_at"],
                sample_count=later - v["first_sample"],
                fields=_fields(field_list if field_list is not None else _fields_decoder.decode(v["fields"])),
            )
        )
        later = v["first_sample"]
    return SchemaVersionList(versions=out)


async def schema_diff(
    ctx: Context, principal: Principal, schema_id: str, from_: int | str | None = None, to: int | str | None = None
) -> SchemaDiff:
    """``from`` defaults to the version before ``to``; before version 1 is the empty schema (0)."""
    to_number = _version_param(to, "to")
    if from_ == "current":
        raise ValidationError("from: must be a version number (current is only for to)")
    from_number = _version_param(from_, "from")
    async with ctx.pool.acquire() as conn:
        row = await _schema(conn, principal, schema_id)
        to_at, after = await _version_fields(conn, row, to_number)
        if from_number is None:
            from_at = to_at - 1
            before = (await _version_fields(conn, row, from_at))[1] if from_at >= 1 else []
        else:
            from_at, before = await _version_fields(conn, row, from_number)
    changes = diff(before, after)
    return msgspec.convert({"from": from_at, "to": to_at, "changes": changes}, SchemaDiff)


CODE_CACHE = CodeCache()
"""Generated answers of this process, by the structures they are made of (``control.schemas.codegen.memo``)."""


class _Part(msgspec.Struct, frozen=True):
    """One event type of an answer: its name, discriminator and what its structure is known by (the state's
    digest, or an older version's stored fields): what the answer is cached by (``control.schemas.codegen.memo``)."""

    name: str
    event_type: str
    digest: bytes
    """``State.digest`` of the current version; empty for an older version (``fields`` says it all)."""
    fields: bytes = b""
    """An older version's stored fields (JSON)."""


def _member(part: _Part, source: asyncpg.Record, version: int) -> Member:
    """The part's tree: an older version's from its stored fields, the current one's from the state."""
    if part.fields:
        built = build(rows_of(_fields_decoder.decode(part.fields)))
    else:
        built = build(structure(decode_paths(source["state"])))
    return Member(part.name, part.event_type, built, source["id"], version)


async def _parts(
    conn: Connection, row: asyncpg.Record, version: int | None, union: bool
) -> tuple[int, list[tuple[_Part, asyncpg.Record, int]]]:
    """(version, [(part, its schema row, version)]): the schema (at ``version``) and, with ``union``, the other
    event types of its provider its endpoints receive."""
    at, old = row["current_version"], b""
    if version is not None and version != at:
        raw = await db.version_fields(conn, row["id"], version)
        if raw is None:
            raise NotFoundError(f"schema {row['id']!r} has no version {version} (its current is {at})")
        at, old = version, raw.encode()
    siblings = [r for r in await db.siblings(conn, row["id"]) if r["id"] != row["id"]] if union else []
    siblings.sort(key=lambda r: r["event_type"] or "")
    names = unique_names(
        [type_name(r["provider"], r["event_type"]) if r["provider"] else "EndpointPayload" for r in [row, *siblings]]
    )
    first = _Part(names[0], row["event_type"] or "", b"" if old else _digest(row["state"]), old)
    parts = [(first, row, at)]
    for name, r in zip(names[1:], siblings, strict=True):
        parts.append((_Part(name, r["event_type"] or "", _digest(r["state"])), r, r["current_version"]))
    return at, parts


def _digest(state: bytes | None) -> bytes:
    """The current version's ``State.digest``; of a state written before it was kept, computed."""
    return stored_digest(state) or structure_digest(structure(decode_paths(state)))


def _text(lang: str, framework: str | None, provider: str | None, title: str, members: list[Member]) -> str:
    """The answer's text with ``HEADER`` for its header."""
    union = type_name(provider, None)  # PaymentsEvent; EndpointEvent for traffic with no provider
    if lang == "json-schema":
        doc = json_schema(members, union, title, HEADER)
        return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"
    if framework is not None:
        return handler(framework, provider, members, union, zod(members, union, "", with_import=False), HEADER)
    return (zod if lang == "zod" else typescript)(members, union, HEADER)


async def schema_types(
    ctx: Context,
    principal: Principal,
    schema_id: str,
    lang: str | None = None,
    framework: str | None = None,
    version: int | str | None = None,
    union: bool | None = None,
) -> GeneratedTypes:
    """The code of the schema's event type; with ``union``, of every event type of its provider its endpoints
    receive, with the discriminated union over them. Made from the versions' structures, and kept by them
    (``control.schemas.codegen.memo``): the same structures, asked the same way, give the same text."""
    if lang is not None and lang not in LANGS:
        raise ValidationError(not_one_of("lang", LANGS, lang))
    if framework is not None and framework not in FRAMEWORKS:
        raise ValidationError(not_one_of("framework", FRAMEWORKS, framework))
    lang = "typescript" if framework is not None or lang is None else lang  # a handler is TypeScript
    number = _version_param(version, "version")
    async with ctx.pool.acquire() as conn:
        row = await _schema(conn, principal, schema_id)
        at, parts = await _parts(conn, row, number, bool(union))
    title = type_name(row["provider"], row["event_type"])
    key = (lang, framework, row["provider"], title, tuple(part for part, _, _ in parts))
    text = CODE_CACHE.get(key)
    if text is None:
        text = _text(lang, framework, row["provider"], title, [_member(part, r, v) for part, r, v in parts])
        CODE_CACHE.put(key, text)
    what = " ".join(x for x in (row["provider"] or "unattributed", row["event_type"]) if x)
    header = (
        f"Generated by hookyard from learned schema {row['id']} version {at} ({what}), {row['sample_count']} samples."
    )
    if lang == "json-schema":
        text = text.replace(HEADER, msgspec.json.encode(header).decode()[1:-1], 1)
    else:
        text = text.replace(HEADER, f"// {header}\n", 1)
    return GeneratedTypes(
        schema_id=row["id"],
        version=at,
        lang=lang,
        framework=framework if lang != "json-schema" else None,
        content_type="application/schema+json" if lang == "json-schema" else "application/typescript",
        text=text,
    )


async def schema_correlations(
    ctx: Context, principal: Principal, schema_id: str, version: int | str | None = None
) -> Correlations:
    number = _version_param(version, "version")
    async with ctx.pool.acquire() as conn:
        row = await _schema(conn, principal, schema_id)
        at, field_list = await _version_fields(conn, row, number)
        account = await db.states_for_account(conn, principal.account_id)
    others: list[tuple[dict[str, Any], State]] = [
        (
            {"schema_id": r["id"], "provider": r["provider"], "event_type": r["event_type"], "id": r["id"]},
            decode_state(r["state"]),
        )
        for r in account
    ]
    found = candidates(row["id"], decode_state(row["state"]), {f["path"] for f in field_list}, others)
    for c in found:
        for link in c["links"]:
            link.pop("id", None)
    return msgspec.convert({"schema_id": row["id"], "version": at, "candidates": found}, Correlations)
