"""Dependencies every handler may ask for by name: ``ctx`` (the process's Context) and ``principal``."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State

from control.db.context import Context, Principal

__all__ = ("provide_ctx", "provide_principal")


def provide_ctx(state: State) -> Context:
    found: Context = state.ctx
    return found


def provide_principal(request: Request[Principal, Any, Any]) -> Principal:
    return request.user
