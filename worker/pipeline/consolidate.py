"""Consolidate stage: decide ADD / UPDATE / DELETE / NONE per candidate.

``run`` is the stage: one neighbour query, LLM pass 2 (asked only about the
candidates that have neighbours, and once more with the reasons when an answer
is unusable), then the pure parts: the request and its validation
(worker.pipeline.decisions) and the writes they plan (worker.pipeline.plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog
from opentelemetry import trace

from worker.errors import ProviderAnswerInvalid, answer_try_left
from worker.pipeline import persons as persons_stage
from worker.pipeline.context import RunContext, ask
from worker.pipeline.decisions import (
    PreparedRequest,
    Validated,
    build_request,
    only_asked,
    renumbered,
    unasked,
    validate,
)
from worker.pipeline.extract import CandidateFact, observed_label
from worker.pipeline.plan import Plan, plan_writes
from worker.providers.base import Embedder
from worker.providers.wire import ConsolidationRequest
from worker.store.person_types import ExistingPerson, NewPerson, PersonRecord, PersonWrites
from worker.store.types import Neighbors, Vector

log = structlog.get_logger("memfleet.consolidate")


@dataclass(frozen=True, slots=True)
class Decided:
    plan: Plan
    user_version: int | None  # the user's version the neighbours were read at; None: no facts
    rejected: int
    # The model the plan's embeddings come from; None: the worker's own embedder's.
    embedding_model: str | None = None
    # Why the rejected candidates had no usable decision (Validated.reasons: no text),
    # for the audit row.
    doubts: tuple[str, ...] = ()
    # The persons the run creates or relabels (persons on; docs/persons.md), else None.
    persons: PersonWrites | None = None


async def _read_neighbors(
    ctx: RunContext, user_id: str, candidates: Sequence[CandidateFact], embeddings: Vector,
    model: str,
) -> Neighbors:
    k = ctx.settings.neighbors_k
    with ctx.clock.span(
        "SELECT memory_fact", trace.SpanKind.CLIENT,
        {"db.system.name": "postgresql", "db.operation.name": "SELECT",
         "db.collection.name": "memory_fact", "memfleet.neighbors.k": k},
    ):
        about = [p.id if isinstance(p := c.terms.person, ExistingPerson) else None
                 for c in candidates]
        # Named only when a candidate is about a stored person: None everywhere is the
        # user's facts, the store's default.
        by_person = {"persons": about} if any(p is not None for p in about) else {}
        found = await ctx.store.neighbors(
            user_id, embeddings, k, agents=[c.terms.agent_id for c in candidates], model=model,
            **by_person)
    # A person met for the first time has no facts yet: nothing stored to compare with.
    for i, candidate in enumerate(candidates):
        if isinstance(candidate.terms.person, NewPerson):
            found.rows[i] = []
    return found


async def _embed_again(
    ctx: RunContext, embedder: Embedder, candidates: Sequence[CandidateFact]
) -> Vector:
    texts = [c.text for c in candidates]
    answer = await ask(ctx, "embeddings", embedder, lambda: embedder.embed(texts))
    if answer.value.shape != (len(candidates), embedder.dim):
        raise ProviderAnswerInvalid("the embeddings do not match the request")
    return answer.value


async def run(
    ctx: RunContext,
    user_id: str,
    candidates: Sequence[CandidateFact],
    embeddings: Vector,
    observed_at: datetime,
    attempt: int,
    persons: Sequence[PersonRecord] | None = None,
) -> Decided:
    """Read the user's nearest active facts and decide what every candidate does to them.
    ``persons`` (persons on: the user's, read with the extraction): each candidate is
    attributed first (worker.pipeline.persons) and compared only with the facts about
    the same person; a later attempt reads them again."""
    with ctx.clock.stage("consolidate", **{"memfleet.attempt": attempt}):
        writes = None
        if persons is not None:
            if attempt > 1:
                persons = await persons_stage.read_known(ctx, user_id) or []
            candidates, embeddings, writes = persons_stage.attributed(
                ctx, candidates, embeddings, persons)
        if not candidates:
            return Decided(Plan((), 0, 0, 0, 0), None, 0, persons=writes)
        k = ctx.settings.neighbors_k
        embedder = ctx.providers.embedder
        found = await _read_neighbors(ctx, user_id, candidates, embeddings, embedder.model)
        if found.other_model is not None:
            # `memfleet reembed` moved the user's facts to another model: the candidates
            # are embedded with that one too and the neighbours read again, so distances
            # are only taken within one model (and the new rows are written with it).
            embedder = ctx.providers.embedder_for(*found.other_model)
            embeddings = await _embed_again(ctx, embedder, candidates)
            found = await _read_neighbors(ctx, user_id, candidates, embeddings, embedder.model)
        version, neighbors = found.version, found.rows
        prepared = build_request(candidates, embeddings, neighbors, observed_label(observed_at),
                                 observed_at.date().isoformat(), k,
                                 ctx.settings.neighbors_min_similarity)
        validated = await _decide(ctx, prepared)
        plan = plan_writes(candidates, embeddings, prepared, validated)
    return Decided(plan, version, validated.rejected, embedder.model,
                   validated.reasons if validated.rejected else (), writes)


async def _answer(
    ctx: RunContext, prepared: PreparedRequest, request: ConsolidationRequest
) -> Validated:
    """The model's decisions on ``request``, validated. An answer that stays unusable
    (ProviderAnswerInvalid, after MEMFLEET_LLM_ANSWER_ATTEMPTS asks) is raised while the
    job has a try left for it; on its last try it is no decision for any candidate."""
    consolidator = ctx.providers.consolidator
    try:
        answer = await ask(ctx, "chat", consolidator, lambda: consolidator.consolidate(request))
    except ProviderAnswerInvalid as exc:
        if answer_try_left(ctx.job_try, ctx.settings.max_tries):
            raise
        log.warning("consolidation answer unusable on the last try", error=str(exc))
        count = len(prepared.offered)
        return Validated({}, count, tuple(f"candidate {i}: no usable answer was given"
                                          for i in range(count)))
    return validate(prepared, answer.value)


async def _decide(ctx: RunContext, prepared: PreparedRequest) -> Validated:
    """Decide every candidate: those without neighbours are added unasked; the model
    is asked about the rest (``_ask_twice``)."""
    asked, given = unasked(prepared)
    if not asked:
        return Validated(given, 0)
    if not given:
        return await _ask_twice(ctx, prepared)
    return renumbered(await _ask_twice(ctx, only_asked(prepared, asked)), asked, given)


async def _ask_twice(ctx: RunContext, prepared: PreparedRequest) -> Validated:
    """Ask, and ask again once told what was wrong. What is still wrong sends the job
    back for one more try later (a fresh sample of both passes, so a glitch does not
    cost the user a fact); on the last try its candidates are held for the user
    (plan_writes), on the record (the audit row's rejected and held, the decision
    metric's REJECTED and HELD)."""
    request = prepared.request
    validated = await _answer(ctx, prepared, request)
    if not validated.rejected:
        return validated
    log.warning("consolidation decisions rejected, asking again",
                rejected=validated.rejected, reasons=list(validated.reasons))
    retry = request.model_copy(update={"corrections": validated.reasons})
    validated = validated.merged(await _answer(ctx, prepared, retry))
    if validated.rejected:
        log.warning("consolidation decisions rejected twice",
                    rejected=validated.rejected, reasons=list(validated.reasons))
        if answer_try_left(ctx.job_try, ctx.settings.max_tries):
            raise ProviderAnswerInvalid(
                f"{validated.rejected} consolidation decisions invalid twice")
    return validated
