"""A consolidation's accepted decisions as the store's ordered writes. Pure.

``plan_writes`` follows supersessions made earlier in the same batch (a fact
updated twice is superseded once, by the last), holds changes of pinned or more
trusted facts for the user (``hold_reason``), holds candidates left without a
usable decision as ADD proposals, and turns a forget request into a retraction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from worker.pipeline.decisions import PreparedRequest, Ref, Validated
from worker.pipeline.extract import CandidateFact
from worker.providers.wire import Decision
from worker.store.types import (
    ExistingRow,
    FactRef,
    HoldProposal,
    InsertFact,
    NeighborRow,
    NewRow,
    SupersedeFact,
    Vector,
    Write,
)


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
            # held for the user to add or dismiss (docs/memory_model.md). Its terms keep
            # whom it is about: accepted, it is that person's fact (docs/persons.md).
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
