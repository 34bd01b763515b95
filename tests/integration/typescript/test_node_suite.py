"""The TypeScript client's integration tests (clients/typescript/src/test/integration/), run by
node's test runner against real servers: Redis, PostgreSQL, a ``memfleet worker`` on the
LLM stub, and the memory API with service keys (tests/typescript_node.py). Redis mode:
the stored payload byte for byte as Python's, a worker committing the facts, status,
wait, events, merged and replaced lists, every refusal, a Redis down or silent within
about a second. HTTP mode: hand-over, status, wait, known facts, search, typed errors."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from api_stub.llm_stub import StubServer
from tests.typescript_node import ROOT, node_fleet, require_build, run_node
from worker.config import Settings


async def test_the_node_integration_suite_passes_against_real_servers(
    settings: Settings, stub: StubServer, tmp_path: Path,
) -> None:
    require_build()
    async with node_fleet(settings, stub, tmp_path) as env:
        done = await asyncio.to_thread(
            run_node, ["--test", "--test-concurrency=1",
                       "clients/typescript/dist/test/integration/"],
            env)
    print(done.stdout)  # node's own report, with -s or on a failure elsewhere
    assert "# fail 0" in done.stdout and "# pass " in done.stdout


def test_the_bench_script_prints_one_latency_a_hand_over(redis_url: str) -> None:
    require_build()
    done = run_node(["clients/typescript/dist/bench/handover.js", "--redis-url", redis_url,
                     "--requests", "40", "--concurrency", "4"], timeout_s=60)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    latencies = json.loads(lines[0])["latencies_ms"]
    assert len(latencies) == 40 and all(0 < ms < 1000 for ms in latencies)


def test_a_bench_mistake_exits_2_with_one_line() -> None:
    require_build()
    done = subprocess.run(["node", "clients/typescript/dist/bench/handover.js", "--requests", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("bench/handover: ")
