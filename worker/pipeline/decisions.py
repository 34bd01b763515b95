"""The consolidation request and its validation. Pure.

``build_request`` gives every neighbour a small integer id standing for a real
row (or for one of the batch's earlier candidates) inside this request only.
``validate`` keeps only decisions whose target is among that candidate's own
neighbours, so an answer can never reach another user's row or an id it was
not shown. ``unasked`` sets aside the candidates with no neighbour (only ADD is
right for them), ``only_asked`` narrows the request to the others and
``renumbered`` puts the model's verdict back in the batch's numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from worker.pipeline.extract import CandidateFact
from worker.providers.wire import ConsolidationAnswer, ConsolidationRequest, Decision
from worker.store.types import ExistingRow, NeighborRow, Vector


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
        # only those of the same scope and agent, and about the same person (the
        # user, or one of theirs), like the stored ones.
        agent, person = candidate.terms.agent_id, candidate.terms.person
        # A forget request is nothing to compare with: it is never stored.
        same = [j for j in range(i) if candidates[j].terms.agent_id == agent
                and candidates[j].terms.person == person
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


def unasked(prepared: PreparedRequest) -> tuple[list[int], dict[int, Decision]]:
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


def only_asked(prepared: PreparedRequest, asked: Sequence[int]) -> PreparedRequest:
    """The request narrowed to ``asked``, renumbered from 0 in order; ids unchanged."""
    candidates = tuple(prepared.request.candidates[i].model_copy(update={"candidate": k})
                       for k, i in enumerate(asked))
    request = prepared.request.model_copy(update={"candidates": candidates})
    return PreparedRequest(request, prepared.id_map,
                           tuple(prepared.offered[i] for i in asked), prepared.rows)


def renumbered(validated: Validated, asked: Sequence[int],
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
