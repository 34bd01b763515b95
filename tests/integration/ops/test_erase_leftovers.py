"""What an erase leaves behind. Nothing of the user in Redis, even with no worker
running: the user's queued ARQ jobs (also one ARQ queued again after a failed
try, which no marker names: the user's job index does) and the user's sessions
in the pending and waiting sets go in the erase's own script; other users' jobs
and entries stay.
In PostgreSQL, the fence names the user by an HMAC under a key every process
of the fleet must share (worker.store.fence_key), never by a plain hash of the id."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, StubServer
from tests.acceptance.test_cli import memfleet
from tests.conftest import TEST_EMBED_DIM, TEST_FENCE_KEY
from tests.helpers import active_texts, drain, fences_for_tests, job_deps, user_msg, worker_env
from tests.openai_stub import openai_settings
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import ConfigurationError
from worker.fleet.app import worker_options
from worker.ops import privacy
from worker.protocol import keys, queue
from worker.protocol.keys import SessionRef
from worker.providers.factory import build_providers
from worker.store.fence_key import EMBEDDED_KEY_FILE, FenceKeys, embedded_key, fence_keys
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import Erasure


async def _names(redis: Redis, needle: bytes) -> list[str]:
    """Every key, set member and string value of Redis that holds ``needle``."""
    found = []
    for key in await redis.keys("*"):
        kind = await redis.type(key)
        if needle in key:
            found.append(key.decode())
        elif kind == b"string" and needle in (await redis.get(key) or b""):
            found.append(f"{key.decode()} (value)")
        elif kind in (b"zset", b"set"):
            members = (await redis.zrange(key, 0, -1) if kind == b"zset"
                       else await redis.smembers(key))
            if any(needle in m for m in members):
                found.append(f"{key.decode()} (member)")
    return found


async def test_an_erase_takes_the_users_queued_jobs_and_set_entries_with_no_worker_running(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    name = settings.queue_name
    for session in ("1", "2", "3"):
        await schedule_memory_persistence(redis, session, "alice", [user_msg("I use Rust.")],
                                          queue_name=name)
    await schedule_memory_persistence(redis, "1", "bob", [user_msg("I use Go.")],
                                      queue_name=name)
    # A job a worker is running: left to that worker (it meets the fence).
    await redis.set(keys.ARQ_JOB_PREFIX + "memfleet-running",
                    queue.job_bytes(SessionRef("alice", "8"), 1))
    await redis.set(keys.ARQ_IN_PROGRESS_PREFIX + "memfleet-running", 1)
    await redis.zadd(name, {"memfleet-running": 1})
    assert len(await _names(redis, b"alice")) > 10, "the user is all over Redis before"

    async with job_deps(settings, redis, build_providers(settings)) as deps:
        deleted = await privacy.erase_user(redis, deps.store, "alice", queue_name=name)

    assert (deleted["handovers"], deleted["jobs"]) == (3, 3)
    assert await _names(redis, b"alice") == [keys.ARQ_JOB_PREFIX + "memfleet-running (value)"]
    bob = SessionRef("bob", "1")
    assert await redis.zrange(keys.pending_key(name), 0, -1) == [bob.key.encode()]
    assert await redis.zrange(keys.waiting_key(name), 0, -1) == [bob.key.encode()]
    jobs = await redis.zrange(name, 0, -1)
    assert sorted(jobs) == sorted([b"memfleet-running", (await redis.get(bob.queued_key))])
    # bob's job still runs and remembers; the erase twice finds nothing more.
    await redis.delete(keys.ARQ_IN_PROGRESS_PREFIX + "memfleet-running",
                       keys.ARQ_JOB_PREFIX + "memfleet-running")
    await redis.zrem(name, "memfleet-running")
    await drain(settings)
    assert await active_texts(db, "bob") == ["Uses Go"]
    assert await active_texts(db, "alice") == []
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        again = await privacy.erase_user(redis, deps.store, "alice", queue_name=name)
    assert (again["handovers"], again["jobs"]) == (0, 0)


async def test_an_erase_takes_a_job_arq_queued_again_after_a_failed_try(
    settings: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer
) -> None:
    llm = openai_settings(settings, stub, extract_model="stub-extract",
                          consolidate_model="stub-consolidate", llm_timeout_s=2.0,
                          llm_retry_after_cap_s=2.0).model_copy(
        update={"llm_max_attempts": 1, "max_tries": 3})
    name = llm.queue_name
    alice = SessionRef("alice", "9")
    stub.add_fault("503", count=1000, path=CHAT_PATH)
    try:
        await schedule_memory_persistence(redis, alice.session_id, alice.user_id,
                                          [user_msg("I use Rust.")], queue_name=name)
        (job,) = [j.decode() for j in await redis.zrange(name, 0, -1)]
        # A real ARQ worker takes the job; the model is down: ARQ queues it again,
        # under the same id, after its backoff, and no queued marker names it now.
        assert await drain(llm, max_burst_jobs=1) == {"complete": 0, "failed": 0,
                                                       "retried": 1}
    finally:
        stub.reset()
    assert await redis.get(keys.ARQ_RETRY_PREFIX + job) == b"1"
    assert await redis.zrange(name, 0, -1) == [job.encode()]
    assert await redis.get(alice.queued_key) is None
    await schedule_memory_persistence(redis, "1", "bob", [user_msg("I use Go.")],
                                      queue_name=name)

    cleared = await queue.erase_user(redis, "alice", name)
    assert (cleared.handovers, cleared.jobs) == (1, 1)
    assert await _names(redis, b"alice") == []
    await drain(settings)
    assert await active_texts(db, "bob") == ["Uses Go"]
    assert await active_texts(db, "alice") == []


async def test_the_fence_names_the_user_by_a_keyed_hash_and_every_process_needs_that_key(
    settings: Settings, redis: Redis, db: asyncpg.Connection, tmp_path: Path
) -> None:
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        await privacy.erase_user(redis, deps.store, "alice@example.com")
    (key,) = [bytes(r["user_key"]) for r in await db.fetch(
        "SELECT user_key FROM memory_erasure_fence")]
    # Not reversible with a dictionary of likely ids: hashing them finds nothing.
    assert key != hashlib.sha256(b"alice@example.com").digest()
    assert key == fence_keys(TEST_FENCE_KEY).of("alice@example.com")
    assert key != FenceKeys(b"another key of at least thirty-two chars").of("alice@example.com")

    pool = await create_pool(settings.database_url or "", min_size=1, max_size=1)
    try:
        # No key: nothing falls back to an unkeyed hash; the store refuses to fence.
        with pytest.raises(ConfigurationError, match="MEMFLEET_ERASE_FENCE_KEY"):
            await PostgresStore(pool).erase_user(Erasure("bob", erased_seq=1))
        # Another key than the one the fleet's fences are written with: refused too,
        # before anything is deleted.
        other = PostgresStore(pool, FenceKeys(b"another key of at least thirty-two chars"))
        await db.execute("INSERT INTO memory_fact (user_id, text, category, importance,"
                         " embedding, embedding_model, observed_at, source_kind) VALUES"
                         " ('bob', 'Uses Go', 'fact', 5, $1, 'm', now(), 'manual')",
                         "[" + ",".join(["0.5"] * TEST_EMBED_DIM) + "]")
        with pytest.raises(ConfigurationError, match="not the key"):
            await other.erase_user(Erasure("bob", erased_seq=1))
        with pytest.raises(ConfigurationError, match="not the key"):
            await other.check_fence_key()
        assert await active_texts(db, "bob") == ["Uses Go"]
    finally:
        await pool.close()
    with pytest.raises(ConfigurationError, match="MEMFLEET_ERASE_FENCE_KEY is not set"):
        worker_options(settings.model_copy(update={"erase_fence_key": None}))
    with pytest.raises(ConfigurationError, match="at least 32"):
        fence_keys("short")
    # The CLI's erase says so in one line, exit 2, and deletes nothing.
    env = {k: v for k, v in worker_env(settings).items() if k != "MEMFLEET_ERASE_FENCE_KEY"}
    done = memfleet(env, "consent", "erase", "--user", "bob")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("memfleet: ") and len(done.stderr.splitlines()) == 1, \
        done.stderr
    assert await active_texts(db, "bob") == ["Uses Go"]


def test_the_embedded_servers_key_is_made_once_and_kept_private(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not set"):
        fence_keys(None, tmp_path)  # no key, no key file: refused
    first = embedded_key(tmp_path)
    assert len(first) == 64 and embedded_key(tmp_path) == first
    assert stat.S_IMODE(os.stat(tmp_path / EMBEDDED_KEY_FILE).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [EMBEDDED_KEY_FILE]
    # A process of that home without MEMFLEET_ERASE_FENCE_KEY uses it; a set key wins.
    assert fence_keys(None, tmp_path).of("u") == FenceKeys(first.encode()).of("u")
    assert fence_keys(TEST_FENCE_KEY, tmp_path).of("u") == fence_keys(TEST_FENCE_KEY).of("u")


async def test_a_list_read_before_an_erase_and_handed_over_after_it_stores_nothing(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # A chat turn reads its list, the user is erased, and then the turn hands the list
    # over: numbered after the erase, it was read before it (listed_at_us, on the Redis
    # clock). A real worker runs it: nothing of it is stored, and what the user says
    # after the erase (the chat server starts the session afresh) is remembered.
    name = settings.queue_name
    await schedule_memory_persistence(redis, "1", "alice", [user_msg("I live in Oslo.")],
                                      queue_name=name)
    await drain(settings)
    assert await active_texts(db, "alice") == ["Lives in Oslo"]
    said = [user_msg("I live in Oslo."), user_msg("I use Rust.")]
    listed = await queue.redis_clock(redis)  # the turn reads its list
    async with job_deps(settings, redis, build_providers(settings)) as deps:
        await privacy.erase_user(redis, deps.store, "alice", queue_name=name)
    late = await schedule_memory_persistence(redis, "1", "alice", said, queue_name=name,
                                             listed_at_us=listed)
    fence = await db.fetchval("SELECT erased_seq FROM memory_erasure_fence")
    assert listed <= fence < late.handover_id, "read before the erase, handed over after"
    await drain(settings)
    assert await active_texts(db, "alice") == []
    assert await db.fetchval("SELECT count(*) FROM memory_run WHERE user_id = 'alice'") == 0
    # The same turn read after the erase is remembered, as is what follows.
    await schedule_memory_persistence(redis, "1", "alice", [user_msg("I use Zig.")],
                                      queue_name=name,
                                      listed_at_us=await queue.redis_clock(redis))
    await drain(settings)
    assert await active_texts(db, "alice") == ["Uses Zig"]


async def test_processes_starting_together_on_a_fresh_database_agree_on_the_key(
    settings: Settings, db: asyncpg.Connection
) -> None:
    # The first key is recorded inside the first erase's transaction; a worker that
    # starts meanwhile waits for it, and then reads the recorded key back, not nothing.
    pool = await create_pool(settings.database_url or "", min_size=2, max_size=2)
    try:
        first, starting = PostgresStore(pool, fences_for_tests()), PostgresStore(
            pool, fences_for_tests())
        async with pool.acquire() as conn, conn.transaction():
            await first.check_fence_key(conn)  # recorded, not committed yet
            check = asyncio.create_task(starting.check_fence_key())
            deadline = asyncio.get_running_loop().time() + 60
            while not await db.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND strpos(query, 'memory_erasure_fence_key') > 0"):
                assert asyncio.get_running_loop().time() < deadline, "the check never waited"
                await asyncio.sleep(0.02)
        await check  # no error: the same key
    finally:
        await pool.close()


async def test_an_erase_of_a_user_whose_id_reads_as_a_pattern_takes_theirs_alone(
    settings: Settings, redis: Redis
) -> None:
    name = settings.queue_name
    for user in ("a*[b]?\\", "ab[b]?\\", "a*"):
        await schedule_memory_persistence(redis, "1", user, [user_msg("I use Go.")],
                                          queue_name=name)
    cleared = await queue.erase_user(redis, "a*[b]?\\", name)
    assert cleared.jobs == 1 and cleared.handovers == 1
    left = {SessionRef.parse(m.decode()).user_id
            for m in await redis.zrange(keys.pending_key(name), 0, -1)}
    assert left == {"ab[b]?\\", "a*"}
    assert left == {SessionRef.parse(m.decode()).user_id
                    for m in await redis.zrange(keys.waiting_key(name), 0, -1)}
    assert len(await redis.zrange(name, 0, -1)) == 2
