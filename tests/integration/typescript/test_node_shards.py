"""The TypeScript client's sharded Redis mode (clients/typescript/src/test/shards/), run by
node's test runner against two real Redis servers and a real ``memfleet worker`` serving
both; then the Python side checks what node handed over: each hand-over is on the shard
Python's ShardMap routes its user to (settled, pending, joining), Python's ShardedRedis
reads the same hand-over numbers, and the worker stored each spread user's fact once.
A shard that is down fails only its users' calls, within the bound."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.helpers import WorkerProcesses, active_texts, worker_env
from tests.openai_stub import openai_settings
from tests.shard_servers import aof_servers, shard_map, sharded
from tests.typescript_node import closed_port, require_build, run_node
from worker.client import ShardedRedis, memory_status
from worker.config import Settings
from worker.protocol.keys import SessionRef
from worker.protocol.shards import ShardMap


async def test_the_sharded_node_suite_routes_as_python_does(
    settings: Settings, stub: StubServer, db: asyncpg.Connection, tmp_path: Path,
) -> None:
    require_build()
    async with aof_servers(tmp_path, "a", "b") as servers:
        two = openai_settings(sharded(settings, servers), stub)
        env = worker_env(two, redis_shards=shard_map(servers), llm_provider="openai",
                         llm_base_url=stub.v1, embed_provider="openai",
                         embed_base_url=stub.v1, queue_name=two.queue_name)
        report_path = tmp_path / "shard-report.json"
        workers = WorkerProcesses(env, tmp_path, 1)
        try:
            done = await asyncio.to_thread(
                run_node, ["--test", "--test-concurrency=1",
                           "clients/typescript/dist/test/shards/"],
                {**env, "MEMFLEET_TEST_SHARDS": shard_map(servers),
                 "MEMFLEET_TEST_QUEUE": two.queue_name,
                 "MEMFLEET_TEST_SHARD_REPORT": str(report_path),
                 "MEMFLEET_TEST_CLOSED_REDIS_URL": f"redis://127.0.0.1:{closed_port()}"})
        finally:
            await asyncio.to_thread(workers.stop)
        print(done.stdout)
        assert "# fail 0" in done.stdout and "# pass 6" in done.stdout

        report = json.loads(report_path.read_text("utf-8"))
        plain = {name: Redis.from_url(server.url) for name, server in servers.items()}
        try:
            assert {r["shard"] for r in report if "fact" in r} == {"a", "b"}
            for entry in report:
                shard_map_ = ShardMap(("a", "b"), frozenset(entry["pending"]),
                                      frozenset(entry["joining"]))
                route = shard_map_.route(entry["user"])
                # Where Python routes the user: its target when it has moved, else home.
                assert entry["shard"] in route.shards, entry
                if not route.moving:
                    assert entry["shard"] == route.home, entry
                session = SessionRef(entry["user"], entry["session"])
                meta = await plain[entry["shard"]].hmget(session.meta_key, "q")
                assert int(meta[0] or 0) == entry["handoverId"], entry
                python = ShardedRedis(plain, pending=entry["pending"], joining=entry["joining"])
                state = await memory_status(python, entry["session"], entry["user"])
                assert state.latest == entry["handoverId"], entry
                if "fact" in entry:
                    assert await active_texts(db, entry["user"]) == [entry["fact"]], entry
        finally:
            for client in plain.values():
                await client.aclose()
