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

if TYPE_CHECKING:
    from control.cli.remote import ApiKey

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


def _open(args: argparse.Namespace) -> int:
    import asyncio
    import webbrowser

    from control.cli.remote import saved_key

    settings = clients.client_settings(args)
    target, key = clients.target(args, settings), saved_key(settings)
    link = asyncio.run(inbox_link(target, key, args.endpoint, settings.data_dir))
    print(link["url"])
    print(f"valid until {link['expires_at']}; anyone holding it can open the page until then", file=sys.stderr)
    if not args.no_browser:
        webbrowser.open(link["url"])
    return 0


async def inbox_link(target: Target, key: ApiKey, endpoint: str | None, data_dir: str) -> dict[str, Any]:
    """The control plane's ``InboxLink`` answer for ``endpoint`` (an id or an ``external_ref``; None: the one
    the webhook commands default to, ``control.cli.last``), asked as every client command asks: over /v1 with
    an API key, over /mcp with a temporary token (``clients.remote``), so its errors read as theirs."""
    from control.cli.last import chosen_endpoint

    remote = clients.remote(target.url, key, target.source)
    try:
        found = await chosen_endpoint(remote, data_dir, endpoint, "EP")
        return await remote.inbox_link(str(found["id"]))
    finally:
        await remote.aclose()
