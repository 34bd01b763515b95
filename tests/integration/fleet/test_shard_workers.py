"""`memfleet worker` with several Redis shards: one process serves every shard (one ARQ
worker each) or those named with --shard, and on SIGTERM stops on all of them."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from tests.helpers import active_texts, eventually, user_msg, worker_env
from tests.shard_servers import aof_servers, shard_map, sharded
from worker.client import ShardedRedis, schedule_memory_persistence
from worker.config import Settings
from worker.protocol import keys
from worker.protocol.shards import ShardMap

QUEUE = "memfleet:queue"


def _worker(env: dict[str, str], log: Path, *shards: str) -> subprocess.Popen[bytes]:
    args = [a for name in shards for a in ("--shard", name)]
    return subprocess.Popen([sys.executable, "-m", "worker.cli", "worker", *args],
                            env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


async def test_one_process_serves_the_shards_it_is_given_and_stops_on_all(
    settings: Settings, db: asyncpg.Connection, tmp_path: Path
) -> None:
    async with aof_servers(tmp_path, "a", "b") as servers:
        two = sharded(settings, servers)
        env = worker_env(two, redis_shards=shard_map(servers))
        route = ShardMap.from_settings(two)
        user_a = next(f"user{i}" for i in range(50) if route.route(f"user{i}").home == "a")
        user_b = next(f"user{i}" for i in range(50) if route.route(f"user{i}").home == "b")
        plain = {name: Redis.from_url(server.url) for name, server in servers.items()}
        client = ShardedRedis.from_settings(two)
        only_a = _worker(env, tmp_path / "only-a.log", "a")
        both: subprocess.Popen[bytes] | None = None
        try:
            await schedule_memory_persistence(client, "s1", user_a, [user_msg("I use Zig.")])
            await schedule_memory_persistence(client, "s1", user_b, [user_msg("I use Go.")])

            async def done(user: str) -> bool:
                return await active_texts(db, user) == [
                    "Uses Zig" if user == user_a else "Uses Go"]

            await eventually(lambda: done(user_a), 60)
            await asyncio.sleep(1.0)
            assert not await done(user_b)  # nobody serves b yet
            assert await plain["b"].hlen(keys.workers_key(QUEUE)) == 0
            both = _worker(env, tmp_path / "both.log")
            await eventually(lambda: done(user_b), 60)

            async def beats(count_a: int, count_b: int) -> bool:
                return (await plain["a"].hlen(keys.workers_key(QUEUE)),
                        await plain["b"].hlen(keys.workers_key(QUEUE))) == (count_a, count_b)

            await eventually(lambda: beats(2, 1), 30)
            both.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(both.wait, 30) == 0
            await eventually(lambda: beats(1, 0), 10)  # its heartbeats went from both shards
            only_a.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(only_a.wait, 30) == 0
        finally:
            for proc in (only_a, both):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
            await client.aclose()
            for c in plain.values():
                await c.aclose()
