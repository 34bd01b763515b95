"""The prompt split's pure parts (the volatile block's re-ranking with the settings'
weights, the stable block's budget and version) and the split over InMemoryStore:
the stable block's order, its stability across queries, memory off."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from tests.unit.shared.test_read import DIM, FixedEmbedder
from worker.config import Settings
from worker.read import BLOCK_HEADER, RRF_K, MemoryReader, SearchHit
from worker.read_split import (
    RRF_BEST,
    VOLATILE_HEADER,
    RerankWeights,
    SplitPolicy,
    build_stable,
    prompt_blocks,
    rerank,
    stable_block,
    stable_version,
)
from worker.store.types import FactRecord, FactTerms, NewFact, Vector
from worker.testing.in_memory_store import InMemoryStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def _fact(i: int, *, days_old: float = 0.0, pinned: bool = False, scope: str = "profile",
          agent: str | None = None, importance: int = 5, text: str | None = None) -> FactRecord:
    at = NOW - timedelta(days=days_old)
    return FactRecord(id=i, user_id="u", text=text or f"fact {i}", category="fact",
                      importance=importance, observed_at=at, source_session_id=None,
                      source_kind="manual", superseded_at=None, superseded_by=None,
                      created_at=at, scope=scope, agent_id=agent, pinned=pinned)


def _hit(fact: FactRecord, relevance: float) -> SearchHit:
    return SearchHit(fact, relevance * RRF_BEST, 1, 1)


def _settings(**fields: float) -> Settings:
    return Settings(**fields)  # type: ignore[arg-type]


def test_the_weights_come_from_the_settings_with_the_documented_defaults() -> None:
    assert RerankWeights.from_settings(_settings()) == RerankWeights(0.20, 0.10, 0.10, 90.0)
    assert SplitPolicy.from_settings(_settings()) == SplitPolicy(40, 4096, 8,
                                                                 people_max_facts=20)
    weights = RerankWeights.from_settings(_settings(
        read_rerank_pin_boost=0.5, read_rerank_agent_boost=0.0,
        read_rerank_recency_penalty=0.3, read_rerank_recency_days=30))
    assert weights == RerankWeights(0.5, 0.0, 0.3, 30.0)
    assert RRF_BEST == 2 / (RRF_K + 1)


def test_a_pin_adds_its_boost_and_age_takes_its_penalty_up_to_the_days() -> None:
    weights = RerankWeights()
    ranked = rerank([_hit(_fact(1), 0.5), _hit(_fact(2, pinned=True), 0.5),
                     _hit(_fact(3, days_old=45), 0.5), _hit(_fact(4, days_old=900), 0.5)],
                    weights, now=NOW, top_k=10)
    scores = {r.fact.id: round(r.score, 9) for r in ranked}
    assert scores == {1: 0.5, 2: 0.7, 3: 0.45, 4: 0.4}
    assert [r.fact.id for r in ranked] == [2, 1, 3, 4]
    assert all(r.relevance == 0.5 for r in ranked)


def test_the_weights_are_the_ones_given() -> None:
    weights = RerankWeights(pin_boost=0.05, agent_boost=0.0, recency_penalty=0.5,
                            recency_days=10)
    ranked = rerank([_hit(_fact(1, pinned=True, days_old=10), 0.6), _hit(_fact(2), 0.3)],
                    weights, now=NOW, top_k=10)
    assert [(r.fact.id, round(r.score, 9)) for r in ranked] == [(2, 0.3), (1, 0.15)]


def test_the_assistants_relationship_facts_gain_the_agent_boost_and_no_other() -> None:
    hits = [_hit(_fact(1), 0.5), _hit(_fact(2, scope="relationship", agent="sam"), 0.45),
            _hit(_fact(3, scope="relationship", agent="max"), 0.45)]
    with_sam = rerank(hits, RerankWeights(), now=NOW, top_k=10, agent_id="sam")
    assert [r.fact.id for r in with_sam] == [2, 1, 3]
    assert [r.fact.id for r in rerank(hits, RerankWeights(), now=NOW, top_k=10)] == [1, 2, 3]


def test_a_boost_can_lift_a_less_relevant_fact_over_a_more_relevant_one() -> None:
    ranked = rerank([_hit(_fact(1), 0.9), _hit(_fact(2, pinned=True), 0.75)],
                    RerankWeights(), now=NOW, top_k=1)
    assert [r.fact.id for r in ranked] == [2], "top_k cuts after the re-ranking"


def test_ties_go_to_the_more_relevant_then_the_smaller_id_in_any_input_order() -> None:
    # 0.6 + 0.2 pinned - 0.1 old ties the fresh 0.7s: they are more relevant, by id.
    a = _hit(_fact(7, pinned=True, days_old=90), 0.6)
    b = _hit(_fact(9), 0.7)
    c = _hit(_fact(3), 0.7)
    d = _hit(_fact(5), 0.7)
    for hits in ([a, b, c, d], [d, c, b, a], [b, a, d, c]):
        assert [r.fact.id for r in rerank(hits, RerankWeights(), now=NOW, top_k=4)] == [
            3, 5, 9, 7]


def test_a_future_observation_takes_no_bonus_and_top_k_zero_takes_nothing() -> None:
    ranked = rerank([_hit(_fact(1, days_old=-5), 0.5)], RerankWeights(), now=NOW, top_k=3)
    assert ranked[0].score == 0.5
    assert rerank([_hit(_fact(1), 0.5)], RerankWeights(), now=NOW, top_k=0) == []


def test_the_stable_block_keeps_its_order_cuts_at_the_byte_budget_and_hashes_its_bytes(
) -> None:
    facts = [_fact(i, text="x" * 40) for i in range(1, 6)]
    whole = build_stable(facts, 100_000)
    assert whole.count == 5 and whole.block.splitlines()[0] == BLOCK_HEADER
    assert whole.version == stable_version(whole.block) and len(whole.version) == 32
    cut = build_stable(facts, len(whole.block.encode()) - 1)
    assert cut.count == 4 and whole.block.startswith(cut.block)
    assert len(cut.block.encode()) <= len(whole.block.encode()) - 1
    assert cut.version != whole.version
    empty = build_stable(facts, 10)
    assert (empty.block, empty.count) == ("", 0)
    assert empty.version == stable_version("")


def _vec(i: int) -> Vector:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


async def _add(store: InMemoryStore, text: str, i: int, *, importance: int = 5,
               pinned: bool = False, agent: str | None = None) -> FactRecord:
    terms = FactTerms(scope="relationship" if agent else "profile", agent_id=agent)
    return await store.add_fact("u", NewFact(text, "fact", importance, _vec(i), "test", terms,
                                             pinned=pinned))


async def test_over_the_in_memory_store_the_stable_block_is_the_same_for_every_query(
) -> None:
    store = InMemoryStore()
    added = [await _add(store, f"Fact number {i} about topic{i}", i) for i in range(12)]
    vip = await _add(store, "Pinned fact", 0, importance=1, pinned=True)
    big = await _add(store, "Important fact", 1, importance=9)
    await _add(store, "Calls the assistant Sam", 2, agent="sam")
    policy = SplitPolicy(stable_max_facts=4, volatile_top_k=3)
    embedder = FixedEmbedder(_vec(3))
    seen = set()
    for i in range(12):
        blocks = await prompt_blocks(store, embedder, "u", query=f"topic{i}", policy=policy)
        seen.add((blocks.stable.block, blocks.stable.version))
        stable_ids = {f.id for f in blocks.stable.facts}
        assert blocks.volatile.count == 3
        assert not stable_ids & {f.id for f in blocks.volatile.facts}
        assert blocks.volatile.block.splitlines()[0] == VOLATILE_HEADER
    assert len(seen) == 1
    stable = (await stable_block(store, "u", policy=policy))
    assert (stable.block, stable.version) in seen
    assert [f.id for f in stable.facts] == [vip.id, big.id, added[0].id, added[1].id]
    # The lexical side finds topic7 first: it is in the volatile block, not the stable.
    blocks = await prompt_blocks(store, embedder, "u", query="topic7", policy=policy)
    assert added[7].id in {f.id for f in blocks.volatile.facts}
    # With the agent, its relationship facts may enter; without, never.
    with_sam = await stable_block(store, "u", agent_id="sam",
                                  policy=replace(policy, stable_max_facts=100))
    assert "Calls the assistant Sam" in with_sam.block
    assert "Sam" not in (await stable_block(store, "u", policy=replace(
        policy, stable_max_facts=100))).block


async def test_all_in_the_stable_block_no_query_or_memory_off_no_embeddings_call() -> None:
    store = InMemoryStore()
    for i in range(3):
        await _add(store, f"Fact {i}", i)
    embedder = FixedEmbedder(_vec(0))
    reader = MemoryReader(store, embedder, split=SplitPolicy(stable_max_facts=5))
    blocks = await reader.prompt_blocks("u", query="Fact")
    assert (blocks.stable.count, blocks.volatile.count, embedder.calls) == (3, 0, 0)
    few = MemoryReader(store, embedder, split=SplitPolicy(stable_max_facts=1))
    assert (await few.prompt_blocks("u")).volatile.block == ""
    assert embedder.calls == 0
    assert (await few.prompt_blocks("u", query="Fact")).volatile.count == 2
    assert embedder.calls == 1
    await store.set_consent("u", False)
    off = await few.prompt_blocks("u", query="Fact")
    assert (off.stable.block, off.volatile.block, off.stable.count) == ("", "", 0)
    assert off.stable.version == stable_version("")
    assert (await reader.stable_block("u")).block == ""
    assert embedder.calls == 1, "memory off: the user's words go to no model"


async def test_a_fact_the_byte_budget_cut_from_the_stable_block_can_enter_the_volatile(
) -> None:
    """The search leaves out only the facts the stable block holds: one fetched for it
    but cut by the bytes stays a candidate, and the candidates are ranked among
    themselves (the volatile block is full although the stable block took the best)."""
    store = InMemoryStore()
    for i in range(6):
        await _add(store, f"Short fact {i} about topic{i}", i, importance=9)
    cut = await _add(store, "A long fact about topicX " + "and more words " * 20, 6,
                     importance=8)
    for i in range(6):
        await _add(store, f"Other fact {i} about topicX", 7 + i, importance=1)
    policy = SplitPolicy(stable_max_facts=8, stable_max_bytes=len(BLOCK_HEADER) + 200,
                         volatile_top_k=3)
    blocks = await prompt_blocks(store, FixedEmbedder(_vec(6)), "u", query="topicX",
                                 policy=policy)
    held = {f.id for f in blocks.stable.facts}
    assert cut.id not in held and len(held) < 8, "the byte budget ended the stable block"
    assert cut.id in {f.id for f in blocks.volatile.facts}
    assert blocks.volatile.count == 3
    assert not held & {f.id for f in blocks.volatile.facts}
