"""`memfleet reembed` on real servers: PostgreSQL with pgvector, valkey, the
OpenAI-compatible stub over HTTP through the real openai client, and real
`memfleet` processes.

- Killed with SIGKILL mid-way and run again, the move ends with every active
  fact on the new model and dimension, each with its own text's vector, no row
  added or lost, texts, ids, times and chains as they were.
- While it runs, workers set up for the old model keep committing, and every
  change of mind finds the fact it changes (the neighbours come from one model).
- A worker set up for the new model boots once the move started; one for a
  model nobody moves to does not; one for the old model no longer does once the
  move is finished.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.fleet_scenario import wait_for_workers
from tests.helpers import WorkerProcesses, active_texts, drain, user_msg, worker_env
from tests.openai_stub import openai_settings, wire_requests
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import ConfigurationError, MemfleetError
from worker.ops.preflight import check_servers
from worker.ops.reembed import Target, reembed
from worker.providers.hashing import HashingEmbedder, hash_embed
from worker.store.maintenance import PostgresMaintenanceStore
from worker.store.migrate import check_schema
from worker.store.pool import create_pool

OLD, NEW = "text-embedding-3-small", "text-embedding-3-large"
NEW_DIM = 128
LINE = re.compile(r"(\d+) users moved, (\d+) facts and (\d+) notes re-embedded,"
                  r" (\d+) embedding calls")


@pytest.fixture
def openai(settings: Settings, stub: StubServer) -> Settings:
    return openai_settings(settings, stub, embed_model=OLD, extract_model="stub-extract",
                           consolidate_model="stub-consolidate", llm_timeout_s=5.0)


def _literal(vector: list[float]) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


async def _seed(db: asyncpg.Connection, users: int, facts: int) -> None:
    """``facts`` active facts per user on the old model, and one superseded by the last."""
    for u in range(users):
        user = f"user-{u}"
        ids = []
        for f in range(facts + 1):
            text = f"User {u} fact {f}: likes topic {u * 100 + f}"
            ids.append(await db.fetchval(
                "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
                " embedding_model, observed_at) VALUES ($1, $2, 'fact', 5, $3::halfvec, $4,"
                " now() - make_interval(days => $5)) RETURNING id",
                user, text, _literal(hash_embed(text, TEST_EMBED_DIM)), OLD, f))
        await db.execute("UPDATE memory_fact SET superseded_at = now(), superseded_by = $2,"
                         " superseded_reason = 'updated' WHERE id = $1", ids[0], ids[-1])
        if u % 2:  # users without a state row get one from their move
            await db.execute("INSERT INTO user_memory_state (user_id, version) VALUES ($1, 4)",
                             user)


async def _rows(db: asyncpg.Connection) -> list[dict[str, Any]]:
    rows = await db.fetch(
        "SELECT id, user_id, text, observed_at, superseded_at, superseded_by, created_at,"
        " embedding_model, embedding_dim, embedding::text AS embedding"
        " FROM memory_fact ORDER BY id")
    return [dict(r) for r in rows]


def _same_except_embedding(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    strip = ("embedding_model", "embedding_dim", "embedding")
    assert [{k: v for k, v in r.items() if k not in strip} for r in after] == [
        {k: v for k, v in r.items() if k not in strip} for r in before]


def _reembed_process(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "worker.cli", "reembed", "--model", NEW, "--dim", str(NEW_DIM),
         *args], env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


async def _moved(db: asyncpg.Connection) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM memory_fact WHERE superseded_at IS NULL AND embedding_model = $1",
        NEW)
    return count


async def _check(url: str, model: str, dim: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        await check_schema(conn, dim, embed_model=model)
    finally:
        await conn.close()


async def test_a_move_killed_midway_and_run_again_ends_verified_with_nothing_duplicated(
    openai: Settings, stub: StubServer, db: asyncpg.Connection, tmp_path: Path,
) -> None:
    users, facts = 6, 5
    await _seed(db, users, facts)
    before = await _rows(db)
    env = worker_env(openai, embed_provider="openai", embed_base_url=stub.v1, embed_model=OLD)
    url = openai.database_url or ""
    # c: before the move, a worker set up for the new model refuses to boot.
    with pytest.raises(ConfigurationError, match="migrated with 256"):
        await _check(url, NEW, NEW_DIM)

    stub.add_fault("latency_ms", latency_ms=250, count=10_000, path=EMBED_PATH)
    first = _reembed_process(env, tmp_path / "first.log", "--batch", "2")
    try:
        deadline = time.monotonic() + 60
        while await _moved(db) < facts:  # at least one user moved
            assert first.poll() is None, (tmp_path / "first.log").read_text()
            assert time.monotonic() < deadline, "no user was moved"
            await asyncio.sleep(0.05)
        first.kill()  # SIGKILL: no chance to clean up
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    stub.control("DELETE", "/_stub/faults")
    moved = await _moved(db)
    assert facts <= moved < users * facts, "killed before it finished"
    # Each user moved whole or not at all: a user's move is one transaction.
    per_user = await db.fetch(
        "SELECT user_id, count(DISTINCT embedding_model) AS models FROM memory_fact"
        " WHERE superseded_at IS NULL GROUP BY user_id")
    assert all(r["models"] == 1 for r in per_user)

    # c: while the move is under way, the new model boots, the old one still does, an
    # unknown model or dimension does not.
    await _check(url, NEW, NEW_DIM)
    await _check(url, OLD, TEST_EMBED_DIM)
    for model, dim in ((NEW, 64), ("text-embedding-ada-002", NEW_DIM)):
        with pytest.raises(ConfigurationError, match=f"a move to {NEW} at {NEW_DIM}"):
            await _check(url, model, dim)
    new_worker = openai.model_copy(update={"embed_model": NEW, "embed_dim": NEW_DIM})
    await check_servers(new_worker)  # what `memfleet worker` runs before it starts

    stub.reset()
    second = _reembed_process(env, tmp_path / "second.log", "--batch", "4")
    assert second.wait(timeout=60) == 0, (tmp_path / "second.log").read_text()
    output = (tmp_path / "second.log").read_text()
    counts = LINE.search(output)
    assert counts is not None, output
    left = users * facts - moved
    assert (int(counts[2]), int(counts[3])) == (left, 0)
    assert int(counts[4]) == -(-left // 4)  # one call per batch of up to four texts
    assert (f"verified: {users * facts} active facts and 0 active notes, all on {NEW} at"
            f" {NEW_DIM}") in output

    after = await _rows(db)
    _same_except_embedding(before, after)  # same ids, texts, times and chains: no row added
    for row in after:
        if row["superseded_at"] is None:
            assert (row["embedding_model"], row["embedding_dim"]) == (NEW, NEW_DIM)
            # Each row got its own text's vector (the stub embeds by hashing the text).
            got = np.array(json.loads(row["embedding"]), dtype=np.float32)
            want = np.array(hash_embed(row["text"], NEW_DIM), dtype=np.float32)
            assert np.allclose(got, want, atol=2e-3), row["id"]
        else:  # history is not re-embedded: it is never ranked
            assert (row["embedding_model"], row["embedding_dim"]) == (OLD, TEST_EMBED_DIM)
    sent = [r["body"] for r in stub.recorded() if r["path"] == EMBED_PATH]
    assert sent and all(b["model"] == NEW and b["dimensions"] == NEW_DIM for b in sent)
    record = await db.fetchrow("SELECT moved, finished_at FROM memory_reembed")
    assert record["moved"] == users * facts and record["finished_at"] is not None
    settings_rows = dict(await db.fetch("SELECT key, value FROM memfleet_setting"))
    assert settings_rows == {"embed_dim": str(NEW_DIM), "embed_model": NEW,
                             "pg_partitions": "16"}
    # Every user's version moved: a consolidation that read before the move re-reads.
    versions = dict(await db.fetch("SELECT user_id, version FROM user_memory_state"))
    assert len(versions) == users

    # c: once the move is finished, the old model no longer boots, the new one does.
    await _check(url, NEW, NEW_DIM)
    with pytest.raises(ConfigurationError, match=f"the fleet embeds with {NEW} at {NEW_DIM}"):
        await _check(url, OLD, TEST_EMBED_DIM)

    # Run again: nothing left to move, verified again, exit 0.
    third = _reembed_process(env, tmp_path / "third.log")
    assert third.wait(timeout=60) == 0
    assert "0 users moved, 0 facts and 0 notes re-embedded, 0 embedding calls" in (
        tmp_path / "third.log").read_text()


async def _wait_for(db: asyncpg.Connection, users: list[str], texts: list[str]) -> None:
    """Until every user's active facts are ``texts``."""
    deadline = time.monotonic() + 60
    while True:
        found = {user: await active_texts(db, user) for user in users}
        if all(t == texts for t in found.values()):
            return
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.1)


async def _hand_over(redis: Redis, users: list[str], *said: str) -> None:
    for user in users:
        await schedule_memory_persistence(redis, "s1", user, [user_msg(t) for t in said])


async def test_workers_keep_committing_during_a_move_and_never_mix_models(
    openai: Settings, stub: StubServer, redis: Redis, db: asyncpg.Connection, tmp_path: Path,
) -> None:
    users = [f"mover-{i}" for i in range(6)]
    env = worker_env(openai, llm_provider="openai", llm_base_url=stub.v1,
                     embed_provider="openai", embed_base_url=stub.v1, embed_model=OLD,
                     extract_model="stub-extract", consolidate_model="stub-consolidate")
    old_fleet = WorkerProcesses(env, tmp_path, count=2)  # set up for the old model
    try:
        await wait_for_workers(redis, workers=2)
        await _hand_over(redis, users, "I live in Berlin.")
        await _wait_for(db, users, ["Lives in Berlin"])

        stub.add_fault("latency_ms", latency_ms=300, count=10_000, path=EMBED_PATH)
        move = _reembed_process(env, tmp_path / "move.log", "--batch", "1")
        try:
            deadline = time.monotonic() + 30
            while not await db.fetchval("SELECT count(*) FROM memory_reembed"):
                assert move.poll() is None and time.monotonic() < deadline
                await asyncio.sleep(0.05)
            # Each user's change of mind is taken while the move runs: some before
            # their user moves, some after.
            await _hand_over(redis, users, "I live in Berlin.", "I just moved to Paris.")
            assert await asyncio.to_thread(move.wait, 90) == 0, (
                tmp_path / "move.log").read_text()
        finally:
            if move.poll() is None:
                move.kill()
                move.wait()
        assert f"all on {NEW} at {NEW_DIM}" in (tmp_path / "move.log").read_text()
        await _wait_for(db, users, ["Lives in Paris"])
        stub.control("DELETE", "/_stub/faults")

        # The old workers still run after the move: they find each user's facts on
        # the new model and write what they add with it.
        await _hand_over(redis, users, "I live in Berlin.", "I just moved to Paris.",
                         "I work as a baker.")
        await _wait_for(db, users, ["Lives in Paris", "Works as baker"])
    finally:
        old_fleet.stop()

    for user in users:
        rows = await db.fetch("SELECT text, embedding_model, embedding_dim FROM memory_fact"
                              " WHERE user_id = $1 ORDER BY id", user)
        assert [r["text"] for r in rows] == ["Lives in Berlin", "Lives in Paris",
                                             "Works as baker"]  # nothing twice
        assert {(r["embedding_model"], r["embedding_dim"]) for r in rows[1:]} == {
            (NEW, NEW_DIM)}
    # Every consolidation was shown the fact it changes: the neighbours came from the
    # model the user's facts were on, whichever that was at the time.
    shown: dict[str, list[list[str]]] = {}
    for document in wire_requests(stub, "memory_consolidation"):
        for candidate in document["candidates"]:
            shown.setdefault(candidate["text"], []).append(
                [n["text"] for n in candidate["neighbors"]])
    assert len(shown.get("Lives in Paris", [])) >= len(users), shown
    assert all(s == ["Lives in Berlin"] for s in shown["Lives in Paris"]), shown
    assert shown.get("Works as baker") and all(s == ["Lives in Paris"]
                                           for s in shown["Works as baker"]), shown
    assert await db.fetchval("SELECT count(*) FROM memory_run WHERE outcome <> 'committed'"
                             " AND user_id LIKE 'mover-%'") == 0

    # The fleet rolled to the new model: its workers boot and go on.
    rolled = openai.model_copy(update={"embed_model": NEW, "embed_dim": NEW_DIM})
    await _hand_over(redis, users[:1], "I live in Berlin.", "I just moved to Paris.",
                     "I work as a baker.", "I moved to Rome.")
    assert (await drain(rolled))["failed"] == 0
    assert await active_texts(db, users[0]) == ["Works as baker", "Lives in Rome"]


async def test_a_second_move_at_once_is_refused(openai: Settings, db: asyncpg.Connection) -> None:
    pool = await create_pool(openai.database_url or "", min_size=1, max_size=2)
    store = PostgresMaintenanceStore(pool)
    try:
        async with pool.acquire() as holder:
            await holder.fetchval("SELECT pg_advisory_lock(hashtextextended('memfleet:reembed',"
                                  " 0))")
            with pytest.raises(MemfleetError, match="another memfleet reembed is running"):
                await reembed(store, HashingEmbedder(64), Target("hashing-v1", 64), batch=8)
            await holder.execute("SELECT pg_advisory_unlock_all()")
        outcome = await reembed(store, HashingEmbedder(64), Target("hashing-v1", 64), batch=8)
        assert (outcome.counts.users, outcome.active) == (0, 0)
    finally:
        await pool.close()


async def test_the_extraction_model_changes_with_its_setting_alone(
    openai: Settings, stub: StubServer, redis: Redis, db: asyncpg.Connection,
) -> None:
    for model, said in (("stub-extract-a", "I live in Berlin."),
                        ("stub-extract-b", "I work as a baker.")):
        configured = openai.model_copy(update={"extract_model": model})
        await check_servers(configured)  # nothing records the extraction model
        await schedule_memory_persistence(redis, "s1", "u1", [user_msg(said)],
                                          queue_name=configured.queue_name)
        assert (await drain(configured))["failed"] == 0
    models = [r["body"]["model"] for r in stub.recorded() if r["path"] == CHAT_PATH
              and json.loads(r["body"]["messages"][1]["content"])["task"] == "fact_extraction"]
    assert models == ["stub-extract-a", "stub-extract-b"]
    assert await db.fetchval("SELECT count(*) FROM memory_fact WHERE user_id = 'u1'"
                             " AND superseded_at IS NULL") == 2


async def test_a_failed_move_exits_non_zero_with_one_line_and_resumes(
    openai: Settings, stub: StubServer, db: asyncpg.Connection, tmp_path: Path,
) -> None:
    await _seed(db, users=2, facts=2)
    env = worker_env(openai, embed_provider="openai", embed_base_url=stub.v1, embed_model=OLD)
    stub.add_fault("401", count=1000, path=EMBED_PATH)
    failed = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "worker.cli", "reembed", "--model", NEW,
                         "--dim", str(NEW_DIM)],
        env=env, capture_output=True, text=True, check=False, timeout=60)
    assert failed.returncode == 2
    assert failed.stdout == ""
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfleet: "), failed.stderr
    assert await _moved(db) == 0
    stub.control("DELETE", "/_stub/faults")
    again = _reembed_process(env, tmp_path / "again.log")
    assert again.wait(timeout=60) == 0
    assert await _moved(db) == 4
