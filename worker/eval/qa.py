"""`memfleet eval --qa` and `--retrieval`: each scenario's questions, asked at its end
through the read a chat server makes (docs/eval.md, "Question answering" and
"Retrieval").

The read is the chat server's (worker.read, as api_stub's chat turn calls it): the
known-facts block of the scenario's user, with the question as the query and
MEMFLEET_READ_TOP_K as top-k (all active facts while the user has no more; else the
top-k by the hybrid search), the agent's relationship facts when the question names
one. The block is worker.read.format_block's, byte for byte. One difference: the
store reads by the real clock and the scenario clock lies ahead of it (worker.eval.suite),
so a fact that had expired by the scenario's end is still active for the store; it
is dropped from what the read returned, as the store itself would drop it at that
moment.

``--qa``: the answer model (MEMFLEET_EVAL_ANSWER_MODEL, else the extraction model;
the rules with the rules provider) answers from the block; the answer is scored by
exact match (worker.eval.qa_score) and, with MEMFLEET_EVAL_JUDGE_MODEL, by the judge model.
``--retrieval``: after the answers, the user's facts get the haystack's distractors
(worker.eval.haystack), and the search for the question (worker.read.search_facts, the
memory API's search) ranks them; the gold fact's rank is kept, in the fused list the
read uses and in the list by meaning alone. ``--rerank`` (with ``--retrieval``): also
its rank in the same hits re-ranked as the prompt split's volatile block ranks them
(worker.read_split.rerank: pins, the asking agent's relationship facts, recency, the
MEMFLEET_READ_RERANK_* weights), at the scenario's end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from worker.config import Settings, secret
from worker.errors import ConfigurationError
from worker.eval.haystack import add_distractors
from worker.eval.qa_openai import answer_model, build_qa
from worker.eval.qa_score import QuestionScore, exact_match
from worker.eval.qa_wire import Answerer, AnswerRequest, Judge, JudgeRequest
from worker.eval.suite import Question, Scenario
from worker.providers.base import Embedder
from worker.providers.factory import build_embedder, embedding_model
from worker.providers.rules import MODEL as RULES_MODEL
from worker.read import MemoryReader, SearchHit, format_block
from worker.read_split import RerankWeights, rerank
from worker.store.fence_key import fence_keys
from worker.store.imports import ImportStore
from worker.store.postgres import PostgresStore
from worker.store.types import FactRecord

RETRIEVAL_K = 3  # the retrieval table's second column: the gold fact within the top 3
SEARCH_DEPTH = 50  # hits asked of the search: the haystack and the scenario's own facts


@dataclass(frozen=True, slots=True)
class QaChoice:
    """What `memfleet eval` was asked to do with the questions."""

    answer: bool = False  # --qa
    retrieval: bool = False  # --retrieval
    # --rerank (with --retrieval): also rank the hits as the split's volatile block does
    rerank: bool = False
    # --control empty-read: answer from an empty known-facts block (memory's floor)
    empty_read: bool = False

    @property
    def any(self) -> bool:
        return self.answer or self.retrieval


def qa_names(settings: Settings) -> tuple[str, str | None]:
    """The answer model's and the judge's names (None: exact match only), checked
    before a run that may take long: a blank one is a ConfigurationError."""
    judge = settings.eval_judge_model
    if judge is not None and not judge.strip():
        raise ConfigurationError("MEMFLEET_EVAL_JUDGE_MODEL is blank: unset it for exact "
                                 "match only")
    if settings.llm_provider == "rules":
        return RULES_MODEL, RULES_MODEL if judge else None
    model = answer_model(settings)
    if not model.strip():
        raise ConfigurationError("memfleet eval --qa needs MEMFLEET_EVAL_ANSWER_MODEL or "
                                 "MEMFLEET_EXTRACT_MODEL")
    return model, judge


def _live(facts: Sequence[FactRecord], moment: datetime) -> list[FactRecord]:
    """What the read returned, less what had expired by the scenario's end."""
    return [f for f in facts if f.expires_at is None or f.expires_at > moment]


async def _answer(reader: MemoryReader, scenario: Scenario, user_id: str,
                  question: Question, choice: QaChoice, answerer: Answerer | None,
                  judge: Judge | None, top_k: int) -> QuestionScore:
    facts = _live(await reader.known_facts(user_id, query=question.ask, top_k=top_k,
                                           agent_id=question.agent), scenario.ends_at)
    block = "" if choice.empty_read else format_block(facts)
    answer, exact, judged = "", False, None
    if answerer is not None:
        reply = await answerer.answer(AnswerRequest(question=question.ask, known_facts=block))
        answer = reply.value.answer
        exact = exact_match(question, answer)
        if judge is not None:
            verdict = await judge.judge(JudgeRequest(question=question.ask,
                                                     reference=question.answer, answer=answer))
            judged = verdict.value.correct
    return QuestionScore(scenario.id, scenario.kind, question.ask, question.answer, answer,
                         exact, judged, 0 if choice.empty_read else len(facts))


def reranked_facts(hits: Sequence[SearchHit], weights: RerankWeights, *, now: datetime,
                   agent_id: str | None) -> list[FactRecord]:
    """All of ``hits`` in the prompt split's volatile order (worker.read_split.rerank,
    its single definition), as of ``now``."""
    return [r.fact for r in rerank(hits, weights, now=now, top_k=len(hits),
                                   agent_id=agent_id)]


async def _ranked(reader: MemoryReader, scenario: Scenario, user_id: str, question: Question,
                  score: QuestionScore, weights: RerankWeights | None) -> QuestionScore:
    """``score`` with the gold fact's ranks in the search for the question; ``weights``:
    also in the hits re-ranked with them (--rerank)."""
    hits = await reader.search(user_id, question.ask, top_k=SEARCH_DEPTH,
                               agent_id=question.agent)
    by_meaning = sorted((h for h in hits if h.semantic_rank), key=lambda h: h.semantic_rank or 0)
    reranked = None
    if weights is not None:
        reranked = _gold_rank(question, _live(
            reranked_facts(hits, weights, now=scenario.ends_at, agent_id=question.agent),
            scenario.ends_at))
    return dataclasses.replace(
        score, rank=_gold_rank(question, _live([h.fact for h in hits], scenario.ends_at)),
        semantic_rank=_gold_rank(question, _live([h.fact for h in by_meaning],
                                                 scenario.ends_at)),
        reranked_rank=reranked)


def _gold_rank(question: Question, ranked: Sequence[FactRecord]) -> int | None:
    gold = question.gold_fact
    return next((i for i, f in enumerate(ranked, 1) if gold.found_in(f.text)), None)


async def ask_questions(
    settings: Settings, store: PostgresStore, scenarios: Sequence[Scenario],
    users: dict[str, str], choice: QaChoice, progress: Callable[[str], None],
) -> list[QuestionScore]:
    """Every question of the scenarios, asked of its scenario's user (``users``: id to
    user) at the scenario's end: answered first, then (``--retrieval``) ranked with the
    haystack's distractors added (worker.eval.haystack). The models and the embedder are
    closed at the end; the distractors go with the run's erase."""
    asked = [(s, q) for s in scenarios for q in s.questions]
    if not asked:
        return []
    answerer, judge = build_qa(settings) if choice.answer else (None, None)
    embedder: Embedder = build_embedder(settings, embedding_model(settings), settings.embed_dim)
    reader = MemoryReader(store, embedder, memory_default=settings.memory_default)
    try:
        progress(f"{len(asked)} questions")
        scores = [await _answer(reader, s, users[s.id], q, choice, answerer, judge,
                                settings.read_top_k) for s, q in asked]
        if not choice.retrieval:
            return scores
        spans = {users[s.id]: (s.sessions[0].at, s.ends_at) for s, _ in reversed(asked)}
        imports = await ImportStore.connect(
            settings.database_url or "",
            fences=fence_keys(secret(settings.erase_fence_key), settings.home_dir))
        try:
            for user_id, span in spans.items():
                await add_distractors(imports, embedder, user_id, span=span,
                                      memory_default=settings.memory_default)
        finally:
            await imports.aclose()
        weights = RerankWeights.from_settings(settings) if choice.rerank else None
        return [await _ranked(reader, s, users[s.id], q, score, weights)
                for (s, q), score in zip(asked, scores, strict=True)]
    finally:
        for closable in (answerer, judge, embedder):
            close = getattr(closable, "aclose", None)
            if close is not None:
                await close()
