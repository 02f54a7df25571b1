"""docs/reference/providers.md and the providers section of /llms.txt, made from the catalog (and, for the
walk-through of pointing Slack, Zoom and Meta at an ingest URL, ``first_contact.md`` beside it).

So the page cannot drift from what the edge does: tests/repo checks the committed page equals
:func:`render`; ``python -m shared.providers.reference > docs/reference/providers.md`` writes it again after
a provider is added.
"""

from __future__ import annotations

from pathlib import Path

from shared.providers.catalog import CATALOG
from shared.providers.model import Provider, Scheme, Where

__all__ = ("render", "scheme_text", "summary")

_HANDSHAKES = {
    "slack_url_verification": "`url_verification`: the `challenge` echoed",
    "zoom_url_validation": "`endpoint.url_validation`: `plainToken` and its HMAC-SHA256 (hex) with the secret",
    "meta_hub_challenge": "GET `hub.challenge` echoed when `hub.verify_token` is the endpoint's `verify_token`",
    "graph_validation_token": "`validationToken` query parameter echoed as text",
    "dropbox_challenge": "GET `challenge` echoed as text",
    "x_crc": "GET `crc_token`: `response_token` = `sha256=` base64 HMAC-SHA256 with the secret",
    "twitch_callback_verification": "`webhook_callback_verification`: the `challenge` echoed (signed)",
    "asana_hook_secret": "`X-Hook-Secret` echoed in the answer's header",
    "okta_verification": 'GET `x-okta-verification-challenge` answered as `{"verification": ...}`',
    "discord_ping": 'PING (`type` 1) answered `{"type": 1}` (signed; a bad signature is 401)',
    "body_challenge_echo": "body `challenge` echoed as JSON",
}
_BUILTIN = {
    "identity": "HMAC-SHA256 base64 of `{id}.{timestamp}.{body}` in `svix-signature`/`webhook-signature` "
    "(`v1,`), key from `whsec_`",
    "commerce": "HMAC-SHA256 base64 of the body in `x-shopify-hmac-sha256`",
    "payments": "HMAC-SHA256 hex of `{t}.{body}` in `stripe-signature` (`t=`, `v1=`)",
    "code_host": "HMAC-SHA256 hex of the body in `x-hub-signature-256` (`sha256=`)",
}

_BUILTIN_HEADERS = {
    "identity": "`svix-id`/`webhook-id`/`relay-id` (and their `*-signature`)",
    "commerce": "`x-shopify-topic`/`x-shop-topic`",
    "payments": "`stripe-signature`/`pay-signature`",
    "code_host": "`x-github-event`/`x-codehost-event`",
}


def scheme_text(provider: Provider) -> str:
    """One line saying how ``provider`` signs."""
    scheme: Scheme = provider.scheme
    if scheme.kind == "builtin":
        return _BUILTIN[provider.name]
    if scheme.kind == "token":
        where = f"body `{scheme.body_token}`" if scheme.body_token else f"`{scheme.header}`"
        return f"shared token in {where}, compared in constant time"
    if scheme.kind == "basic":
        return f"Basic credentials in `{scheme.header}` (secret `user:password`), constant time"
    if scheme.kind == "jws":
        return (
            f"JWS (HS256) in `{scheme.header}` with the secret, claims `iss` = `{scheme.issuer}` and "
            f"`{scheme.body_hash_claim}` = the body's SHA-256 (hex)"
        )
    algorithm = {"hmac": f"HMAC-{scheme.algorithm.upper()}", "ed25519": "Ed25519", "ecdsa_p256": "ECDSA P-256"}
    signed = "the body" if scheme.signed == "{body}" else f"`{scheme.signed}`"
    where = f"body `{scheme.signature_body}`" if scheme.signature_body else f"`{scheme.header}`"
    text = f"{algorithm[scheme.kind]} {scheme.encoding} of {signed} in {where}"
    if scheme.key == "sha1":
        text += ", keyed with the SHA-1 of the secret"
    if scheme.label:
        text += f" (`label{scheme.label}signature`)"
    if scheme.body_hash_query:
        text += f"; a non-form body bound by the URL's `{scheme.body_hash_query}`"
    if scheme.items is not None:
        text += f" (`{scheme.items.timestamp}=`, `{scheme.items.signature}=`)"
    elif scheme.prefix:
        text += f" (`{scheme.prefix}`)"
    if scheme.timestamp_header or scheme.timestamp_body:
        text += ", time in " + (
            f"`{scheme.timestamp_header}`" if scheme.timestamp_header else f"body `{scheme.timestamp_body}`"
        )
    if scheme.tolerance_s is not None:
        text += f", ±{scheme.tolerance_s} s"
    if scheme.kind in ("ed25519", "ecdsa_p256"):
        text += "; the secret is the public key"
    if scheme.signature_body and "{body}" not in scheme.signed:
        text += "; the provider signs only these fields, not the rest of the body"
    return text


def _where(where: Where | None) -> str:
    if where is None:
        return "none"
    if where.header is not None:
        return f"header `{where.header}`"
    if where.body is not None:
        return "body " + " or ".join(f"`{path}`" for path in where.body.split("|"))
    return f"`{where.fixed}`"


def _proof(provider: Provider) -> str:
    """Which proof the provider's test has, plainly: its own library, its published example, or neither."""
    example = f"published example ([source]({provider.example}))" if provider.example else ""
    if provider.proof.startswith("library:"):
        libraries = ", ".join(f"`{name.strip()}`" for name in provider.proof[8:].split(","))
        return f"official library {libraries}" + (f"; {example}" if example else "")
    if provider.proof.startswith("community:"):
        libraries = ", ".join(f"`{name.strip()}`" for name in provider.proof[10:].split(","))
        return f"community library {libraries} (the provider publishes none)" + (f"; {example}" if example else "")
    if provider.proof == "example":
        return example
    return "documented rule only"


def _proof_counts(providers: list[Provider]) -> str:
    """How many of ``providers`` rest on each kind of proof, in one sentence."""
    kinds = [p.proof.partition(":")[0] for p in providers]
    named = (("library", "official library"), ("community", "community library"), ("example", "published example"))
    counts = ", ".join(f"{label} {kinds.count(kind)}" for kind, label in named)
    return f"Of the {len(providers)} beyond the four kinds: {counts}, documented rule only {kinds.count('documented')}."


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    beyond = [p for p in CATALOG.values() if p.kind is None]
    lines = [
        "# Providers",
        "",
        f"hookyard recognises, verifies and answers the handshake of {len(CATALOG)} providers: the spec's four "
        f"kinds and {len(beyond)} more. This page is generated from `shared/providers/catalog.json` "
        "(`python -m shared.providers.reference`); tests/repo keeps it in sync.",
        "",
        "- **Recognised by**: a header that names the provider (one dict lookup at the edge). A provider with none, "
        "or a GET challenge that carries none, is named per endpoint: `PATCH /v1/endpoints/{id}/auth-config` "
        '`{"provider": "meta"}` (MCP `update_auth_config`). Names are any case; aliases: '
        + ", ".join(f"`{alias}` → `{p.name}`" for p in CATALOG.values() for alias in p.aliases)
        + ".",
        "- **Secret**: the provider's signing secret in auth-config `secret`; for Ed25519 and ECDSA P-256 its public "
        "key (PEM, or the provider's hex or base64), 16-1024 characters (a shorter shared token is refused with a "
        "400). Set it before you paste the ingest URL into the provider: until then the endpoint's own signing "
        "secret is what a signed handshake is checked with, and Slack's or Zoom's fails as `signature_mismatch`. "
        "`verify_token` is what Meta echoes in its GET challenge. As "
        "for the four kinds, checks decide nothing until auth-config sets `hmac_enabled: true`: before that a "
        "request that passes reads `signature_valid: true` and one that fails reads `null` (not checked); after "
        "it, `on_failure` decides: `reject` (the default) answers 401 and stores nothing, `accept_log` stores it "
        "with `signature_valid: false` and its reason ([signatures](signatures.md)).",
        "- **Signed URL**: providers whose template has `{url}` sign the URL they posted to: the edge uses "
        "`HOOKYARD_PUBLIC_EDGE_URL` when set, else `X-Forwarded-Proto`/`X-Forwarded-Host`, else its own scheme "
        "and `Host`.",
        "- **Handshake**: answered at the edge once the request is stored; the event is marked `handshake: true`, "
        "shown in the inbox, never delivered. A signed handshake (Slack's `url_verification`, Zoom's "
        "`endpoint.url_validation`, Twitch's verification, Discord's PING) whose signature fails is 401 whatever "
        "`hmac_enabled` and `on_failure` say (Discord registers a URL only if its forged probe is refused), and "
        "stored marked failed unless `hmac_enabled` is on with `on_failure: reject`. A keyed handshake whose key "
        "is not set or does not match is no handshake: Meta's GET with another `hub.verify_token` (or none set "
        "on the endpoint) is captured as any GET, refused 401 `missing_header` with `hmac_enabled` on (it "
        'carries no signature) or answered `{"ok": true}` with it off, and Meta reports that the verification '
        "failed; Zoom's or X's without a secret likewise.",
        "- **Proven with**: what the test that shows the edge accepts a request and refuses a tampered copy rests "
        "on. *Official library*: the provider's own library (PyPI or npm) signs the request or verifies it "
        "(`tests/edge/test_provider_libraries*.py`). *Community library*: the provider publishes neither, and the "
        "maintained community library its developers use verifies instead (same tests). *Published example*: "
        "a worked example the provider publishes "
        "(secret, request, signature, in its documentation or its own SDK's tests; for a shared token, the "
        "request with the token it carries) is replayed as published, and a copy with what it vouches for "
        "changed (a body byte; for a token, the token) is refused "
        "(`tests/edge/test_provider_examples.py`, values and licences in `tests/data/provider_examples`). "
        "*Documented rule only*: no library and no published example was found; the test signs with hookyard's "
        "own reading of the provider's documented rule, so a misreading would pass it. " + _proof_counts(beyond),
        "",
        (Path(__file__).parent / "first_contact.md").read_text().rstrip("\n"),
        "",
        "## Every provider",
        "",
        "| provider | recognised by | event type | idempotency key | scheme | handshake | proven with |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in CATALOG.values():
        recognised = _BUILTIN_HEADERS.get(p.name) or ", ".join(f"`{h}`" for h in p.recognise) or "endpoint's `provider`"
        handshake = _HANDSHAKES[p.handshake] if p.handshake else ""
        row = (
            f"`{p.name}` ({p.title})",
            recognised,
            _where(p.event_type),
            _where(p.idempotency),
            scheme_text(p),
            handshake,
            _proof(p),
        )
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def summary() -> str:
    """The providers in one paragraph, for /llms.txt."""
    names = ", ".join(f"`{p.name}`" + (f" ({', '.join(p.aliases)})" if p.aliases else "") for p in CATALOG.values())
    shakes = ", ".join(f"`{p.name}`" for p in CATALOG.values() if p.handshake)
    return (
        f"**Providers** ({len(CATALOG)}): {names}. Each is recognised by its headers (or named per endpoint in "
        "auth-config `provider`), verified with auth-config `secret` (a public key for Ed25519/ECDSA), and "
        "`test-webhook`/`send_test_webhook` send its sample. Handshakes answered at the edge (stored with "
        f"`handshake: true`, never delivered): {shakes}."
    )


if __name__ == "__main__":
    print(render(), end="")
