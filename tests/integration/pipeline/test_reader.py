"""The read path as a chat server uses it: a reader built from settings alone (its own
pool and embedder), against the real PostgreSQL."""

from __future__ import annotations

import pytest

from tests.helpers import fences_for_tests
from worker.config import Settings
from worker.errors import ConfigurationError, StoreError, StoreUnavailable
from worker.providers.hashing import HashingEmbedder
from worker.read import MemoryReader, known_facts_block, open_reader
from worker.store.pool import create_pool
from worker.store.postgres import PostgresStore
from worker.store.types import FactTerms, NewFact


async def remember(settings: Settings, user_id: str,
                   facts: list[tuple[str, str, str | None]]) -> None:
    """(text, category, agent: None for a profile fact), written by hand."""
    embedder = HashingEmbedder(settings.embed_dim)
    store = await PostgresStore.connect(settings.database_url or "", fences=fences_for_tests())
    try:
        vectors = (await embedder.embed([text for text, _, _ in facts])).value
        for (text, category, agent), vector in zip(facts, vectors, strict=True):
            terms = FactTerms(confidence=1.0) if agent is None else FactTerms(
                scope="relationship", agent_id=agent, confidence=1.0)
            await store.add_fact(user_id, NewFact(text, category, 5, vector, embedder.model,
                                                  terms))
    finally:
        await store.aclose()


async def test_a_reader_from_settings_reads_the_block_then_closes_its_pool(
    settings: Settings,
) -> None:
    await remember(settings, "ada", [
        ("Lives in Lisbon", "fact", None), ("Prefers\nshort answers", "preference", None),
        ("Calls the assistant Captain", "relationship", "orion"),
        *((f"Visited museum number {i}", "event", None) for i in range(6)),
    ])
    async with open_reader(settings) as reader:
        block = await reader.known_facts_block("ada")
        lines = block.splitlines()
        assert len(lines) == 1 + 8  # the profile only: no agent named
        assert lines[1].startswith("- [fact] Lives in Lisbon (")
        assert lines[2].startswith("- [preference] Prefers short answers (")
        with_orion = await reader.known_facts_block("ada", agent_id="orion")
        assert "Calls the assistant Captain" in with_orion
        few = await reader.known_facts_block("ada", query="where do I live Lisbon", top_k=2)
        assert len(few.splitlines()) == 3 and "Lives in Lisbon" in few
        hits = await reader.search("ada", "museum", top_k=3)
        assert len(hits) == 3 and all("museum" in hit.fact.text for hit in hits)
        assert await reader.known_facts_block("nobody") == ""
        # The same block as the lower-level calls: on a pool of the caller's (as chat
        # servers called it before the reader), and a reader on the caller's store.
        pool = await create_pool(settings.database_url or "")
        try:
            embedder = HashingEmbedder(settings.embed_dim)
            assert await known_facts_block(pool, embedder, "ada") == block
            beside = MemoryReader(PostgresStore(pool), embedder)
            assert await beside.known_facts_block("ada") == block
            await beside.aclose()  # closes nothing of its caller's
            assert await beside.known_facts_block("ada") == block
        finally:
            await pool.close()
    # The reader's pool closed with it.
    with pytest.raises(StoreUnavailable):
        await reader.known_facts_block("ada")


async def test_a_reader_without_a_database_is_refused_before_it_connects(
    settings: Settings,
) -> None:
    with pytest.raises(ConfigurationError, match="MEMFLEET_DATABASE_URL"):
        await MemoryReader.from_settings(settings.model_copy(update={"database_url": None}))
    unreachable = settings.model_copy(
        update={"database_url": "postgresql://nobody@127.0.0.1:9/none"})
    with pytest.raises(StoreError, match=r"PostgreSQL at 127\.0\.0\.1:9 is unreachable"):
        async with open_reader(unreachable):
            pass
