"""MCP tool descriptions say each thing once: an agent reads the description and every parameter's
description of each tool, and a sentence said twice costs its context and reads as two rules.

"Said twice" is measured, not eyeballed: two clauses (sentences, or the parts of one between semicolons)
repeat each other when most of the shorter one's content words (at least ``MIN_WORDS`` of them, short
words and common ones left out) are in the longer one. Checked between the clauses of a description, and
between the description and each parameter's description.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from control.app import create_app
from control.mcp.catalog import Catalog
from control.mcp.registry import TOOLS
from shared.settings import load_settings

MIN_WORDS = 5
SHARE = 0.7
_COMMON = frozenset(
    re.findall(
        r"\w+",
        """an the and or of to in on for with by at as is are be it its this that these those from but not no any
        every each one their them they was were which when what where who how than then so if else also only all
        own per via into out up off there here has have had do does can may must will would should new""",
    )
)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    app = create_app(load_settings({}, database_url="postgresql://unused", redis_url="redis://unused"))
    built = Catalog(TOOLS)
    built.bind(app.openapi_schema.to_schema())
    return built


def clauses(text: str) -> Iterator[tuple[str, frozenset[str]]]:
    for part in re.split(r"(?<=[.;!?])\s+|\n\s*\n", text):
        words = {w.strip(".-") for w in re.findall(r"[a-z0-9_/#.-]+", part.lower().replace("`", ""))}
        words = {w for w in words if len(w) > 1 and w not in _COMMON}
        if len(words) >= MIN_WORDS:
            yield " ".join(part.split()), frozenset(words)


def repeats(one: frozenset[str], other: frozenset[str]) -> bool:
    shorter, longer = sorted((one, other), key=len)
    return len(shorter & longer) / len(shorter) >= SHARE


def said_twice(description: str, parameters: dict[str, Any]) -> list[str]:
    found = []
    said = list(clauses(description))
    for i, (first, words) in enumerate(said):
        found += [f"twice in the description: {first!r} / {again!r}" for again, w in said[i + 1 :] if repeats(words, w)]
    for name, schema in parameters.items():
        for clause, words in clauses(schema.get("description", "")):
            found += [f"{name!r} says {clause!r}, the description {first!r}" for first, w in said if repeats(words, w)]
    return found


def test_the_measure_finds_a_thing_said_twice() -> None:
    """The measure itself: a restatement in other words is found, two different statements are not."""
    assert said_twice(
        "Lists the account's endpoints, newest first. Deleted ones are gone.",
        {"order": {"description": "The account's endpoints are listed newest first, always"}},
    )
    assert said_twice(
        "Adds a destination URL to the endpoint for deliveries. Adds destination URLs to an endpoint, for deliveries.",
        {},
    )
    assert not said_twice(
        "Lists the account's endpoints, newest first.",
        {"external_ref": {"description": "Only the endpoint with this caller-chosen stable name"}},
    )


def test_each_tool_says_each_thing_once(catalog: Catalog) -> None:
    problems = {
        tool.name: found
        for tool in catalog.tools
        if (found := said_twice(tool.description or "", tool.input_schema.get("properties", {})))
    }
    assert not problems, "\n".join(f"{name}: {line}" for name, lines in problems.items() for line in lines)


def test_a_mirrored_tool_states_its_summary_or_its_operation_not_both(catalog: Catalog) -> None:
    """The summary (the tool's line in /llms.txt) is the operation's description said shorter."""
    for tool in catalog.tools:
        spec = TOOLS[tool.name]
        if spec.operation is not None and tool.description != spec.doc:
            assert spec.summary not in " ".join((tool.description or "").split()), tool.name
