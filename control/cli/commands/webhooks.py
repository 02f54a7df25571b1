"""The webhook commands of ``hookyard``: ``listen``, ``trigger``, ``replay`` and ``tail`` (``control.cli.listen``
and ``control.cli.tail`` do the following and forwarding, ``control.cli.remote`` the API calls). Like ``hookyard open``
(``control.cli.commands.open``), they are clients of a running control plane, found as ``control.cli.instance``
says (``--control-url``, ``HOOKYARD_CONTROL_URL``, the ``hookyard up`` running on ``--data-dir``); the key
comes from ``HOOKYARD_API_KEY`` or the data dir. With no endpoint named, ``trigger`` and ``replay`` use the
one ``listen`` last followed (``control.cli.last``), and ``replay`` sends to where ``listen`` forwards: the
first hour needs no id copied by hand."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from control.cli.commands import clients
from control.cli.instance import CONTROL_URL_ENV
from shared.errors import ApiError, ConfigError, HookyardError
from shared.settings import Settings

__all__ = ("PROVIDER_NAMES", "add_parsers")


def _catalog_names() -> dict[str, str]:
    """Every name ``shared.providers`` gives a provider (its own and its aliases) → its own name, read from the
    catalog's JSON with the standard library: importing the samples to build the parser and read PROVIDER
    cost every command's start-up tens of milliseconds."""
    document = json.loads((Path(__file__).resolve().parents[3] / "shared/providers/catalog.json").read_text())
    return {
        name: entry["name"] for entry in document["providers"] for name in (entry["name"], *entry.get("aliases", ()))
    }


PROVIDER_NAMES = _catalog_names()
"""``shared.providers.NAMES`` (tests/onboarding holds them equal)."""
_ALIASES = {
    n: p for n, p in PROVIDER_NAMES.items() if n != p and p in ("identity", "commerce", "payments", "code_host")
}
PROVIDERS_HELP = (
    "identity, commerce, payments, code_host, or by its name: "
    + ", ".join(f"{n} ({p})" for n, p in _ALIASES.items())
    + ", or any provider of docs/reference/providers.md ("
    + ", ".join(
        n for n, p in PROVIDER_NAMES.items() if n == p and p not in ("identity", "commerce", "payments", "code_host")
    )
    + ")"
)
_DEFAULT_EP = "the one hookyard listen last followed, else the account's only one"


def add_parsers(commands: Any) -> None:
    listen = commands.add_parser("listen", help="forward an endpoint's new events to a local URL, like stripe listen")
    listen.add_argument("endpoint", nargs="?", metavar="ENDPOINT", help="endpoint id or external_ref")
    listen.add_argument("--start", action="store_true", help="make a temporary endpoint and print its ingest URL")
    listen.add_argument("--forward-to", required=True, metavar="URL", help="where each event is sent")
    listen.add_argument("--events", metavar="T,..", help="only these event types (comma-separated)")
    listen.add_argument(
        "--resign-with",
        metavar="SECRET",
        help="re-sign each event with this secret, in the provider's own header; kept (0600) in the data dir, so "
        "a restart on the same endpoint and target and `hookyard replay` re-sign with it too",
    )
    listen.add_argument(
        "--verbatim", action="store_true", help="forward as captured, forgetting a secret kept from the run before"
    )
    clients.add_target(listen)
    listen.set_defaults(handler=_listen)

    trigger = commands.add_parser("trigger", help="send a realistic signed sample webhook to an endpoint")
    trigger.add_argument("provider", metavar="PROVIDER", help=PROVIDERS_HELP)
    trigger.add_argument(
        "event_type",
        metavar="EVENT_TYPE",
        nargs="?",
        help="e.g. payment_intent.succeeded (default: the provider's first)",
    )
    trigger.add_argument("--endpoint", metavar="EP", help=f"endpoint id or external_ref (default: {_DEFAULT_EP})")
    trigger.add_argument(
        "--headers",
        choices=("provider", "neutral"),
        default="provider",
        help="the real provider's header names, which its library reads (default), or the spec's neutral ones",
    )
    clients.add_target(trigger)
    trigger.set_defaults(handler=_trigger)

    replay = commands.add_parser(
        "replay",
        help="send a captured event again (default: the latest), re-signed as hookyard listen re-signs; "
        "--verbatim: as captured",
    )
    replay.add_argument("event", nargs="?", metavar="EVENT", help="event id (default: the endpoint's latest event)")
    replay.add_argument("--endpoint", metavar="EP", help=f"whose latest event (default: {_DEFAULT_EP})")
    replay.add_argument("--to", metavar="URL", help="where to send it (default: where hookyard listen forwards)")
    replay.add_argument(
        "--resign-with",
        metavar="SECRET",
        help="re-sign it with this secret, in the provider's own header (default: the secret hookyard listen "
        "re-signs with, if it does)",
    )
    replay.add_argument(
        "--verbatim", action="store_true", help="send it as captured, even where hookyard listen re-signs"
    )
    clients.add_target(replay)
    replay.set_defaults(handler=_replay)

    tail = commands.add_parser("tail", help="follow arriving events and delivery outcomes, one line each")
    tail.add_argument("endpoint", nargs="?", metavar="ENDPOINT", help="endpoint id or external_ref (default: all)")
    clients.add_target(tail)
    tail.set_defaults(handler=_tail)


def _remote(args: argparse.Namespace) -> tuple[Settings, Any]:
    from control.cli.instance import relocation
    from control.cli.remote import saved_key

    settings = clients.client_settings(args)
    found = clients.target(args, settings)
    return settings, clients.remote(found.url, saved_key(settings), found.source, relocation(found, settings))


def _webhook_command(args: argparse.Namespace, command: Callable[[Settings, Any], Coroutine[Any, Any, int]]) -> int:
    settings, remote = _remote(args)

    async def run() -> int:
        try:
            return await command(settings, remote)
        finally:
            await remote.aclose()

    import asyncio  # here, as in control.cli.runtime: the other commands' start-up does not pay for it

    return asyncio.run(run())


def _listen(args: argparse.Namespace) -> int:
    from control.cli.listen import listen

    if args.start and args.endpoint is not None:
        raise ConfigError("listen: name an ENDPOINT or --start for a new temporary one, not both")
    if not args.start and args.endpoint is None:
        raise ConfigError("listen: name an ENDPOINT to follow, or --start for a new temporary one")
    if not args.forward_to.startswith(("http://", "https://")):
        raise ConfigError(f"--forward-to: {args.forward_to!r} is not an http(s) URL")
    if args.verbatim and args.resign_with:
        raise ConfigError("listen: --verbatim or --resign-with, not both")
    types = frozenset(t.strip() for t in (args.events or "").split(",") if t.strip())
    return _webhook_command(
        args,
        lambda settings, remote: listen(
            remote,
            data_dir=settings.data_dir,
            endpoint_ref=args.endpoint,
            forward_to=args.forward_to,
            events=types,
            resign_with=args.resign_with,
            verbatim=args.verbatim,
            again=_listen_again(args, remote),
            replay_flags=_same_instance(args, remote),
        ),
    )


def _same_instance(args: argparse.Namespace, remote: Any) -> list[str]:
    """The flags that find this instance again: a control URL given by flag or variable, a data dir by flag."""
    flags = ["--control-url", remote.base_url] if remote.source in ("--control-url", CONTROL_URL_ENV) else []
    return flags + (["--data-dir", args.data_dir] if args.data_dir else [])


def _listen_again(args: argparse.Namespace, remote: Any) -> list[str]:
    """What ``listen --start``'s "restart with:" line repeats besides the endpoint: the same instance and
    filter. Not the secret: a restart on the same endpoint and target re-signs with the one kept, and a
    secret is never printed."""
    events = ["--events", args.events] if args.events else []
    return ["--forward-to", args.forward_to, *_same_instance(args, remote), *events]


def _tail(args: argparse.Namespace) -> int:
    from control.cli.tail import tail

    return _webhook_command(args, lambda settings, remote: tail(remote, endpoint_ref=args.endpoint))


def _trigger(args: argparse.Namespace) -> int:
    provider = PROVIDER_NAMES.get(args.provider.strip().lower())
    if provider is None:
        raise ConfigError(f"PROVIDER: {args.provider!r} is not a provider; one of {PROVIDERS_HELP}")

    async def send(settings: Settings, remote: Any) -> int:
        from control.cli.last import chosen_endpoint

        endpoint = await chosen_endpoint(remote, settings.data_dir, args.endpoint, "--endpoint")
        body = {"provider": provider, "event_type": args.event_type, "headers": args.headers}
        sent = await remote.send_test_webhook(endpoint["id"], body)
        if sent["accepted"]:
            print(f"sent {provider} {sent['event_type']} to {endpoint['id']}: {sent['status']}, {sent['event_id']}")
            return 0
        refusal = sent["error"] or json.dumps(sent["response"])
        print(f"hookyard: the edge refused the sample: {sent['status']} {refusal}", file=sys.stderr)
        return 1

    return _webhook_command(args, send)


def _replay(args: argparse.Namespace) -> int:
    """The captured request again, as it arrived (``POST /v1/events/{id}/replay``), recorded as a delivery;
    re-signed as ``listen`` re-signs when it does (the secret it keeps in the data dir), unless ``--verbatim``.

    Re-signing is the replay's ``resign_with`` with ``signature_header`` set to the header ``resign`` signs in
    for ``listen --resign-with`` (``shared.signatures.own_signature_header``; for an event of no provider
    scheme that is Standard Webhooks' ``webhook-signature``, where the API's default is ``x-signature``), so a
    replay reaches the app exactly as listen's forward did."""
    if args.to is not None and not args.to.startswith(("http://", "https://")):
        raise ConfigError(f"--to: {args.to!r} is not an http(s) URL")
    if args.verbatim and args.resign_with:
        raise ConfigError("replay: --verbatim or --resign-with, not both")

    async def send(settings: Settings, remote: Any) -> int:
        from control.cli.last import chosen_endpoint, last_listened

        listened = last_listened(settings.data_dir, remote.base_url) or {}
        to = args.to or listened.get("forward_to")
        secret = None if args.verbatim else args.resign_with or listened.get("resign_with")
        if not to:
            raise ConfigError("--to: where to? no `hookyard listen` has forwarded from this data dir to say")
        event = None
        event_id = args.event
        if event_id is None:
            endpoint = await chosen_endpoint(remote, settings.data_dir, args.endpoint, "--endpoint")
            try:
                event = await remote.latest_event(endpoint["id"])
            except ApiError as exc:
                if exc.code != "not_found":
                    raise
                raise HookyardError(f"endpoint {endpoint['id']} has no event yet to replay") from None
            event_id = event["id"]
        body: dict[str, Any] = {"url": to}
        if secret is not None:
            from shared.signatures import own_signature_header

            event = event or await remote.event(event_id)
            text = {k: v for k, v in event["headers"].items() if k not in (event.get("header_encodings") or {})}
            header = own_signature_header(text, event.get("provider"))
            body |= {"resign_with": secret, "signature_header": header}
        sent = await remote.replay(event_id, body)
        status = sent["status"] if sent["status"] is not None else f"ERR {sent['error']}"
        how = "" if secret is None else ", re-signed" if args.resign_with else ", re-signed as listen does"
        print(f"replayed {event_id} to {to}{how}: {status}, {sent['latency_ms']} ms ({sent['id']})")
        return 0 if sent["success"] else 1

    return _webhook_command(args, send)
