"""Adding a Redis shard, as docs/operations.md ("Adding a shard") says, with hand-overs
in flight: nothing lost, nothing doubled, and each moving user's lists on one shard.

A fleet on one Redis (MEMFLEET_REDIS_URL alone: the shard `default`) takes a second
one, `b`. Chat servers hand sessions over turn by turn (tests/fleet_scenario.py), and
at each step of the procedure they run a mix of maps, as a rolling deploy would: the
old single URL and `b` pending; `b` pending and `b` joining; `b` joining and `b`
settled (after `memfleet shards drain` said none is left). Worker processes serve
both shards throughout. Then every session's cursor is at its end, every message in
exactly one committed slice, every fact stored once; every moving user's sessions are
on `b` and nobody else's is; an erase of a moved user leaves nothing on either shard.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.fleet_scenario import (
    TURNS,
    assert_exactly_once,
    handed_over,
    session_of,
    user_of,
    wait_until_done,
)
from tests.helpers import WorkerProcesses, fences_for_tests, worker_env
from tests.shard_servers import aof_servers, shard_map, sharded
from worker.client import ShardedRedis, schedule_memory_persistence
from worker.config import Settings
from worker.ops import privacy
from worker.ops.shard_moves import moving_left
from worker.protocol import keys
from worker.protocol.keys import SessionRef
from worker.protocol.shards import ShardMap
from worker.store.postgres import PostgresStore

SESSIONS = 40  # 20 users: about a third of them move to the new shard
QUEUE = "memfleet:queue"


async def _turn(turn: int, clients: list[Any]) -> None:
    """Every session's list after ``turn``, each through one of ``clients`` in turn (a
    mix of chat servers mid-rollout), all at once."""
    await asyncio.gather(*(
        schedule_memory_persistence(clients[s % len(clients)], session_of(s), user_of(s),
                                    handed_over(s, turn), timeout_s=30)
        for s in range(SESSIONS)))


def _drain_cli(env: dict[str, str], wait_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "worker.cli", "shards", "drain", "--wait",
                           str(wait_s)], env=env, capture_output=True, text=True,
                          timeout=wait_s + 60, check=False)


@pytest.mark.slow
async def test_adding_a_shard_while_handing_over_loses_and_doubles_nothing(
    tmp_path: Path, settings: Settings, db: asyncpg.Connection
) -> None:
    users = sorted({user_of(s) for s in range(SESSIONS)})
    final_map = ShardMap(("default", "b"))
    movers = {u for u in users if final_map.route(u).home == "b"}
    assert 0 < len(movers) < len(users)
    async with aof_servers(tmp_path, "default", "b") as servers:
        url_a, url_b = servers["default"].url, servers["b"].url
        joining_settings = sharded(settings, servers, redis_shards_joining="b")
        joining_env = worker_env(joining_settings, redis_shards=shard_map(servers),
                                 redis_shards_joining="b")
        old = Redis.from_url(url_a)  # a chat server still on MEMFLEET_REDIS_URL alone
        pending = ShardedRedis.from_urls({"default": url_a, "b": url_b}, pending=["b"])
        joining = ShardedRedis.from_urls({"default": url_a, "b": url_b}, joining=["b"])
        final = ShardedRedis.from_urls({"default": url_a, "b": url_b})
        plain_b = Redis.from_url(url_b)
        fleet: WorkerProcesses | None = None
        try:
            with StubServer(dim=TEST_EMBED_DIM) as stub:
                await _turn(1, [old])
                await _turn(2, [old, pending])  # rollout 1: b pending, next to the old map
                # Rollout 2 (b joining next to b pending), before any worker ran: every
                # mover holds unfinished lists on `default`, so stays there.
                await _turn(3, [pending, joining])
                assert await plain_b.dbsize() == 0
                fleet = WorkerProcesses(worker_env(
                    joining_settings, llm_provider="openai", llm_base_url=stub.v1,
                    embed_provider="openai", embed_base_url=stub.v1,
                    redis_shards=shard_map(servers), redis_shards_joining="b",
                    busy_defer_s="0.2"), tmp_path, count=2)
                # In flight while the workers drain `default`: a mover whose lists are
                # finished goes to b, one still busy stays (the old shard's script decides).
                await asyncio.sleep(1.0)
                await _turn(4, [joining])
                drained = await asyncio.to_thread(_drain_cli, joining_env, 90)
                assert drained.returncode == 0, drained.stderr
                assert "moving users left 0" in drained.stdout
                assert all(left.users == 0 for left in await moving_left(joining))
                # Rollout 3: b settled, next to joining chat servers.
                await _turn(5, [joining, final])
                assert TURNS == 5
                for client in (Redis.from_url(url_a), plain_b):
                    try:
                        await wait_until_done(db, client, 120, SESSIONS)
                    finally:
                        if client is not plain_b:
                            await client.aclose()
            await assert_exactly_once(db, SESSIONS)
            # Every mover's sessions are on b now, nobody else's; and no mover's list is
            # left unfinished on `default`.
            for user in users:
                on_b = await plain_b.exists(keys.user_sessions_key(user))
                assert bool(on_b) == (user in movers), user
            for user in movers:
                for sid in ("chat0", "chat1"):
                    latest, done = await old.hmget(SessionRef(user, sid).meta_key, "q", "d")
                    assert latest == done, (user, sid)
            # The moved markers were written by the joining clients, on `default` only.
            marked = {k.decode() for k in await old.keys(keys.USER_MOVED_PREFIX + "*")}
            assert marked and marked <= {keys.user_moved_key(u) for u in movers}
            # An erase of a moved user finds every shard it was on.
            mover = sorted(movers)[0]
            store = await PostgresStore.connect(settings.database_url or "",
                                                fences=fences_for_tests())
            try:
                await privacy.erase_user(final, store, mover, queue_name=QUEUE)
            finally:
                await store.aclose()
            for client in (old, plain_b):
                assert not await client.keys(f"*{{{mover}}}*")
            assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE user_id = $1",
                                     mover) == 0
            print(f"\nadd a shard: {SESSIONS} sessions of {len(users)} users, {len(movers)} "
                  f"moved to b ({len(marked)} marked by a joining chat server); "
                  "lost 0, doubled 0 (checked)")
        finally:
            if fleet is not None:
                fleet.stop()
            for client in (old, plain_b):
                await client.aclose()
            for sharded_client in (pending, joining, final):
                await sharded_client.aclose()

