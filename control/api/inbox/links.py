"""POST /v1/endpoints/{id}/inbox-link: a short-lived signed URL that opens the endpoint's inbox page in a
browser, which cannot send an API key; POST .../inbox-link/rotate: ends every such link (and the page cookies
they were traded for) at once (``control.service.inbox_links``)."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency

from control.api.openapi import errors
from control.api.params import EndpointId
from control.db.context import Context, Principal
from control.records.inbox import InboxLink
from control.service import inbox_links as service

__all__ = ("EndpointInboxLinkController",)


class EndpointInboxLinkController(Controller):
    path = "/endpoints/{endpoint_id:str}/inbox-link"
    tags = ("endpoints",)

    @post("/", operation_id="CreateInboxLink", status_code=200, responses=errors(401, 404, 410, 429))
    async def create_inbox_link(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> InboxLink:
        """A URL that opens the endpoint's inbox page in a browser for 15 minutes; opening it sets a cookie
        for that page only (12 hours) and drops the token from the address bar. Anyone holding the URL can
        open the page until it expires: give it only to the person who should see the events. Made with a
        read-only key, the page cannot replay. Nothing is stored; `hookyard open EP` prints one."""
        return await service.create_inbox_link(ctx, principal, endpoint_id)

    @post("/rotate", operation_id="RotateInboxLinks", status_code=200, responses=errors(401, 403, 404, 410, 429))
    async def rotate_inbox_links(
        self, ctx: NamedDependency[Context], principal: NamedDependency[Principal], endpoint_id: EndpointId
    ) -> InboxLink:
        """Revokes every inbox link of the endpoint handed out so far (a temporary endpoint's `inbox_url`
        included) and every page opened with one: their next request is refused. Answers the link that
        replaces them: for a temporary endpoint, valid until the endpoint expires (its new `inbox_url`), else
        for 15 minutes. Use it when a link reached someone who should not see the events."""
        return await service.rotate_inbox_links(ctx, principal, endpoint_id)
