"""The prompt split's calls in the Python clients, against httpx's MockTransport: the
routes and queries sent, the known version sent as If-None-Match and a 304 read as
None, and the answers' types mirroring the server's models."""

from __future__ import annotations

import dataclasses

import httpx

from worker.api import memory_models
from worker.client import AsyncMemoryApi, MemoryApi
from worker.client.memory_api_prompt import PromptBlocks, StableBlock, VolatileBlock

URL = "http://memory.test:8088"
KEY = "mfk_0123456789ab_" + "cd" * 32
STABLE = {"block": "Known facts...\n- [fact] Lives in Lisbon (2026-01-02)",
          "version": "ab" * 16, "count": 1}


def answer(request: httpx.Request) -> httpx.Response:
    timing = {"Server-Timing": "store;dur=1.50, total;dur=2.00"}
    if request.url.path.endswith("/prompt-blocks"):
        return httpx.Response(200, headers=timing, json={
            "stable": STABLE, "volatile": {"block": "More...", "count": 2}})
    if request.headers.get("if-none-match") == f'"{STABLE["version"]}"':
        return httpx.Response(304, headers={"ETag": f'"{STABLE["version"]}"'})
    return httpx.Response(200, headers=timing, json=STABLE)


def test_the_blocking_client_sends_the_routes_and_reads_304_as_none() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return answer(request)

    with MemoryApi(URL, service_key=KEY, transport=httpx.MockTransport(handler)) as api:
        blocks = api.prompt_blocks("a/b", "where?", agent_id="luna")
        assert blocks == PromptBlocks(StableBlock(STABLE["block"], STABLE["version"], 1),
                                      VolatileBlock("More...", 2),
                                      {"store": 1.5, "total": 2.0})
        assert api.stable_block("a/b", known_version=STABLE["version"]) is None
        other = api.stable_block("a/b", known_version="cd" * 16)
        assert other is not None and other.version == STABLE["version"]
    assert sent[0].url.raw_path.decode() == "/users/a%2Fb/prompt-blocks?q=where%3F&agent_id=luna"
    assert "if-none-match" not in sent[0].headers
    assert sent[1].url.path == "/users/a/b/stable-block"
    assert sent[1].headers["if-none-match"] == f'"{STABLE["version"]}"'


async def test_the_async_client_does_the_same() -> None:
    async with AsyncMemoryApi(URL, service_key=KEY, transport=httpx.MockTransport(answer)) as api:
        blocks = await api.prompt_blocks("ada")
        assert blocks.stable.version == STABLE["version"] and blocks.volatile.count == 2
        assert await api.stable_block("ada", known_version=STABLE["version"]) is None
        fresh = await api.stable_block("ada")
        assert fresh is not None and fresh.timing_ms == {"store": 1.5, "total": 2.0}


def test_the_answers_mirror_the_servers_models() -> None:
    for client, server in ((StableBlock, memory_models.StableBlockBody),
                           (VolatileBlock, memory_models.VolatileBlockBody),
                           (PromptBlocks, memory_models.PromptBlocksBody)):
        own = {f.name for f in dataclasses.fields(client)} - {"timing_ms"}
        assert own == set(server.model_fields), client
