"""Generated code, checked by the real tools: ``tsc --strict`` compiles every TypeScript output (interfaces,
zod, the Next.js and Express handlers), Node runs the zod schemas and the Next.js handler against the
captured samples (signed in the provider's own scheme), and ``jsonschema`` (draft 2020-12) validates the
JSON Schema against them. Samples pass; a wrong shape fails; a bad signature is refused.

The npm packages are pinned in ``tests/node/package-lock.json``; the ``node_modules`` fixture installs them
(``npm ci``) when they are stale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from control.db.context import Context
from control.service import schemas as service
from shared.signatures import sign
from tests.conftest import make_account
from tests.schemas.support import flush, make_endpoint, node_work, principal, record, run, tsc

SECRET = "whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQ="


def intent(i: int) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": f"pi_{i}", "amount": 100 + i, "currency": "usd", "customer": f"cus_{i % 3}"}
    if i % 2:
        obj["description"] = None if i % 3 else "note"
    obj["items"] = [{"sku": "a", "qty": 1}] if i % 4 else []
    return {"id": f"evt_{i}", "type": "payment_intent.succeeded", "data": {"object": obj}, "livemode": False}


def refund(i: int) -> dict[str, Any]:
    return {"id": f"evt_r{i}", "type": "charge.refunded", "data": {"object": {"id": f"ch_{i}", "amount_refunded": 5.5}}}


def order(i: int) -> dict[str, Any]:
    return {"id": i, "email": f"u{i}@example.com", "line_items": [{"title": "x", "price": "1.00"}], "note": None}


async def _generate(ctx: Context, account_id: str, schema_id: str, **kw: str) -> str:
    """With the union over the endpoint's event types (asked for: the default is the one type's)."""
    return (await service.schema_types(ctx, principal(account_id), schema_id, union=True, **kw)).text


@pytest.mark.usefixtures("node_modules")
async def test_generated_code_compiles_validates_and_handles(ctx: Context, database_url: str, tmp_path: Path) -> None:
    account = await make_account(database_url)
    ep = await make_endpoint(database_url, account.id)
    intents, refunds, orders = (
        [intent(i) for i in range(12)],
        [refund(i) for i in range(3)],
        [order(i) for i in range(4)],
    )
    plain = [{"a": i, "b": [1, 2.5]} for i in range(2)]
    await flush(
        ctx,
        [record(ep, b) for b in intents + refunds]
        + [record(ep, o, provider="commerce", event_type="orders/create") for o in orders]
        + [record(ep, p, provider=None) for p in plain],
    )
    schemas = {
        (s.provider, s.event_type): s.id for s in (await service.list_schemas(ctx, principal(account.id))).schemas
    }
    pay, com, unattributed = (
        schemas[("payments", "payment_intent.succeeded")],
        schemas[("commerce", "orders/create")],
        schemas[(None, None)],
    )

    with node_work() as work:  # a strict tsconfig there (package.json, tsconfig.json)
        files = {
            "pay.ts": await _generate(ctx, account.id, pay),
            "pay_zod.ts": await _generate(ctx, account.id, pay, lang="zod"),
            "pay_next.ts": await _generate(ctx, account.id, pay, framework="next"),
            "pay_express.ts": await _generate(ctx, account.id, pay, framework="express"),
            "com_next.ts": await _generate(ctx, account.id, com, framework="next", lang="zod"),
            "com_express.ts": await _generate(ctx, account.id, com, framework="express"),
            "plain_zod.ts": await _generate(ctx, account.id, unattributed, lang="zod"),
            "plain_next.ts": await _generate(ctx, account.id, unattributed, framework="next"),
        }
        assert "export type PaymentsEvent =" in files["pay.ts"]
        assert '"charge.refunded"' in files["pay.ts"]  # the union over the endpoint's event types
        assert "description?: string | null;" in files["pay.ts"]
        for name, text in files.items():
            (work / name).write_text(text)
        tsc(work)

        # zod under Node: every captured sample passes; a wrong shape fails.
        signed = []
        for body in [*intents[:3], refunds[0], {**intents[0], "data": {"object": {"id": 1}}}]:
            raw = json.dumps(body).encode()
            signed.append({"body": raw.decode(), "headers": sign("payments", raw, SECRET)})
        signed.append({"body": json.dumps(intents[0]), "headers": {"pay-signature": "t=1,v1=" + "0" * 64}})
        samples = {
            "pay": [{"event_type": b["type"], "payload": b} for b in intents + refunds],
            "com": [{"event_type": "orders/create", "payload": o} for o in orders],
            "plain": [{"event_type": "", "payload": p} for p in plain],
            "wrong": [
                {"event_type": "payment_intent.succeeded", "payload": {**intents[0], "livemode": "no"}},
                {"event_type": "orders/create", "payload": {**orders[0], "line_items": [{"title": 5}]}},
            ],
            "signed": signed,
        }
        (work / "samples.json").write_text(json.dumps(samples))
        (work / "check.mjs").write_text(CHECK)
        env = {**os.environ, "WEBHOOK_SECRET": SECRET}
        out = json.loads(run(["node", "check.mjs"], work, env=env))
        assert out["pay"] == [True] * len(samples["pay"])
        assert out["com"] == [True] * len(samples["com"])
        assert out["plain"] == [True] * len(samples["plain"])
        assert out["wrong"] == [False, False]
        # The Next.js handler: signed samples 200, a wrong shape 422, a bad signature 401.
        assert out["next"] == [200, 200, 200, 200, 422, 401], out

    # JSON Schema 2020-12, by a real validator: samples pass, a wrong shape fails.
    doc = json.loads(await _generate(ctx, account.id, pay, lang="json-schema"))
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    validator = jsonschema.Draft202012Validator(doc)
    validator.check_schema(doc)
    for body in intents:
        validator.validate(body)
    for wrong in (
        {**intents[0], "data": {"object": {**intents[0]["data"]["object"], "amount": "100"}}},
        {k: v for k, v in intents[0].items() if k != "type"},
        {**intents[0], "data": {"object": {**intents[0]["data"]["object"], "items": [{"sku": 1, "qty": 1}]}}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(wrong)
    # Its union over the endpoint's event types: every captured envelope passes; a wrong one fails.
    assert set(doc["$defs"]) == {"PaymentsPaymentIntentSucceeded", "PaymentsChargeRefunded", "PaymentsEvent"}
    union = jsonschema.Draft202012Validator({"$defs": doc["$defs"], "$ref": "#/$defs/PaymentsEvent"})
    for body in intents + refunds:
        union.validate({"event_type": body["type"], "payload": body})
    for wrong in (
        {"event_type": "payment_intent.succeeded", "payload": {**intents[0], "livemode": "no"}},
        {"event_type": "charge.disputed", "payload": refunds[0]},
        {"payload": intents[0]},
    ):
        with pytest.raises(jsonschema.ValidationError):
            union.validate(wrong)


CHECK = """
import { readFileSync } from "node:fs";
import * as pay from "./out/pay_zod.js";
import * as com from "./out/com_next.js";
import * as plain from "./out/plain_zod.js";
import { POST } from "./out/pay_next.js";

const samples = JSON.parse(readFileSync("samples.json", "utf8"));
const ok = (schema, list) => list.map((s) => schema.safeParse(s).success);
const next = [];
for (const s of samples.signed) {
  const response = await POST(new Request("http://localhost/api/webhooks", {
    method: "POST", body: s.body, headers: { "content-type": "application/json", ...s.headers },
  }));
  next.push(response.status);
}
console.log(JSON.stringify({
  pay: ok(pay.PaymentsEventSchema, samples.pay),
  com: ok(com.CommerceEventSchema, samples.com),
  plain: ok(plain.EndpointEventSchema, samples.plain),
  wrong: [pay.PaymentsEventSchema.safeParse(samples.wrong[0]).success,
          com.CommerceEventSchema.safeParse(samples.wrong[1]).success],
  next,
}));
"""
