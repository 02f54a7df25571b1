"""A candidate outbound transport: httpx's ``Request``/``Response`` API over aiohttp (llhttp parser, pool, TLS).

Issue 18 asks whether the hand-written HTTP/1.1 client (``control.delivery.transport``) can give way to a
well-kept protocol library. This adapter is what was measured against it (docs/DECISIONS.md, "The delivery
transport"): the egress policy is checked on the addresses aiohttp connects to (``_EgressConnector``
refuses a name if any address it resolves to is internal, IP literals included), redirects are not followed,
nothing is decompressed by aiohttp (``send`` inflates bounded), and aiohttp's errors become the httpx
exceptions ``send`` already maps to outcomes. It is selected with ``HOOKYARD_DELIVER_TRANSPORT=aiohttp``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx
from multidict import CIMultiDict

from control.delivery.egress import EgressRefusedError, refusal
from control.delivery.transport import MAX_HEAD

__all__ = ("AiohttpTransport",)


class _EgressConnector(aiohttp.TCPConnector):
    """Refuses a host whose resolution includes an internal address (policy ``public``)."""

    def __init__(self, *, check: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._check = check

    async def _resolve_host(self, host: str, port: int, traces: Any = None) -> list[Any]:  # type: ignore[override]
        hosts = await super()._resolve_host(host, port, traces=traces)
        if self._check:
            for info in hosts:
                reason = refusal(str(info["host"]))
                if reason is not None:
                    raise EgressRefusedError(f"egress refused: {reason} (HOOKYARD_EGRESS=public)")
        return hosts


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
            raise httpx.RemoteProtocolError(f"connection closed mid-body: {exc}") from exc
        except TimeoutError as exc:
            raise httpx.ReadTimeout("no response bytes within the read timeout") from exc

    async def aclose(self) -> None:
        self._response.release()


class AiohttpTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        egress: str,
        *,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
        timeout: httpx.Timeout,
        max_connections: int,
        keepalive_expiry: float = 4.0,
    ) -> None:
        self._egress = egress
        self._ssl = ssl_context
        self._timeouts = timeout.as_dict()
        self._max = max_connections
        self._keepalive = keepalive_expiry
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            context = self._ssl if isinstance(self._ssl, ssl.SSLContext) else self._ssl()
            connector = _EgressConnector(
                check=self._egress == "public",
                limit=self._max,
                limit_per_host=0,
                keepalive_timeout=self._keepalive,
                ssl=context,
                ttl_dns_cache=None,
                use_dns_cache=False,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
                max_line_size=MAX_HEAD,
                max_field_size=MAX_HEAD,
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"the URL scheme must be http or https, not {url.scheme!r}")
        t = request.extensions.get("timeout") or self._timeouts
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=_sum(t.get("pool"), t.get("connect")),
            sock_connect=t.get("connect"),
            sock_read=t.get("read"),
        )
        # As httpx made them (host and content-length included, lowercase): aiohttp keeps given names.
        headers = CIMultiDict(
            (k.decode("latin-1"), v.decode("utf-8", "surrogateescape")) for k, v in request.headers.raw
        )
        content = await request.aread()
        try:
            response = await self._client().request(
                request.method,
                str(url),
                headers=headers,
                data=content,
                allow_redirects=False,
                timeout=timeout,
                compress=None,
            )
        except EgressRefusedError:
            raise
        except aiohttp.ConnectionTimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {url.host}:{url.port} in time") from exc
        except aiohttp.SocketTimeoutError as exc:
            raise httpx.ReadTimeout("no response within the read timeout") from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc.os_error) or type(exc).__name__) from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise httpx.RemoteProtocolError("connection closed before a response") from exc
        except aiohttp.ClientResponseError as exc:  # the parser refused what came back
            raise httpx.RemoteProtocolError(f"invalid response: {exc.message}") from exc
        except (aiohttp.ClientOSError, aiohttp.ClientPayloadError) as exc:
            raise httpx.RemoteProtocolError(f"connection closed: {exc}") from exc
        except TimeoutError as exc:
            raise httpx.ReadTimeout("no response within the read timeout") from exc
        except ValueError as exc:  # aiohttp refusing a header value (CR/LF): nothing was sent
            raise httpx.LocalProtocolError(str(exc)) from exc
        if response.status < 200:  # a 1xx aiohttp handed over (101): nothing was asked to switch
            response.close()
            raise httpx.RemoteProtocolError(f"invalid response: {response.status} {response.reason}, never asked for")
        return httpx.Response(
            response.status,
            headers=list(response.raw_headers),
            stream=_Body(response),
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode()},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        await asyncio.sleep(0)


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
