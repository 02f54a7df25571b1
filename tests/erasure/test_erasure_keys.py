"""An erased value that was also an object key leaves every learned output (issue 42): a map keyed by customer id
is learned as fields named by the ids, so after the erasure no field, version, diff, generated language or
stored state may name it, and later batches do not bring it back as a ``removed`` change; and the activity
log never printed the ingest path the value may have been in."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from control.schemas.state import decode_state
from control.support import activity
from tests.erasure.conftest import erase, make_endpoint, run_erasures, stored
from tests.helpers import db
from tests.schemas.support import record

ALICE = "cus_alice.v2"  # a dot too: a key with one is escaped inside a path
OTHER = "cus_bob"


def _balances(*keys: str, n: int = 0) -> dict[str, Any]:
    return {
        "type": "balance.updated",
        "n": n,
        "customer": keys[0] if keys else "none",
        "balances": {k: {"amount": n, "currency": "eur"} for k in keys},
    }


def _names_alice(text: str) -> bool:
    """Whether ``text`` names ALICE in any spelling generated code may give it (``cus_alice``, ``CusAliceV2``)."""
    squashed = re.sub(r"[^a-z0-9]", "", text.lower())
    return "cusalice" in squashed


async def _outputs(client: Any, account: Any, schema_id: str) -> dict[str, str]:
    base = f"/v1/schemas/{schema_id}"
    out = {}
    for path in (
        base,
        f"{base}/versions",
        f"{base}/diff?from=1&to=2",
        f"{base}/types?lang=typescript",
        f"{base}/types?lang=zod",
        f"{base}/types?lang=json-schema",
        f"{base}/types?framework=next",
        f"{base}/types?framework=express",
        f"{base}/types?lang=typescript&version=1",
        f"{base}/types?lang=typescript&union=true",
        "/v1/schemas",
    ):
        resp = await client.get(path, headers=account.headers)
        assert resp.status_code == 200, (path, resp.text)
        out[path] = resp.text
    return out


async def test_a_value_that_was_a_key_leaves_every_schema_output(client, account, other_account, ctx) -> None:
    endpoint = await make_endpoint(client, account, label=False)
    await stored(ctx, endpoint, [_balances(OTHER, n=n) for n in range(110)])  # version 1, past the warm-up
    await stored(ctx, endpoint, [_balances(ALICE, OTHER, n=n) for n in range(3)])  # version 2 adds the key
    theirs = await make_endpoint(client, other_account, label=False)  # another account's same key stays
    await stored(ctx, theirs, [_balances(ALICE, n=n) for n in range(3)])

    listed = (await client.get(f"/v1/endpoints/{endpoint}/schemas", headers=account.headers)).json()
    (schema,) = listed["schemas"]
    assert schema["version"] == 2
    before = await _outputs(client, account, schema["id"])
    assert all(_names_alice(text) for path, text in before.items() if "version=1" not in path), before

    job = await erase(client, account, endpoint, "body.customer", ALICE)
    await run_erasures(ctx)
    done = (await client.get(f"/v1/erasures/{job['id']}", headers=account.headers)).json()
    assert (done["state"], done["schemas_scrubbed"]) == ("completed", 1), done

    after = await _outputs(client, account, schema["id"])
    for path, text in after.items():
        assert not _names_alice(text), (path, text[:2000])
    assert "balances.cus_bob" in after[f"/v1/schemas/{schema['id']}"]
    async with db(ctx.settings.database_url) as conn:
        state = decode_state(await conn.fetchval("SELECT state FROM schemas WHERE id = $1", schema["id"]))
        assert not any("alice" in path for path in [*state.paths, *state.keys])
        versions = await conn.fetch("SELECT fields::text FROM schema_versions WHERE schema_id = $1", schema["id"])
        assert versions
        assert not any("alice" in v["fields"] for v in versions)
        mine = await conn.fetchval("SELECT state FROM schemas WHERE id = $1", schema["id"])
        assert b"alice" not in mine

    # More traffic without the key: no version is cut for its going (a "removed" change would name it).
    await stored(ctx, endpoint, [_balances(OTHER, n=n) for n in range(5)])
    again = await _outputs(client, account, schema["id"])
    assert not any(_names_alice(text) for text in again.values())
    assert (await client.get(f"/v1/schemas/{schema['id']}", headers=account.headers)).json()["version"] == 2

    other = (await client.get(f"/v1/endpoints/{theirs}/schemas", headers=other_account.headers)).json()
    assert _names_alice(str(other))  # not their erasure


@pytest.mark.parametrize(
    ("path", "query", "shown"),
    [("cus_alice/orders", "", "POST /…"), ("", "customer=cus_alice", "POST /…"), ("", "", "POST /  ")],
)
def test_the_activity_line_never_shows_the_ingest_path_or_query(caplog, path: str, query: str, shown: str) -> None:
    caplog.set_level(logging.INFO, logger="hookyard.activity")
    activity.use_clock(activity.LoopClock())
    records = [record("ep_1", {"type": "x"}, path=path, query=query)]
    activity.stored(records, {records[0].id})
    (line,) = [r.getMessage() for r in caplog.records if r.name == "hookyard.activity"]
    assert shown in line, line
    assert "alice" not in line


def test_the_edge_error_line_names_the_route_not_the_token_or_path() -> None:
    from edge.respond import _route_of

    assert _route_of({"raw_path": b"/h/tok_secret/cus_alice/orders?x=1"}) == "/h/…"
    assert _route_of({"path": "/healthz"}) == "/healthz"
    assert _route_of({"raw_path": b"/\n\x00forged line/x"}) == "/forgedline/…"
