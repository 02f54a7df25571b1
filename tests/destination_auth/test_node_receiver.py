"""A Node receiver (``tests/node/v1a_receiver.mjs``, Node's own ``crypto.verify`` with Ed25519, as the spec
describes; no npm package verifies ``v1a``) is a real destination: it answers 204 only to deliveries whose
``v1a`` signature verifies with the destination's public key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from control.db.context import Context
from tests.destination import make_task, running, settled
from tests.helpers import create_endpoint
from tests.node_packages import node_executable

RECEIVER = Path(__file__).resolve().parents[1] / "node" / "v1a_receiver.mjs"


async def _receiver(public_key: str) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        "node", str(RECEIVER), public_key, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    port = int((await asyncio.wait_for(process.stdout.readline(), 10)).decode())
    return process, f"http://127.0.0.1:{port}/webhooks"


async def test_a_node_receiver_verifies_v1a(ctx: Context, client: Any, account: Any) -> None:
    node_executable()  # fails, naming it, without Node.js
    endpoint = (await create_endpoint(client, account.headers))["id"]
    resp = await client.post(
        f"/v1/endpoints/{endpoint}/destinations",
        json={"url": "http://127.0.0.1:9/placeholder", "signing_scheme": "ed25519"},
        headers=account.headers,
    )
    created = resp.json()
    right, right_url = await _receiver(created["signing_public_key"])
    wrong, wrong_url = await _receiver("whpk_" + "A" * 43 + "=")  # another key: nothing verifies
    try:
        made = {}
        for name, url in (("right", right_url), ("wrong", wrong_url)):
            patched = await client.patch(
                f"/v1/destinations/{created['id']}", json={"url": url}, headers=account.headers
            )
            assert patched.status_code == 200
            made[name] = await make_task(ctx, url, endpoint_id=endpoint, destination_id=created["id"], body=b'{"a":1}')
            async with running(ctx):
                await settled(ctx, made[name]["task"], "succeeded" if name == "right" else "failed")
        for process, expected in ((right, True), (wrong, False)):
            assert process.stdout is not None
            line = json.loads(await asyncio.wait_for(process.stdout.readline(), 10))
            assert line["verified"] is expected
    finally:
        for process in (right, wrong):
            process.kill()
            await process.wait()
