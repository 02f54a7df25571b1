"""The routes outside /v1 that need no API key: /api/start, /api/register, the inbox page they lead to (with
its data routes) and the static files of the pages.

Registered beside the /v1 router by ``control.app``; they share the per-address limit and documentation
helpers of ``control.api.public``."""

from __future__ import annotations

from litestar import Controller
from litestar.handlers import HTTPRouteHandler

from control.api.inbox.data import InboxDataController
from control.api.inbox.destinations import InboxDestinationsController
from control.api.inbox.page import InboxController
from control.api.register import RegisterController
from control.api.start import StartController
from control.api.static import favicon, static_file

__all__ = ("provisioning_routes",)


def provisioning_routes() -> list[type[Controller] | HTTPRouteHandler]:
    return [
        StartController,
        RegisterController,
        InboxController,
        InboxDataController,
        InboxDestinationsController,
        static_file,
        favicon,
    ]
