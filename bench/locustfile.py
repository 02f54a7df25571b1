"""Locust scenarios: providers sending signed webhooks at a chosen rate, and developers/agents using the
control plane at the same time. Driven by ``python -m bench load`` (which starts the stack and checks the
ledger afterwards); the plan (endpoints, secrets, API key, hosts) comes in ``HOOKYARD_LOAD_PLAN``.

- ``Provider``: picks an endpoint and one of the four providers, builds that provider's body with a unique
  id, signs it with the provider's real header names, and POSTs it to the edge. Every answer is written to
  this process's file in the plan's ``answers_dir`` (``bench.load_ledger``): a 200 with the event id it gave
  back and the idempotency key sent, anything else as refused. The ledger is checked from those files, not
  from locust's aggregated counts (which miss the last seconds of a multi-process run).
- ``Developer``: lists with filters, reads latest, pages with the cursor, long-polls briefly, reads one
  event; the kind of traffic a developer or an agent makes while webhooks flow.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import random
from pathlib import Path

from locust import FastHttpUser, between, constant_throughput, task

from bench.load_ledger import AnswerLog
from shared.signatures import sign

PLAN = json.loads(os.environ.get("HOOKYARD_LOAD_PLAN", "{}"))
_counter = itertools.count()
_logs: dict[int, AnswerLog] = {}
"""This process's answer file, opened on its first answer: locust forks its worker processes after importing
this module, and each must write its own."""


def _answers() -> AnswerLog:
    pid = os.getpid()
    if pid not in _logs:
        _logs[pid] = AnswerLog(Path(PLAN["answers_dir"]))
        atexit.register(_logs[pid].close)
    return _logs[pid]


# The providers' own event names (docs/reference/events.md) and how each carries its type and id.
_PROVIDERS = {
    "payments": ("stripe", ["invoice.paid", "payment_intent.succeeded", "charge.refunded"]),
    "identity": ("svix", ["user.created", "session.created", "organization.created"]),
    "commerce": ("shopify", ["orders/create", "orders/paid", "products/update"]),
    "code_host": ("github", ["push", "pull_request", "issues"]),
}


def _webhook(provider: str) -> tuple[bytes, dict[str, str], str]:
    """(body, headers, idempotency key) for one delivery of ``provider``, signed with its real header names;
    the key is where the provider carries it (``shared.attribution``), unique to this request."""
    unique = f"{os.getpid()}-{next(_counter)}"
    event_type = random.choice(_PROVIDERS[provider][1])
    secret = PLAN["secrets"][provider]
    headers = {"content-type": "application/json"}
    if provider in ("payments", "identity"):
        body = json.dumps({"id": f"evt_{unique}", "type": event_type, "data": {"amount": random.randint(1, 9999)}})
        family = "vendor" if provider == "payments" else random.choice(["standard", "vendor"])
        headers |= sign(provider, body.encode(), secret, msg_id=f"msg_{unique}", header_family=family)
        return body.encode(), headers, f"evt_{unique}" if provider == "payments" else f"msg_{unique}"
    elif provider == "commerce":
        body = json.dumps({"id": unique, "total_price": "12.00", "currency": "EUR"})
        headers |= sign("commerce", body.encode(), secret, header_family="vendor")
        headers |= {"x-shopify-topic": event_type, "x-shopify-webhook-id": unique}
    else:
        body = json.dumps({"ref": "refs/heads/main", "after": unique})
        headers |= sign("code_host", body.encode(), secret, header_family="vendor")
        headers |= {"x-github-event": event_type, "x-github-delivery": unique}
    return body.encode(), headers, unique


class Provider(FastHttpUser):
    host = PLAN.get("edge_url", "http://127.0.0.1:8080")
    wait_time = constant_throughput(float(PLAN.get("rate_per_user", 50)))
    weight = int(PLAN.get("provider_weight", 9))

    @task
    def send(self) -> None:
        endpoint = random.choice(PLAN["endpoints"])
        provider = endpoint["provider"]
        body, headers, key = _webhook(provider)
        with self.client.post(
            f"/h/{endpoint['token']}", data=body, headers=headers, name=f"ingest {provider}", catch_response=True
        ) as response:
            event_id = response.json().get("id") if response.status_code == 200 else None
            if event_id:
                _answers().acked(endpoint["id"], event_id, key)
            else:
                _answers().refused(endpoint["id"], key, response.status_code or 0)
                response.failure(f"status {response.status_code}: {(response.text or '')[:200]}")


class Developer(FastHttpUser):
    host = PLAN.get("control_url", "http://127.0.0.1:8000")
    wait_time = between(0.05, 0.2)
    weight = int(PLAN.get("developer_weight", 1))

    default_headers = {"authorization": f"Bearer {PLAN.get('api_key', '')}"}  # noqa: RUF012 - locust's API

    def _endpoint(self) -> dict:
        return random.choice(PLAN["developer_endpoints"])

    @task(4)
    def list_filtered(self) -> None:
        endpoint = self._endpoint()
        params = random.choice([{}, {"provider": endpoint["provider"]}, {"q": "amount"}, {"method": "POST"}])
        self.client.get(f"/v1/endpoints/{endpoint['id']}/events", params={**params, "limit": 20}, name="list")

    @task(2)
    def page(self) -> None:
        endpoint = self._endpoint()
        first = self.client.get(f"/v1/endpoints/{endpoint['id']}/events", params={"limit": 50}, name="page 1")
        cursor = first.json().get("next_cursor") if first.status_code == 200 else None
        if cursor:
            self.client.get(
                f"/v1/endpoints/{endpoint['id']}/events", params={"limit": 50, "cursor": cursor}, name="page 2"
            )

    @task(2)
    def latest_then_get(self) -> None:
        endpoint = self._endpoint()
        with self.client.get(
            f"/v1/endpoints/{endpoint['id']}/events/latest", name="latest", catch_response=True
        ) as latest:
            if latest.status_code == 404:  # nothing stored on this endpoint yet: a correct answer
                latest.success()
        if latest.status_code == 200:
            self.client.get(f"/v1/events/{latest.json()['id']}", name="get event")

    @task(1)
    def wait(self) -> None:
        endpoint = self._endpoint()
        with self.client.get(
            f"/v1/endpoints/{endpoint['id']}/events/wait", params={"timeout": 2}, name="wait", catch_response=True
        ) as response:
            if response.status_code in (200, 204):
                response.success()
