"""The openai client of an endpoint, shared by the providers that call it.

Each client keeps its own pool of connections, and the pool drops a
connection idle for longer than its keep-alive expiry (httpx's default, 5 s).
With a client per provider, a job after such a pause opened a connection (a
TLS handshake, on a real endpoint) for every provider it called; sharing one,
it opens one (docs/bench.md, the real path). Each provider passes its own
timeout with every request, so chat and embeddings may share a client.
"""

from __future__ import annotations

import httpx2
import openai

from worker.providers.aiohttp_transport import AiohttpTransport


def new_client(base_url: str, api_key: str, timeout_s: float) -> openai.AsyncOpenAI:
    # On aiohttp (worker.providers.aiohttp_transport): httpx2's own pool costs a busy
    # worker CPU on every request. The library's own retries are off:
    # worker.protection.retry does them, bounded and logged.
    http = httpx2.AsyncClient(transport=AiohttpTransport(), timeout=timeout_s,
                              follow_redirects=True)
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                              timeout=timeout_s, http_client=http)


class SharedClient:
    """A client and the count of providers using it; closed when the last one lets go."""

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self.client = client
        self._users = 0

    def take(self) -> openai.AsyncOpenAI:
        self._users += 1
        return self.client

    async def release(self) -> None:
        self._users -= 1
        if self._users <= 0:
            await self.client.close()


class Clients:
    """One SharedClient per (base URL, key), built on first use."""

    def __init__(self) -> None:
        self._built: dict[tuple[str, str], SharedClient] = {}

    def of(self, base_url: str, api_key: str, timeout_s: float) -> SharedClient:
        key = (base_url, api_key)
        if key not in self._built:
            self._built[key] = SharedClient(new_client(base_url, api_key, timeout_s))
        return self._built[key]
