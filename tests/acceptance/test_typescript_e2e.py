"""End to end in TypeScript: the example chat server
(clients/typescript/src/examples/chat_server.ts) hands turns over once through Redis and
once through the memory API, waits until each is stored, and reads the known-facts block
back over HTTP, against a real worker (LLM stub), PostgreSQL, Redis and the API. Every
fact of both sessions is there, once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg

from api_stub.llm_stub import StubServer
from tests.helpers import active_texts
from tests.typescript_node import node_fleet, require_build, run_node
from worker.config import Settings

FACTS = ["Lives in Lisbon", "Uses TypeScript", "Works at Initech"]


async def test_a_typescript_chat_server_reads_back_what_it_handed_over(
    settings: Settings, tmp_path: Path, db: asyncpg.Connection,
) -> None:
    require_build()
    with StubServer(dim=settings.embed_dim) as stub:
        seen = await _chat(settings, stub, tmp_path)
        calls = [r["path"] for r in stub.recorded()].count("/v1/chat/completions")
    assert seen["redis_covered"] is True and seen["http_covered"] is True, seen
    block = seen["block"]
    for fact in FACTS:
        assert block.count(fact) == 1, f"{fact!r} once in:\n{block}"
    assert seen["count"] == len(FACTS)
    assert sorted(await active_texts(db, "tess")) == sorted(FACTS)
    assert calls >= 2, "the facts came through the LLM stub"


async def _chat(settings: Settings, stub: StubServer, tmp_path: Path) -> dict[str, Any]:
    async with node_fleet(settings, stub, tmp_path) as env:
        env = {**env, "MEMFLEET_API_URL": env["MEMFLEET_TEST_API_URL"],
               "MEMFLEET_SERVICE_KEY": env["MEMFLEET_TEST_SERVICE_KEY"]}
        done = await asyncio.to_thread(
            run_node, ["clients/typescript/dist/examples/chat_server.js", "tess"], env, 120)
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen
