"""The TypeScript client's integration tests (typescript/src/test/integration/), run by
node's test runner against real servers: Redis, PostgreSQL, a ``memfleet worker`` on the
LLM stub, and the memory API with service keys (tests/typescript_node.py). Redis mode:
the stored payload byte for byte as Python's, a worker committing the facts, status,
wait, events, merged and replaced lists, every refusal, a Redis down or silent within
about a second. HTTP mode: hand-over, status, wait, known facts, search, typed errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

from api_stub.llm_stub import StubServer
from tests.typescript_node import node_fleet, require_build, run_node
from worker.config import Settings


async def test_the_node_integration_suite_passes_against_real_servers(
    settings: Settings, stub: StubServer, tmp_path: Path,
) -> None:
    require_build()
    async with node_fleet(settings, stub, tmp_path) as env:
        done = await asyncio.to_thread(
            run_node, ["--test", "--test-concurrency=1", "typescript/dist/test/integration/"],
            env)
    print(done.stdout)  # node's own report, with -s or on a failure elsewhere
    assert "# fail 0" in done.stdout and "# pass " in done.stdout
