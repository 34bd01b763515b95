"""`memfleet import` against the real servers: facts from a file and old blobs through
extraction (the openai client over HTTP to the LLM stub), each run twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest
from redis.asyncio import Redis

from api_stub.llm_stub import CHAT_PATH, EMBED_PATH, StubServer
from tests.conftest import TEST_EMBED_DIM
from tests.helpers import fences_for_tests
from worker.config import Settings
from worker.memory_rules import Limits
from worker.ops import importer
from worker.ops.import_lines import LEGACY_CHUNK_CHARS
from worker.ops.importer import ImportReport, LegacyReport, import_facts, numbered_lines, run_import
from worker.protection.budget import BudgetKeys
from worker.providers.base import Answer
from worker.providers.hashing import HashingEmbedder
from worker.store.imports import ImportRow, ImportStore
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import Erasure, FactTerms, NewFact
from worker.vectors import Vector

SOON = (datetime.now(UTC) + timedelta(days=3)).isoformat()
PRIVATE = "Lives in Porto"


def jsonl(path: Path, *lines: object) -> Path:
    with path.open("wb") as out:
        for item in lines:
            out.write(item if isinstance(item, bytes) else json.dumps(item).encode("utf-8"))
            out.write(b"\n")
    return path


async def run(settings: Settings, path: Path, *,
              legacy: bool = False) -> tuple[ImportReport, list[tuple[int, str]]]:
    problems: list[tuple[int, str]] = []
    with path.open("rb") as stream:
        report = await run_import(settings, stream, legacy=legacy,
                                  on_problem=lambda n, why: problems.append((n, why)),
                                  on_report=lambda _: None)
    return report, problems


async def facts_of(db: asyncpg.Connection, user_id: str) -> list[asyncpg.Record]:
    return await db.fetch("SELECT * FROM memory_fact WHERE user_id = $1 ORDER BY id", user_id)


async def version(db: asyncpg.Connection, user_id: str) -> int | None:
    found: int | None = await db.fetchval(
        "SELECT version FROM user_memory_state WHERE user_id = $1", user_id)
    return found


@pytest.fixture
async def store(settings: Settings) -> Any:
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
    yield PostgresStore(pool, fences_for_tests())
    await pool.close()


async def test_an_import_run_twice_adds_nothing_the_second_time(
    settings: Settings, db: asyncpg.Connection, store: PostgresStore, tmp_path: Path,
) -> None:
    embedder = HashingEmbedder(settings.embed_dim)
    said = (await embedder.embed(["Likes chess"])).value[0]
    await store.add_fact("u3", NewFact("Likes chess", "preference", 5, said, embedder.model))
    await store.set_consent("u4", False)
    path = jsonl(
        tmp_path / "facts.jsonl",
        {"user_id": "u1", "text": PRIVATE, "id": "r-1", "category": "fact", "importance": 8},
        {"user_id": "u1", "text": "Uses Neovim"},
        {"user_id": "u2", "text": PRIVATE},  # the same text of another user is theirs
        {"user_id": "u1", "text": "Calls the assistant Max", "agent_id": "max",
         "basis": "inferred"},
        b"{not json",
        {"user_id": "u2", "text": "Is in Paris this week", "expires_at": SOON, "pinned": True},
        {"user_id": "u1"},
        {"user_id": "u1", "text": "lives  in PORTO."},  # u1 has it: a duplicate
        {"user_id": "u1", "text": "Likes tea", "id": "r-1"},  # r-1 is taken: a duplicate
        {"user_id": "u3", "text": "likes chess"},  # written by hand before: a duplicate
        b"   ",
        {"user_id": "u2", "text": "Likes opera", "category": "opinion"},
        b'{"user_id": "u2", "text": "Likes caf\xe9"}',
        {"user_id": "u4", "text": "Likes jazz"},  # memory off: never written
    )

    first, problems = await run(settings, path)
    assert first.to_json() == {"read": 13, "imported": 5, "duplicates": 3, "invalid": 4,
                               "skipped": 1}
    assert [n for n, _ in problems] == [5, 7, 12, 13]
    assert [why for _, why in problems] == [
        "is not JSON", "text is missing",
        "category must be one of preference, fact, event, relationship, decision, general",
        "is not valid UTF-8"]
    versions = {u: await version(db, u) for u in ("u1", "u2", "u3", "u4")}
    assert versions == {"u1": 1, "u2": 1, "u3": 1, "u4": None}  # one transaction per user

    u1 = {row["text"]: row for row in await facts_of(db, "u1")}
    assert sorted(u1) == ["Calls the assistant Max", PRIVATE, "Uses Neovim"]
    assert all(r["source_kind"] == "imported" and r["superseded_at"] is None for r in u1.values())
    assert u1[PRIVATE]["import_key"] == "r-1" and u1[PRIVATE]["importance"] == 8
    assert u1["Uses Neovim"]["import_key"].startswith("sha256:")
    max_fact = u1["Calls the assistant Max"]
    assert (max_fact["scope"], max_fact["agent_id"], max_fact["basis"]) == (
        "relationship", "max", "inferred")
    assert max_fact["confidence"] == pytest.approx(0.55)
    assert u1[PRIVATE]["confidence"] == pytest.approx(0.85)
    assert u1[PRIVATE]["valid_from"] == u1[PRIVATE]["observed_at"]
    assert all(r["embedding_model"] == embedder.model and r["embedding_dim"] == TEST_EMBED_DIM
               for r in u1.values())
    u2 = {row["text"]: row for row in await facts_of(db, "u2")}
    assert sorted(u2) == ["Is in Paris this week", PRIVATE]
    assert u2["Is in Paris this week"]["pinned"]
    assert u2["Is in Paris this week"]["expires_at"] == datetime.fromisoformat(SOON)
    assert [r["text"] for r in await facts_of(db, "u3")] == ["Likes chess"]
    assert await facts_of(db, "u4") == []

    second, again = await run(settings, path)
    assert second.to_json() == {"read": 13, "imported": 0, "duplicates": 8, "invalid": 4,
                                "skipped": 1}
    assert [n for n, _ in again] == [5, 7, 12, 13]
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 6
    # Nothing written, nothing bumped: a consolidation in flight need not re-read.
    assert {u: await version(db, u) for u in versions} == versions


class CountingEmbedder:
    """The hashing embedder, counting its calls."""

    def __init__(self, dim: int) -> None:
        self.inner = HashingEmbedder(dim)
        self.calls: list[int] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def provider_name(self) -> str:
        return self.inner.provider_name

    async def embed(self, texts: list[str]) -> Answer[Vector]:
        self.calls.append(len(texts))
        return await self.inner.embed(texts)


async def test_one_embeddings_call_per_batch_and_none_for_what_is_stored(
    settings: Settings, db: asyncpg.Connection, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importer, "BATCH_ROWS", 4)
    path = jsonl(tmp_path / "many.jsonl",
                 *({"user_id": f"u{i % 3}", "text": f"Fact number {i}"} for i in range(10)))
    embedder = CountingEmbedder(settings.embed_dim)
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
    try:
        for expected_calls, expected_imported in (([4, 4, 2], 10), ([], 0)):
            embedder.calls.clear()
            with path.open("rb") as stream:
                store = ImportStore(pool, fences_for_tests())
                report = await import_facts(numbered_lines(stream), store, embedder,
                                            limits=Limits(), memory_default=True,
                                            on_problem=lambda n, why: None)
            assert embedder.calls == expected_calls
            assert report.imported == expected_imported
            assert report.duplicates == 10 - expected_imported
    finally:
        await pool.close()
    # Batches of one user are separate transactions: each bumps the version once.
    # (u0 is in all three batches, u1 in the first two, u2 in all three)
    assert [await version(db, u) for u in ("u0", "u1", "u2")] == [3, 2, 3]


def _row(user_id: str, text: str) -> ImportRow:
    return ImportRow(user_id=user_id, text=text, category="general", importance=5,
                     observed_at=datetime.now(UTC), terms=FactTerms(confidence=0.85),
                     import_key="k-" + text)


async def test_a_user_erased_while_the_import_runs_is_not_written_again(
    settings: Settings, db: asyncpg.Connection, store: PostgresStore,
) -> None:
    pool = await create_pool(settings.database_url or "", min_size=1, max_size=2)
    imports = ImportStore(pool, fences_for_tests())
    vectors = np.asarray((await HashingEmbedder(settings.embed_dim).embed(["a"])).value)
    try:
        before = await imports.fences()  # the import starts
        await store.erase_user(Erasure("gone", erased_seq=1))
        written = await imports.write_user("gone", [_row("gone", "a")], vectors, model="m",
                                           source_kind="imported", fences=before,
                                           memory_default=True)
        assert (written.imported, written.skipped) == (0, 1)
        assert await facts_of(db, "gone") == []
        assert await version(db, "gone") is None  # no version row made again
        # An import started after the erase writes: the operator chose to.
        written = await imports.write_user("gone", [_row("gone", "a")], vectors, model="m",
                                           source_kind="imported",
                                           fences=await imports.fences(), memory_default=True)
        assert written.imported == 1
        # A user who never chose is imported only when the fleet remembers by default.
        written = await imports.write_user("new", [_row("new", "b")], vectors, model="m",
                                           source_kind="imported", fences={},
                                           memory_default=False)
        assert written.skipped == 1 and await facts_of(db, "new") == []
    finally:
        await pool.close()


@pytest.fixture(scope="module")
def stub() -> Iterator[StubServer]:
    with StubServer(dim=TEST_EMBED_DIM) as server:
        yield server


FILLER = "Nothing else to note about that day. " * 150  # several pieces for one blob


async def test_legacy_blobs_through_the_openai_extractor_twice_add_nothing_the_second_time(
    settings: Settings, db: asyncpg.Connection, redis: Redis, stub: StubServer, tmp_path: Path,
) -> None:
    stub.reset()
    openai = settings.model_copy(update={
        "llm_provider": "openai", "llm_base_url": stub.v1, "embed_provider": "openai",
        "embed_base_url": stub.v1, "llm_budget_rpm": 10_000})
    long_blob = f"I use Neovim. {FILLER}I am allergic to peanuts."
    path = jsonl(
        tmp_path / "legacy.jsonl",
        {"user_id": "u1", "id": "blob-1",
         "text": "I live in Lisbon. I love hiking and I work as a nurse.\n\nMy sister is "
                 "called Ana."},
        {"user_id": "u1", "id": "blob-2", "text": long_blob},
        {"user_id": "u2", "text": "I live in Lisbon."},
        {"user_id": "u2", "text": "I live in Lisbon."},  # the same blob again
        {"text": "I live in Faro."},
        {"user_id": "u1", "id": "blob-3", "text": "I live in Lisbon."},  # u1 has it
    )

    first, problems = await run(openai, path, legacy=True)
    assert isinstance(first, LegacyReport)
    assert problems == [(5, "user_id is missing")]
    assert first.to_json() | {"input_tokens": 0, "output_tokens": 0} == {
        "read": 6, "imported": 7, "duplicates": 2, "invalid": 1, "skipped": 0,
        "already_imported": 0, "failed": 0, "extracted": 9,
        "input_tokens": 0, "output_tokens": 0}
    assert first.input_tokens > 0 and first.output_tokens > 0
    u1 = {row["text"]: row for row in await facts_of(db, "u1")}
    assert sorted(u1) == ["Is allergic to peanuts", "Likes hiking", "Lives in Lisbon",
                          "Sister's name is Ana", "Uses Neovim", "Works as nurse"]
    assert all(r["source_kind"] == "backfill" and r["import_key"].startswith("legacy:")
               and r["confidence"] == pytest.approx(0.8) for r in u1.values())
    assert [r["text"] for r in await facts_of(db, "u2")] == ["Lives in Lisbon"]

    sent = stub.state.recorded(clear=True)
    chats = [r for r in sent if r["path"] == CHAT_PATH]
    pieces = [json.loads(r["body"]["messages"][-1]["content"])["messages"] for r in chats]
    assert all(len(p) == 1 and p[0]["role"] == "user"
               and len(p[0]["content"]) <= LEGACY_CHUNK_CHARS for p in pieces)
    assert len(chats) == 4 + len(long_blob) // LEGACY_CHUNK_CHARS + 1
    assert sum(r["path"] == EMBED_PATH for r in sent) == 1  # one batch, one call
    # Every call went through the fleet's budget.
    keys = BudgetKeys.of(openai.queue_name, stub.v1)
    assert await redis.zcard(keys.log) == len(sent)

    second, _ = await run(openai, path, legacy=True)
    assert (second.imported, second.already_imported, second.duplicates) == (0, 4, 1)
    assert await db.fetchval("SELECT count(*) FROM memory_fact") == 7
    again = stub.state.recorded(clear=True)
    # Only the blob that gave nothing new is read again; nothing is embedded.
    assert [r["path"] for r in again] == [CHAT_PATH]
