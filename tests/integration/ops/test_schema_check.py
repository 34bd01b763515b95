"""Migrations: a new database gets the baseline, an old one keeps its history,
functions are re-applied when they change, and a process refuses to start on
a database that is behind the code (or was made for another embedding dimension)."""

from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import TEST_EMBED_DIM
from tests.helpers import fences_for_tests
from worker.errors import ConfigurationError
from worker.store import queries
from worker.store.migrate import check_schema, checksum, default_schema_dir, migrate, render
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import Erasure

LEGACY = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_schema"
ROUTINES = sorted(p.stem for p in (default_schema_dir() / "routines").glob("*.sql"))
MIGRATIONS = sorted(p.stem for p in default_schema_dir().glob("0*.sql"))


async def _check(url: str, embed_dim: int = TEST_EMBED_DIM) -> None:
    conn = await asyncpg.connect(url)
    try:
        await check_schema(conn, embed_dim)
    finally:
        await conn.close()


def _copy_schema(tmp_path: Path) -> Path:
    copy = tmp_path / "schema"
    shutil.copytree(default_schema_dir(), copy, ignore=shutil.ignore_patterns("__*"))
    return copy


async def _catalog(url: str) -> dict[str, list[str]]:
    """Everything that makes the schema what it is, in a comparable form."""
    conn = await asyncpg.connect(url)
    try:
        columns = await conn.fetch(
            "SELECT table_name, column_name, data_type, is_nullable, column_default,"
            " generation_expression FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name NOT LIKE 'memfleet_%'"
            " ORDER BY table_name, ordinal_position")
        indexes = await conn.fetch(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname")
        checks = await conn.fetch(
            "SELECT conrelid::regclass::text AS t, pg_get_constraintdef(oid) AS d"
            " FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2")
        functions = await conn.fetch(
            "SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args"
            " FROM pg_proc AS p WHERE p.pronamespace = 'public'::regnamespace"
            " AND p.proname LIKE 'memfleet%' ORDER BY 1")
        storage = await conn.fetchval(
            "SELECT attstorage FROM pg_attribute"
            " WHERE attrelid = 'memory_fact'::regclass AND attname = 'embedding'")
    finally:
        await conn.close()
    return {
        "columns": [str(tuple(r)) for r in columns if r["table_name"] != "memfleet_routine"],
        "indexes": [r["indexdef"] for r in indexes if "memfleet_" not in r["indexdef"]],
        "checks": [f"{r['t']}: {r['d']}" for r in checks if not r["t"].startswith("memfleet_")],
        "functions": [f"{r['proname']}({r['args']})" for r in functions],
        "storage": [storage],
    }


async def test_unmigrated_database_is_refused(empty_database_url: str) -> None:
    with pytest.raises(ConfigurationError, match="not migrated"):
        await _check(empty_database_url)


async def test_a_new_database_gets_the_baseline_and_every_routine(
    empty_database_url: str,
) -> None:
    applied = await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM)
    assert applied == ["0004_baseline", *MIGRATIONS, *(f"routines/{name}" for name in ROUTINES)]
    assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM) == []
    await _check(empty_database_url)


async def test_a_database_migrated_before_the_baseline_ends_the_same_as_a_new_one(
    empty_database_url: str, database_url: str
) -> None:
    # The four migrations of the releases before the baseline, as they recorded them.
    conn = await asyncpg.connect(empty_database_url)
    try:
        await conn.execute(
            "CREATE TABLE memfleet_migration (version integer PRIMARY KEY, name text NOT NULL,"
            " checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        for path in sorted(LEGACY.glob("*.sql")):
            text = render(path.read_text("utf-8"), TEST_EMBED_DIM)
            await conn.execute(text)
            await conn.execute("INSERT INTO memfleet_migration VALUES ($1, $2, $3)",
                               int(path.name[:4]), path.stem[5:], checksum(text))
    finally:
        await conn.close()
    behind = ("lacks 0005_cursor_handover_seq, 0006_user_scoped_sessions, 0007_memory_model,"
              " 0008_run_owners, 0009_keyed_erase_fences, 0010_service_keys,"
              " 0011_held_proposal_resolution, 0012_fact_text_inline, 0013_partition_by_user,"
              " 0014_held_additions, 0015_manual_fact_via, 0016_persons, 0017_notes,"
              " 0018_portraits, 0019_stable_order_index, 0020_held_person,"
              " routines/")
    with pytest.raises(ConfigurationError, match=behind):
        await _check(empty_database_url)
    assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM) == [
        *MIGRATIONS, *(f"routines/{name}" for name in ROUTINES)]
    await _check(empty_database_url)
    assert await _catalog(empty_database_url) == await _catalog(database_url)


async def test_a_changed_routine_is_applied_again_and_a_missing_one_refused(
    empty_database_url: str, tmp_path: Path
) -> None:
    schema = _copy_schema(tmp_path)
    held_back = schema / "routines" / f"{ROUTINES[0]}.sql"
    text = held_back.read_text("utf-8")
    held_back.unlink()  # a database migrated by a release without this routine
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=schema)
    with pytest.raises(ConfigurationError, match=f"lacks routines/{ROUTINES[0]}"):
        await _check(empty_database_url)
    assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM) == [
        f"routines/{ROUTINES[0]}"]
    held_back.write_text(text + "\n-- changed\n", "utf-8")
    assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=schema) == [
        f"routines/{ROUTINES[0]}"]


async def test_a_new_numbered_migration_is_required_then_applied_once(
    empty_database_url: str, tmp_path: Path
) -> None:
    schema = _copy_schema(tmp_path)
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=schema)
    (schema / "0099_fact_note.sql").write_text(
        "ALTER TABLE memory_fact ADD COLUMN note text;\n", "utf-8")
    conn = await asyncpg.connect(empty_database_url)
    try:
        with pytest.raises(ConfigurationError, match="lacks 0099_fact_note"):
            await check_schema(conn, TEST_EMBED_DIM, schema_dir=schema)
    finally:
        await conn.close()
    assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=schema) == [
        "0099_fact_note"]
    (schema / "0099_fact_note.sql").write_text("-- edited after release\n", "utf-8")
    with pytest.raises(ConfigurationError, match="applied with different contents"):
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=schema)


async def test_other_embedding_dimension_is_refused(database_url: str) -> None:
    await _check(database_url)
    with pytest.raises(ConfigurationError, match=f"migrated with {TEST_EMBED_DIM}"):
        await _check(database_url, embed_dim=TEST_EMBED_DIM * 2)


async def test_a_missing_schema_is_an_error(empty_database_url: str, tmp_path: Path) -> None:
    # An install that lost schema/ must never report "up to date".
    with pytest.raises(ConfigurationError, match=r"baseline\.sql is missing"):
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=tmp_path / "gone")
    with pytest.raises(ConfigurationError, match=r"baseline\.sql is missing"):
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=tmp_path)


async def test_cursors_survive_the_move_to_user_scoped_sessions(
    empty_database_url: str, tmp_path: Path
) -> None:
    # A database at 0005: session_cursor keyed by session id alone.
    before = _copy_schema(tmp_path)
    for later in before.glob("0*.sql"):
        if later.name >= "0006":
            later.unlink()  # 0006 and what builds on it
    for routine in (before / "routines").glob("*.sql"):
        routine.unlink()  # the routines of 0006 need its tables; they come with it
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=before)
    conn = await asyncpg.connect(empty_database_url)
    try:
        await conn.execute(
            "INSERT INTO session_cursor (session_id, user_id, version, last_hash, window_hash,"
            " position, processed_count, summary, handover_seq) VALUES"
            " ('1', 'alice', 3, 'h', 'w', 4, 5, 'alice likes jazz', 7),"
            " ('2', 'bob', 1, 'h2', 'w2', 0, 1, NULL, 0)")
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM)
        rows = await conn.fetch("SELECT session_id, user_id, version, position, processed_count,"
                                " summary, handover_seq FROM session_cursor ORDER BY user_id")
        assert [tuple(r) for r in rows] == [("1", "alice", 3, 4, 5, "alice likes jazz", 7),
                                            ("2", "bob", 1, 0, 1, None, 0)]
        # Now bob may have a session "1" of his own.
        await conn.execute(
            "INSERT INTO session_cursor (session_id, user_id, version, last_hash, window_hash,"
            " position) VALUES ('1', 'bob', 1, 'h', 'w', 0)")
        key = await conn.fetchval(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'session_cursor'::regclass AND contype = 'p'")
        assert key == "PRIMARY KEY (user_id, session_id)"
    finally:
        await conn.close()


async def test_facts_of_the_previous_release_stay_valid_through_the_memory_model(
    empty_database_url: str, tmp_path: Path
) -> None:
    # A database at 0006, with a chain, a retracted fact and a manual one.
    before = _copy_schema(tmp_path)
    for later in before.glob("0*.sql"):
        if later.name >= "0007":
            later.unlink()  # 0007 and what builds on it
    for routine in (before / "routines").glob("*.sql"):
        routine.unlink()  # this release's routines need 0007's columns
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=before)
    vector = "[" + ",".join(["0.5"] * TEST_EMBED_DIM) + "]"
    conn = await asyncpg.connect(empty_database_url)
    try:
        await conn.execute(
            "INSERT INTO memory_fact (user_id, text, category, importance, embedding,"
            " embedding_model, observed_at, source_kind) VALUES"
            " ('ann', 'Lives in Paris', 'fact', 8, $1, 'm', '2025-01-01', 'extracted'),"
            " ('ann', 'Lives in Lyon', 'fact', 8, $1, 'm', '2026-01-01', 'extracted'),"
            " ('ann', 'Uses Vim', 'preference', 5, $1, 'm', '2025-06-01', 'extracted'),"
            " ('ann', 'Likes jazz', 'preference', 5, $1, 'm', '2025-07-01', 'manual')", vector)
        await conn.execute(
            "UPDATE memory_fact SET superseded_at = '2026-01-01', superseded_by ="
            " (SELECT id FROM memory_fact WHERE text = 'Lives in Lyon')"
            " WHERE text = 'Lives in Paris'")
        await conn.execute("UPDATE memory_fact SET superseded_at = '2026-02-01'"
                           " WHERE text = 'Uses Vim'")
        await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM)
        rows = {r["text"]: r for r in await conn.fetch("SELECT * FROM memory_fact")}
        assert {t: r["superseded_reason"] for t, r in rows.items()} == {
            "Lives in Paris": "updated", "Lives in Lyon": None, "Uses Vim": "deleted",
            "Likes jazz": None}
        for row in rows.values():
            assert row["valid_from"] == row["observed_at"]
            assert (row["scope"], row["agent_id"], row["basis"]) == ("profile", None, "stated")
            assert (row["pinned"], row["expires_at"], row["valid_to"]) == (False, None, None)
            assert row["embedding_dim"] == TEST_EMBED_DIM
        assert rows["Likes jazz"]["confidence"] == 1.0
        assert rows["Lives in Lyon"]["confidence"] == pytest.approx(0.9)
        storage = await conn.fetchval(
            "SELECT attstorage FROM pg_attribute"
            " WHERE attrelid = 'memory_fact'::regclass AND attname = 'embedding'")
        assert storage == b"p", "the embedding stays in line after losing its fixed dimension"
    finally:
        await conn.close()


async def test_runs_without_a_user_get_their_one_owner_or_nobody(
    empty_database_url: str, tmp_path: Path
) -> None:
    # A database at 0007 holding audit rows of the release before user-scoped
    # sessions: failures recorded with a session id and no user.
    before = _copy_schema(tmp_path)
    for later in before.glob("0*.sql"):
        if later.name >= "0008":
            later.unlink()
    await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM, schema_dir=before)
    conn = await asyncpg.connect(empty_database_url)
    try:
        async def run(job: str, session: str | None, user: str | None, minute: int) -> None:
            await conn.execute(
                "INSERT INTO memory_run (job_id, session_id, user_id, outcome, started_at,"
                " finished_at) VALUES ($1, $2, $3, 'failed', now(),"
                " '2026-01-01'::timestamptz + make_interval(mins => $4))",
                job, session, user, minute)

        # "1": alice and bob both use it now; "solo": alice's alone, run before the
        # failure; "early": carol's, but the failure came before her first run;
        # "gone": nobody's any more.
        await run("alice-1", "1", "alice", 1)
        await run("bob-1", "1", "bob", 2)
        await run("null-1", "1", None, 3)
        await run("alice-solo", "solo", "alice", 4)
        await run("null-solo", "solo", None, 5)
        await run("null-early", "early", None, 6)
        await run("carol-early", "early", "carol", 7)
        await run("null-gone", "gone", None, 8)
        await conn.execute(
            "INSERT INTO session_cursor (session_id, user_id, version, last_hash, window_hash,"
            " position) VALUES ('1', 'alice', 1, 'h', 'w', 0), ('1', 'bob', 1, 'h', 'w', 0)")
        runs_of = queries.load("export")["runs"]

        async def exported(user: str) -> list[str]:
            ids = [r["id"] for r in await conn.fetch(runs_of, user)]
            return [r["job_id"] for r in await conn.fetch(
                "SELECT job_id FROM memory_run WHERE id = ANY($1::bigint[]) ORDER BY id", ids)]

        assert await migrate(empty_database_url, embed_dim=TEST_EMBED_DIM) == [
            "0008_run_owners", "0009_keyed_erase_fences", "0010_service_keys",
            "0011_held_proposal_resolution", "0012_fact_text_inline", "0013_partition_by_user",
            "0014_held_additions", "0015_manual_fact_via", "0016_persons", "0017_notes",
            "0018_portraits", "0019_stable_order_index", "0020_held_person"]
        owners = {r["job_id"]: (r["user_id"], r["session_id"]) for r in await conn.fetch(
            "SELECT job_id, user_id, session_id FROM memory_run")}
        assert owners == {
            "alice-1": ("alice", "1"), "bob-1": ("bob", "1"), "null-1": (None, None),
            "alice-solo": ("alice", "solo"), "null-solo": ("alice", "solo"),
            "null-early": (None, None), "carol-early": ("carol", "early"),
            "null-gone": (None, None)}
        assert await exported("alice") == ["alice-1", "alice-solo", "null-solo"]
        assert await exported("bob") == ["bob-1"]
        with pytest.raises(asyncpg.CheckViolationError):
            await run("late", "1", None, 9)
        # bob's erase takes bob's rows alone.
        pool = await create_pool(empty_database_url, min_size=1, max_size=1)
        try:
            store = PostgresStore(pool, fences_for_tests())
            counts = await store.erase_user(Erasure("bob", erased_seq=1))
        finally:
            await pool.close()
        assert counts["memory_run"] == 1
        assert await exported("alice") == ["alice-1", "alice-solo", "null-solo"]
        assert await conn.fetchval("SELECT count(*) FROM memory_run") == 7
    finally:
        await conn.close()
