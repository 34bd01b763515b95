"""The openai client's transport (worker.providers.aiohttp_transport) over real TCP
on loopback, against servers that misbehave the ways real endpoints do: each
failure reaches the provider named for what happened, not as a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2
import pytest

from worker.errors import ProviderUnavailable
from worker.protection.retry import RetryPolicy
from worker.providers.aiohttp_transport import AiohttpTransport
from worker.providers.openai_embed import EmbedOptions, OpenAIEmbedder

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return await reader.readexactly(length)


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """A TCP server on a free loopback port answering each connection with ``handler``;
    at the end every connection is closed and every handler has returned."""
    writers: list[asyncio.StreamWriter] = []
    handlers: list[asyncio.Task[None]] = []

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        writers.append(writer)
        handlers.append(task)
        await handler(reader, writer)

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        for writer in writers:
            writer.close()
        await asyncio.wait_for(asyncio.gather(*handlers, return_exceptions=True), 5)
        await server.wait_closed()


async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.close()  # no status line: the server went away mid-request


async def gzipped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    body = gzip.compress(json.dumps({"ok": True}).encode())
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                 b"content-encoding: gzip\r\ncontent-length: " + str(len(body)).encode()
                 + b"\r\n\r\n" + body)
    await writer.drain()
    writer.close()


async def half_a_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                 b"content-length: 1000\r\n\r\n{\"data\": [")
    await writer.drain()
    writer.close()


def embedder(url: str) -> OpenAIEmbedder:
    return OpenAIEmbedder(EmbedOptions(base_url=url + "/v1", api_key="k", model="m", dim=4,
                                       retry=RetryPolicy(max_attempts=1)))


@pytest.mark.parametrize("server", [hang_up, half_a_body], ids=["hung-up", "cut-short"])
async def test_a_server_that_hangs_up_or_cuts_the_body_short_is_a_connection_failure(
    server: Handler,
) -> None:
    async with serving(server) as url:
        provider = embedder(url)
        try:
            with pytest.raises(ProviderUnavailable, match="connection"):
                await provider.embed(["a"])
        finally:
            await provider.aclose()


async def test_the_errors_name_what_happened() -> None:
    client = httpx2.AsyncClient(transport=AiohttpTransport(), timeout=0.5)
    try:
        with pytest.raises(httpx2.ConnectError):
            await client.get("http://127.0.0.1:9/")  # nothing listens: refused
        async with serving(hang_up) as url:
            with pytest.raises(httpx2.RemoteProtocolError):
                await client.post(url, content=b"{}")
        async with serving(half_a_body) as url:
            with pytest.raises(httpx2.ReadError):
                await client.post(url, content=b"{}")

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request(reader)
            await reader.read()  # never answers; until the client gives up and closes
            writer.close()

        async with serving(silent) as url:
            with pytest.raises(httpx2.ReadTimeout):
                await client.post(url, content=b"{}")
    finally:
        await client.aclose()


async def test_a_compressed_answer_is_decoded_once() -> None:
    client = httpx2.AsyncClient(transport=AiohttpTransport(), timeout=5)
    try:
        async with serving(gzipped) as url:
            response = await client.post(url, content=b"{}")
            assert response.json() == {"ok": True}
    finally:
        await client.aclose()


async def test_the_proxy_of_the_environment_is_used_and_no_proxy_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append((await reader.readuntil(b"\r\n")).strip())
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                     b"content-length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()

    async with serving(proxy) as proxy_url, serving(gzipped) as direct_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.delenv("http_proxy", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        client = httpx2.AsyncClient(transport=AiohttpTransport(), timeout=5)
        try:
            # Through the proxy: a host not in NO_PROXY (it never resolves: the proxy answers).
            response = await client.post("http://model.invalid/v1/embeddings", content=b"{}")
            assert response.json() == {}
            assert seen == [b"POST http://model.invalid/v1/embeddings HTTP/1.1"]
            # Not through it: 127.0.0.1 is in NO_PROXY.
            assert (await client.post(direct_url, content=b"{}")).json() == {"ok": True}
            assert len(seen) == 1
        finally:
            await client.aclose()
