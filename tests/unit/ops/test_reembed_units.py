"""Model upgrades, the pure parts: which (model, dimension) a process may boot with,
how `memfleet reembed` batches texts across users, the embedder it builds, and a
worker whose user's facts were moved to another model (InMemoryStore)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from opentelemetry.trace import NoOpTracer

from worker.config import Settings
from worker.errors import ConfigurationError
from worker.ops.reembed import Counts, Outcome, Target, UserMove, next_batch, reembed_embedder
from worker.pipeline.run import RunContext, run_once
from worker.protocol.payload import Handover, Message, Snapshot
from worker.providers.base import Providers
from worker.providers.factory import build_embedder, build_providers, embedding_model
from worker.providers.hashing import HashingEmbedder
from worker.providers.openai_embed import OpenAIEmbedder
from worker.read import query_embedder, search_facts
from worker.store.migrate import embedding_refusal
from worker.store.types import FactTerms, Neighbors, NewFact
from worker.telemetry import StageClock
from worker.testing.in_memory_store import InMemoryStore

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SETTINGS = Settings(embed_dim=64, summary_every_user_turns=100)
OPENAI = Settings(embed_provider="openai", embed_base_url="http://127.0.0.1:9/v1",
                  embed_model="text-embedding-3-small", embed_dim=256)


# -- which process may boot (check_schema) ----------------------------------


def test_the_fleets_own_model_and_dimension_boot() -> None:
    assert embedding_refusal("m0", 256, "m0", 256, []) is None
    # Before any move recorded a model, the dimension alone is checked (as it always was).
    assert embedding_refusal("anything", 256, None, 256, []) is None
    assert embedding_refusal(None, 256, "m0", 256, []) is None


def test_a_new_dimension_is_refused_until_a_move_to_it_is_under_way() -> None:
    refusal = embedding_refusal("m1", 128, None, 256, [])
    assert refusal is not None and "migrated with 256" in refusal and "reembed" in refusal
    assert embedding_refusal("m1", 128, None, 256, [("m1", 128)]) is None
    assert embedding_refusal(None, 128, None, 256, [("m1", 128)]) is None
    # The previous model keeps booting while the move runs (the fleet rolls after it).
    assert embedding_refusal("m0", 256, "m0", 256, [("m1", 128)]) is None


def test_an_unknown_model_or_dimension_is_refused_during_a_move() -> None:
    for model, dim in (("m2", 128), ("m1", 64), ("m2", 256)):
        refusal = embedding_refusal(model, dim, "m0", 256, [("m1", 128)])
        assert refusal is not None, (model, dim)
        assert "a move to m1 at 128 is under way" in refusal
        assert f"memfleet reembed --model {model} --dim {dim}" in refusal


def test_after_a_move_the_previous_model_is_refused() -> None:
    refusal = embedding_refusal("m0", 256, "m1", 128, [])
    assert refusal == ("MEMFLEET_EMBED_MODEL=m0 MEMFLEET_EMBED_DIM=256 but the fleet embeds"
                       " with m1 at 128: move the facts first (`memfleet reembed --model m0"
                       " --dim 256`, docs/operations.md)")


# -- batching and targets -----------------------------------------------------


def _move(user: str, *texts: str, known: int = 0) -> UserMove:
    vectors: list[Any] = [np.ones(4, dtype=np.float32) if i < known else None
                          for i in range(len(texts))]
    return UserMove(user, 3, list(range(len(texts))), list(texts), vectors)


def test_a_batch_takes_waiting_texts_across_users_in_order() -> None:
    a, b = _move("a", "a1", "a2", known=1), _move("b", "b1", "b2", "b3")
    assert [(u.user_id, i) for u, i in next_batch([a, b], 3)] == [("a", 1), ("b", 0), ("b", 1)]
    assert next_batch([_move("c", "c1", known=1)], 3) == []
    assert not a.complete and _move("c", "c1", known=1).complete


def test_a_users_notes_wait_in_the_same_batches_after_their_facts() -> None:
    moved = UserMove("a", 3, [7], ["Lives in Oslo", "Considering a move to Porto"],
                     [None, None], note_ids=[9])
    assert [(u.user_id, i) for u, i in next_batch([moved], 8)] == [("a", 0), ("a", 1)]
    notes_only = UserMove("b", 1, [], ["Weighing a new job"], [None], note_ids=[4])
    assert [(u.user_id, i) for u, i in next_batch([moved, notes_only], 3)] == [
        ("a", 0), ("a", 1), ("b", 0)]


def test_a_reread_user_keeps_the_vectors_of_texts_already_embedded() -> None:
    moved = _move("a", "Lives in Paris", "Likes jazz", known=1)
    assert list(moved.known()) == ["Lives in Paris"]


def test_targets_are_checked() -> None:
    for bad in (Target(" ", 128), Target("m", 4), Target("m", 20_000)):
        with pytest.raises(ConfigurationError):
            bad.check()
    Target("m", 8).check()


def test_the_summary_line_names_every_count() -> None:
    line = Outcome(Target("m1", 128), Counts(users=3, facts=12, notes=2, calls=6, reread=1,
                                             passes=2),
                   active=12, active_notes=4, seconds=1.25).line()
    assert line == ("reembed m1 at 128: 3 users moved, 12 facts and 2 notes re-embedded,"
                    " 6 embedding calls, 1.2 s (1 users read again); verified: 12 active"
                    " facts and 4 active notes, all on m1 at 128")


def test_the_embedder_of_a_move_comes_from_the_same_provider_settings() -> None:
    embedder = build_embedder(OPENAI, "text-embedding-3-large", 1024)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.model, embedder.dim) == ("text-embedding-3-large", 1024)
    asyncio.run(embedder.aclose())  # its HTTP client, never left to a later test's loop
    hashing = reembed_embedder(SETTINGS, Target("hashing-v1", 32), redis=None)
    assert (hashing.model, hashing.dim) == ("hashing-v1", 32)
    # Hashing workers write one model name whatever MEMFLEET_EMBED_MODEL says: a move
    # to another name would leave them unable to boot.
    with pytest.raises(ConfigurationError, match="only --dim can change"):
        reembed_embedder(SETTINGS, Target("text-embedding-3-large", 32), redis=None)
    assert embedding_model(SETTINGS) == "hashing-v1"
    assert embedding_model(OPENAI) == "text-embedding-3-small"


async def test_providers_build_each_other_embedder_once() -> None:
    providers = build_providers(OPENAI)
    assert providers.embedder_for("text-embedding-3-small", 256) is providers.embedder
    large = providers.embedder_for("text-embedding-3-large", 1024)
    assert providers.embedder_for("text-embedding-3-large", 1024) is large
    assert (large.model, large.dim) == ("text-embedding-3-large", 1024)
    await providers.aclose()
    base = build_providers(SETTINGS)
    bare = Providers(base.extractor, base.consolidator, base.summarizer, HashingEmbedder(64))
    with pytest.raises(ConfigurationError):
        bare.embedder_for("other", 64)


# -- a worker meets a user whose facts were moved ------------------------------


class RecordingStore(InMemoryStore):
    """Notes the model and dimension of every neighbour query."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str | None, int, tuple[str, int] | None]] = []

    async def neighbors(self, user_id: str, embeddings: Any, k: int, *,
                        agents: Any = None, model: str | None = None) -> Neighbors:
        found = await super().neighbors(user_id, embeddings, k, agents=agents, model=model)
        self.asked.append((model, int(embeddings.shape[1]), found.other_model))
        return found


def _context(store: Any) -> RunContext:
    return RunContext(SETTINGS, store, build_providers(SETTINGS), StageClock(NoOpTracer()),
                      job_id="j1", job_try=1, started_at=NOW)


async def _moved_fact(store: InMemoryStore, text: str, embedder: HashingEmbedder) -> None:
    vector = (await embedder.embed([text])).value[0]
    await store.add_fact("u1", NewFact(text, "fact", 5, vector, embedder.model,
                                       terms=FactTerms()))


async def test_a_worker_embeds_again_with_the_model_the_users_facts_moved_to() -> None:
    store = RecordingStore()
    moved_to = HashingEmbedder(32, "hashing-v2")  # the worker embeds with hashing-v1 at 64
    await _moved_fact(store, "Lives in Berlin", moved_to)
    said = Handover(session_id="s1", user_id="u1", handed_over_at=NOW,
                    messages=(Message(role="user", content="I just moved to Paris."),))

    result = await run_once(_context(store), [Snapshot(1, said, latest=True)])

    assert result.outcome == "committed" and result.updated == 1
    active = await store.facts("u1")
    assert [(f.text, f.embedding_model, f.embedding_dim) for f in active] == [
        ("Lives in Paris", "hashing-v2", 32)]
    # Asked once with the worker's model, told where the facts are, asked again there:
    # no distance was ever taken across models.
    assert store.asked == [("hashing-v1", 64, ("hashing-v2", 32)), ("hashing-v2", 32, None)]


async def test_a_worker_on_the_users_model_reads_the_neighbours_once() -> None:
    store = RecordingStore()
    await _moved_fact(store, "Lives in Berlin", HashingEmbedder(64))
    said = Handover(session_id="s1", user_id="u1", handed_over_at=NOW,
                    messages=(Message(role="user", content="I just moved to Paris."),))
    await run_once(_context(store), [Snapshot(1, said, latest=True)])
    assert store.asked == [("hashing-v1", 64, None)]
    assert [(f.text, f.embedding_model) for f in await store.facts("u1")] == [
        ("Lives in Paris", "hashing-v1")]


# -- the memory API's search ---------------------------------------------------


async def test_a_search_is_embedded_with_the_model_the_users_facts_are_on() -> None:
    store = InMemoryStore()
    moved_to = HashingEmbedder(32, "hashing-v2")
    for text in ("Lives in Berlin", "Plays the cello", "Likes green tea"):
        await _moved_fact(store, text, moved_to)
    providers = build_providers(SETTINGS)  # embeds with hashing-v1 at 64
    chosen = await query_embedder(store, providers.embedder, "u1", providers.embedder_for)
    assert (chosen.model, chosen.dim) == ("hashing-v2", 32)
    assert await query_embedder(store, providers.embedder, "u1", None) is providers.embedder
    assert await query_embedder(store, providers.embedder, "nobody",
                                providers.embedder_for) is providers.embedder

    hits = await search_facts(store, providers.embedder, "u1", "cello", top_k=1,
                              embedders=providers.embedder_for)
    assert [(h.fact.text, h.semantic_rank) for h in hits] == [("Plays the cello", 1)]
    # Without a way to build the other model's embedder, meaning ranks nothing (no
    # distance across models) and words still find it.
    alone = await search_facts(store, providers.embedder, "u1", "cello", top_k=1)
    assert [(h.fact.text, h.semantic_rank, h.lexical_rank) for h in alone] == [
        ("Plays the cello", None, 1)]
