"""Condition trees: the text form of values (control.routing.conditions.text) that text operators compare."""

from __future__ import annotations

from typing import Any

import pytest

from control.routing.conditions import text_form


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("as is", "as is"),
        ("", ""),
        (2000, "2000"),
        (-7, "-7"),
        (20.5, "20.5"),
        (2000.0, "2000.0"),
        (10**30, "1000000000000000000000000000000"),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        ({"a": 1, "b": [1, "x", None]}, '{"a":1,"b":[1,"x",null]}'),
        ([], "[]"),
        ({}, "{}"),
        ("é ünïcode", "é ünïcode"),
    ],
)
def test_text_form(value, text):
    assert text_form(value) == text


def test_text_form_never_raises():
    class Foreign:
        def __repr__(self) -> str:
            return "<foreign>"

    circular: list[Any] = []
    circular.append(circular)
    assert text_form(Foreign()) == '"<foreign>"'
    assert isinstance(text_form(circular), str)
    assert text_form(["\ud800"]) == '["\ud800"]'
    assert text_form(float("nan")) == "null"
