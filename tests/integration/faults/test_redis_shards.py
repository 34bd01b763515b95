"""Two real Redis primaries (worker.protocol.shards), one SIGKILLed mid-run and restarted
from its append-only file: every message still in exactly one committed slice, every
fact stored once.

Sessions (tests/fleet_scenario.py: two per user, every third summarised halfway) are
handed over turn by turn through a ShardedRedis, so each user's go to the shard the
hash names; worker processes serve both shards (one ARQ worker per shard each). While
they run, a shard's Redis is SIGKILLed and started again from its append-only file:
hand-overs to it are refused meanwhile (HandoverUnavailable) and handed over again, as
a chat server's next turn would. `make test` runs a short version; `make chaos` a long
one (MEMFLEET_SHARDS_SESSIONS=160 MEMFLEET_SHARDS_KILLS=4: more users, several kills,
a worker SIGKILLed too).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.fleet_scenario import (
    assert_exactly_once,
    hand_over_turn_by_turn,
    handed_over,
    session_of,
    user_of,
    wait_until_done,
)
from tests.helpers import WorkerProcesses, user_msg, worker_env
from tests.shard_servers import aof_servers, shard_map, sharded
from worker.client import ShardedRedis, schedule_memory_persistence
from worker.config import Settings
from worker.embedded import EmbeddedPostgres
from worker.errors import HandoverUnavailable
from worker.protocol import keys
from worker.store.migrate import migrate

SESSIONS = int(os.environ.get("MEMFLEET_SHARDS_SESSIONS", "24"))
KILLS = int(os.environ.get("MEMFLEET_SHARDS_KILLS", "1"))
WORKERS = 1 if KILLS <= 1 else 2
QUEUE = "memfleet:queue"


async def _workers_started(clients: dict[str, Redis], workers: int) -> None:
    """Every worker process beats on every shard (one ARQ worker per shard each)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        beats = [await client.hlen(keys.workers_key(QUEUE)) for client in clients.values()]
        if min(beats) >= workers:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the workers did not start on every shard")


@pytest.mark.slow
async def test_two_redis_one_sigkilled_and_restarted_lose_and_double_nothing(
    tmp_path: Path, settings: Settings
) -> None:
    pg = EmbeddedPostgres(tmp_path / "pg")
    await asyncio.to_thread(pg.start)
    await migrate(pg.url, embed_dim=TEST_EMBED_DIM)
    users = {user_of(s) for s in range(SESSIONS)}
    async with aof_servers(tmp_path, "a", "b") as servers:
        base = sharded(settings.model_copy(update={"database_url": pg.url}), servers)
        spread = Counter(base_route(base, user) for user in users)
        assert set(spread) == {"a", "b"}, spread  # the users are spread over both
        faults: Counter[str] = Counter()
        with StubServer(dim=TEST_EMBED_DIM) as stub:
            env = worker_env(base, llm_provider="openai", llm_base_url=stub.v1,
                             embed_provider="openai", embed_base_url=stub.v1,
                             redis_shards=shard_map(servers), lock_ttl_s="3",
                             recovery_interval_s="0.5", busy_defer_s="0.2", max_tries="50")
            fleet = WorkerProcesses(env, tmp_path, count=WORKERS)
            plain = {name: Redis.from_url(server.url) for name, server in servers.items()}
            client = ShardedRedis.from_urls({n: s.url for n, s in servers.items()})
            db: asyncpg.Connection | None = None
            try:
                await _workers_started(plain, WORKERS)
                handing_over = asyncio.create_task(
                    hand_over_turn_by_turn(client, 11, SESSIONS, pause_s=(0.6, 1.0)))
                started = time.monotonic()
                victims = ["b", "a"] * KILLS
                probes: list[bool] = []
                while not handing_over.done() or faults["redis SIGKILL"] < KILLS:
                    since = time.monotonic() - started
                    if faults["redis SIGKILL"] < KILLS and since > 1.0 + 1.5 * faults[
                            "redis SIGKILL"]:
                        victim = servers[victims[faults["redis SIGKILL"]]]
                        await asyncio.to_thread(victim.kill)  # no time to save anything
                        probes.append(await _refused_while_down(
                            client, base, victims[faults["redis SIGKILL"]]))
                        await asyncio.sleep(0.8)
                        await asyncio.to_thread(victim.start)  # from its append-only file
                        faults["redis SIGKILL"] += 1
                        if WORKERS > 1 and faults["redis SIGKILL"] == 2:
                            fleet.kill_and_restart(0)
                            faults["worker SIGKILL"] += 1
                    await asyncio.sleep(0.2)
                handed = await handing_over
                # A hand-over to a shard while it was down was refused, whatever the
                # scenario's own hand-overs met (on a loaded machine they may all fall
                # between the kill and the restart).
                assert probes and all(probes), probes
                db = await asyncpg.connect(pg.url)
                for name in servers:  # every cursor at its end, no job left on either shard
                    await wait_until_done(db, plain[name], 180, SESSIONS)
                await assert_exactly_once(db, SESSIONS)
                # Both shards did work: each one's commit events.
                events = {name: await c.xlen(keys.events_key(QUEUE)) for name, c in plain.items()}
                assert min(events.values()) > 0, events
                # And each user's keys are on its own shard only.
                for user in users:
                    home = base_route(base, user)
                    for name, c in plain.items():
                        held = await c.exists(keys.user_sessions_key(user))
                        assert bool(held) == (name == home), (user, name)
                print(f"\nshards: {SESSIONS} sessions of {len(users)} users over 2 Redis"
                      f" ({dict(spread)} users), {handed.taken} hand-overs taken,"
                      f" {handed.refused} refused while a Redis was down and handed over"
                      f" again; faults {dict(faults)}; commit events per shard {events};"
                      " lost 0, doubled 0 (checked)")
            finally:
                fleet.stop()
                await client.aclose()
                for c in plain.values():
                    await c.aclose()
                if db is not None:
                    await db.close()
                await asyncio.to_thread(pg.stop)


async def _refused_while_down(client: ShardedRedis, base: Settings, shard: str) -> bool:
    """Hand a session homed on the downed ``shard`` its first list again (an older list
    than it has: kept or refused, never a new slice): whether it was refused."""
    s = next(s for s in range(SESSIONS) if base_route(base, user_of(s)) == shard)
    try:
        await schedule_memory_persistence(client, session_of(s), user_of(s),
                                          handed_over(s, 1), timeout_s=5)
    except HandoverUnavailable:
        return True
    return False


def base_route(settings: Settings, user: str) -> str:
    from worker.protocol.shards import ShardMap

    return ShardMap.from_settings(settings).route(user).home


async def test_a_single_url_and_a_one_shard_map_are_the_same_redis_and_keys(
    redis: Redis, settings: Settings
) -> None:
    """MEMFLEET_REDIS_URL alone is the shard `default`: a ShardedRedis of that one shard
    writes exactly the keys a plain client writes."""
    assert settings.redis_url is not None
    one = ShardedRedis.from_urls({"default": settings.redis_url})
    try:
        await schedule_memory_persistence(redis, "s1", "plain", [user_msg("I use Zig.")])
        await schedule_memory_persistence(one, "s1", "sharded", [user_msg("I use Zig.")])
        plain_keys = sorted(k.decode().replace("plain", "U") for k in await redis.keys("*plain*"))
        sharded_keys = sorted(k.decode().replace("sharded", "U")
                              for k in await redis.keys("*sharded*"))
        assert plain_keys == sharded_keys and plain_keys
    finally:
        await one.aclose()
