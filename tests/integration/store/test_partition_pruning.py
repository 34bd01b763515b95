"""Every per-user statement of the store reads one partition (schema/0013).

Each statement of worker/store/sql/*.sql that names a partitioned table is
EXPLAINed with sample parameters and a custom plan (the values known, as the
planner prunes with them), on the test database (MEMFLEET_PG_PARTITIONS'
default, 16): no partitioned table may show more than one of its partitions.
The statements of schema/routines/ (the commit routine) are checked the same
way on a real commit, through auto_explain's plans of nested statements.
Statements meant to span users are listed in OPERATOR, each with why; a new
statement that is neither pruned nor listed fails here.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
import pytest

from tests.conftest import TEST_EMBED_DIM
from tests.helpers import fences_for_tests
from worker.store import halfvec, queries
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.run_commit import commit_arguments
from worker.store.types import (
    CursorAdvance,
    ExistingRow,
    HoldProposal,
    InsertFact,
    RunCommit,
    RunRecord,
    SupersedeFact,
)

PARTITIONED = ("memory_fact", "memory_held_proposal", "session_cursor", "memory_person",
               "memory_person_label", "memory_portrait", "memory_note")
NAMES_PARTITIONED = re.compile(r"\b(" + "|".join(PARTITIONED) + r")\b")

# Statements on partitioned tables that span users on purpose: operator commands.
OPERATOR = {
    "expiry.lock_due_users": "the expiry pass: finds the users with due facts, all of them",
    "expiry.expire_due": "the expiry pass: due facts of the batch of users it locked",
    "reembed.users_left": "memfleet reembed: finds the users still on the old model",
    "reembed.verify": "memfleet reembed: counts every active row at the end of a move",
    "importer.known_keys": "memfleet import: a batch of lines of many users, one lookup",
    "importer.imported_blobs": "memfleet import: a batch of legacy blobs of many users",
    "importer.active_texts": "memfleet import: the active texts of the batch's users",
    "note_promotion.users_to_check": "the notes' promotion job: the users with new notes",
}

USER = "alice"
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def store_statements() -> dict[str, str]:
    """Every named statement of the store's .sql files, as ``file.name``, composed
    with the rules of fact_rules.sql as the store runs it."""
    return queries.statements()


def _vector() -> Any:
    return halfvec.encode_rows(np.full((1, TEST_EMBED_DIM), 0.5, dtype=np.float32))[0]


def _sample(type_name: str) -> Any:
    """A value of the parameter's type; every text is the user's id."""
    if type_name.endswith("[]"):
        return [_sample(type_name[:-2])]
    samples: dict[str, Any] = {
        "text": USER, "smallint": 1, "integer": 1, "bigint": 1, "real": 0.5,
        "double precision": 1.0, "numeric": 1, "boolean": True,
        "timestamp with time zone": NOW, "int2": 1, "int4": 1, "int8": 1, "float4": 0.5,
        "float8": 1.0, "bool": True, "timestamptz": NOW, "bytea": b"k", "jsonb": "{}",
        "halfvec": _vector(),
    }
    return samples[type_name]


async def _connect(url: str, **settings: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(url, server_settings={
        "plan_cache_mode": "force_custom_plan", **settings})
    await conn.set_type_codec("halfvec", encoder=halfvec.encode, decoder=bytes,
                              format="binary")
    return conn


async def _parents(conn: asyncpg.Connection) -> dict[str, str]:
    rows = await conn.fetch(
        "SELECT c.relname AS child, p.relname AS parent FROM pg_inherits AS i"
        " JOIN pg_class AS c ON c.oid = i.inhrelid JOIN pg_class AS p ON p.oid = i.inhparent"
        " WHERE p.relkind = 'p' AND c.relkind = 'r'")
    return {r["child"]: r["parent"] for r in rows}


def _relations(plan: dict[str, Any]) -> list[str]:
    out = [plan["Relation Name"]] if "Relation Name" in plan else []
    for child in plan.get("Plans", []):
        out += _relations(child)
    return out


def scanned(plans: list[dict[str, Any]], parents: dict[str, str]) -> dict[str, set[str]]:
    """Per partitioned table, the partitions the plans read."""
    seen: dict[str, set[str]] = {}
    for plan in plans:
        for relation in _relations(plan):
            if relation in parents:
                seen.setdefault(parents[relation], set()).add(relation)
    return seen


async def explain(conn: asyncpg.Connection, sql: str) -> dict[str, Any]:
    statement = await conn.prepare(sql)
    args = [_sample(p.name) for p in statement.get_parameters()]
    text = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    plan: dict[str, Any] = json.loads(text)[0]["Plan"]
    return plan


async def test_every_per_user_statement_reads_one_partition(database_url: str) -> None:
    statements = store_statements()
    assert set(OPERATOR) <= set(statements), "OPERATOR names a statement that is gone"
    conn = await _connect(database_url)
    try:
        parents = await _parents(conn)
        assert set(parents.values()) == set(PARTITIONED)
        assert Counter(parents.values())["memory_fact"] == 16
        checked, unpruned = [], {}
        for name, sql in statements.items():
            if name in OPERATOR or not NAMES_PARTITIONED.search(sql):
                continue
            seen = scanned([await explain(conn, sql)], parents)
            checked.append(name)
            many = {table: len(parts) for table, parts in seen.items() if len(parts) > 1}
            if many:
                unpruned[name] = many
    finally:
        await conn.close()
    assert not unpruned, (
        f"statements reading more than one partition (partitions per table): {unpruned};"
        " scope them to one user (user_id = $n) or list them in OPERATOR with why")
    # The check ran over the store's statements, not over nothing.
    assert len(checked) >= 30, checked


def _fact(ref: int, text: str, dim: int, supersedes: Any = None) -> InsertFact:
    embedding = np.zeros(TEST_EMBED_DIM, dtype=np.float32)
    embedding[dim] = 1.0
    return InsertFact(ref=ref, text=text, category="fact", importance=5, embedding=embedding,
                      supersedes=supersedes)


def _commit(expected: int, version: int, writes: tuple[Any, ...], n: int) -> RunCommit:
    return RunCommit(
        cursor=CursorAdvance(session_id="s1", user_id=USER, expected_version=expected,
                             last_hash=f"h{n}", window_hash=f"w{n}", position=n, processed=1,
                             user_turns=1),
        user_version=version, writes=writes, observed_at=NOW, embedding_model="test",
        source_session_id="s1",
        run=RunRecord(job_id=f"j{n}", job_try=1, session_id="s1", user_id=USER,
                      outcome="committed", started_at=NOW))


async def test_the_commit_routine_reads_one_partition_of_each_table(database_url: str) -> None:
    pool = await create_pool(database_url, min_size=1, max_size=1)
    try:
        store = PostgresStore(pool, fences_for_tests())
        await store.commit_run(_commit(0, 0, (_fact(0, "Lives in Oslo", 0),
                                              _fact(1, "Likes jazz", 1)), 0))
        ids = [f.id for f in await store.facts(USER)]
    finally:
        await pool.close()
    # Then a commit with every kind of write: an insert superseding a row, a
    # supersession of a row inserted in the same commit, a delete and a hold.
    second = _commit(1, 1, (_fact(0, "Lives in Bergen", 2, supersedes=ExistingRow(ids[0])),
                            _fact(1, "Plays chess", 3), SupersedeFact(ExistingRow(ids[1])),
                            HoldProposal(ExistingRow(ids[1]), "UPDATE", "pinned", "x")), 1)
    plans: list[dict[str, Any]] = []
    conn = await _connect(database_url, session_preload_libraries="auto_explain",
                          client_min_messages="log")
    try:
        for setting in ("auto_explain.log_min_duration = 0",
                        "auto_explain.log_nested_statements = on",
                        "auto_explain.log_format = json"):
            await conn.execute(f"SET {setting}")

        def collect(_: Any, message: asyncpg.PostgresLogMessage) -> None:
            text = message.message
            if "plan:" in text:
                plans.append(json.loads(text[text.index("{"):])["Plan"])

        conn.add_log_listener(collect)
        parents = await _parents(conn)
        fence = fences_for_tests().of(USER).hex()
        await conn.fetchval(queries.load("pipeline")["commit_run"],
                            *commit_arguments(second, fence))
    finally:
        await conn.close()
    seen = scanned(plans, parents)
    # The cursor update, the supersessions' reads and the hold's join were planned.
    assert {"memory_fact", "session_cursor"} <= set(seen), seen
    assert all(len(parts) == 1 for parts in seen.values()), seen


@pytest.mark.parametrize("predicate", ["WHERE user_id = $1 AND id = $2", "WHERE id = $2"])
async def test_the_check_sees_a_statement_without_its_user(
    database_url: str, predicate: str
) -> None:
    """The check itself: a fact read by id alone reads every partition."""
    conn = await _connect(database_url)
    try:
        seen = scanned([await explain(
            conn, f"SELECT text FROM memory_fact {predicate} AND $1::text IS NOT NULL")],  # noqa: S608
            await _parents(conn))
    finally:
        await conn.close()
    assert len(seen["memory_fact"]) == (1 if "user_id" in predicate else 16)
