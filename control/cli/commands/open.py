"""``hookyard open EP``: prints (and opens in a browser) a signed link to an endpoint's inbox page.

A browser cannot send an API key, so the CLI asks the control plane for a short-lived signed link
(``POST /v1/endpoints/{id}/inbox-link``) with the key it reads from ``HOOKYARD_API_KEY`` or, as ``hookyard
up`` leaves it, ``<data dir>/api_key``. A temporary token (``hy_tmp_``) has no /v1 access, so with one the
same operations are asked of /mcp (``create_inbox_link``; ``list_endpoints`` for an ``external_ref``).
``EP`` is an endpoint id or its ``external_ref``. The link is printed first, so it also works over SSH or in
a container where no browser opens; ``--no-browser`` only prints.
"""

from __future__ import annotations

import argparse
import os
import sys
import webbrowser
from typing import Any

import httpx

from control.cli.remote import saved_key
from shared.errors import HookyardError
from shared.settings import Settings, load_settings

__all__ = ("add_parser", "inbox_link")


def add_parser(commands: Any) -> None:
    opened = commands.add_parser("open", help="print and open a signed link to an endpoint's live inbox page")
    opened.add_argument("endpoint", metavar="EP", help="endpoint id (ep_...) or its external_ref")
    opened.add_argument("--no-browser", action="store_true", help="only print the link")
    opened.set_defaults(handler=_open)


def _answer(resp: httpx.Response) -> Any:
    if resp.is_success:
        return resp.json()
    try:
        error = resp.json()["error"]
        message = f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {resp.status_code}"
    raise HookyardError(f"{resp.request.method} {resp.request.url.path}: {message}")


def inbox_link(settings: Settings, key: str, endpoint: str) -> dict[str, Any]:
    """The control plane's ``InboxLink`` answer for ``endpoint`` (an id, or an ``external_ref``)."""
    base = settings.control_url
    if key.startswith("hy_tmp_"):
        return _inbox_link_over_mcp(base, key, endpoint)
    try:
        with httpx.Client(base_url=base, headers={"authorization": f"Bearer {key}"}, timeout=10) as client:
            endpoint_id = endpoint
            if not endpoint.startswith("ep_"):
                found = _answer(client.get("/v1/endpoints", params={"external_ref": endpoint}))["endpoints"]
                if not found:
                    raise HookyardError(f"no endpoint has the id or external_ref {endpoint!r}")
                endpoint_id = found[0]["id"]
            return _answer(client.post(f"/v1/endpoints/{endpoint_id}/inbox-link"))
    except httpx.HTTPError as exc:
        raise HookyardError(
            f"cannot reach the control plane at {base} ({type(exc).__name__}: {exc}); is `hookyard up` running? "
            "HOOKYARD_PUBLIC_CONTROL_URL or HOOKYARD_CONTROL_PORT name another"
        ) from exc


def _inbox_link_over_mcp(base: str, key: str, endpoint: str) -> dict[str, Any]:
    from control.mcp.client import call_tool

    endpoint_id = endpoint
    if not endpoint.startswith("ep_"):
        found = call_tool(base, key, "list_endpoints", {"external_ref": endpoint})["endpoints"]
        if not found:
            raise HookyardError(f"no endpoint has the id or external_ref {endpoint!r}")
        endpoint_id = found[0]["id"]
    return call_tool(base, key, "create_inbox_link", {"endpoint_id": endpoint_id})


def _open(args: argparse.Namespace) -> int:
    # HOOKYARD_API_KEY is the client's, not a setting of the servers: settings refuse unknown HOOKYARD_* names.
    settings = load_settings({k: v for k, v in os.environ.items() if k != "HOOKYARD_API_KEY"})
    link = inbox_link(settings, saved_key(settings), args.endpoint)
    print(link["url"])
    print(f"valid until {link['expires_at']}; anyone holding it can open the page until then", file=sys.stderr)
    if not args.no_browser:
        webbrowser.open(link["url"])
    return 0
