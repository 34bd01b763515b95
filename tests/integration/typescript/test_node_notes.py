"""Notes beside facts through the TypeScript HTTP client (clients/typescript/src/test/notes/),
run by node's test runner against the real memory API and a real worker with notes on
(MEMFLEET_NOTES_ENABLED, docs/notes.md) on the LLM stub: a conversation's note listed,
found by search beside the facts, removed; a topic that came back in three sessions
promoted by the worker's own pass, and the fact's notes read back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from api_stub.llm_stub import StubServer
from tests.typescript_node import node_fleet, require_build, run_node
from worker.config import Settings


async def test_the_typescript_client_lists_searches_removes_and_traces_notes(
    settings: Settings, stub: StubServer, tmp_path: Path,
) -> None:
    require_build()
    # The worker promotes every second (its first pass within one), so that the test
    # sees the fleet's own pass promote the notes.
    async with node_fleet(settings, stub, tmp_path, notes_enabled=True,
                          worker_own={"notes_enabled": "true",
                                      "notes_promote_interval_s": "1"}) as env:
        done = await asyncio.to_thread(
            run_node, ["--test", "--test-concurrency=1", "clients/typescript/dist/test/notes/"],
            env, 180)
    print(done.stdout)  # node's own report, with -s or on a failure elsewhere
    assert "# fail 0" in done.stdout and "# pass 2" in done.stdout
