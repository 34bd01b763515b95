"""The memory tools through the TypeScript executor (clients/typescript/src/test/tools/),
run by node's test runner against the real memory API on PostgreSQL, with the LLM
stub scripted to answer tool calls (docs/tools.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from api_stub.llm_stub import StubServer
from tests.typescript_node import node_fleet, require_build, run_node
from worker.config import Settings


async def test_a_model_uses_the_memory_tools_through_the_typescript_executor(
    settings: Settings, stub: StubServer, tmp_path: Path,
) -> None:
    require_build()
    async with node_fleet(settings, stub, tmp_path) as env:
        done = await asyncio.to_thread(
            run_node, ["--test", "--test-concurrency=1", "clients/typescript/dist/test/tools/"],
            env)
    print(done.stdout)  # node's own report, with -s or on a failure elsewhere
    assert "# fail 0" in done.stdout and "# pass 3" in done.stdout
