"""Labelling, the step of the flush before routing: an endpoint's label rules read each new event.

A rule reads a body path or a header through the same getter conditions use (``conditions.getter``), so a
path means the same in both. The value becomes the label's text the way conditions compare values
(``conditions.text_form``): strings as they are, numbers and booleans as JSON (``2000``, ``true``), objects
and arrays as compact JSON; a missing path or a JSON null adds no label; a text longer than
``MAX_LABEL_VALUE`` characters is cut there, and made storable (``control.records.storable.storable``: a NUL,
which jsonb cannot hold, becomes U+FFFD).
Labels go into the event row (``labels``) and their values into its ``search_text``, so ``q`` finds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from control.records.labels import MAX_LABEL_VALUE
from control.records.storable import EventRow, storable
from control.routing.conditions import MISSING, EventView, Getter, getter, text_form

__all__ = ("LabelRule", "compile_label", "labels_of", "with_labels")


@dataclass(frozen=True, slots=True)
class LabelRule:
    key: str
    color: str
    read: Getter
    reads_body: bool


def compile_label(source: str, path: str, key: str, color: str) -> LabelRule:
    field = f"header.{path.lower()}" if source == "header" else f"body.{path}"
    return LabelRule(key, color, getter(field), source == "body")


def labels_of(rules: Sequence[LabelRule], view: EventView) -> list[dict[str, str]]:
    """The labels the rules give this event, in the rules' order."""
    out = []
    for rule in rules:
        value = rule.read(view)
        if value is MISSING or value is None:
            continue
        text = text_form(value)
        if len(text) > MAX_LABEL_VALUE:
            text = text[:MAX_LABEL_VALUE]
        out.append({"key": rule.key, "value": storable(text), "color": rule.color})
    return out


def with_labels(row: EventRow, labels: list[dict[str, str]]) -> EventRow:
    """The event's row with its labels, their values searchable too."""
    search = row.search_text
    values = "\n".join(label["value"] for label in labels).lower()
    return row._replace(labels=labels, search_text=f"{search}\n{values}" if search else values)
