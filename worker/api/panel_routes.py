"""The user's corrections over the memory API: edit a fact, and list, accept or
dismiss the changes consolidation held back (docs/memory_model.md, "The user's
corrections"; docs/api.md).

Callers as in worker.api.memory_routes: the user's own token, or a service key with
the ``read`` scope (the list) or ``admin`` (the writes); each write takes one of
the user's manual writes (worker.api.write_rate). Every store call is scoped by the
path's user: another user's fact or proposal id is a plain 404. A write made on a
view that is no longer true (the fact changed, the proposal was answered) is a
409 and writes nothing, never a lost edit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError

from worker.api import portrait_due
from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, ErrorBody, error_responses
from worker.api.memory_models import MAX_FACT_ID, Fact
from worker.api.panel_models import (
    FactEditBody,
    HeldAnswer,
    HeldProposals,
    ListedProposal,
    ProposalStateQuery,
)
from worker.api.service_auth import Caller, CallerOf, ReadUser
from worker.api.write_rate import WritingUser
from worker.memory_rules import confidence_for
from worker.read import query_embedder
from worker.store import visibility
from worker.store.types import Acceptance, FactEdit, FactRecord, HeldOutcome

router = APIRouter(prefix="/users/{user_id}", tags=["memory"])

FactId = Annotated[int, Path(ge=1, le=MAX_FACT_ID)]
ProposalId = Annotated[int, Path(ge=1, le=MAX_FACT_ID)]
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.",
                                 "schema": {"type": "integer"}}}
_WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES, **error_responses(503),
    429: {"model": ErrorBody, "headers": _RETRY_AFTER,
          "description": "Too many manual writes of this user; retry after Retry-After."},
}
_NOT_FOUND = "no such fact"
_NOT_ACTIVE = "the fact is no longer active"
_NO_PROPOSAL = "no such held proposal"
_ANSWERED = "the proposal was already answered"
_STALE = "the fact changed since the proposal was held; the proposal can only be dismissed"
_PROPOSAL_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_WRITE_RESPONSES,
    404: {"model": ErrorBody, "description": "No such held proposal for this user."},
    409: {"model": ErrorBody, "description": "Already answered; or (accept) its fact is no "
                                             "longer the version it was held against."},
}


def _deps(request: Request) -> ApiDeps:
    deps: ApiDeps = request.app.state.deps
    return deps


def _answerer(who: Caller) -> str:
    # The audit trail's "by whom": never a token or a secret, a key by its public id.
    return "user" if who.key_id is None else f"key:{who.key_id}"


async def _embedding(deps: ApiDeps, user_id: str, text: str) -> tuple[Any, str]:
    # The user's facts' own model, as an added fact's (worker.read.query_embedder).
    embedder = await query_embedder(deps.memory, deps.providers.embedder, user_id,
                                    deps.providers.embedder_for)
    answer = await embedder.embed([text])
    return answer.value[0], embedder.model


def _merged(old: FactRecord, body: FactEditBody) -> tuple[datetime, datetime | None,
                                                          datetime | None]:
    """valid_from, valid_to, expires_at of the new version: the body's where it names
    them, the old version's otherwise; a 422 of the usual shape when they disagree."""
    given = body.model_fields_set
    valid_from = body.valid_from or old.valid_from or old.observed_at
    valid_to = body.valid_to if "valid_to" in given else old.valid_to
    expires_at = body.expires_at if "expires_at" in given else old.expires_at
    if valid_to is not None and valid_to < valid_from:
        raise RequestValidationError([{
            "type": "value_error", "loc": ("body", "valid_to"),
            "msg": "valid_to is before valid_from (the old version's, when left out)",
        }])
    return valid_from, valid_to, expires_at


@router.patch(
    "/facts/{fact_id}",
    response_model=Fact,
    responses={**_WRITE_RESPONSES, **error_responses(400, 404, 409)},
    summary="Edit a fact: the version is superseded by the user's text, a manual fact in "
            "the same chain (scope, agent and pin kept)",
)
async def edit_fact(
    request: Request, user_id: WritingUser, fact_id: FactId, body: FactEditBody
) -> Fact:
    deps = _deps(request)
    old = await deps.memory.get_fact(user_id, fact_id)
    if old is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NOT_FOUND)
    if not visibility.active(old, datetime.now(UTC)):
        raise HTTPException(status.HTTP_409_CONFLICT, detail=_NOT_ACTIVE)
    valid_from, valid_to, expires_at = _merged(old, body)
    embedding, model = await _embedding(deps, user_id, body.text)
    new = await deps.memory.edit_fact(user_id, fact_id, FactEdit(
        text=body.text, category=body.category or old.category,
        importance=body.importance or old.importance, embedding=embedding,
        embedding_model=model, valid_from=valid_from, valid_to=valid_to,
        expires_at=expires_at, confidence=confidence_for("manual", "stated"), via=body.via))
    if new is None:  # changed between the read above and the write: a stale view
        raise HTTPException(status.HTTP_409_CONFLICT, detail=_NOT_ACTIVE)
    await portrait_due.facts_changed(deps, user_id)
    return Fact.of(new)


@router.get(
    "/held-proposals",
    response_model=HeldProposals,
    responses={**AUTH_RESPONSES, **error_responses(503)},
    summary="Changes consolidation proposed and did not apply (pinned or outranked facts): "
            "the open ones, or those answered, or all",
)
async def held_proposals(
    request: Request, user_id: ReadUser, state: Annotated[ProposalStateQuery, Query(
        description="open: waiting for the user's answer; resolved: accepted or "
                    "dismissed; all.")] = "open",
) -> HeldProposals:
    rows = await _deps(request).memory.held_proposals(user_id, state=state)
    return HeldProposals(proposals=[ListedProposal.model_validate(row) for row in rows])


def _answer(outcome: HeldOutcome) -> HeldAnswer:
    if outcome.status == "missing" or outcome.proposal is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NO_PROPOSAL)
    if outcome.status != "done":
        raise HTTPException(status.HTTP_409_CONFLICT,
                            detail=_ANSWERED if outcome.status == "resolved" else _STALE)
    return HeldAnswer(proposal=ListedProposal.model_validate(outcome.proposal),
                      fact=None if outcome.fact is None else Fact.of(outcome.fact))


@router.post(
    "/held-proposals/{proposal_id}/accept",
    response_model=HeldAnswer,
    responses=_PROPOSAL_RESPONSES,
    summary="Accept a held change: applied only if its fact is still the version it was "
            "held against (an UPDATE supersedes it with the proposed text, a DELETE ends it)",
)
async def accept_proposal(
    request: Request, user_id: WritingUser, proposal_id: ProposalId, who: CallerOf
) -> HeldAnswer:
    deps = _deps(request)
    proposal = await deps.memory.held_proposal(user_id, proposal_id)
    if proposal is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NO_PROPOSAL)
    if proposal["resolution"] is not None or proposal["stale"]:
        # Refused before spending an embedding; the store checks again in its write.
        return _answer(HeldOutcome("resolved" if proposal["resolution"] else "stale",
                                   proposal))
    embedding, model = None, ""
    if proposal["event"] in ("UPDATE", "ADD"):  # a DELETE writes no text
        embedding, model = await _embedding(deps, user_id, proposal["text"])
    # The new version: stated in conversation and confirmed by the user.
    acceptance = Acceptance(resolved_by=_answerer(who), embedding=embedding,
                            embedding_model=model,
                            confidence=confidence_for("extracted", "stated"))
    answer = _answer(await deps.memory.accept_held(user_id, proposal_id, acceptance))
    await portrait_due.facts_changed(deps, user_id)  # _answer raised unless it was applied
    return answer


@router.post(
    "/held-proposals/{proposal_id}/dismiss",
    response_model=HeldAnswer,
    responses=_PROPOSAL_RESPONSES,
    summary="Dismiss a held change: recorded as the user's refusal; no fact changes",
)
async def dismiss_proposal(
    request: Request, user_id: WritingUser, proposal_id: ProposalId, who: CallerOf
) -> HeldAnswer:
    return _answer(await _deps(request).memory.dismiss_held(user_id, proposal_id,
                                                           _answerer(who)))
