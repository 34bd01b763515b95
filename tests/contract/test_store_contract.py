"""One contract, two stores: every test runs on PostgresStore and on InMemoryStore.

The in-memory store stands in for PostgreSQL in the pipeline's unit tests;
these tests are what makes that stand-in honest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from tests.conftest import TEMPLATE_DB, TEST_EMBED_DIM, throwaway_database
from tests.helpers import fences_for_tests
from worker.embedded import EmbeddedPostgres
from worker.errors import (
    CursorFenced,
    MemoryOptedOut,
    StoreError,
    UserErased,
    UserVersionConflict,
)
from worker.store.base import MemoryStore, PipelineStore
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import (
    CursorAdvance,
    CursorState,
    DeadLetter,
    Erasure,
    ExistingRow,
    InsertFact,
    NeighborRow,
    Neighbors,
    NewFact,
    NewRow,
    RunCommit,
    RunRecord,
    SupersedeFact,
    Vector,
    Write,
)
from worker.testing.in_memory_store import InMemoryStore

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
# The erase's counts of the portrait's tables (docs/portrait.md): none written here.
NO_PORTRAIT = {"memory_portrait": 0, "user_portrait_choice": 0}


def _pair(found: Neighbors) -> tuple[int, list[list[NeighborRow]]]:
    return found.version, found.rows


class Store(PipelineStore, MemoryStore):
    """Both interfaces, as each implementation provides them."""


@pytest.fixture(params=["postgres", "memory"])
def server(request: pytest.FixtureRequest) -> EmbeddedPostgres | None:
    """The PostgreSQL server for the postgres case (started outside the test's loop)."""
    if request.param == "memory":
        return None
    request.getfixturevalue("template_url")
    pg: EmbeddedPostgres = request.getfixturevalue("pg_server")
    return pg


@pytest.fixture
async def store(server: EmbeddedPostgres | None) -> AsyncIterator[Any]:
    if server is None:
        yield InMemoryStore()
        return
    async with throwaway_database(server, TEMPLATE_DB) as url:
        pool = await create_pool(url, min_size=1, max_size=2)
        try:
            yield PostgresStore(pool, fences_for_tests())
        finally:
            await pool.close()


def vec(*hot: int) -> Vector:
    """A unit vector with weight on the given dimensions."""
    v = np.zeros(TEST_EMBED_DIM, dtype=np.float32)
    v[list(hot)] = 1.0
    return v / np.linalg.norm(v)


def run_row(session: str = "s1", user: str = "u1", outcome: str = "committed") -> RunRecord:
    return RunRecord(job_id="j", job_try=1, session_id=session, user_id=user, outcome=outcome,
                     started_at=NOW)


def advance(expected: int, *, session: str = "s1", user: str = "u1", position: int = 0,
            summary: str | None = None, user_turns: int = 1, seq: int = 0) -> CursorAdvance:
    return CursorAdvance(session_id=session, user_id=user, expected_version=expected,
                         last_hash=f"h{position}", window_hash=f"w{position}", position=position,
                         processed=1, user_turns=user_turns, summary=summary, handover_seq=seq)


async def cursor_of(store: Store, session: str, user: str = "u1") -> CursorState | None:
    return (await store.load_session(user, session)).cursor


def commit(cursor: CursorAdvance, writes: tuple[Write, ...], user_version: int | None = 0,
           observed_at: datetime = NOW) -> RunCommit:
    return RunCommit(cursor=cursor, user_version=user_version, writes=writes,
                     observed_at=observed_at, embedding_model="test",
                     source_session_id=cursor.session_id,
                     run=replace(run_row(cursor.session_id, cursor.user_id),
                                 handover_seq=cursor.handover_seq))


def insert(ref: int, text: str, embedding: Vector, supersedes: Any = None) -> InsertFact:
    return InsertFact(ref=ref, text=text, category="fact", importance=5, embedding=embedding,
                      supersedes=supersedes)


async def test_a_first_commit_creates_the_cursor_and_the_facts(store: Store) -> None:
    assert await cursor_of(store, "s1") is None
    await store.commit_run(commit(advance(0), (insert(0, "Lives in Oslo", vec(0)),)))
    cursor = await cursor_of(store, "s1")
    assert cursor is not None
    assert (cursor.version, cursor.user_id, cursor.last_hash, cursor.position) == (1, "u1", "h0", 0)
    (fact,) = await store.facts("u1")
    assert (fact.text, fact.source_session_id, fact.source_kind) == ("Lives in Oslo", "s1",
                                                                     "extracted")
    assert fact.observed_at == NOW and fact.superseded_at is None


async def test_the_cursor_fence_refuses_a_stale_commit_and_writes_nothing(store: Store) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Likes jazz", vec(0)),)))
    for stale in (advance(0, position=1), advance(7, position=1)):
        with pytest.raises(CursorFenced):
            await store.commit_run(commit(stale, (insert(0, "Likes rock", vec(1)),), None))
    assert [f.text for f in await store.facts("u1")] == ["Likes jazz"]
    assert len(await store.runs("u1", session_id="s1")) == 1
    cursor = await cursor_of(store, "s1")
    assert cursor is not None and cursor.version == 1


async def test_the_cursor_belongs_to_its_user(store: Store) -> None:
    await store.commit_run(commit(advance(0), ()))
    with pytest.raises(CursorFenced):
        await store.commit_run(commit(advance(1, user="u2"), (), None))


async def test_the_user_version_fence_refuses_a_commit_on_stale_neighbours(store: Store) -> None:
    await store.commit_run(commit(advance(0, session="a"), (insert(0, "Likes jazz", vec(0)),)))
    version, _ = _pair(await store.neighbors("u1", vec(0)[None, :], 5))
    assert version == 1
    with pytest.raises(UserVersionConflict):
        await store.commit_run(commit(advance(0, session="b"), (insert(0, "x", vec(1)),), 0))
    assert await cursor_of(store, "b") is None, "a lost compare-and-set moves no cursor"
    await store.commit_run(commit(advance(0, session="b"), (insert(0, "Likes rock", vec(1)),), 1))
    assert len(await store.facts("u1")) == 2


async def test_supersession_chains_within_one_commit(store: Store) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Lives in Paris", vec(0)),)))
    (paris,) = await store.facts("u1")
    later = NOW + timedelta(days=1)
    await store.commit_run(commit(advance(1, position=1), (
        insert(0, "Lives in Lyon", vec(0, 1), ExistingRow(paris.id)),
        insert(1, "Lives in Nice", vec(0, 2), NewRow(0)),
    ), 1, later))
    active = await store.facts("u1")
    assert [f.text for f in active] == ["Lives in Nice"]
    chain = await store.chain("u1", paris.id)
    assert [f.text for f in chain] == ["Lives in Paris", "Lives in Lyon", "Lives in Nice"]
    assert chain[0].superseded_by == chain[1].id and chain[1].superseded_by == chain[2].id
    assert chain[0].superseded_at == later
    assert await store.chain("u1", chain[2].id) == chain
    assert await store.chain("u2", paris.id) == [], "another user's chain reads as missing"


async def test_delete_supersedes_without_successor_and_history_stays(store: Store) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Has a cat", vec(0)),)))
    (cat,) = await store.facts("u1")
    await store.commit_run(commit(advance(1, position=1), (SupersedeFact(ExistingRow(cat.id)),),
                                  1))
    assert await store.facts("u1") == []
    (kept,) = await store.facts("u1", include_superseded=True)
    assert kept.id == cat.id and kept.superseded_at is not None and kept.superseded_by is None


async def test_superseding_an_inactive_fact_is_a_conflict_and_rolls_back(store: Store) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Has a cat", vec(0)),)))
    (cat,) = await store.facts("u1")
    await store.remove_fact("u1", cat.id)
    with pytest.raises(UserVersionConflict):
        await store.commit_run(commit(advance(1, position=1), (
            insert(0, "Has a dog", vec(1)), SupersedeFact(ExistingRow(cat.id))), None))
    assert await store.facts("u1") == []
    cursor = await cursor_of(store, "s1")
    assert cursor is not None and cursor.version == 1


async def test_neighbors_are_the_users_own_active_facts_nearest_first(store: Store) -> None:
    await store.commit_run(commit(advance(0), (
        insert(0, "near", vec(0)), insert(1, "middle", vec(0, 1, 2)), insert(2, "far", vec(2)),
        insert(3, "gone", vec(0)),
    )))
    gone = next(f for f in await store.facts("u1") if f.text == "gone")
    await store.remove_fact("u1", gone.id)
    await store.commit_run(commit(advance(0, session="x", user="u2"),
                                  (insert(0, "other user", vec(0)),)))
    version, found = _pair(await store.neighbors("u1", np.stack([vec(0), vec(2)]), 2))
    assert version == 2
    assert [[n.text for n in per] for per in found] == [["near", "middle"], ["far", "middle"]]
    assert found[0][0].distance == pytest.approx(0.0, abs=1e-3)
    assert found[0][1].distance == pytest.approx(1 - 1 / np.sqrt(3), abs=1e-3)
    assert _pair(await store.neighbors("nobody", vec(0)[None, :], 2)) == (0, [[]])


async def test_the_summary_moves_with_the_cursor(store: Store) -> None:
    await store.commit_run(commit(advance(0, user_turns=2), (), None))
    first = await cursor_of(store, "s1")
    assert first is not None and (first.summary, first.user_turns_since_summary) == (None, 2)
    await store.commit_run(commit(advance(1, position=1, summary="Lives in Oslo."), (), None))
    second = await cursor_of(store, "s1")
    assert second is not None
    assert (second.summary, second.user_turns_since_summary) == ("Lives in Oslo.", 0)
    await store.commit_run(commit(advance(2, position=2), (), None))
    third = await cursor_of(store, "s1")
    assert third is not None and third.summary == "Lives in Oslo."
    assert third.processed_count == 3


async def test_audit_rows_of_a_session_and_of_a_user(store: Store) -> None:
    await store.record_run(replace(run_row(outcome="empty"), error="nothing new"))
    await store.commit_run(commit(advance(0), ()))
    rows = await store.runs("u1", session_id="s1")
    assert [r["outcome"] for r in rows] == ["empty", "committed"]
    assert rows[0]["error"] == "nothing new" and rows[0]["id"] < rows[1]["id"]
    assert [r["outcome"] for r in await store.runs("u1")] == ["empty", "committed"]
    assert await store.runs("u2") == []


async def test_manual_facts_bump_the_version_and_stay_scoped(store: Store) -> None:
    fact = await store.add_fact("u1", NewFact("Likes tea", "preference", 4, vec(3), "test"))
    assert fact.source_kind == "manual" and fact.user_id == "u1"
    assert (await store.neighbors("u1", vec(3)[None, :], 1)).version == 1
    assert await store.get_fact("u1", fact.id) == fact
    assert await store.get_fact("u2", fact.id) is None
    assert await store.remove_fact("u2", fact.id) is None, "another user's id reads as missing"
    assert await store.count_active("u1") == 1
    removed = await store.remove_fact("u1", fact.id)
    assert removed is not None and removed.superseded_at is not None
    assert await store.remove_fact("u1", fact.id) is None
    assert await store.count_active("u1") == 0
    assert (await store.neighbors("u1", vec(3)[None, :], 1)).version == 2, "a miss bumps nothing"


async def test_a_manual_fact_records_how_it_was_written_and_an_extracted_one_none(
    store: Store,
) -> None:
    plain = await store.add_fact("u1", NewFact("Likes tea", "preference", 4, vec(3), "test"))
    saved = await store.add_fact("u1", NewFact("Likes oolong", "preference", 4, vec(4), "test",
                                               via="tool"))
    assert (plain.written_via, saved.written_via) == ("api", "tool"), "api: the default"
    assert await store.get_fact("u1", saved.id) == saved
    await store.commit_run(commit(advance(0), (insert(0, "Plays chess", vec(5)),), 2))
    extracted = next(f for f in await store.facts("u1") if f.source_kind == "extracted")
    assert extracted.written_via is None


async def test_search_ranks_by_meaning_and_by_words(store: Store) -> None:
    await store.commit_run(commit(advance(0), (
        insert(0, "Plays the cello", vec(0)), insert(1, "Drinks green tea", vec(1)),
        insert(2, "Owns a cello and a violin", vec(2)),
    )))
    await store.add_fact("u2", NewFact("Plays the cello too", "fact", 5, vec(0), "test"))
    hits = {h.fact.text: h for h in await store.search("u1", vec(0), "cello", 2)}
    assert set(hits) == {"Plays the cello", "Drinks green tea", "Owns a cello and a violin"}
    assert hits["Plays the cello"].semantic_rank == 1
    assert hits["Owns a cello and a violin"].lexical_rank is not None
    assert hits["Drinks green tea"].lexical_rank is None
    assert all(h.fact.user_id == "u1" for h in hits.values())


async def test_a_search_leaving_facts_out_ranks_the_rest_as_if_they_were_not_there(
    store: Store,
) -> None:
    """The prompt split's volatile read: the stable block's ids left out, the others
    ranked among themselves; an "as of" search refuses ids to leave out."""
    await store.commit_run(commit(advance(0), (
        insert(0, "Plays the cello", vec(0)), insert(1, "Drinks green tea", vec(1)),
        insert(2, "Owns a cello and a violin", vec(2)),
    )))
    ids = {f.text: f.id for f in await store.facts("u1")}
    hits = {h.fact.text: h for h in await store.search(
        "u1", vec(0), "cello", 2, exclude=[ids["Plays the cello"]])}
    assert set(hits) == {"Drinks green tea", "Owns a cello and a violin"}
    assert hits["Owns a cello and a violin"].lexical_rank == 1
    assert sorted(h.semantic_rank or 0 for h in hits.values()) == [1, 2]
    assert await store.search("u1", vec(0), "cello", 2, exclude=list(ids.values())) == []
    with pytest.raises(ValueError, match="as-of"):
        await store.search("u1", vec(0), "cello", 2, exclude=[1],
                           valid_at=datetime.now(UTC))


async def test_erasing_a_user_removes_everything_of_theirs_only(store: Store) -> None:
    await store.commit_run(commit(advance(0), (insert(0, "Likes jazz", vec(0)),)))
    await store.commit_run(commit(advance(0, session="x", user="u2"),
                                  (insert(0, "Likes rock", vec(1)),)))
    counts = await store.erase_user(Erasure("u1", erased_seq=5))
    assert counts == {"memory_held_proposal": 0, "memory_note": 0, "memory_note_check": 0,
                      "memory_fact": 1, "memory_person_label": 0,
                      "memory_person": 0, "memory_run": 1, "session_cursor": 1,
                      "user_memory_state": 1, "user_memory_consent": 0, **NO_PORTRAIT}
    assert await store.facts("u1", include_superseded=True) == []
    assert await cursor_of(store, "s1") is None
    assert [f.text for f in await store.facts("u2")] == ["Likes rock"]
    # An in-flight job of the erased user writes nothing, whatever cursor it read.
    with pytest.raises(UserErased):
        await store.commit_run(commit(advance(1, position=1, seq=5), (insert(0, "x", vec(2)),),
                                      None))
    with pytest.raises(UserErased):
        await store.commit_run(commit(advance(0, seq=4), (insert(0, "x", vec(2)),), None))
    assert await store.facts("u1", include_superseded=True) == []
    assert await cursor_of(store, "s1") is None
    # A hand-over made after the erase is remembered as usual.
    await store.commit_run(commit(advance(0, seq=6), (insert(0, "Likes blues", vec(2)),)))
    assert [f.text for f in await store.facts("u1")] == ["Likes blues"]
    assert await store.erase_user(Erasure("u1", erased_seq=7)) == {
        "memory_held_proposal": 0, "memory_note": 0, "memory_note_check": 0,
        "memory_fact": 1, "memory_person_label": 0,
        "memory_person": 0, "memory_run": 1, "session_cursor": 1,
        "user_memory_state": 1, "user_memory_consent": 0, **NO_PORTRAIT}
    assert await store.erase_user(Erasure("u1", erased_seq=8)) == {
        "memory_held_proposal": 0, "memory_note": 0, "memory_note_check": 0,
        "memory_fact": 0, "memory_person_label": 0,
        "memory_person": 0, "memory_run": 0, "session_cursor": 0,
        "user_memory_state": 0, "user_memory_consent": 0, **NO_PORTRAIT}, \
        "erasing twice is harmless"


async def test_an_erase_takes_the_users_runs_alone_and_strips_late_rows(
    store: Store,
) -> None:
    # Session ids repeat across users: nothing is matched by session id alone.
    await store.commit_run(commit(advance(0), (insert(0, "Likes jazz", vec(0)),)))
    await store.record_run(run_row("s1", outcome="invalid"))
    await store.record_run(replace(run_row("s1", outcome="invalid"), user_id="u2"))
    await store.record_run(replace(run_row(outcome="invalid"), session_id=None, user_id=None))
    with pytest.raises(StoreError, match="CheckViolation"):
        # A row names a session only with its user (schema/0008_run_owners.sql).
        await store.record_run(replace(run_row("s1", outcome="invalid"), user_id=None))
    counts = await store.erase_user(Erasure("u1", erased_seq=5))
    assert counts["memory_run"] == 2
    assert [(d.user_id, d.session_id) for d in await store.dead_letters(
        ["invalid"], include_resolved=True)] == [(None, None), ("u2", "s1")]
    assert len(await store.runs("u2", session_id="s1")) == 1
    # A run of a hand-over the erase cleared, recorded after it, keeps no id.
    await store.record_run(replace(run_row("s1", outcome="failed"), handover_seq=5))
    await store.record_run(replace(run_row("s2", outcome="failed"), handover_seq=6))
    failed = await store.dead_letters(["failed"], include_resolved=True)
    assert [(d.user_id, d.session_id) for d in failed] == [("u1", "s2"), (None, None)]


async def test_two_users_keep_their_own_cursor_of_one_session_id(store: Store) -> None:
    await store.commit_run(commit(advance(0, user="u1"), (insert(0, "Likes jazz", vec(0)),)))
    await store.commit_run(commit(advance(0, user="u2", position=3),
                                  (insert(0, "Likes rock", vec(1)),)))
    mine, theirs = await cursor_of(store, "s1", "u1"), await cursor_of(store, "s1", "u2")
    assert mine is not None and theirs is not None
    assert (mine.user_id, mine.position, theirs.user_id, theirs.position) == ("u1", 0, "u2", 3)
    assert len(await store.runs("u1", session_id="s1")) == 1


async def test_memory_turned_off_refuses_every_commit_but_an_opted_out_one(store: Store) -> None:
    assert (await store.load_session("u1", "s1")).memory_enabled is None
    await store.set_consent("u1", False)
    assert (await store.load_session("u1", "s1")).memory_enabled is False
    assert await store.consent("u1") is False
    with pytest.raises(MemoryOptedOut):
        await store.commit_run(commit(advance(0), (insert(0, "Likes jazz", vec(0)),)))
    opted_out = replace(commit(advance(0), (), None), run=replace(run_row(), outcome="opted_out"))
    await store.commit_run(opted_out)
    cursor = await cursor_of(store, "s1")
    assert cursor is not None and cursor.version == 1
    assert await store.facts("u1", include_superseded=True) == []
    # Forgetting keeps the opt-out; a plain erase of a user who opted in drops it.
    counts = await store.erase_user(Erasure("u1", erased_seq=1))
    assert counts["user_memory_consent"] == 0 and await store.consent("u1") is False
    await store.set_consent("u2", True)
    assert (await store.erase_user(Erasure("u2", erased_seq=1)))["user_memory_consent"] == 1


async def test_a_dead_letter_is_one_per_point_of_its_session_whatever_its_attempts(
    store: Store,
) -> None:
    # a: a failed hand-over, queued again and failed again (ARQ's try, a retry), then
    # committed past; then a new failure at the next point, still open.
    for outcome in ["committed", "retry", "failed", "deferred", "failed", "committed",
                    "failed"]:
        await store.record_run(run_row("a", outcome=outcome))
    await store.record_run(run_row("b", outcome="skipped"))  # moved past by its own run
    await store.record_run(run_row("c", outcome="error"))
    await store.record_run(run_row("c", outcome="empty"))  # moves nothing: still open
    await store.record_run(replace(run_row(outcome="invalid"), session_id=None, user_id=None))
    await store.record_run(run_row("a", user="u2", outcome="failed"))  # another user's a
    await store.record_run(run_row("d", outcome="opted_out"))  # no dead letter at all

    def seen(letters: list[DeadLetter]) -> list[tuple[Any, ...]]:
        return [(d.user_id, d.session_id, d.status, d.outcome, d.attempts, d.resolved_by)
                for d in letters]

    assert seen(await store.dead_letters()) == [
        ("u2", "a", "open", "failed", 1, None),
        ("u1", "c", "open", "error", 1, None),
        ("u1", "a", "open", "failed", 1, None)]
    history = await store.dead_letters(include_resolved=True)
    assert seen(history) == [
        ("u2", "a", "open", "failed", 1, None),
        (None, None, "no_session", "invalid", 1, None),
        ("u1", "c", "open", "error", 1, None),
        ("u1", "b", "resolved", "skipped", 1, "skipped"),
        ("u1", "a", "open", "failed", 1, None),
        ("u1", "a", "resolved", "failed", 3, "committed")]
    first = history[-1]
    assert first.first_failed_at <= first.last_failed_at <= (first.resolved_at or NOW)
    assert seen(await store.dead_letters(["error", "skipped"], include_resolved=True)) == [
        ("u1", "c", "open", "error", 1, None), ("u1", "b", "resolved", "skipped", 1, "skipped")]
    assert seen(await store.dead_letters(limit=1)) == [("u2", "a", "open", "failed", 1, None)]
    assert seen(await store.dead_letters(include_resolved=True, session=("u1", "a"))) == [
        ("u1", "a", "open", "failed", 1, None),
        ("u1", "a", "resolved", "failed", 3, "committed")]
    assert await store.dead_letters(session=("u1", "d")) == []
    await store.record_run(run_row("a", outcome="committed"))
    assert seen(await store.dead_letters(["failed"])) == [("u2", "a", "open", "failed", 1, None)]


async def test_a_user_moved_to_another_model_is_ranked_only_on_that_model(store: Store) -> None:
    """What `memfleet reembed` leaves and a worker of the previous model meets."""
    assert await store.active_embedding("u1") is None
    small = np.zeros(64, dtype=np.float32)
    small[0] = 1.0
    for text, vector, model in (("Likes tea", vec(0), "m0"), ("Plays chess", small, "m1"),
                                ("Reads poems", small, "m1")):
        await store.add_fact("u1", NewFact(text, "fact", 5, vector, model))
    await store.add_fact("u2", NewFact("Likes tea too", "fact", 5, vec(0), "m0"))
    assert await store.active_embedding("u1") == ("m1", 64)
    assert await store.active_embedding("u2") == ("m0", TEST_EMBED_DIM)

    on_m0 = await store.neighbors("u1", vec(0)[None, :], 5, model="m0")
    assert [[r.text for r in rows] for rows in on_m0.rows] == [["Likes tea"]]
    assert on_m0.other_model == ("m1", 64)
    on_m1 = await store.neighbors("u1", small[None, :], 5, model="m1")
    assert [[r.text for r in rows] for rows in on_m1.rows] == [["Plays chess", "Reads poems"]]
    assert on_m1.other_model == ("m0", TEST_EMBED_DIM)
    # Same dimension, another model: not ranked either.
    assert (await store.neighbors("u2", vec(0)[None, :], 5, model="m9")).rows == [[]]
