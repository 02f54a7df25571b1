"""Send a realistic, signed sample of a provider's webhook to one of the caller's endpoints.

So that a whole flow (capture, verification, labels, routing, replay) can be tried without the real
provider: the sample (``shared.samples``) carries the real provider's header names, which its own library
reads (``headers: "neutral"`` asks for the spec's), is signed with the secret the endpoint verifies with
(the provider's own when one is set through auth-config, else the platform signing secret), in the
endpoint's custom signature header when it has one, and posted to the endpoint's public ingest URL, through
the edge like any provider's request. Signed even when verification is off, as the providers always sign;
the edge proves it with the endpoint's secret even then (``edge.trust``), so it reads "verified".

The ingest URL is this deployment's own (``HOOKYARD_PUBLIC_EDGE_URL``), never the caller's, so the egress
policy, which guards outbound requests to URLs callers choose, does not apply. The edge's answer is the
outcome, refusals included (401 signature, 403 allowlist): they are what the caller is testing. Only an
edge that cannot be reached is reported as ``error``. An expired endpoint is refused before anything is sent
(410 ``endpoint_expired``, as on every route that names it). Each sample is one of the account's outbound
sends (``control.support.rate_limits``), as a replay is. An accepted sample is answered once it is stored, with
the ``cursor`` to wait for it from (``control.support.until_stored``).

Every sample of a process goes through one client (``EdgeClient``, closed with the app's lifespan):
a new ``httpx.AsyncClient`` per sample cost ~45 ms of CPU (its TLS context loads the CA bundle, which a
plain-HTTP edge never needs, and which it now builds only for an https one) and a new connection to the edge
each time.
"""

from __future__ import annotations

import json
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx

from control.db import endpoints as db_endpoints
from control.db.context import Context, Principal
from control.records.trigger import TriggerOutcome, TriggerSample
from control.service.endpoints import ingest_url, require_endpoint, require_write
from control.support import sealing
from control.support.client_tls import verify_for
from control.support.long_poll import Wakeups
from control.support.parameter_messages import not_one_of
from control.support.rate_limits import charge_send
from control.support.until_stored import watch_storing
from shared import samples
from shared.errors import NotFoundError, ValidationError
from shared.providers import NAMES

__all__ = ("EdgeClient", "send_test_webhook")

_TIMEOUT_S = 10.0


class EdgeClient:
    """The one ``httpx.AsyncClient`` a control process sends its samples with, made on the first sample (a
    lifespan that sends none, as most of the tests' in-process ones, pays nothing) and closed with the app's
    lifespan. It keeps no cookie (an edge's answer to one account's sample must not ride along with another's),
    follows no redirect and reads no proxy from the environment. Its TLS trust is built only when the edge's
    URL (``url``, the deployment's one) is https (``control.support.client_tls``)."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None

    def get(self, url: str) -> httpx.AsyncClient:
        if self._client is None:
            cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))  # no domain allowed: none kept
            self._client = httpx.AsyncClient(
                timeout=_TIMEOUT_S, trust_env=False, follow_redirects=False, cookies=cookies, verify=verify_for(url)
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def send_test_webhook(
    ctx: Context,
    wakeups: Wakeups,
    edge: EdgeClient,
    principal: Principal,
    endpoint_id: str,
    data: TriggerSample,
) -> TriggerOutcome:
    """For ``POST /v1/endpoints/{id}/test-webhook``, the MCP tool and ``hookyard trigger`` alike; ``edge``
    is the app's ``EdgeClient``."""
    require_write(principal)
    provider = samples.provider_name(data.provider)
    if provider is None:
        raise ValidationError(not_one_of("provider", sorted(NAMES), data.provider))
    names = samples.EVENT_TYPES[provider]
    event_type = names[0] if data.event_type is None else data.event_type
    if event_type not in names:
        named = data.provider if data.provider == provider else f"{data.provider} ({provider})"
        raise ValidationError(f"event_type: {samples.not_offered(provider, event_type, named)}")
    async with ctx.pool.acquire() as conn:
        endpoint = await require_endpoint(conn, principal, endpoint_id)
        rows = await db_endpoints.edge_rows(conn, [endpoint["id"]])
    if not rows:  # deleted between the two reads
        raise NotFoundError(f"endpoint {endpoint_id!r} not found")
    config = rows[0]
    url = ingest_url(ctx, endpoint["ingest_token"])
    sample = samples.sample(
        provider,
        event_type,
        secret=sealing.open_provider_secret(ctx, config["id"], config["secret"])
        or sealing.open_endpoint_secret(ctx, config["id"], config["signing_secret"]),
        header_name=config["header_name"],
        family="vendor" if data.headers == "provider" else "neutral",
        url=url,
    )
    await charge_send(ctx, principal)
    outcome = TriggerOutcome(
        endpoint_id=endpoint["id"],
        provider=provider,
        event_type=event_type,
        ingest_url=url,
        idempotency_key=sample.idempotency_key,
        signature_header=sample.signature_header,
        status=None,
        accepted=False,
        event_id=None,
        stored=False,
        cursor=None,
        response=None,
        error=None,
    )
    async with watch_storing(ctx, wakeups, endpoint["id"]) as storing:
        try:
            answer = await edge.get(url).post(url, content=sample.body, headers=sample.headers)
        except httpx.HTTPError as exc:
            outcome.error = f"the edge at {url} could not be reached: {type(exc).__name__}: {exc}"
            return outcome
        outcome.status = answer.status_code
        outcome.accepted = answer.is_success
        outcome.event_id = answer.headers.get("x-hookyard-event-id")
        try:
            outcome.response = answer.json()
        except json.JSONDecodeError:
            outcome.response = answer.text[:2000] or None
        if outcome.accepted and outcome.event_id:
            outcome.stored, outcome.cursor = await storing.position(outcome.event_id)
    return outcome
