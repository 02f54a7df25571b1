"""The ``SET`` list of an UPDATE from a mapping of column to new value: the one place the column names are
checked against what the table lets change (they are spliced into the SQL, so nothing else may reach it) and
numbered after the statement's own parameters, in one order, so the values line up with them."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import NamedTuple

__all__ = ("Assignments", "assignments")


class Assignments(NamedTuple):
    sql: str
    """``a = $3, b = $4``; empty when nothing is set."""
    values: tuple[object, ...]
    """The new values, in the order of their parameters."""


def assignments(changes: Mapping[str, object], updatable: Set[str], *, first: int) -> Assignments:
    """``changes`` as assignments numbered from ``$first``; a ValueError names the columns not updatable."""
    unknown = set(changes) - updatable
    if unknown:
        raise ValueError(f"not updatable: {sorted(unknown)}")
    names = sorted(changes)
    sql = ", ".join(f"{name} = ${i}" for i, name in enumerate(names, start=first))
    return Assignments(sql, tuple(changes[name] for name in names))
