"""A condition on ``meta.provider`` means what the event list's ``provider`` filter means: a provider by its
catalog name or an alias, any case (``github`` is ``code_host``, the name events are stored with)."""

from __future__ import annotations

import pytest

from control.routing.conditions import EventView, InvalidConditionTree, compile_tree, validate
from tests.unit.conditions.support import leaf

PUSH = EventView(meta={"provider": "code_host", "event_type": "push"})
CHARGE = EventView(meta={"provider": "payments"})
UNATTRIBUTED = EventView(meta={"provider": None})


@pytest.mark.parametrize("name", ["github", "GitHub", " code_host "])
def test_equals_takes_an_alias_and_stores_the_catalogs_name(name: str) -> None:
    stored = validate(leaf("meta.provider", "equals", name))
    assert stored == leaf("meta.provider", "equals", "code_host")
    rule = compile_tree(stored)
    assert (rule(PUSH), rule(CHARGE), rule(UNATTRIBUTED)) == (True, False, False)


def test_not_equals_takes_an_alias_too() -> None:
    rule = compile_tree(validate(leaf("meta.provider", "not_equals", "stripe")))
    assert (rule(PUSH), rule(CHARGE), rule(UNATTRIBUTED)) == (True, False, True)


def test_a_tree_stored_with_an_alias_before_matches_all_the_same() -> None:
    """Rules written before names were made the catalog's: compilation reads the alias as its provider."""
    assert compile_tree(leaf("meta.provider", "equals", "github"))(PUSH) is True
    assert compile_tree(leaf("meta.provider", "not_equals", "github"))(PUSH) is False


@pytest.mark.parametrize(("operator", "value"), [("contains", "hub"), ("regex", "^git(hub|lab)$")])
def test_contains_and_regex_are_true_of_a_provider_through_any_of_its_names(operator: str, value: str) -> None:
    rule = compile_tree(validate(leaf("meta.provider", operator, value)))
    assert (rule(PUSH), rule(CHARGE), rule(UNATTRIBUTED)) == (True, False, False)


@pytest.mark.parametrize("value", ["gitlub", None, 3])
def test_an_unknown_provider_is_refused_on_write_with_the_names_it_takes(value: object) -> None:
    with pytest.raises(InvalidConditionTree) as refused:
        validate({"op": "AND", "children": [leaf("meta.provider", "equals", value)]})
    message = str(refused.value)
    assert message.startswith("condition_tree.children[0].value: ")
    assert "is not a provider" in message
    assert {"code_host", "github"} <= set(message.replace(",", " ").split())


def test_a_stored_unknown_provider_still_compiles_as_it_did() -> None:
    """Refused on write only: a stored ``not_equals`` of a name no provider has keeps matching every event."""
    assert compile_tree(leaf("meta.provider", "not_equals", "gitlub"))(PUSH) is True
