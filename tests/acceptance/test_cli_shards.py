"""The CLI with several Redis shards (MEMFLEET_REDIS_SHARDS): `memfleet enqueue` hands a
user over on the user's shard, `memfleet worker --burst` drains every shard, `consent
erase` clears the user on every shard, `shards list` and `route` say where."""

from __future__ import annotations

import json
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from tests.acceptance.test_cli import memfleet
from tests.helpers import active_texts, worker_env
from tests.shard_servers import aof_servers, shard_map, sharded
from worker.config import Settings
from worker.protocol import keys
from worker.protocol.shards import ShardMap

USERS = [f"user{i}" for i in range(6)]


async def test_enqueue_drain_and_erase_route_by_user(
    settings: Settings, db: asyncpg.Connection, tmp_path: Path
) -> None:
    async with aof_servers(tmp_path, "a", "b") as servers:
        two = sharded(settings, servers)
        env = worker_env(two, redis_shards=shard_map(servers))
        env.pop("MEMFLEET_REDIS_URL")  # the map alone, as an operator would set it
        homes = {user: ShardMap.from_settings(two).route(user).home for user in USERS}
        assert set(homes.values()) == {"a", "b"}
        messages = tmp_path / "messages.json"
        messages.write_text(json.dumps([{"role": "user", "content": "I use Zig."}]))
        for user in USERS:
            done = memfleet(env, "enqueue", "--session", "s1", "--user", user,
                            "--messages", str(messages))
            assert done.returncode == 0, done.stderr
            routed = memfleet(env, "shards", "route", "--user", user)
            assert json.loads(routed.stdout)["shard"] == homes[user]
        plain = {name: Redis.from_url(server.url) for name, server in servers.items()}
        try:
            for user in USERS:
                for name, client in plain.items():
                    held = await client.exists(keys.user_sessions_key(user))
                    assert bool(held) == (homes[user] == name), (user, name)
            burst = memfleet(env, "worker", "--burst")
            assert burst.returncode == 0, burst.stderr
            for user in USERS:
                assert await active_texts(db, user) == ["Uses Zig"]
            erased = memfleet(env, "consent", "erase", "--user", USERS[0])
            assert erased.returncode == 0, erased.stderr
            assert await active_texts(db, USERS[0]) == []
            for client in plain.values():
                assert not await client.keys(f"*{{{USERS[0]}}}*")
            listed = memfleet(env, "shards", "list")
            assert [line.split("\t")[:2] for line in listed.stdout.splitlines()] == [
                ["a", "settled"], ["b", "settled"]]
            not_joining = memfleet(env, "shards", "drain")
            assert not_joining.returncode == 2 and "no shard is joining" in not_joining.stderr
        finally:
            for client in plain.values():
                await client.aclose()
