"""Ready webhook handlers (Next.js App Router, Express 5) for the event types of a learned schema.

A handler reads the raw body (signatures are over the exact bytes), verifies the signature in the
provider's own scheme (``shared.signatures``: the header names and rules the edge checks) in every form
hookyard sends it: the provider's header under its real and its neutral name (where a replay with
``resign_with`` puts its re-signature by default), and a re-signature in another ``signature_header``
(``x-signature`` unless ``WEBHOOK_SIGNATURE_HEADER`` names another), any one verifying with
``WEBHOOK_SECRET``. It then parses the JSON, validates it with the
generated zod union, and switches on the event type. Event types the schema never saw are acknowledged
(200) and ignored, so a provider never retries them forever. Traffic with no provider is verified as
Standard Webhooks.
"""

from __future__ import annotations

import json

from control.schemas.codegen.tree import Member
from shared.signatures import HEADERS

__all__ = ("handler",)

_EVENT_HEADERS = {"commerce": ("x-shop-topic", "x-shopify-topic"), "code_host": ("x-codehost-event", "x-github-event")}

_COMMON = """
type Get = (name: string) => string | null | undefined;
type Outcome = { status: number; body: unknown };

const SECRET = process.env.WEBHOOK_SECRET ?? "";
const TOLERANCE_S = 300;
// hookyard's own re-signature: a replay with `resign_with` puts it in the provider's own header unless its
// `signature_header` names another (this one: x-signature unless WEBHOOK_SIGNATURE_HEADER says), in this
// provider's scheme. Verified with the same SECRET: set it to your `resign_with`.
const RESIGNED_HEADER = (process.env.WEBHOOK_SIGNATURE_HEADER ?? "x-signature").toLowerCase();

function header(get: Get, ...names: string[]): string | null {
  for (const name of names) {
    const value = get(name);
    if (value) return value.trim();
  }
  return null;
}

function same(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function fresh(timestamp: string): boolean {
  return /^\\d+$/.test(timestamp) && Math.abs(Date.now() / 1000 - Number(timestamp)) <= TOLERANCE_S;
}
"""

# Every form hookyard sends for the provider: its own header (the real provider's name and the spec's
# neutral one, verbatim as captured or re-signed by `hookyard listen --resign-with`) and a replay's
# re-signature in RESIGNED_HEADER. Any one that verifies is enough: all are HMACs keyed with SECRET.
_ANY_HEADER = """
const SIGNATURE_HEADERS: string[] = [%(sig)s, RESIGNED_HEADER];

function verify(raw: Buffer, get: Get): boolean {
  return SIGNATURE_HEADERS.some((name) => {
    const value = header(get, name);
    return value !== null && verifyValue(value, raw);
  });
}
"""

_VERIFY = {
    "payments": """
// payments: `t=<unix>,v1=<hex>`, HMAC-SHA256 over `{t}.{body}` keyed with the whole secret.
function verifyValue(value: string, raw: Buffer): boolean {
  let t = "";
  const signatures: string[] = [];
  for (const part of value.split(",")) {
    const at = part.indexOf("=");
    const key = part.slice(0, at).trim();
    const val = part.slice(at + 1).trim();
    if (key === "t") t = val;
    else if (key === "v1") signatures.push(val);
  }
  if (!fresh(t)) return false;
  const expected = createHmac("sha256", SECRET).update(`${t}.`).update(raw).digest();
  return signatures.some((s) => /^[0-9a-fA-F]{64}$/.test(s) && same(Buffer.from(s, "hex"), expected));
}
"""
    + _ANY_HEADER,
    "identity": """
// Standard Webhooks: `v1,<base64>` entries, HMAC-SHA256 over `{id}.{timestamp}.{body}`, keyed with the
// base64 after `whsec_`. Each family of names (signature, id, timestamp) is read together; a replay's
// re-signature in RESIGNED_HEADER goes with the id and timestamp of whichever family the request carries.
const FAMILIES: [string, string, string][] = %(families)s;

function verifyValue(value: string, id: string | null, ts: string | null, raw: Buffer): boolean {
  if (!id || !ts || !fresh(ts)) return false;
  const decoded = SECRET.startsWith("whsec_") ? Buffer.from(SECRET.slice(6), "base64") : Buffer.alloc(0);
  const key = decoded.length > 0 ? decoded : Buffer.from(SECRET, "utf8");
  const expected = createHmac("sha256", key).update(`${id}.${ts}.`).update(raw).digest();
  return value
    .split(" ")
    .some((entry) => entry.startsWith("v1,") && same(Buffer.from(entry.slice(3), "base64"), expected));
}

function verify(raw: Buffer, get: Get): boolean {
  const resigned = header(get, RESIGNED_HEADER);
  return FAMILIES.some(([sigName, idName, tsName]) => {
    const id = header(get, idName);
    const ts = header(get, tsName);
    const value = header(get, sigName);
    return (
      (value !== null && verifyValue(value, id, ts, raw)) || (resigned !== null && verifyValue(resigned, id, ts, raw))
    );
  });
}
""",
    "commerce": """
// commerce: base64 HMAC-SHA256 of the raw body, keyed with the secret.
function verifyValue(value: string, raw: Buffer): boolean {
  return same(Buffer.from(value, "base64"), createHmac("sha256", SECRET).update(raw).digest());
}
"""
    + _ANY_HEADER,
    "code_host": """
// code host: `sha256=<hex>` HMAC-SHA256 of the raw body, keyed with the secret.
function verifyValue(value: string, raw: Buffer): boolean {
  if (!/^sha256=[0-9a-fA-F]{64}$/.test(value)) return false;
  return same(Buffer.from(value.slice(7), "hex"), createHmac("sha256", SECRET).update(raw).digest());
}
"""
    + _ANY_HEADER,
}


def _verify(provider: str | None) -> str:
    scheme = provider if provider is not None and provider in HEADERS else "identity"
    families = HEADERS[scheme]
    sig = ", ".join(json.dumps(names[0]) for names in families.values())
    fams = json.dumps([list(names) for names in families.values()])
    return _VERIFY[scheme] % {"sig": sig, "families": fams}


def _event_type(provider: str | None) -> str:
    if provider in _EVENT_HEADERS:
        names = ", ".join(json.dumps(n) for n in _EVENT_HEADERS[provider])
        return f'function eventTypeOf(_body: unknown, get: Get): string {{\n  return header(get, {names}) ?? "";\n}}\n'
    if provider is None:
        return 'function eventTypeOf(_body: unknown, _get: Get): string {\n  return "";\n}\n'
    return (
        "function eventTypeOf(body: unknown, _get: Get): string {\n"
        '  if (typeof body === "object" && body !== null && "type" in body && typeof body.type === "string") {\n'
        '    return body.type;\n  }\n  return "";\n}\n'
    )


def _handle(members: list[Member], union: str) -> str:
    known = ", ".join(json.dumps(m.event_type) for m in members)
    cases = "\n".join(
        f"    case {json.dumps(m.event_type)}: {{\n"
        f"      const event: {m.name} = payload;\n"
        f"      void event; // handle {m.event_type or 'the event'} here\n"
        "      break;\n    }"
        for m in members
    )
    return f"""
const KNOWN = new Set<string>([{known}]);

export function handle(raw: Buffer, get: Get): Outcome {{
  if (!verify(raw, get)) {{
    return {{ status: 401, body: {{ error: {{ code: "signature_invalid", message: "signature does not verify" }} }} }};
  }}
  let body: unknown;
  try {{
    body = JSON.parse(raw.toString("utf8"));
  }} catch {{
    return {{ status: 400, body: {{ error: {{ code: "invalid_json", message: "body is not JSON" }} }} }};
  }}
  const eventType = eventTypeOf(body, get);
  if (!KNOWN.has(eventType)) return {{ status: 200, body: {{ received: true, ignored: eventType }} }};
  const parsed = {union}Schema.safeParse({{ event_type: eventType, payload: body }});
  if (!parsed.success) {{
    return {{ status: 422, body: {{ error: {{ code: "invalid_payload", message: z.prettifyError(parsed.error) }} }} }};
  }}
  const {{ event_type: kind, payload }} = parsed.data;
  switch (kind) {{
{cases}
    default: {{
      const unhandled: never = kind;
      void unhandled;
    }}
  }}
  return {{ status: 200, body: {{ received: true, event_type: kind }} }};
}}
"""


_NEXT = """
// app/api/webhooks/%(route)s/route.ts
export async function POST(request: Request): Promise<Response> {
  const raw = Buffer.from(await request.arrayBuffer());
  const outcome = handle(raw, (name) => request.headers.get(name));
  return Response.json(outcome.body, { status: outcome.status });
}
"""

_EXPRESS = """
export const app = express();

// The raw body, not express.json(): the signature is over the exact bytes.
app.post("/webhooks/%(route)s", express.raw({ type: "*/*", limit: "1mb" }), (req: Request, res: Response) => {
  const raw: Buffer = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const outcome = handle(raw, (name) => req.get(name));
  res.status(outcome.status).json(outcome.body);
});
"""


def handler(framework: str, provider: str | None, members: list[Member], union: str, zod_code: str, header: str) -> str:
    imports = ['import { createHmac, timingSafeEqual } from "node:crypto";']
    if framework == "express":
        imports.append('import express, { type Request, type Response } from "express";')
    imports.append('import { z } from "zod";')
    route = provider or "endpoint"
    tail = (_NEXT if framework == "next" else _EXPRESS) % {"route": route}
    return "\n".join(
        [
            header,
            *imports,
            "",
            zod_code,
            _COMMON,
            _verify(provider),
            _event_type(provider),
            _handle(members, union),
            tail,
        ]
    )
