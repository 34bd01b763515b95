"""The openai client's HTTP transport: aiohttp, with errors that say what happened.

The openai client sends through httpx2. Its connection pool (httpcore2) looks at
every pooled connection, asking the socket of each idle one whether the server
closed it, on every request and every response closed (upstream
encode/httpcore#928): with tens of model calls in flight, a large share of a
worker's CPU (docs/bench.md). aiohttp's connector takes an idle connection from
a queue per host instead.

openai ships an aiohttp transport too (``DefaultAioHttpClient``), but it reports
a refused connection or a server that hung up as a timeout. This one maps
aiohttp's errors to the httpx2 errors that name them, which the openai client
then raises as APITimeoutError or APIConnectionError.

Timeouts are httpx's, per request: ``connect`` for opening a connection,
``read`` for each wait on the server. Proxies come from the environment
(HTTPS_PROXY, HTTP_PROXY, NO_PROXY), as with httpx, read once per transport and
host: aiohttp's own ``trust_env`` reads them and the netrc file again on every
request, which a busy worker felt in its throughput (docs/bench.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx2

from worker.log_redaction import redact_urls_in

MAX_CONNECTIONS = 1000  # the openai client's own default
KEEPALIVE_S = 5.0  # httpx's default keep-alive expiry
CHUNK_BYTES = 64 * 1024

# The first match wins: a subclass comes before its base.
_ERRORS: tuple[tuple[type[BaseException], type[httpx2.TransportError]], ...] = (
    (aiohttp.ConnectionTimeoutError, httpx2.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx2.ReadTimeout),
    (asyncio.TimeoutError, httpx2.ReadTimeout),
    (aiohttp.ClientConnectorError, httpx2.ConnectError),
    (aiohttp.ServerDisconnectedError, httpx2.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx2.ReadError),
    (aiohttp.ClientResponseError, httpx2.RemoteProtocolError),
    (aiohttp.ClientError, httpx2.NetworkError),
)


@contextlib.contextmanager
def _translated(request: httpx2.Request) -> Iterator[None]:
    try:
        yield
    except tuple(cause for cause, _ in _ERRORS) as exc:
        error = next(error for cause, error in _ERRORS if isinstance(exc, cause))
        # aiohttp's message can quote the whole URL (ClientResponseError does).
        raise error(redact_urls_in(f"{type(exc).__name__}: {exc}"), request=request) from exc


class _Body(httpx2.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _translated(self._request):
            async for chunk in self._response.content.iter_chunked(CHUNK_BYTES):
                yield chunk

    async def aclose(self) -> None:
        # Back to the pool when the body was read to its end, closed otherwise.
        self._response.release()


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """One aiohttp session, built on the first request (it belongs to the event loop)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._proxies = urllib.request.getproxies_environment()
        self._proxy_of: dict[tuple[str, str], str | None] = {}

    def _proxy(self, url: httpx2.URL) -> str | None:
        """The proxy for ``url`` from the environment, or None; once per scheme and host."""
        key = (url.scheme, url.host)
        if key not in self._proxy_of:
            bypass = urllib.request.proxy_bypass(url.host)
            self._proxy_of[key] = None if bypass else self._proxies.get(url.scheme)
        return self._proxy_of[key]

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, keepalive_timeout=KEEPALIVE_S)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                                  auto_decompress=False)
        return self._session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeout = request.extensions.get("timeout", {})
        body = await request.aread()
        with _translated(request):
            response = await self._open_session().request(
                request.method, str(request.url), headers=request.headers.multi_items(),
                data=body or None, allow_redirects=False,  # httpx2 follows them itself
                proxy=self._proxy(request.url),
                timeout=aiohttp.ClientTimeout(sock_connect=timeout.get("connect"),
                                              sock_read=timeout.get("read")))
        # The body stays compressed: httpx2 decodes it by its Content-Encoding.
        return httpx2.Response(status_code=response.status, headers=response.raw_headers,
                               stream=_Body(response, request), request=request,
                               extensions={"http_version": b"HTTP/1.1"})

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
