"""The read path's hybrid search (worker.read): a user's facts ranked for a query.

A query is matched by meaning (the nearest embeddings) and by words (the query's
words, any one of them, in PostgreSQL's full-text search), and the two rankings are
fused by Reciprocal Rank Fusion (``rrf``). The query is embedded with the model the
user's facts are on (``query_embedder``: `memfleet reembed` may have moved them off
the settings' model), so distances are only taken within one model. A search for a
prompt takes a consent gate: nothing while the user's memory is off, and then no
embeddings call either. Nothing here writes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from worker.memory_rules import MemoryScope
from worker.providers.base import Embedder, EmbedderFactory
from worker.store.base import MemoryStore
from worker.store.postgres import StoreOrPool, memory_store
from worker.store.types import ConsentGate, FactRecord

RRF_K = 60

_WORD = re.compile(r"\w+")
# Enough words for any real question; keeps a pasted essay from becoming a huge tsquery.
MAX_QUERY_WORDS = 64


@dataclass(frozen=True, slots=True)
class SearchHit:
    fact: FactRecord
    score: float
    semantic_rank: int | None
    lexical_rank: int | None


def rrf(rankings: Iterable[Sequence[int]], *, k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal Rank Fusion: score(d) = sum over lists of 1 / (k + rank of d), rank from 1.

    Returns (id, score), best first; ties go to the smaller id so the order is stable.
    An id that appears twice in one list counts at its best rank only.
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        seen: set[int] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def words_query(text: str) -> str:
    """The query's words joined by " or ", for websearch_to_tsquery.

    Only word characters pass, so quotes, '-' and other operators in the user's
    text can never change the query's meaning; any one word matching is enough
    (ranking rewards matching more).
    """
    return " or ".join(_WORD.findall(text)[:MAX_QUERY_WORDS])


async def search_facts(
    store_or_pool: StoreOrPool,
    embedder: Embedder,
    user_id: str,
    query: str,
    *,
    top_k: int,
    scope: MemoryScope = "both",
    agent_id: str | None = None,
    valid_at: datetime | None = None,
    known_at: datetime | None = None,
    embedders: EmbedderFactory | None = None,
    consent_gate: ConsentGate | None = None,
) -> list[SearchHit]:
    """The user's top-k facts for ``query``: semantic and lexical top-k, RRF-fused; of
    the active ones, or of those true at ``valid_at`` or believed at ``known_at``.
    Equal scores go to the more trusted fact (confidence), then the smaller id.
    ``consent_gate`` (a read for a prompt): nothing while the user's memory is off."""
    store = memory_store(store_or_pool)
    if scope == "none":
        return []  # no embeddings call for nothing
    if consent_gate is not None and not await remembered(store, user_id, consent_gate):
        return []  # nor for a user who turned memory off (the search checks it again)
    embedder = await query_embedder(store, embedder, user_id, embedders)
    return await fused_search(store, embedder, user_id, query, top_k=top_k, scope=scope,
                         agent_id=agent_id, valid_at=valid_at, known_at=known_at,
                         consent_gate=consent_gate)


async def fused_search(
    store: MemoryStore, embedder: Embedder, user_id: str, query: str, *, top_k: int,
    scope: MemoryScope, agent_id: str | None, consent_gate: ConsentGate | None,
    valid_at: datetime | None = None, known_at: datetime | None = None,
    exclude: Sequence[int] = (),
) -> list[SearchHit]:
    # search_facts once its caller knows the user's memory is on, and ``embedder`` is
    # the one of the user's facts (query_embedder). ``exclude``: MemoryStore.search.
    answer = await embedder.embed([query])
    ranked = await store.search(user_id, answer.value[0], words_query(query), top_k,
                                scope=scope, agent_id=agent_id, valid_at=valid_at,
                                known_at=known_at, consent_gate=consent_gate,
                                exclude=exclude)
    by_id = {hit.fact.id: hit for hit in ranked}
    semantic = sorted((h for h in ranked if h.semantic_rank), key=lambda h: h.semantic_rank or 0)
    lexical = sorted((h for h in ranked if h.lexical_rank), key=lambda h: h.lexical_rank or 0)
    fused = sorted(rrf([[h.fact.id for h in semantic], [h.fact.id for h in lexical]]),
                   key=lambda pair: (-pair[1], -by_id[pair[0]].fact.confidence, pair[0]))
    return [
        SearchHit(by_id[i].fact, score, by_id[i].semantic_rank, by_id[i].lexical_rank)
        for i, score in fused[:top_k]
    ]


async def remembered(store: MemoryStore, user_id: str, gate: ConsentGate) -> bool:
    """Whether the user's memory is on: their own choice, else the gate's default."""
    chosen = await store.consent(user_id)
    return gate.memory_default if chosen is None else chosen


async def query_embedder(
    store: MemoryStore, embedder: Embedder, user_id: str, embedders: EmbedderFactory | None
) -> Embedder:
    """What a query about the user (or a fact written for them) is embedded with: the
    model their facts are on, which `memfleet reembed` may have moved away from
    ``embedder``'s, so distances are only taken within one model. ``embedders``
    (``Providers.embedder_for``) builds it; without one, ``embedder`` as it is."""
    if embedders is None:
        return embedder
    return embedder_on(await store.active_embedding(user_id), embedder, embedders)


def embedder_on(on: tuple[str, int] | None, embedder: Embedder,
                embedders: EmbedderFactory | None) -> Embedder:
    """``query_embedder`` given the user's (model, dimension), ``active_embedding``."""
    if embedders is None or on is None or on == (embedder.model, embedder.dim):
        return embedder
    return embedders(*on)
