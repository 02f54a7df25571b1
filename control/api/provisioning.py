"""The routes outside /v1 that need no API key: /api/start, /api/register and the inbox page they lead to.

Registered beside the /v1 router by ``control.app``; they share the per-address limit and documentation
helpers of ``control.api.public``."""

from __future__ import annotations

from litestar import Controller

from control.api.inbox import InboxController
from control.api.register import RegisterController
from control.api.start import StartController

__all__ = ("provisioning_routes",)


def provisioning_routes() -> list[type[Controller]]:
    return [StartController, RegisterController, InboxController]
