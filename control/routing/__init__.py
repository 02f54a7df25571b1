"""Routing: which events a rule forwards. ``conditions`` validates condition trees on write and compiles
them into predicates the flush worker runs on every event."""

from __future__ import annotations

from control.routing.conditions import (
    MISSING,
    EventView,
    InvalidConditionTree,
    Predicate,
    compile_tree,
    text_form,
    validate,
)

__all__ = ("MISSING", "EventView", "InvalidConditionTree", "Predicate", "compile_tree", "text_form", "validate")
