"""``hookyard open EP``: prints (and opens in a browser) a signed link to an endpoint's inbox page.

A browser cannot send an API key, so the CLI asks the control plane for a short-lived signed link
(``POST /v1/endpoints/{id}/inbox-link``) with the key it reads from ``HOOKYARD_API_KEY`` or, as ``hookyard
up`` leaves it, ``<data dir>/api_key``. A temporary token (``hy_tmp_``) has no /v1 access, so with one the
same operations are asked of /mcp (``create_inbox_link``; ``list_endpoints`` for an ``external_ref`` and for
the default, as ``control.cli.remote_mcp`` asks every command's).
The control plane is the one the other client commands talk to (``--control-url``, ``HOOKYARD_CONTROL_URL``,
the ``hookyard up`` running on ``--data-dir``: ``control.cli.instance``). ``EP`` is an endpoint id or its
``external_ref``; with none, the one ``hookyard listen`` last followed, else the account's only one
(``control.cli.last``: a temporary token's account has the one /api/start made). The link is
printed first, so it also works over SSH or in a container where no browser opens; ``--no-browser`` only
prints.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from control.cli.commands import clients
from control.cli.instance import Target
from shared.errors import HookyardError

if TYPE_CHECKING:
    import httpx

__all__ = ("add_parser", "inbox_link")


def add_parser(commands: Any) -> None:
    opened = commands.add_parser("open", help="print and open a signed link to an endpoint's live inbox page")
    opened.add_argument(
        "endpoint",
        nargs="?",
        metavar="EP",
        help="endpoint id (ep_...) or its external_ref (default: the one hookyard listen last followed, else the "
        "account's only one)",
    )
    opened.add_argument("--no-browser", action="store_true", help="only print the link")
    clients.add_target(opened)
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


def inbox_link(target: Target, key: str, endpoint: str) -> dict[str, Any]:
    """The control plane's ``InboxLink`` answer for ``endpoint`` (an id, or an ``external_ref``)."""
    import httpx  # here: the parser of every command is built without it

    from control.support.client_tls import verify_for

    base = target.url
    if key.startswith("hy_tmp_"):
        return _inbox_link_over_mcp(target, key, endpoint)
    try:
        headers = {"authorization": f"Bearer {key}"}
        verify = verify_for(base, trust_env=True)  # TLS trust only for https (control.support.client_tls)
        with httpx.Client(base_url=base, headers=headers, timeout=10, verify=verify) as client:
            endpoint_id = endpoint
            if not endpoint.startswith("ep_"):
                found = _answer(client.get("/v1/endpoints", params={"external_ref": endpoint}))["endpoints"]
                if not found:
                    raise HookyardError(f"no endpoint has the id or external_ref {endpoint!r}")
                endpoint_id = found[0]["id"]
            link: dict[str, Any] = _answer(client.post(f"/v1/endpoints/{endpoint_id}/inbox-link"))
            return link
    except httpx.HTTPError as exc:
        raise HookyardError(f"cannot reach the control plane at {target}: {type(exc).__name__}: {exc}") from exc


def _inbox_link_over_mcp(target: Target, key: str, endpoint: str) -> dict[str, Any]:
    import asyncio

    from control.cli.remote_mcp import RemoteOverMcp

    async def ask() -> dict[str, Any]:
        remote = RemoteOverMcp(target.url, key, source=target.source)
        try:
            endpoint_id = (await remote.endpoint(endpoint))["id"] if not endpoint.startswith("ep_") else endpoint
            return await remote.tool("create_inbox_link", {"endpoint_id": endpoint_id})
        finally:
            await remote.aclose()

    return asyncio.run(ask())


def _open(args: argparse.Namespace) -> int:
    import webbrowser

    from control.cli.remote import saved_key

    settings = clients.client_settings(args)
    target, key = clients.target(args, settings), saved_key(settings)
    endpoint = args.endpoint or _default_endpoint(target, key, settings.data_dir)
    link = inbox_link(target, key, endpoint)
    print(link["url"])
    print(f"valid until {link['expires_at']}; anyone holding it can open the page until then", file=sys.stderr)
    if not args.no_browser:
        webbrowser.open(link["url"])
    return 0


def _default_endpoint(target: Target, key: str, data_dir: str) -> str:
    """The endpoint the webhook commands default to (``control.cli.last``), over /v1 or, for a temporary
    token, over /mcp."""
    import asyncio

    from control.cli.last import chosen_endpoint

    async def choose() -> str:
        remote = clients.remote(target.url, key, target.source)
        try:
            return str((await chosen_endpoint(remote, data_dir, None, "EP"))["id"])
        finally:
            await remote.aclose()

    return asyncio.run(choose())
