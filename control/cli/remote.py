"""The API as the client commands (``listen``, ``trigger``, ``tail``, ``replay``, ``open``) call it: /v1 over
HTTP with a key, one method per operation they make.

The key is ``HOOKYARD_API_KEY``, else the data dir's ``api_key`` file that ``hookyard up`` writes, so on a
laptop the commands work with no setup; a temporary ``hy_tmp_`` token from ``POST /api/start``, which /v1
refuses, makes the same operations as MCP tool calls (``control.cli.remote_mcp``). The control plane is the one
``control.cli.instance`` finds (``--control-url``, ``HOOKYARD_CONTROL_URL``, the running ``hookyard up``), and
the messages say which, and from where. Answers that are not 2xx become ``ApiError`` carrying the envelope's
code and message; an unreachable or restarting control plane is ``Unreachable``, which ``listen`` and
``tail`` wait out rather than fail on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec

from control.support.client_tls import verify_for
from shared.errors import ApiError, ConfigError, HookyardError, Unreachable
from shared.settings import API_KEY_VARIABLE, Settings

__all__ = ("ApiKey", "Remote", "saved_key")

_RETRYABLE = frozenset({502, 503, 504})


class ApiKey(msgspec.Struct, frozen=True, kw_only=True):
    value: str
    origin: str
    """Where it was read, as the messages name it: ``HOOKYARD_API_KEY``, or the file ``hookyard up`` saved."""


def saved_key(settings: Settings) -> ApiKey:
    """``HOOKYARD_API_KEY``, else the key ``hookyard up`` saved in the data dir."""
    key = os.environ.get(API_KEY_VARIABLE, "").strip()
    if key:
        return ApiKey(value=_header_safe(key, API_KEY_VARIABLE), origin=f"{API_KEY_VARIABLE}'s")
    saved = Path(settings.data_dir) / "api_key"
    if saved.is_file() and (key := saved.read_text().strip()):
        return ApiKey(
            value=_header_safe(key, f"the key file {saved}"), origin=f"the one `hookyard up` saved in {saved}"
        )
    raise ConfigError(
        f"no API key: set {API_KEY_VARIABLE}, or run `hookyard up` once (it saves one in {saved}); "
        "--data-dir or HOOKYARD_DATA_DIR names another data dir"
    )


def _header_safe(key: str, where: str) -> str:
    """``key`` if it can be sent as ``Authorization: Bearer <key>``: visible ASCII only. A key pasted with a line
    break or a space inside was sent anyway, and httpx's refusal ("Illegal header value b'Bearer hy_live_...'")
    printed the whole key under "cannot reach the control plane". The message names where the key was read,
    what is wrong and where, never the key itself."""
    for at, char in enumerate(key, 1):
        if not "!" <= char <= "~":
            what = _KINDS.get(
                char, "a control character" if ord(char) < 0x20 or ord(char) == 0x7F else "a non-ASCII character"
            )
            hint = "was it pasted across lines?" if char in "\r\n" else "a key is letters, digits and _ only"
            at_what = f"{what} at character {at} of {len(key)}"
            raise ConfigError(f"{where} is not a usable API key: it has {at_what} ({hint})")
    return key


_KINDS = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab", " ": "a space"}


def transport_failure(where: str, exc: BaseException, what: str = "") -> HookyardError:
    """What a request that got no answer means. httpx's ``LocalProtocolError`` is a request that could not be
    sent (a header value it refuses), not an unreachable control plane, and its text quotes the header, which
    may be the key: it is named by type only. Anything else is ``Unreachable``, worth waiting out."""
    if type(exc).__name__ == "LocalProtocolError":  # httpx's, or httpx2's (the MCP client's): the same class
        return ConfigError(
            f"the request to the control plane at {where} could not be sent: a header was refused "
            f"(LocalProtocolError); check the API key ({API_KEY_VARIABLE}, or the data dir's api_key file)"
        )
    return Unreachable(f"cannot reach the control plane at {where}: {what}{type(exc).__name__}: {exc}", where=where)


def not_found_for_key(error: ApiError, key: ApiKey | None) -> ApiError:
    """An endpoint the key's account does not see, with why: an endpoint is found only with a key of the
    account that made it, and a first-hour user holds two (``hookyard up``'s ``hy_live_`` key, saved in the
    data dir, and the ``hy_tmp_`` token ``POST /api/start`` answered), so a bare "not found" sent them looking
    for a typo. The message says which key was used and which one to give instead."""
    if key is None:
        return error
    if key.value.startswith("hy_tmp_"):
        other = (
            "a hy_tmp_ token, which finds only the endpoint POST /api/start made for it; an endpoint made with "
            f"`hookyard up`'s hy_live_ key is found with that key (unset {API_KEY_VARIABLE} to use the one it saved)"
        )
    else:
        other = (
            "and an endpoint is found only with a key of the account that made it; one POST /api/start made is "
            f"its hy_tmp_ token's: give that token as {API_KEY_VARIABLE}"
        )
    return ApiError(f"{error}; the key used is {key.origin}, {other}", code=error.code)


def _refusal(status: int, code: str, message: str) -> ApiError:
    """An error answer as the commands meet it: the status is told in the message, and a 429 (the key's rate
    limit, or a proxy's) is one to wait out."""
    return ApiError(f"{message} ({status} {code})", code=code, rate_limited=status == 429)


class Remote:
    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        key_origin: str = "",
        source: str = "",
        timeout_s: float = 30.0,
        relocate: Callable[[], Any] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.key = ApiKey(value=key, origin=key_origin) if key_origin else None
        """The key and where it was read, for the message of an endpoint it does not find."""
        self.source = source
        """Where ``base_url`` came from (``control.cli.instance.Target``), for the messages."""
        self.relocate = relocate
        """Where the instance serves now (a ``Target``, or None: unknown), when ``base_url`` came from its
        record rather than a flag or variable (``control.cli.instance.relocation``); None: never moves."""
        # TLS trust only for an https control plane (control.support.client_tls): loading the CA bundle was
        # ~40 ms of every command's CPU against the plain-HTTP one `hookyard up` serves (ADR 0043). `moved`
        # keeps the scheme: a record's URL is always `hookyard up`'s http one.
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={"authorization": f"Bearer {key}", "user-agent": "hookyard-cli"},
            timeout=httpx.Timeout(timeout_s, connect=5.0),
            trust_env=False,
            verify=verify_for(self.base_url),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(self, method: str, path: str, *, timeout_s: float | None = None, **kwargs: Any) -> httpx.Response:
        """The 2xx answer; ``ApiError`` for an error envelope, ``Unreachable`` for no answer or a 502-504."""
        extra: dict[str, Any] = {} if timeout_s is None else {"timeout": httpx.Timeout(timeout_s, connect=5.0)}
        try:
            resp = await self._client.request(method, path, **kwargs, **extra)
        except httpx.HTTPError as exc:
            raise transport_failure(self._where, exc) from exc
        if resp.is_success:
            return resp
        raise self.refused(resp.status_code, resp.content, resp.reason_phrase)

    def refused(self, status: int, body: bytes, reason: str) -> ApiError | Unreachable:
        """What a non-2xx answer means for the command: a 502-504 is ``Unreachable`` (a restarting control plane
        or its proxy), anything else an ``ApiError`` with the envelope's code and message."""
        if status in _RETRYABLE:
            return Unreachable(f"the control plane at {self._where} answered {status}", where=self._where)
        try:
            error = json.loads(body)["error"]
            return _refusal(status, str(error["code"]), str(error["message"]))
        except (ValueError, KeyError, TypeError):
            return _refusal(status, "http_error", body[:200].decode("utf-8", "replace") or reason)

    def moved(self) -> str | None:
        """After an unreachable answer: reads the instance's record again (``relocate``). If it now serves
        elsewhere (``hookyard up`` restarted on other ports), the calls go there from now on, and the new place
        is returned for the message; else None. Either way ``source`` says what runs now: the ``up`` restarted on
        the same ports (its own pid), or none, so no message names an ``up`` that has stopped."""
        found = self.relocate() if self.relocate is not None else None
        if found is None:
            return None
        self.source = found.source
        if not found.url or found.url.rstrip("/") == self.base_url:
            return None
        self.base_url = found.url.rstrip("/")
        self._client.base_url = self.base_url
        return self._where

    def reconnected(self) -> None:
        """After a call answered following an outage: ``source`` read again for the line that says so. The
        last read was made at the last unreachable answer, before the backoff's sleep, and may predate the
        ``up`` that answered (its record written during the sleep): the line then said no ``up`` was running.
        Kept as it was if the record names another URL (``moved`` goes there at the next failure)."""
        found = self.relocate() if self.relocate is not None else None
        if found is not None and found.url and found.url.rstrip("/") == self.base_url:
            self.source = found.source

    @property
    def _where(self) -> str:
        return f"{self.base_url} (from {self.source})" if self.source else self.base_url

    def unreachable(self, exc: Unreachable) -> str:
        """``exc``'s message naming what runs now (``moved`` read the record again), not what ran when the
        call was made: the first try after ``up`` stopped still carried the stopped ``up``'s pid."""
        return str(exc).replace(exc.where, self._where, 1) if exc.where else str(exc)

    async def ingest_moved(self, endpoint: dict[str, Any]) -> str | None:
        """After an outage: ``endpoint``'s ingest URL as the control plane reports it now (from its public edge
        URL), when it is not the one ``endpoint`` has, which was printed (``hookyard up`` restarted with its edge
        on another port: the old URL takes nothing); None when it is the same, or cannot be asked now."""
        try:
            now: str = (await self.endpoint_by_id(endpoint["id"]))["ingest_url"]
        except (Unreachable, ApiError):
            return None
        return now if now != endpoint["ingest_url"] else None

    # The operations the commands make, one method each: ``RemoteOverMcp`` (``control.cli.remote_mcp``) makes the
    # same ones as MCP tool calls for a temporary token, which /v1 refuses.

    async def endpoint(self, ref: str) -> dict[str, Any]:
        """An endpoint by id, or by its ``external_ref``; not found says which key looked (``not_found_for_key``)."""
        try:
            if ref.startswith("ep_"):
                return await self.endpoint_by_id(ref)
            matches = await self.endpoints_by_ref(ref)
            if not matches:
                raise ApiError(f"no endpoint with id or external_ref {ref!r}", code="not_found")
        except ApiError as exc:
            if exc.code != "not_found":
                raise
            raise not_found_for_key(exc, self.key) from None
        return matches[0]

    async def endpoint_by_id(self, endpoint_id: str) -> dict[str, Any]:
        found: dict[str, Any] = (await self.call("GET", f"/v1/endpoints/{endpoint_id}")).json()
        return found

    async def endpoints_by_ref(self, ref: str) -> list[dict[str, Any]]:
        params = {"external_ref": ref}
        listed: list[dict[str, Any]] = (await self.call("GET", "/v1/endpoints", params=params)).json()["endpoints"]
        return listed

    async def endpoints(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = (await self.call("GET", "/v1/endpoints")).json()["endpoints"]
        return listed

    async def create_temporary_endpoint(self, name: str) -> dict[str, Any]:
        body = {"name": name, "temporary": True}
        created: dict[str, Any] = (await self.call("POST", "/v1/endpoints", json=body)).json()
        return created

    async def latest_event(self, endpoint_id: str) -> dict[str, Any]:
        """The endpoint's latest event; ``ApiError`` ``not_found`` when it has none."""
        found: dict[str, Any] = (await self.call("GET", f"/v1/endpoints/{endpoint_id}/events/latest")).json()
        return found

    async def event(self, event_id: str) -> dict[str, Any]:
        found: dict[str, Any] = (await self.call("GET", f"/v1/events/{event_id}")).json()
        return found

    async def wait(self, endpoint_id: str, after: str, timeout_s: int) -> tuple[dict[str, Any] | None, str]:
        """The first event stored after the position ``after`` (None when ``timeout_s`` passed without one),
        and the position after it (``control.service.events.follow``)."""
        resp = await self.call(
            "GET",
            f"/v1/endpoints/{endpoint_id}/events/wait",
            params={"after": after, "timeout": timeout_s},
            timeout_s=timeout_s + 15,
        )
        return (resp.json()["event"] if resp.status_code == 200 else None), resp.headers["hookyard-cursor"]

    async def events(self, endpoint_id: str, limit: int) -> list[dict[str, Any]]:
        """The endpoint's latest events, newest first."""
        path = f"/v1/endpoints/{endpoint_id}/events"
        listed: list[dict[str, Any]] = (await self.call("GET", path, params={"limit": limit})).json()["events"]
        return listed

    async def deliveries(self, endpoint_id: str, limit: int) -> list[dict[str, Any]]:
        """The endpoint's latest delivery records, newest first."""
        path = f"/v1/endpoints/{endpoint_id}/deliveries"
        listed: list[dict[str, Any]] = (await self.call("GET", path, params={"limit": limit})).json()["deliveries"]
        return listed

    async def send_test_webhook(self, endpoint_id: str, sample: dict[str, Any]) -> dict[str, Any]:
        path = f"/v1/endpoints/{endpoint_id}/test-webhook"
        sent: dict[str, Any] = (await self.call("POST", path, json=sample)).json()
        return sent

    async def replay(self, event_id: str, request: dict[str, Any]) -> dict[str, Any]:
        sent: dict[str, Any] = (await self.call("POST", f"/v1/events/{event_id}/replay", json=request)).json()
        return sent

    async def record_forward(self, event_id: str, report: dict[str, Any], timeout_s: float) -> None:
        await self.call("POST", f"/v1/events/{event_id}/forwards", json=report, timeout_s=timeout_s)

    async def inbox_link(self, endpoint_id: str) -> dict[str, Any]:
        """A signed link to the endpoint's inbox page (``hookyard open``)."""
        link: dict[str, Any] = (await self.call("POST", f"/v1/endpoints/{endpoint_id}/inbox-link")).json()
        return link
