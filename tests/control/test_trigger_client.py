"""The test webhook's sends share one client per app lifespan (``control.service.trigger.EdgeClient``): samples
in a row reach the edge on one kept-alive connection, and a cookie the edge sets is not sent back, to it or
on another account's sample. The edge here is a loopback server that counts connections and keeps each
request's head (``public_edge_url`` points at it), answering as an edge refusing the sample would: that is an
answer, so nothing waits for a stored event."""

from __future__ import annotations

import msgspec

from shared.settings import Settings
from tests.conftest import Account
from tests.delivery.transport_support import answering, scripted
from tests.helpers import concurrent_client

REFUSED = (
    b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nset-cookie: seen=1; Path=/\r\n"
    b'content-length: 49\r\n\r\n{"error":{"code":"bad_signature","message":"no"}}'
)


async def test_samples_in_a_row_share_one_connection_and_no_cookie(
    settings: Settings, account: Account, other_account: Account
) -> None:
    async with scripted(answering(REFUSED)) as edge:
        edge_url = edge.url.removesuffix("/hook")
        async with concurrent_client(msgspec.structs.replace(settings, public_edge_url=edge_url)) as client:
            answers = []
            for who in (account, account, other_account):
                endpoint = await client.post("/v1/endpoints", json={"name": "trigger"}, headers=who.headers)
                assert endpoint.status_code == 201, endpoint.text
                sent = await client.post(
                    f"/v1/endpoints/{endpoint.json()['id']}/test-webhook",
                    json={"provider": "payments"},
                    headers=who.headers,
                )
                answers.append(sent)
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [(a.json()["status"], a.json()["accepted"]) for a in answers] == [(401, False)] * 3
    assert len(edge.heads) == 3
    assert edge.connections == 1
    assert not [head for head in edge.heads if b"\r\ncookie:" in head.lower()]
