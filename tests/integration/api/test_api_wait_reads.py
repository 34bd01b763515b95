"""The waits' reads of Redis are shared (worker.api.wait_poller), over real HTTP and real
Redis: many waits on one session cost about what one does; waits for users of two
Redis shards, read together, each answer once a commit covers them (one shard:
test_api_session_status.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from redis.asyncio import Redis

from tests.api_server import api_settings, new_key, running_api
from tests.integration.api.conftest import key_auth
from tests.shard_servers import aof_servers, sharded
from worker.config import Settings
from worker.fleet.shard_workers import drain_shards
from worker.protocol.shards import ShardMap
from worker.store.service_keys import ServiceKeyStore

WAITS = 40
WAIT_S = 2.0
# One wait polls about 8 times in 2 s (at once, then 50 ms doubling up to 500 ms), two
# commands each, and reads the status once more at its end: 40 waits polling on their
# own cost about 40 * (8 + 1) * 2 = 720 commands; shared, about 8 * 2 plus the 40 * 2
# end reads, and a few more reads at once as the waits come in.
MAX_COMMANDS = 300


async def commands(redis: Redis) -> int:
    return int((await redis.info("stats"))["total_commands_processed"])


async def test_many_waits_on_one_session_share_its_reads(
    client: httpx.AsyncClient, keys: ServiceKeyStore, redis: Redis,
) -> None:
    auth = key_auth(await new_key(keys, "read"))
    before = await commands(redis)
    answers = await asyncio.gather(*(
        client.get("/users/ada/sessions/s1/handovers/1/wait", params={"timeout_s": WAIT_S},
                   headers=auth) for _ in range(WAITS)))
    spent = await commands(redis) - before - 1  # less the INFO itself
    assert [a.status_code for a in answers] == [200] * WAITS
    assert all(a.json()["covered"] is False for a in answers)
    assert spent < MAX_COMMANDS, spent


async def test_waits_on_two_shards_each_answer_once_covered(
    settings: Settings, keys: ServiceKeyStore, tmp_path: Path,
) -> None:
    users = [f"user{i}" for i in range(12)]
    async with aof_servers(tmp_path, "a", "b") as servers:
        two = sharded(settings, servers)
        shard_map = ShardMap.from_settings(two)
        assert {shard_map.route(user).home for user in users} == {"a", "b"}
        async with (running_api(api_settings(two)) as base_url,
                    httpx.AsyncClient(base_url=base_url, timeout=60) as api):
            auth = key_auth(await new_key(keys, "handover"))
            ids = {}
            for user in users:
                answer = await api.post(
                    f"/users/{user}/sessions/s1/handover", headers=auth,
                    json={"messages": [{"role": "user", "content": "I live in Berlin."}]})
                assert answer.status_code == 202, answer.text
                ids[user] = answer.json()["handover_id"]
            waits = [asyncio.create_task(api.get(
                f"/users/{user}/sessions/s1/handovers/{ids[user]}/wait",
                params={"timeout_s": 30}, headers=auth)) for user in users]
            await asyncio.sleep(0.5)
            assert not any(task.done() for task in waits), "nothing committed yet"
            await drain_shards(two)
            answers = await asyncio.gather(*waits)
    for user, answer in zip(users, answers, strict=True):
        assert answer.status_code == 200, answer.text
        assert answer.json()["covered"] is True, user
        assert answer.json()["finished"] == ids[user]
