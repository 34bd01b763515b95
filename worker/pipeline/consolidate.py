"""Consolidate stage: decide ADD / UPDATE / DELETE / NONE per candidate. Pure parts.

``build_request`` gives every neighbour a small integer id standing for a real
row (or for one of the batch's earlier candidates) inside this request only.
``validate`` keeps only decisions whose target is among that candidate's own
neighbours, so an answer can never reach another user's row or an id it was
not shown. ``plan_writes`` turns the accepted decisions into the store's
ordered writes, following supersessions made earlier in the same batch.
``run`` is the stage: one neighbour query, LLM pass 2, and those three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog
from opentelemetry import trace

from worker.errors import ProviderAnswerInvalid, answer_try_left
from worker.pipeline.context import RunContext, ask
from worker.pipeline.extract import CandidateFact, observed_label
from worker.providers.base import Embedder
from worker.providers.wire import ConsolidationAnswer, ConsolidationRequest, Decision
from worker.store.types import (
    ExistingRow,
    FactRef,
    HoldProposal,
    InsertFact,
    NeighborRow,
    Neighbors,
    NewRow,
    SupersedeFact,
    Vector,
    Write,
)

log = structlog.get_logger("memfleet.consolidate")


@dataclass(frozen=True, slots=True)
class BatchCandidate:
    index: int


Ref = ExistingRow | BatchCandidate


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    request: ConsolidationRequest
    id_map: dict[int, Ref]  # wire id -> what it stands for
    offered: tuple[frozenset[int], ...]  # per candidate: the wire ids it was shown
    # The stored rows shown, by row id: whether each is pinned, and how trusted.
    rows: dict[int, NeighborRow] = field(default_factory=dict)


def build_request(
    candidates: Sequence[CandidateFact],
    embeddings: Vector,
    neighbors: Sequence[Sequence[NeighborRow]],
    observed_at: str,
    observed_date: str,
    k: int,
    min_similarity: float | None = None,
) -> PreparedRequest:
    id_map: dict[int, Ref] = {}
    # Keyed by plain ints (row id, candidate index): a neighbour shared by several
    # candidates keeps one wire id, and no Ref is built just to be looked up.
    row_ids: dict[int, int] = {}
    batch_ids: dict[int, int] = {}

    def wire_id(known: dict[int, int], key: int, ref: type[ExistingRow | BatchCandidate]) -> int:
        wire = known.get(key)
        if wire is None:
            wire = known[key] = len(id_map) + 1
            id_map[wire] = ref(key)
        return wire

    wire_candidates: list[dict[str, Any]] = []
    offered: list[frozenset[int]] = []
    rows = {row.id: row for found in neighbors for row in found}
    # Cosine of every pair of candidates at once (vectors are unit length): one
    # matrix product instead of a Python loop over 1536-dim lists per pair.
    similarity = (embeddings @ embeddings.T).tolist()
    floor = -2.0 if min_similarity is None else min_similarity  # below any cosine
    for i, candidate in enumerate(candidates):
        # Below the floor a neighbour is about something else: a small model took
        # "lives in Leeds" for a change of "works as a radiographer" (issue 38).
        shown: list[dict[str, Any]] = [
            {"id": wire_id(row_ids, row.id, ExistingRow), "text": row.text,
             "observed_at": row.observed_at.date().isoformat(), "pinned": row.pinned}
            for row in neighbors[i] if 1.0 - row.distance >= floor
        ]
        # The batch's earlier candidates count as neighbours too (the nearest k),
        # so a user who changes their mind twice in one slice ends with one fact;
        # only those of the same scope and agent, like the stored ones.
        agent = candidate.terms.agent_id
        # A forget request is nothing to compare with: it is never stored.
        same = [j for j in range(i) if candidates[j].terms.agent_id == agent
                and not candidates[j].forget and similarity[i][j] >= floor]
        earlier = sorted(same, key=lambda j: -similarity[i][j])[:k]
        shown += [
            {"id": wire_id(batch_ids, j, BatchCandidate), "text": candidates[j].text,
             "observed_at": observed_date}
            for j in sorted(earlier)
        ]
        wire_candidates.append({"candidate": i, "text": candidate.text,
                                "category": candidate.category, "neighbors": shown,
                                "forget": candidate.forget})
        offered.append(frozenset(n["id"] for n in shown))
    # Plain dicts validated once, as a whole: pydantic builds the nested models
    # in one call, cheaper than a model constructor per neighbour.
    request = ConsolidationRequest.model_validate(
        {"observed_at": observed_at, "candidates": wire_candidates}
    )
    return PreparedRequest(request, id_map, tuple(offered), rows)


@dataclass(frozen=True, slots=True)
class Validated:
    decisions: dict[int, Decision]  # candidate index -> its one accepted decision
    rejected: int  # candidates without an acceptable decision
    # Why, one line per fault, naming the candidate by its index and quoting no
    # text: safe to log, and what a second ask is told (``corrections``).
    reasons: tuple[str, ...] = field(default=())

    def merged(self, retry: Validated) -> Validated:
        """These decisions, with a second ask's filling the candidates that had none."""
        decisions = {**retry.decisions, **self.decisions}
        missing = self.rejected + len(self.decisions) - len(decisions)
        # The faults of the candidates still without a decision.
        reasons = tuple(r for r in retry.reasons
                        if not any(r.startswith(f"candidate {i}:") for i in decisions))
        return Validated(decisions, missing, reasons)


def validate(prepared: PreparedRequest, answer: ConsolidationAnswer) -> Validated:
    """Accept at most one well-formed decision per candidate; count the rest as rejected."""
    count = len(prepared.offered)
    accepted: dict[int, Decision] = {}
    reasons: list[str] = []
    for decision in answer.decisions:
        i = decision.candidate
        if not 0 <= i < count:
            reasons.append(f"candidate {i}: there is no such candidate in the request")
            continue
        if i in accepted:
            reasons.append(f"candidate {i}: give one decision per candidate, not two")
            continue
        needs_target = decision.event in ("UPDATE", "DELETE")
        if needs_target and decision.target is None:
            reasons.append(f"candidate {i}: {decision.event} needs a target")
            continue
        if decision.target is not None and decision.target not in prepared.offered[i]:
            if needs_target:
                reasons.append(f"candidate {i}: target {decision.target} is not among"
                               " this candidate's neighbours")
                continue
            decision = decision.model_copy(update={"target": None})  # NONE's target is a hint
        accepted[i] = decision
    reasons += [f"candidate {i}: no acceptable decision was given"
                for i in range(count) if i not in accepted
                and not any(r.startswith(f"candidate {i}:") for r in reasons)]
    return Validated(accepted, count - len(accepted), tuple(reasons))


@dataclass(frozen=True, slots=True)
class Plan:
    writes: tuple[Write, ...]
    added: int
    updated: int
    deleted: int
    unchanged: int
    held: int = 0  # changes to pinned or more trusted facts, kept for the user instead


def hold_reason(candidate: CandidateFact, row: NeighborRow | None) -> str | None:
    """Why a change of ``row`` proposed for ``candidate`` is not applied, if it is not.

    A pinned fact changes only when the user changes it; a fact the user stated
    is not replaced by what was merely inferred (docs/memory_model.md).
    """
    if row is None:
        return None
    if row.pinned:
        return "pinned"
    if candidate.terms.basis == "inferred" and row.confidence > candidate.terms.confidence:
        return "outranked"
    return None


def plan_writes(
    candidates: Sequence[CandidateFact],
    embeddings: Vector,
    prepared: PreparedRequest,
    validated: Validated,
) -> Plan:
    writes: list[Write] = []
    # What a batch candidate became: its inserted row, or the row its NONE pointed at.
    became: dict[int, FactRef] = {}
    # Rows superseded earlier in this batch -> the row that replaced them (None: deleted).
    replaced: dict[FactRef, FactRef | None] = {}
    added = updated = deleted = unchanged = held = 0

    def shown(ref: Ref) -> FactRef | None:
        """The row a wire id stood for when the request was built."""
        return ref if isinstance(ref, ExistingRow) else became.get(ref.index)

    def current(row: FactRef | None) -> FactRef | None:
        while row is not None and row in replaced:
            row = replaced[row]
        return row

    for i, candidate in enumerate(candidates):
        decision = validated.decisions.get(i)
        if candidate.forget:
            given, decision = decision, _retraction(decision)
            if decision is None:  # it names nothing stored (or had no usable decision,
                unchanged += given is not None  # counted rejected): nothing is kept
                continue
        if decision is None:
            # No usable decision even after the re-ask: neither added (a duplicate, or a
            # contradiction if it was meant to replace a neighbour) nor dropped, but
            # held for the user to add or dismiss (docs/memory_model.md).
            writes.append(HoldProposal(None, "ADD", "undecided", candidate.text,
                                       category=candidate.category,
                                       importance=candidate.importance,
                                       terms=candidate.terms))
            held += 1
            continue
        was = shown(prepared.id_map[decision.target]) if decision.target is not None else None
        target = current(was)
        event = decision.event
        if event == "NONE":
            if was is None or was not in replaced:
                unchanged += 1
                if target is not None:
                    became[i] = target
                continue
            # "Already known" of a fact this batch has just changed or retracted:
            # the user said it again, after what undid it, so it holds again.
            event = "UPDATE" if target is not None else "ADD"
        if event in ("UPDATE", "DELETE") and isinstance(target, ExistingRow):
            reason = hold_reason(candidate, prepared.rows.get(target.id))
            if reason is not None:
                text = (decision.text or "").strip() or candidate.text
                writes.append(HoldProposal(target, event, reason,
                                           text if event == "UPDATE" else None))
                held += 1
                became[i] = target
                continue
        if event == "DELETE":
            if target is None:  # already gone within this batch
                unchanged += 1
                continue
            writes.append(SupersedeFact(target))
            replaced[target] = None
            deleted += 1
            continue
        text = (decision.text or "").strip() or candidate.text
        if event == "UPDATE" and target is None:
            event = "ADD"  # its target vanished earlier in the batch: keep the new fact
        insert = InsertFact(
            ref=i, text=text, category=candidate.category, importance=candidate.importance,
            embedding=embeddings[i],
            supersedes=target if event == "UPDATE" else None, terms=candidate.terms,
        )
        writes.append(insert)
        became[i] = NewRow(i)
        if event == "UPDATE" and target is not None:
            replaced[target] = NewRow(i)
            updated += 1
        else:
            added += 1
    return Plan(tuple(writes), added, updated, deleted, unchanged, held)


def _retraction(decision: Decision | None) -> Decision | None:
    """What a forget request's decision may do: retract the neighbour it names, never
    add. An UPDATE or a NONE naming a neighbour names the fact the user asked to forget
    (the one that says the same); without a target, or ADD, there is nothing to do."""
    if decision is None or decision.target is None or decision.event == "ADD":
        return None
    return decision.model_copy(update={"event": "DELETE", "text": None})


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
        return await ctx.store.neighbors(
            user_id, embeddings, k, agents=[c.terms.agent_id for c in candidates], model=model)


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
) -> Decided:
    """Read the user's nearest active facts and decide what every candidate does to them."""
    with ctx.clock.stage("consolidate", **{"memfleet.attempt": attempt}):
        if not candidates:
            return Decided(Plan((), 0, 0, 0, 0), None, 0)
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
                   validated.reasons if validated.rejected else ())


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


def _unasked(prepared: PreparedRequest) -> tuple[list[int], dict[int, Decision]]:
    """Which candidates the model is asked about, and the decisions of the others.

    A candidate with no neighbour at all can only be new: it is added (a forget
    request, retracting nothing, does nothing) without a question whose one right
    answer is ADD. A small model answered such questions with UPDATE of an id it
    made up, which cost the candidate (issue 38).
    """
    asked: list[int] = []
    given: dict[int, Decision] = {}
    for candidate in prepared.request.candidates:
        i = candidate.candidate
        if candidate.neighbors:
            asked.append(i)
        else:
            given[i] = Decision(candidate=i, event="NONE" if candidate.forget else "ADD")
    return asked, given


def _only(prepared: PreparedRequest, asked: Sequence[int]) -> PreparedRequest:
    """The request narrowed to ``asked``, renumbered from 0 in order; ids unchanged."""
    candidates = tuple(prepared.request.candidates[i].model_copy(update={"candidate": k})
                       for k, i in enumerate(asked))
    request = prepared.request.model_copy(update={"candidates": candidates})
    return PreparedRequest(request, prepared.id_map,
                           tuple(prepared.offered[i] for i in asked), prepared.rows)


def _renumbered(validated: Validated, asked: Sequence[int],
                given: dict[int, Decision]) -> Validated:
    """A narrowed request's verdict in the whole batch's candidate numbers."""
    decisions = {asked[k]: d.model_copy(update={"candidate": asked[k]})
                 for k, d in validated.decisions.items()}
    reasons = []
    for reason in validated.reasons:
        head, _, rest = reason.partition(":")
        k = head.removeprefix("candidate ")
        reasons.append(f"candidate {asked[int(k)]}:{rest}"
                       if k.isdigit() and int(k) < len(asked) else reason)
    return Validated({**given, **decisions}, validated.rejected, tuple(reasons))


async def _decide(ctx: RunContext, prepared: PreparedRequest) -> Validated:
    """Decide every candidate: those without neighbours are added unasked; the model
    is asked about the rest (``_ask_twice``)."""
    asked, given = _unasked(prepared)
    if not asked:
        return Validated(given, 0)
    if not given:
        return await _ask_twice(ctx, prepared)
    return _renumbered(await _ask_twice(ctx, _only(prepared, asked)), asked, given)


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
