"""The memory API with several Redis primaries (worker.protocol.shards): its hand-over,
status and erase route each user to the user's shard; workers serving both shards
commit every user's facts."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import httpx
from redis.asyncio import Redis

from tests.api_server import api_settings, bearer, new_key, running_api
from tests.helpers import active_texts
from tests.integration.api.conftest import key_auth
from tests.shard_servers import aof_servers, sharded
from worker.config import Settings
from worker.fleet.shard_workers import drain_shards
from worker.protocol import keys as protocol_keys
from worker.protocol.shards import ShardMap
from worker.store.service_keys import ServiceKeyStore

USERS = [f"user{i}" for i in range(12)]  # 7 on b, 5 on a


async def test_the_api_routes_handovers_status_and_erase_by_user(
    settings: Settings, keys: ServiceKeyStore, db: asyncpg.Connection, tmp_path: Path
) -> None:
    async with aof_servers(tmp_path, "a", "b") as servers:
        two = sharded(settings, servers)
        shard_map = ShardMap.from_settings(two)
        homes = {user: shard_map.route(user).home for user in USERS}
        assert set(homes.values()) == {"a", "b"}
        async with (running_api(api_settings(two)) as base_url,
                    httpx.AsyncClient(base_url=base_url, timeout=30) as api):
            auth = key_auth(await new_key(keys, "handover"))
            ids = {}
            for user in USERS:
                answer = await api.post(
                    f"/users/{user}/sessions/s1/handover", headers=auth,
                    json={"messages": [{"role": "user", "content": "I live in Berlin."}]})
                assert answer.status_code == 202, answer.text
                ids[user] = answer.json()["handover_id"]
            for name, server in servers.items():
                client = Redis.from_url(server.url)
                try:
                    for user in USERS:
                        held = await client.exists(protocol_keys.user_sessions_key(user))
                        assert bool(held) == (homes[user] == name), (user, name)
                finally:
                    await client.aclose()
            status = await api.get("/users/user0/sessions/s1/status", headers=auth)
            assert status.json()["latest"] == ids["user0"] and status.json()["finished"] == 0
            workers = await drain_shards(two)
            assert sum(w.jobs_complete for w in workers) == len(USERS)
            assert all(w.jobs_complete for w in workers)  # both shards had jobs
            for user in USERS:
                assert await active_texts(db, user) == ["Lives in Berlin"]
            status = await api.get("/users/user0/sessions/s1/status", headers=auth)
            assert status.json()["finished"] == ids["user0"]
            erased = await api.delete("/users/user0", headers=bearer("user0"))
            assert erased.status_code == 200, erased.text
            assert await active_texts(db, "user0") == []
            assert await active_texts(db, "user1") == ["Lives in Berlin"]
