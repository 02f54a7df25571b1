"""What the retry modules share: an endpoint with destinations, each forwarded every event by a rule of its
own (rows and loops are in tests/delivery/retries_support.py)."""

from __future__ import annotations

from typing import Any


async def endpoint_with_destinations(client: Any, account: Any, url: str, *, destinations: int = 1) -> dict[str, Any]:
    """An endpoint with ``destinations`` destinations at ``url`` (``?n`` tells them apart), each forwarded
    every event by its own rule."""
    h = account.headers
    endpoint = (await client.post("/v1/endpoints", json={"name": "retries"}, headers=h)).json()
    made: dict[str, Any] = {"endpoint": endpoint["id"], "destinations": [], "rules": []}
    for n in range(destinations):
        body = {"url": f"{url}?{n}", "name": f"sink {n}", "forward_all": True}
        resp = await client.post(f"/v1/endpoints/{endpoint['id']}/destinations", json=body, headers=h)
        assert resp.status_code == 201, resp.text
        made["destinations"].append(resp.json()["id"])
        made["rules"].append(resp.json()["rule"]["id"])
    return made
