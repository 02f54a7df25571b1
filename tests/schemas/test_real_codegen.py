"""The code generated from real traffic accepts that traffic (issue 26): the provider's 329 published example
payloads over 58 event types (``tests/data/real/code_host``) go through the real flush, and for each event
type the generated code is checked by the real tools against every payload of that type:

- JSON Schema (2020-12) validates each payload (``jsonschema``), and is itself valid against the 2020-12
  metaschema (``jsonschema_rs``: ``jsonschema``'s ``check_schema`` took 3.2 s of CPU for the 58 documents,
  jsonschema_rs 0.01 s; both refuse a document with an unknown type);
- zod parses each payload (Node, zod pinned in ``tests/node``);
- each payload, as a literal, type-checks as the generated TypeScript type under ``tsc --strict`` (excess
  property checks included: a field the schema lacks is an error).

Each check can fail: the same payload without one of its required fields is refused by all three (for
TypeScript, a ``@ts-expect-error`` that would itself be an error if the literal compiled). The union over
the endpoint's event types (``union``) compiles too, and parses every payload in its envelope."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import jsonschema_rs
import pytest

from control.db.context import Context
from control.schemas.codegen.tree import type_name
from control.service import schemas as service
from tests.schemas.real import by_event_type, examples
from tests.schemas.support import learned, node_work, principal, run, tsc

pytestmark = pytest.mark.slow  # tsc and node over 329 payloads: scheduled with the modules that start processes


def _without_required(payload: dict[str, Any], fields: list[Any]) -> dict[str, Any]:
    """The payload less its first top-level field that is required and present."""
    required = next(f.path for f in fields if "." not in f.path and "[" not in f.path and not f.optional)
    return {k: v for k, v in payload.items() if k != required}


@pytest.mark.usefixtures("node_modules")
async def test_generated_code_accepts_every_real_payload(ctx: Context, database_url: str) -> None:
    events = by_event_type()
    assert len(examples()) == 329
    assert len(events) == 58
    account_id, schemas = await learned(ctx, database_url, list(examples()))
    assert set(schemas) == set(events)
    me = principal(account_id)

    with node_work() as work:
        samples: dict[str, Any] = {}
        for i, (event_type, payloads) in enumerate(sorted(events.items())):
            schema_id = schemas[event_type]
            schema = await service.get_schema(ctx, me, schema_id)
            assert schema.sample_count == len(payloads)
            name = type_name("code_host", event_type)
            wrong = _without_required(payloads[0], schema.fields)

            doc = json.loads((await service.schema_types(ctx, me, schema_id, lang="json-schema")).text)
            validator = jsonschema.Draft202012Validator(doc)
            jsonschema_rs.meta.validate(doc)
            for payload in payloads:
                validator.validate(payload)
            assert not validator.is_valid(wrong), event_type

            ts = (await service.schema_types(ctx, me, schema_id)).text
            assert ts.count("export interface ") == 1  # the one event type asked for
            (work / f"types_{i}.ts").write_text(ts)
            literals = [f'import type {{ {name} }} from "./types_{i}.js";']
            literals += [f"export const e{j}: {name} = {json.dumps(p)};" for j, p in enumerate(payloads)]
            literals += ["// @ts-expect-error: a required field is missing"]
            literals += [f"export const w: {name} = {json.dumps(wrong)};"]
            (work / f"literals_{i}.ts").write_text("\n".join(literals) + "\n")
            (work / f"zod_{i}.ts").write_text((await service.schema_types(ctx, me, schema_id, lang="zod")).text)
            samples[str(i)] = {"name": name, "event_type": event_type, "payloads": payloads, "wrong": wrong}

        union_id = schemas["issues"]
        (work / "union.ts").write_text((await service.schema_types(ctx, me, union_id, union=True)).text)
        union_zod = (await service.schema_types(ctx, me, union_id, lang="zod", union=True)).text
        assert union_zod.count("export const ") == 58 + 1
        (work / "union_zod.ts").write_text(union_zod)
        (work / "samples.json").write_text(json.dumps(samples))
        (work / "check.mjs").write_text(CHECK)
        tsc(work)
        out = json.loads(run(["node", "check.mjs"], work))
    assert out["failed"] == []
    assert out["parsed"] == 329
    assert out["refused"] == 58
    assert out["union_parsed"] == 329


CHECK = """
import { readFileSync } from "node:fs";
import * as union from "./out/union_zod.js";

const samples = JSON.parse(readFileSync("samples.json", "utf8"));
const failed = [];
let parsed = 0, refused = 0, unionParsed = 0;
for (const [i, { name, payloads, wrong }] of Object.entries(samples)) {
  const schema = (await import(`./out/zod_${i}.js`))[`${name}Schema`];
  payloads.forEach((p, j) => {
    const r = schema.safeParse(p);
    if (r.success) parsed++; else failed.push([name, j, r.error.issues.slice(0, 2)]);
  });
  if (!schema.safeParse(wrong).success) refused++; else failed.push([name, "wrong"]);
}
for (const { event_type, payloads } of Object.values(samples)) {
  for (const p of payloads) {
    if (union.CodeHostEventSchema.safeParse({ event_type, payload: p }).success) unionParsed++;
  }
}
console.log(JSON.stringify({ failed, parsed, refused, union_parsed: unionParsed }));
"""
