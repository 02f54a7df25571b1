"""The API as the webhook commands (``listen``, ``trigger``, ``tail``) call it: /v1 over HTTP with a key.

The key is ``HOOKYARD_API_KEY``, else the data dir's ``api_key`` file that ``hookyard up`` writes (as for
``hookyard open``), so on a laptop the commands work with no setup; the control plane is the one
``control.cli.instance`` finds (``--control-url``, ``HOOKYARD_CONTROL_URL``, the running ``hookyard up``), and
the messages say which, and from where. Answers that are not 2xx become ``ApiError`` carrying the envelope's
code and message; an unreachable or restarting control plane is ``Unreachable``, which ``listen`` and
``tail`` wait out rather than fail on.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from control.support.client_tls import verify_for
from shared.errors import ApiError, ConfigError, HookyardError, Unreachable
from shared.settings import Settings

__all__ = ("Remote", "api_key", "saved_key")

_RETRYABLE = frozenset({502, 503, 504})


def saved_key(settings: Settings) -> str:
    """``HOOKYARD_API_KEY``, else the key ``hookyard up`` saved in the data dir."""
    key = os.environ.get("HOOKYARD_API_KEY", "").strip()
    if key:
        return key
    saved = Path(settings.data_dir) / "api_key"
    if saved.is_file() and (key := saved.read_text().strip()):
        return key
    raise ConfigError(
        f"no API key: set HOOKYARD_API_KEY, or run `hookyard up` once (it saves one in {saved}); "
        "--data-dir or HOOKYARD_DATA_DIR names another data dir"
    )


def api_key(settings: Settings) -> str:
    """The key ``hookyard open`` reads too (``saved_key``); a temporary ``hy_tmp_`` token is refused here, as
    /v1 would refuse it, saying what to do instead."""
    key = saved_key(settings)
    if key.startswith("hy_tmp_"):
        raise ConfigError(
            "HOOKYARD_API_KEY: a temporary hy_tmp_ token works on /mcp and the inbox only (`hookyard open` takes it;"
            " over MCP, send_test_webhook triggers and replay_event replays); POST /api/register"
            ' {"email": ..., "api_token": "hy_tmp_..."} turns its account into one with a key this command takes'
        )
    return key


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
        source: str = "",
        timeout_s: float = 30.0,
        relocate: Callable[[], Any] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
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
            raise Unreachable(
                f"cannot reach the control plane at {self._where}: {type(exc).__name__}: {exc}", where=self._where
            ) from exc
        if resp.is_success:
            return resp
        if resp.status_code in _RETRYABLE:
            raise Unreachable(f"the control plane at {self._where} answered {resp.status_code}", where=self._where)
        try:
            error = resp.json()["error"]
            raise _refusal(resp.status_code, error["code"], error["message"])
        except (ValueError, KeyError, TypeError):
            raise _refusal(resp.status_code, "http_error", resp.text[:200] or resp.reason_phrase) from None

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

    async def endpoint(self, ref: str) -> dict[str, Any]:
        """An endpoint by id, or by its ``external_ref``."""
        if ref.startswith("ep_"):
            found: dict[str, Any] = (await self.call("GET", f"/v1/endpoints/{ref}")).json()
            return found
        matches = (await self.call("GET", "/v1/endpoints", params={"external_ref": ref})).json()["endpoints"]
        if not matches:
            raise HookyardError(f"no endpoint with id or external_ref {ref!r}")
        found = matches[0]
        return found
