"""Ids in paths that cannot be ids (garbage, NUL bytes Postgres text cannot hold) are plain 404s."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from tests.conftest import Account

ROUTES = [
    ("GET", "/v1/endpoints/{}"),
    ("PATCH", "/v1/endpoints/{}"),
    ("DELETE", "/v1/endpoints/{}"),
    ("GET", "/v1/endpoints/{}/events"),
    ("GET", "/v1/endpoints/{}/events/latest"),
    ("GET", "/v1/endpoints/{}/deliveries"),
    ("GET", "/v1/endpoints/{}/auth-config"),
    ("GET", "/v1/endpoints/{}/allowlist"),
    ("GET", "/v1/events/{}"),
    ("DELETE", "/v1/allowlist/{}"),
]


@pytest.mark.parametrize("bad_id", ["ep_%00", "evt_%00x", "al_%00", "nope", "ep_01M7YR98QAS6M63A6RMQQFSNN0%00"])
async def test_unshaped_ids_are_404_never_500(client: AsyncTestClient, account: Account, bad_id: str) -> None:
    for method, path in ROUTES:
        response = await client.request(
            method, path.format(bad_id), headers=account.headers, json={} if method == "PATCH" else None
        )
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PATCH", "/v1/endpoints//auth-config"),
        ("GET", "/v1/endpoints//events"),
        ("POST", "/v1/events//replay"),
        ("DELETE", "/v1/destinations//"),
    ],
)
async def test_an_empty_id_is_a_404_naming_the_path_as_sent(
    client: AsyncTestClient, account: Account, method: str, path: str
) -> None:
    """An id variable that came out empty: not an answer about another route (``PATCH /v1/endpoints//auth-config``
    reached the endpoint's own PATCH, id ``auth-config``, and was refused as ``provider: unknown field``)."""
    response = await client.request(method, path, headers=account.headers, json={"provider": None})
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert error["message"] == f"no route for {method} {path} (a path segment is empty)"
