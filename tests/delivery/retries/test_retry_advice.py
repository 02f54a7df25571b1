"""What ``retry_delivery`` says to do with a delivery it does not retry must work when done: a destination
test's event is synthetic (never stored), so the answer is to run the test again, not to replay its event
(a 404). Over the official MCP client, which is where the advice was followed and failed."""

from __future__ import annotations

from tests.delivery.retries.support import endpoint_with_destinations
from tests.destination import Destination
from tests.events_support import live_app
from tests.mcp_client import call, connected


async def test_a_destination_tests_retry_points_to_running_the_test_again(
    settings, account, destination: Destination
) -> None:
    async with live_app(settings) as (client, app):
        made = await endpoint_with_destinations(client, account, destination.url)
        dst = made["destinations"][0]
        async with connected(app, account.key) as mcp:
            failed, tested = await call(mcp, "test_destination", destination_id=dst)
            assert not failed, tested
            assert tested["success"], tested
            is_error, refused = await call(mcp, "retry_delivery", delivery_id=tested["id"])
            assert is_error
            message = refused["error"]["message"]
            assert "a destination test (source 'manual_test')" in message, message
            assert f"test_destination (destination_id '{dst}')" in message, message
            assert f"POST /v1/destinations/{dst}/test" in message, message
            assert "/replay" not in message, message
            # What the message says works, on both surfaces:
            failed, again = await call(mcp, "test_destination", destination_id=dst)
            assert (failed, again["success"]) == (False, True), again
        resp = await client.post(f"/v1/destinations/{dst}/test", headers=account.headers)
        assert (resp.status_code, resp.json()["success"]) == (200, True), resp.text
        v1 = await client.post(f"/v1/deliveries/{tested['id']}/retry", headers=account.headers)
        assert (v1.status_code, v1.json()["error"]["message"]) == (400, message)
    assert len(destination.requests) == 3
