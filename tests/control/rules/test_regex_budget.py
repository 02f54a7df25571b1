"""What a rule's patterns may cost the shared flush, refused on write (ADR 0094): a tree's patterns together,
then an endpoint's rules together, each a 400 ``invalid_condition_tree`` naming the field, nothing stored."""

from __future__ import annotations

import random
import string

from control.routing.conditions import MAX_ENDPOINT_REGEX_PROGRAM, MAX_REGEX_PROGRAM, regex_program
from tests.control.rules.support import create, listed, setup
from tests.helpers import assert_error

_random = random.Random(94)


def _leaf(words: int) -> dict[str, str]:
    """A regex leaf of alternated 12-letter literals: about 12 RE2 instructions a word."""
    alternatives = "|".join("".join(_random.choice(string.ascii_lowercase) for _ in range(12)) for _ in range(words))
    return {"field": "body", "operator": "regex", "value": f"(?:{alternatives})"}


async def _refused(client, account, made, tree: dict[str, object], destination_id: str, field: str) -> str:
    """The write's 400 naming ``field``: its message."""
    resp = await create(client, account, made, name="over", condition_tree=tree, destination_ids=[destination_id])
    return str(assert_error(resp, 400, "invalid_condition_tree", field=field)["message"])


async def test_the_trial_tree_is_refused_at_the_leaf_that_crosses_the_budget(client, account):
    made, (d0, _) = await setup(client, account)
    tree = {"op": "OR", "children": [_leaf(76) for _ in range(55)]}  # 55 patterns of ~1,000 characters
    message = await _refused(client, account, made, tree, d0, "condition_tree.children[2].value")
    assert f"more than the {MAX_REGEX_PROGRAM} a tree may run over each event" in message
    assert await listed(client, account, made) == []


async def test_an_endpoints_rules_share_one_budget(client, account):
    made, (d0, d1) = await setup(client, account)
    tree = {"op": "OR", "children": [_leaf(76)]}
    per_rule = regex_program(tree)
    assert per_rule <= MAX_REGEX_PROGRAM
    fits = MAX_ENDPOINT_REGEX_PROGRAM // per_rule
    rules = []
    for i in range(fits):
        resp = await create(client, account, made, name=f"r{i}", condition_tree=tree, destination_ids=[d0])
        assert resp.status_code == 201, resp.text
        rules.append(resp.json()["id"])
    message = await _refused(client, account, made, tree, d1, "condition_tree")
    assert f"more than the {MAX_ENDPOINT_REGEX_PROGRAM} an endpoint's rules" in message
    assert len(await listed(client, account, made)) == fits
    # A rule's own tree is replaced, not added to: rewriting one passes, growing it past the endpoint's does not.
    path = f"/v1/rules/{rules[0]}"
    resp = await client.patch(path, json={"condition_tree": tree}, headers=account.headers)
    assert resp.status_code == 200, resp.text
    grown = {"op": "OR", "children": [*tree["children"], _leaf(76)]}
    resp = await client.patch(path, json={"condition_tree": grown}, headers=account.headers)
    assert_error(resp, 400, "invalid_condition_tree", field="condition_tree")
    # A destination created with its rule spends the same budget.
    resp = await client.post(
        f"/v1/endpoints/{made['id']}/destinations",
        json={"url": "https://example.com/x", "name": "x", "condition_tree": tree},
        headers=account.headers,
    )
    assert_error(resp, 400, "invalid_condition_tree", field="condition_tree")
    plain = {"field": "body.type", "operator": "equals", "value": "paid"}  # no pattern: no budget to spend
    resp = await create(client, account, made, name="plain", condition_tree=plain, destination_ids=[d1])
    assert resp.status_code == 201, resp.text
