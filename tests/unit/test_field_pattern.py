"""The erasure request's OpenAPI pattern for ``field`` and the condition validator accept the same fields, so
a client generating requests from the document never sends one the validator refuses (or the reverse)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control.records.fields import FIELD_PATTERN, META_KEYS
from control.routing.conditions import validate
from shared.errors import InvalidConditionTree

PATTERN = re.compile(FIELD_PATTERN)

SAMPLES = [
    "body", "body.data", "body.data.object.customer", "body.a.0.b", "body.", "body..x", "body.x.", "bodyx",
    "header.x-shop-domain", "header.X-Shop", "header.", "header.a b", "header.a:b", "meta.label.customer",
    "meta.label.", "meta.label.a b", "meta.label." + "k" * 65, "meta.", "meta.nope", "meta.provider", "0", "",
    "headerx.y", "meta.label.k_1-2", *(f"meta.{key}" for key in META_KEYS),
]  # fmt: skip


def _accepted(field: str) -> bool:
    try:
        validate({"field": field, "operator": "exists"})
    except InvalidConditionTree:
        return False
    return True


@pytest.mark.parametrize("field", SAMPLES)
def test_the_pattern_and_the_validator_agree(field: str) -> None:
    assert bool(PATTERN.fullmatch(field)) == _accepted(field)


@given(
    st.one_of(
        st.text(max_size=30),
        st.builds(lambda kind, rest: f"{kind}.{rest}", st.sampled_from(["body", "header", "meta", "meta.label"]),
                  st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)),
    )
)  # fmt: skip
def test_they_agree_on_generated_fields(field: str) -> None:
    assert bool(PATTERN.fullmatch(field)) == _accepted(field)
