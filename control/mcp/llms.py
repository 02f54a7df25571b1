"""GET /llms.txt: how an agent uses THIS instance, in the llmstxt.org format, generated so it cannot drift.

Everything that can change is read, not written: the public URLs from the settings, every route from the
app's OpenAPI document (itself generated from the live route table), every MCP tool from the app's tool
catalog, and the getting-started text from which provisioning routes this instance has. A route or tool
added later appears without touching this module (``tests/test_llms_txt.py`` checks each is listed).

The llmstxt.org shape: an H1, a blockquote summary, details without headings (bold leads instead), then
H2 sections that are lists of ``- [name](url): notes``, ``Optional`` last. Rendered once per app (the routes
never change while it serves). No authentication, like the OpenAPI document.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from litestar import Litestar, Request, get

from control.mcp.catalog import Catalog
from control.mcp.registry import TOOLS
from shared.providers.reference import summary as providers_summary
from shared.settings import Settings

__all__ = ("llms_txt", "render")

_SENTENCE = re.compile(r"(?<=[.!?])\s")


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    return _SENTENCE.split(flat, maxsplit=1)[0].rstrip(".") if flat else ""


def _pointer(control: str, method: str, path: str) -> str:
    """A link to the operation inside the OpenAPI document (a JSON pointer as the fragment)."""
    escaped = path.replace("~", "~0").replace("/", "~1")
    return f"{control}/schema/openapi.json#" + quote(f"/paths/{escaped}/{method.lower()}", safe="/~")


def _routes(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict)
    ]


def _block(language: str, text: str) -> str:
    return f"```{language}\n{text}\n```"


def _mcp_configs(control: str) -> str:
    url, header = f"{control}/mcp", "Bearer <api_token or hy_live_ key>"
    generic = {"mcpServers": {"hookyard": {"url": url, "headers": {"Authorization": header}}}}
    vscode = {"servers": {"hookyard": {"type": "http", "url": url, "headers": {"Authorization": header}}}}
    bridge = {
        "mcpServers": {
            "hookyard": {
                "command": "npx",
                "args": ["-y", "mcp-remote", url, "--header", "Authorization:${AUTH_HEADER}"],
                "env": {"AUTH_HEADER": header},
            }
        }
    }
    return "\n\n".join(
        [
            "Cursor, Windsurf and most clients (`mcpServers`, remote URL with headers):",
            _block("json", json.dumps(generic, indent=2)),
            "VS Code (`.vscode/mcp.json`):",
            _block("json", json.dumps(vscode, indent=2)),
            "Claude Code:",
            _block("sh", f'claude mcp add --transport http hookyard {url} --header "Authorization: {header}"'),
            "Clients that only start local commands (Claude Desktop), through the `mcp-remote` bridge:",
            _block("json", json.dumps(bridge, indent=2)),
        ]
    )


def _getting_started(control: str, routes: set[tuple[str, str]]) -> str:
    parts = []
    if ("POST", "/api/start") in routes:
        parts.append(
            f"**Start without an account.** `POST {control}/api/start` (no key, no body needed) answers a temporary "
            "endpoint that lasts 3 days: `ingest_url` (give it to the provider), `inbox_url` (hand it to your human: "
            "it opens the endpoint's live inbox in any browser until the endpoint expires; MCP "
            "`rotate_inbox_links` revokes it) and `api_token` (`hy_tmp_...`), a token for /mcp that sees and acts "
            "on that endpoint only (403 `temporary_token` on /v1). Call it once and reuse `ingest_url`."
        )
    if ("POST", "/api/register") in routes:
        parts.append(
            f'**Get an API key.** `POST {control}/api/register` with `{{"email": "you@example.com", "api_token": '
            '"hy_tmp_..."}` creates a free account and answers its `hy_live_` key, shown once; with `api_token`, '
            "that token's endpoints become permanent."
        )
    parts.append(
        "The operator of this instance can also create an account and key with "
        "`hookyard account create --email you@example.com`."
    )
    return "\n\n".join(parts)


_RULES = """**Authentication.** Every /v1 route and /mcp take `Authorization: Bearer <key>`: an `hy_live_` API key \
(its account's endpoints only), or on /mcp an `api_token` from /api/start. A missing or unknown key is 401. Every \
error, on /v1 and in MCP tool errors alike, is `{"error": {"code", "message"}}` with a stable snake_case `code` \
(`validation_error` naming the field, `not_found`, `invalid_condition_tree`, `temporary_token`, `rate_limited` \
with `Retry-After`...). A temporary endpoint past its `expires_at` is 410 `endpoint_expired` on every route that \
names it or one of its objects, and left out of lists: call /api/start again for a new one.

**Signatures.** Turn verification on with `PATCH /v1/endpoints/{id}/auth-config` `{"hmac_enabled": true, \
"secret": "<the provider's own signing secret>"}`; no algorithm is configured, the scheme is detected from the \
headers: relay / Standard Webhooks (`relay-signature`/`webhook-signature`, `v1,<base64>` HMAC-SHA256 over \
`<id>.<timestamp>.<body>`), commerce (`X-Shop-Hmac-SHA256`, base64 HMAC of the body), payments \
(`Pay-Signature: t=<unix>,v1=<hex>` over `<t>.<body>`), code host (`sha256=<hex>` of the body). A failure is \
stored as `signature_valid: false` with `signature_failure_reason` (`missing_header`, `malformed_header`, \
`malformed_timestamp`, `timestamp_out_of_tolerance` = a late or replayed delivery, not a wrong secret, \
`signature_mismatch`); with `on_failure: "reject"` the sender gets 401 and nothing is stored. The platform \
`signing_secret` only verifies what this instance signs itself (`send_test_webhook`); rotating it breaks \
verification of a real provider, which keeps its own secret.

**Long poll.** `GET /v1/endpoints/{id}/events/wait?timeout=30` (1 to 55 s; MCP `wait_for_event`) blocks until \
an event matching the filters arrives: 200 `{"event": ...}`, or 204 when the timeout passes (MCP: \
`timed_out: true`, not an error). Events that do not match do not end the wait. To miss nothing, wait with \
`after`: the `cursor` that `POST /v1/endpoints/{id}/test-webhook` (MCP `send_test_webhook`) answers once its \
sample is stored (the wait answers that sample first), or `now` (what is stored from then on). Every answer \
carries the next `cursor` (also the header `hookyard-cursor`, on a 204 too): passed back as `after`, each match is \
answered once, in the order stored, however long ago. Without `after` only events arriving during the call count. \
Filters everywhere: `since`, `until`, `provider`, `type`, `method`, `signature_valid`, `q`.

**Replay.** `POST /v1/events/{id}/replay {"url": ...}` (MCP `replay_event`) re-sends a captured request to any \
URL: method, body and headers verbatim by default, the provider's signature included. `body` and `headers` \
change what is sent; `resign_with` (16+ characters) recomputes the signature over what is actually sent, in \
`signature_header`: by default the event's own signature header (`stripe-signature` for a payments event, \
`svix-signature`, ...: the provider's library verifies it), `x-signature` for an event of no provider scheme. \
The answer is always 200 with the outcome (`success`, `status`, `error`) and the attempt is recorded as a \
delivery with `source: "replay"`.

**Transforms.** A destination's `transform` (create, `PATCH /v1/destinations/{id}`, MCP \
`update_destination_transform`; `null` removes it) is JavaScript defining `function handler(request, context)`: \
`request` is `{method, path, query, headers, body}` (`body` parsed when the event is JSON), `context` is \
`{event: {id, provider, event_type, received_at, labels}, destination: {id, name}}`. Return the request to send \
(any field changed; an object `body` is sent as JSON) or `null` to skip. It runs in a sandbox (V8: no network, \
files, timers or modules; 1 s and 64 MB per call). hookyard's signature is computed over what it returns. A \
delivery records `transform` (`applied`, `skipped`, or `failed` with `error.message`, `error.line` and \
`console.log` output); a failed one is not retried until you fix the code and retry it. Try code first with \
`POST /v1/transformations/test {"transform", "event_id"}` (MCP `test_transformation`): it returns \
`{request, skipped, logs, error, duration_ms}` and sends nothing. A replay takes `transform` too, applied \
before `resign_with`.

**Destinations as apps expect them.** A destination's `auth` authenticates every delivery, by `type`: `basic` \
(`username`, `password`; a URL's `user:pass@` becomes this), `bearer` (`token`), `header` (`name`, `value`), \
`oauth2_client_credentials` (`token_url`, `client_id`, `client_secret`, optional `scope`, `audience`: the token \
is fetched, cached until it expires and fetched again once on a 401; each fetch is in the delivery's `auth`, \
never the token) or `mtls` (`certificate`, `private_key` PEM; https only). `tls_ca` (PEM) replaces the system's \
CAs. Secrets are sealed and never returned: reads show the `type` and non-secret fields; recorded headers show \
`[redacted]`. Example: `{"url": "https://api.example/hooks", "auth": {"type": "oauth2_client_credentials", \
"token_url": "https://auth.example/oauth/token", "client_id": "hookyard", "client_secret": "..."}}`. \
`signing_scheme: "ed25519"` signs as Standard Webhooks `v1a` (`webhook-signature: v1a,<base64>` over \
`{webhook-id}.{webhook-timestamp}.{body}`); receivers verify with `signing_public_key` (`whpk_`, base64 of the \
32-byte key) using libsodium, `cryptography` or Node's `crypto.verify(null, data, key, sig)`. \
`rotate_destination_secret` takes `overlap_s` (default 86400; 0: none): meanwhile both signatures go out, \
space separated. A destination answering 410 is disabled (`state`, `disabled_reason`, `disabled_at`): its \
deliveries are held (no attempt spent) until `enable_destination`; `disable_destination` does it by hand. \
A replay with `destination_id` instead of `url` uses that destination's auth; a replay to a URL never does."""


def _limits(settings: Settings) -> str:
    """This instance's rate limits (``control.support.rate_limits``), from its settings."""
    s = settings
    return (
        f"**Limits.** Each API key, temporary token, inbox link and browser session may make {s.rate_limit_per_s} "
        f"requests a second (bursts of {s.rate_limit_burst}) on /v1, /mcp and the inbox. Replays, destination "
        "tests, test webhooks and delivery retries are also the account's outbound sends, whichever key asks: "
        f"{s.send_rate_per_min} a minute (bursts of {s.send_rate_burst}). Past either: 429 `rate_limited` with "
        "`Retry-After` in seconds; over MCP a send past the account's limit is a tool error `rate_limited` whose "
        "message says when to retry."
    )


def _example(control: str, edge: str, routes: set[tuple[str, str]]) -> str:
    """Steps as prose, each with its own block: a ``#`` comment line would read as a heading to a parser."""
    auth = '-H "Authorization: Bearer $HOOKYARD_API_KEY"'
    json_type = "-H 'content-type: application/json'"
    steps = []
    if ("POST", "/api/start") in routes:
        steps.append(
            ("A temporary endpoint and its MCP token, no account needed:", f"curl -s -X POST {control}/api/start")
        )
    steps += [
        (
            "An endpoint of your account (note its `id` and `ingest_url`):",
            f'curl -s -X POST {control}/v1/endpoints {auth} {json_type} -d \'{{"name": "orders"}}\'',
        ),
        (
            "Send it a correctly signed sample of a provider's webhook; the answer comes once the event is stored, "
            "with its `event_id` and a `cursor`:",
            f"curl -s -X POST {control}/v1/endpoints/$ENDPOINT_ID/test-webhook {auth} {json_type} "
            '-d \'{"provider": "payments", "event_type": "invoice.paid"}\'',
        ),
        (
            'Wait with `after` set to that `cursor`: the answer is the sample itself, `{"event", "cursor"}`. '
            "Call again with `after` set to each answer's `cursor` to receive the events stored after it, none "
            "missed:",
            f'curl -s "{control}/v1/endpoints/$ENDPOINT_ID/events/wait?timeout=30&after=$CURSOR" {auth}',
        ),
        (
            f"What a provider does: any request to the ingest URL (`{edge}/h/<token>`) is captured; the answer "
            '`{"ok": true, "id"}` names the event:',
            f'curl -s -X POST "$INGEST_URL" {json_type} -d \'{{"type": "order.created", "id": "ord_1"}}\'',
        ),
        (
            "Wait again, `after` set to the last answer's `cursor`: the answer is that request, with its `path` "
            "(`/` for the bare ingest URL), headers and exact body:",
            f'curl -s "{control}/v1/endpoints/$ENDPOINT_ID/events/wait?timeout=30&after=$CURSOR" {auth}',
        ),
        (
            "Replay it (`$EVENT_ID`) to your own server:",
            f"curl -s -X POST {control}/v1/events/$EVENT_ID/replay {auth} {json_type} "
            '-d \'{"url": "https://example.com/webhooks"}\'',
        ),
    ]
    return "\n\n".join(
        f"{number}. {text}\n\n{_block('sh', command)}" for number, (text, command) in enumerate(steps, 1)
    )


def _tool_line(control: str, catalog: Catalog, name: str) -> str:
    spec = TOOLS[name]
    route = catalog.routes.get(name)
    hints = ["read-only"] if spec.read_only else []
    hints += ["destructive"] if spec.destructive else []
    hints += ["reaches any URL"] if spec.open_world else []
    where = f"{route[0]} {route[1]}" if route else "MCP only"
    link = _pointer(control, *route) if route else f"{control}/mcp"
    return f"- [{name}]({link}): {spec.summary.rstrip('.')} ({', '.join([where, *hints])})"


def render(app: Litestar) -> str:
    settings = app.state.ctx.settings
    control, edge = settings.control_url, settings.edge_url
    document = app.openapi_schema.to_schema()
    catalog: Catalog = app.state.mcp
    routes = _routes(document)
    present = {(method, path) for method, path, _ in routes}
    tool_of = {route: name for name, route in catalog.routes.items()}

    route_lines = []
    for method, path, operation in routes:
        tool = tool_of.get((method, path))
        summary = TOOLS[tool].summary if tool else _first_sentence(operation.get("description", ""))
        note = f" (MCP: `{tool}`)" if tool else ""
        route_lines.append(f"- [{method} {path}]({_pointer(control, method, path)}): {summary.rstrip('.')}{note}")
    tool_lines = [_tool_line(control, catalog, tool.name) for tool in catalog.tools]

    sections = [
        "# hookyard",
        f"> Webhook capture, routing and replay at {control}. Providers send webhooks to an endpoint's ingest URL "
        f"on {edge}; you read, verify, route and replay what arrived through the JSON API under {control}/v1 "
        f"or the MCP server at {control}/mcp: the same operations, the same Bearer keys.",
        _getting_started(control, present),
        _RULES,
        _limits(settings),
        providers_summary(),
        "**Worked example.**",
        _example(control, edge, present),
        f"**MCP.** Streamable HTTP at `{control}/mcp`, stateless (no session to keep). Authenticate with the "
        "`api_token` from /api/start or an `hy_live_` key. A first session: `create_endpoint` (or the endpoint "
        "of /api/start), `send_test_webhook` (a correctly signed sample of a real provider's event, answered once "
        "it is stored, with a `cursor`), `wait_for_event` with `after` set to that `cursor` (its answer is the "
        "sample itself, with the `cursor` to wait for the next event from), then `replay_event` to your own URL.",
        _mcp_configs(control),
        "## Docs",
        "\n".join(
            [
                f"- [OpenAPI document]({control}/schema/openapi.json): every route below, its parameters, bodies, "
                "answers and error statuses",
                f"- [API reference]({control}/schema): the same document, rendered for reading",
                f"- [MCP server]({control}/mcp): POST JSON-RPC with a Bearer key; `tools/list` answers every tool "
                "below with its input schema; a result is JSON, the route's answer as the OpenAPI document shows "
                "it (and what the tool's description adds)",
            ]
        ),
        "## API routes",
        "\n".join(route_lines),
        "## MCP tools",
        "\n".join(tool_lines),
        "## Optional",
        f"- [Health]({control}/healthz): 200 once Postgres and Redis answer, with the ingest backlog",
    ]
    return "\n\n".join(sections) + "\n"


@get("/llms.txt", include_in_schema=False, media_type="text/markdown", sync_to_thread=False)
def llms_txt(request: Request[Any, Any, Any]) -> str:
    state = request.app.state
    text = state.get("llms_txt")
    if text is None:
        text = state.llms_txt = render(request.app)
    return text
