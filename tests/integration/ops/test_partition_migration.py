"""0013: a database at 0012 holding facts, chains, runs, held proposals and cursors,
written through the real store, is partitioned by user with every row, id and
chain kept; the store reads the same afterwards and commits go on. The count is
fixed at that point: migrate refuses another one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.conftest import TEST_EMBED_DIM
from tests.contract.test_store_contract import NOW, advance, commit, insert, vec
from tests.helpers import fences_for_tests
from worker.errors import ConfigurationError
from worker.store.migrate import default_schema_dir, migrate
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import Acceptance, ExistingRow, HoldProposal, RunRecord, SupersedeFact

USERS = [f"user-{n}" for n in range(8)]
TABLES = ("memory_fact", "memory_held_proposal", "session_cursor", "memory_run",
          "user_memory_state")


def _schema_0012(tmp_path: Path) -> Path:
    before = tmp_path / "schema"
    shutil.copytree(default_schema_dir(), before, ignore=shutil.ignore_patterns("__*"))
    for later in before.glob("0*.sql"):
        if later.name >= "0013":
            later.unlink()
    return before


async def _version(store: PostgresStore, user: str) -> int:
    return (await store.neighbors(user, vec(0)[None, :], 1)).version


async def _fill(store: PostgresStore, user: str, accept: bool) -> None:
    """Two sessions; a chain of two versions, a deleted fact, a pinned one and a
    proposal held against it (accepted for some users: result_fact_id set)."""
    await store.commit_run(commit(advance(0, user=user), (
        insert(0, "Lives in Oslo", vec(0)), insert(1, "Likes jazz", vec(1))), 0))
    oslo, jazz = await store.facts(user)
    await store.commit_run(commit(advance(1, user=user, position=1), (
        insert(0, "Lives in Bergen", vec(2), supersedes=ExistingRow(oslo.id)),), 1))
    await store.set_pinned(user, jazz.id, True)
    hold = HoldProposal(ExistingRow(jazz.id), "UPDATE", "pinned", "Likes blues")
    await store.commit_run(commit(advance(2, user=user, position=2), (hold,),
                                  await _version(store, user)))
    await store.commit_run(commit(advance(0, user=user, session="s2"), (
        insert(0, "Plays chess", vec(3)),), await _version(store, user)))
    (chess,) = [f for f in await store.facts(user) if f.text == "Plays chess"]
    await store.commit_run(commit(advance(1, user=user, session="s2", position=1), (
        SupersedeFact(ExistingRow(chess.id)),), await _version(store, user)))
    if accept:
        (proposal,) = await store.held_proposals(user)
        done = await store.accept_held(user, proposal["id"], Acceptance(
            resolved_by="user", embedding=vec(4), embedding_model="test"))
        assert done.status == "done"


async def _reads(store: PostgresStore) -> dict[str, Any]:
    """What the store says of every user."""
    out: dict[str, Any] = {}
    for user in USERS:
        facts = await store.facts(user, include_superseded=True)
        out[user] = {
            "facts": facts,
            "chains": [await store.chain(user, f.id) for f in facts],
            "held": await store.held_proposals(user, state="all"),
            "runs": await store.runs(user),
            "cursors": [(await store.load_session(user, s)).cursor for s in ("s1", "s2")],
            "version": await _version(store, user),
        }
    return out


async def _rows(conn: asyncpg.Connection) -> dict[str, list[Any]]:
    """Every row of the tables the migration moves or must leave alone, whole."""
    return {table: [json.loads(r[0]) for r in await conn.fetch(
        f"SELECT to_jsonb(t)::text FROM {table} AS t ORDER BY 1")]  # noqa: S608
        for table in TABLES}


async def test_a_populated_database_is_partitioned_with_every_row_kept(
    empty_database_url: str, tmp_path: Path
) -> None:
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=_schema_0012(tmp_path))
    pool = await create_pool(empty_database_url, min_size=1, max_size=2)
    conn = await asyncpg.connect(empty_database_url)
    try:
        # This release's store reads the held-proposal columns 0014 adds and the fact
        # column 0015 adds; the 0012 tables get them as those add them (all NULL here),
        # so the reads before and after compare like with like. 0013 rebuilds the
        # tables without them.
        for later in sorted(default_schema_dir().glob("001[45]_*.sql")):
            await conn.execute(later.read_text("utf-8"))
        # And the columns 0016 adds to facts and 0020 to held proposals (their foreign
        # keys name the person tables, which need 0013's partitions).
        await conn.execute("ALTER TABLE memory_fact ADD COLUMN person_id bigint")
        await conn.execute("ALTER TABLE memory_held_proposal ADD COLUMN person_id bigint")
        store = PostgresStore(pool, fences_for_tests())
        for n, user in enumerate(USERS):
            await _fill(store, user, accept=n % 2 == 0)
        # A run that failed before it knew its user: no user, no session.
        await store.record_run(RunRecord(job_id="lost", job_try=1, session_id=None,
                                         user_id=None, outcome="failed",
                                         started_at=NOW))
        rows_before, reads_before = await _rows(conn), await _reads(store)
        assert await conn.fetchval("SELECT count(*) FROM pg_inherits") == 0
        assert len(rows_before["memory_fact"]) == 4 * len(USERS) + len(USERS) // 2
        assert sum(1 for r in rows_before["memory_held_proposal"]
                   if r["result_fact_id"] is not None) == len(USERS) // 2
        last_fact = max(r["id"] for r in rows_before["memory_fact"])
        last_held = max(r["id"] for r in rows_before["memory_held_proposal"])

        assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, pg_partitions=4) == [
            "0013_partition_by_user", "0014_held_additions", "0015_manual_fact_via",
            "0016_persons", "0017_notes", "0018_portraits", "0019_stable_order_index",
            "0020_held_person"]

        parts = await conn.fetch(
            "SELECT p.relname AS parent, count(*) AS n FROM pg_inherits AS i"
            " JOIN pg_class AS p ON p.oid = i.inhparent JOIN pg_class AS c ON c.oid = i.inhrelid"
            " WHERE c.relkind = 'r' GROUP BY 1 ORDER BY 1")
        assert [(r["parent"], r["n"]) for r in parts] == [
            ("memory_fact", 4), ("memory_held_proposal", 4), ("memory_note", 4),
            ("memory_person", 4), ("memory_person_label", 4), ("memory_portrait", 4),
            ("session_cursor", 4)]
        # The users' rows lie in more than one partition (the copy routed them).
        spread = await conn.fetchval(
            "SELECT count(DISTINCT tableoid) FROM memory_fact")
        assert spread > 1
        assert await _rows(conn) == rows_before
        assert await _reads(store) == reads_before

        # Commits go on: new ids above the old ones, a chain grown from a copied row,
        # a new hold against a copied fact.
        user = USERS[1]
        bergen = next(f for f in await store.facts(user) if f.text == "Lives in Bergen")
        jazz = next(f for f in await store.facts(user) if f.text == "Likes jazz")
        await store.commit_run(commit(advance(3, user=user, position=3), (
            insert(0, "Lives in Tromsø", vec(5), supersedes=ExistingRow(bergen.id)),
            HoldProposal(ExistingRow(jazz.id), "DELETE", "pinned")),
            await _version(store, user)))
        chain = await store.chain(user, bergen.id)
        assert [f.text for f in chain] == ["Lives in Oslo", "Lives in Bergen", "Lives in Tromsø"]
        assert chain[-1].id > last_fact
        assert max(p["id"] for p in await store.held_proposals(user, state="all")) > last_held
        # The keys now say what the code checked: a chain stays within its user.
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await conn.execute("UPDATE memory_fact SET superseded_by = $1, superseded_at = now()"
                               " WHERE user_id = $2 AND id = $3",
                               chain[-1].id, USERS[2], reads_before[USERS[2]]["facts"][0].id)
    finally:
        await conn.close()
        await pool.close()

    with pytest.raises(ConfigurationError, match="partitioned into 4 at install"):
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, pg_partitions=16)
    assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, pg_partitions=4) == []


async def test_one_partition_is_a_working_install(empty_database_url: str) -> None:
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, pg_partitions=1)
    pool = await create_pool(empty_database_url, min_size=1, max_size=1)
    try:
        store = PostgresStore(pool, fences_for_tests())
        await store.commit_run(commit(advance(0), (insert(0, "Lives in Oslo", vec(0)),)))
        (oslo,) = await store.facts("u1")
        await store.commit_run(commit(advance(1, position=1), (
            insert(0, "Lives in Bergen", vec(1), supersedes=ExistingRow(oslo.id)),), 1))
        assert [f.text for f in await store.chain("u1", oslo.id)] == [
            "Lives in Oslo", "Lives in Bergen"]
        assert await pool.fetchval(
            "SELECT value FROM memfleet_setting WHERE key = 'pg_partitions'") == "1"
        assert await pool.fetchval(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'memory_fact'::regclass") == 1
    finally:
        await pool.close()
