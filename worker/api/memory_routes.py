"""The memory API: what a user can see, add, remove, pin, trace and erase of their memory.

Every route takes the user from the path, and ``ReadUser`` (routes that only read)
or ``AdminUser`` / ``WritingUser`` (routes that change or hand out the memory) has
already checked the caller: an end-user token whose subject is that user, or a
service key with the ``read`` or ``admin`` scope (worker.api.service_auth; 401/403
otherwise). Every query below is scoped by that user id, so another user's fact
id is a plain 404.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator

from worker.api import portrait_due
from worker.api.deps import ApiDeps
from worker.api.errors import (
    AUTH_RESPONSES,
    CONSENT_RESPONSES,
    ERASE_RESPONSES,
    RETRY_AFTER_HEADER,
    WRITE_RESPONSES,
    ErrorBody,
    error_responses,
)
from worker.api.exports import SpooledExport
from worker.api.extensions import erase_extras
from worker.api.fields import MAX_ID_CHARS, clean_text, valid_id
from worker.api.memory_models import (
    MAX_FACT_ID,
    MAX_QUERY_CHARS,
    ActiveFacts,
    CategoryGroup,
    Chain,
    Consent,
    ConsentBody,
    ConsentChanged,
    Erased,
    Export,
    Fact,
    KnownFacts,
    NewFactBody,
    SearchHitBody,
    SearchResults,
    utc,
)
from worker.api.note_models import Note, NoteHitBody
from worker.api.read_timing import HEADER as SERVER_TIMING
from worker.api.read_timing import ReadTiming
from worker.api.service_auth import AdminUser, ReadUser
from worker.api.write_rate import ConsentingUser, ErasingUser, WritingUser
from worker.errors import MemoryOptedOut
from worker.memory_rules import CATEGORY_ORDER, MemoryScope, confidence_for
from worker.ops import privacy
from worker.protocol.keys import api_exports_key, api_fact_writes_key
from worker.read import (
    format_block,
    planned_known_facts,
    query_embedder,
    recall_order,
    remembered,
    search_facts,
)
from worker.read_notes import prompt_notes, search_notes, with_notes
from worker.read_persons import people_section, with_people
from worker.store.types import ConsentGate, FactRecord, FactTerms, NewFact

router = APIRouter(prefix="/users/{user_id}", tags=["memory"])

FactId = Annotated[int, Path(ge=1, le=MAX_FACT_ID)]
SearchQuery = Annotated[
    str, Query(min_length=1, max_length=MAX_QUERY_CHARS), AfterValidator(clean_text)
]
OptionalQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=MAX_QUERY_CHARS),
    AfterValidator(lambda v: None if v is None else clean_text(v)),
]
ScopeQuery = Annotated[MemoryScope, Query(
    description="profile: the user's profile; relationship: agent_id's relationship facts "
                "(none without agent_id); both; none; all: every agent's too.")]
ListScopeQuery = Annotated[MemoryScope | None, Query(
    description="As scope elsewhere; by default both with agent_id, else all: the user's "
                "whole memory.")]
AgentQuery = Annotated[
    str | None,
    Query(min_length=1, max_length=MAX_ID_CHARS,
          description="The agent whose relationship facts are read; another's never are."),
    AfterValidator(lambda v: None if v is None else valid_id(v)),
]
ValidAt = Annotated[
    datetime | None,
    Query(description="What was true then, by what memfleet knows now (without a zone: UTC)."),
    AfterValidator(lambda v: None if v is None else utc(v)),
]
KnownAt = Annotated[
    datetime | None,
    Query(description="What memfleet believed then (without a zone: UTC)."),
    AfterValidator(lambda v: None if v is None else utc(v)),
]
# The prompt reads' 200 says where its time went (worker.api.read_timing).
_TIMED: dict[int | str, dict[str, Any]] = {200: {"headers": {SERVER_TIMING: {
    "description": "Milliseconds: embed (the query's embeddings call; absent when none was "
                   "made), store (the read outside it), total (the handler).",
    "schema": {"type": "string"}}}}}
# 409 MemoryOff: an add asked with if_memory_on while the user's memory is off.
_MEMORY_OFF: dict[int | str, dict[str, Any]] = {409: {
    "model": ErrorBody,
    "description": "if_memory_on and the user's memory is off (error MemoryOff): nothing "
                   "was stored."}}
_NOT_FOUND = "no such fact"
_NOT_ACTIVE = "the fact is no longer active"


def _one_time(valid_at: datetime | None, known_at: datetime | None) -> None:
    # A 422 of the usual shape, naming the parameter.
    if valid_at is not None and known_at is not None:
        raise RequestValidationError([{
            "type": "value_error", "loc": ("query", "known_at"),
            "msg": "valid_at and known_at cannot be combined",
        }])


def _deps(request: Request) -> ApiDeps:
    deps: ApiDeps = request.app.state.deps
    return deps


async def _forget_limits(deps: ApiDeps, user_id: str) -> None:
    # The user's rate and export keys name the user: an erase leaves neither behind.
    await deps.redis.delete(api_fact_writes_key(user_id), api_exports_key(user_id))


@router.get(
    "/facts",
    response_model=ActiveFacts,
    responses={**AUTH_RESPONSES, **error_responses(503)},
    summary="The user's active facts (or those of one time), grouped by category",
)
async def list_facts(
    request: Request, user_id: ReadUser, scope: ListScopeQuery = None,
    agent_id: AgentQuery = None, valid_at: ValidAt = None, known_at: KnownAt = None,
) -> ActiveFacts:
    _one_time(valid_at, known_at)
    # No scope asked: what one agent sees when an agent is named, else all of it.
    scope = scope or ("both" if agent_id else "all")
    facts = recall_order(await _deps(request).memory.facts(
        user_id, scope=scope, agent_id=agent_id, valid_at=valid_at, known_at=known_at))
    groups = [
        CategoryGroup(category=category,
                      facts=[Fact.of(f) for f in facts if f.category == category])
        for category in CATEGORY_ORDER
    ]
    return ActiveFacts(user_id=user_id, count=len(facts),
                       groups=[g for g in groups if g.facts])


@router.post(
    "/facts",
    response_model=Fact,
    status_code=status.HTTP_201_CREATED,
    responses={**WRITE_RESPONSES, **_MEMORY_OFF, **error_responses(400, 503)},
    summary="Add a fact by hand (source_kind manual, stated, fully trusted)",
)
async def add_fact(request: Request, user_id: WritingUser, body: NewFactBody) -> Fact:
    deps = _deps(request)
    gate = ConsentGate(deps.settings.memory_default) if body.if_memory_on else None
    if gate is not None and not await remembered(deps.memory, user_id, gate):
        raise MemoryOptedOut()  # before the embeddings call: the words go to no model
    embedder = await query_embedder(deps.memory, deps.providers.embedder, user_id,
                                    deps.providers.embedder_for)
    answer = await embedder.embed([body.text])
    terms = FactTerms(scope=body.scope, agent_id=body.agent_id, valid_from=body.valid_from,
                      valid_to=body.valid_to, expires_at=body.expires_at, basis="stated",
                      confidence=confidence_for("manual", "stated"))
    record = await deps.memory.add_fact(user_id, NewFact(
        text=body.text, category=body.category, importance=body.importance,
        embedding=answer.value[0], embedding_model=embedder.model, terms=terms,
        pinned=body.pinned, via=body.via,
    ), if_memory_on=gate)
    await portrait_due.facts_changed(deps, user_id)
    return Fact.of(record)


@router.delete(
    "/facts/{fact_id}",
    response_model=Fact,
    responses={**WRITE_RESPONSES, **error_responses(404, 409, 503)},
    summary="Remove a fact: it is superseded, nothing is deleted",
)
async def remove_fact(request: Request, user_id: WritingUser, fact_id: FactId) -> Fact:
    memory = _deps(request).memory
    removed = await memory.remove_fact(user_id, fact_id)
    if removed is not None:
        await portrait_due.facts_changed(_deps(request), user_id)
        return Fact.of(removed)
    if await memory.get_fact(user_id, fact_id) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NOT_FOUND)
    raise HTTPException(status.HTTP_409_CONFLICT, detail=_NOT_ACTIVE)


async def _pin(request: Request, user_id: str, fact_id: int, pinned: bool) -> Fact:
    memory = _deps(request).memory
    changed: FactRecord | None = await memory.set_pinned(user_id, fact_id, pinned)
    if changed is not None:
        await portrait_due.facts_changed(_deps(request), user_id)
        return Fact.of(changed)
    if await memory.get_fact(user_id, fact_id) is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NOT_FOUND)
    raise HTTPException(status.HTTP_409_CONFLICT, detail=_NOT_ACTIVE)


@router.put(
    "/facts/{fact_id}/pin",
    response_model=Fact,
    responses={**WRITE_RESPONSES, **error_responses(404, 409, 503)},
    summary="Pin a fact: consolidation keeps its changes to it for the user to review",
)
async def pin_fact(request: Request, user_id: WritingUser, fact_id: FactId) -> Fact:
    return await _pin(request, user_id, fact_id, True)


@router.delete(
    "/facts/{fact_id}/pin",
    response_model=Fact,
    responses={**WRITE_RESPONSES, **error_responses(404, 409, 503)},
    summary="Unpin a fact",
)
async def unpin_fact(request: Request, user_id: WritingUser, fact_id: FactId) -> Fact:
    return await _pin(request, user_id, fact_id, False)


@router.get(
    "/facts/{fact_id}/chain",
    response_model=Chain,
    responses={**AUTH_RESPONSES, **error_responses(404, 503)},
    summary="Every version of a fact (its supersession chain), oldest first",
)
async def fact_chain(request: Request, user_id: ReadUser, fact_id: FactId) -> Chain:
    versions = await _deps(request).memory.chain(user_id, fact_id)
    if not versions:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NOT_FOUND)
    return Chain(fact_id=fact_id, versions=[Fact.of(f) for f in versions])


@router.get(
    "/search",
    response_model=SearchResults,
    responses={**_TIMED, **AUTH_RESPONSES, **error_responses(503)},
    summary="Active facts (or those of one time) by meaning and by words, fused by "
            "Reciprocal Rank Fusion (k = 60); equal scores by confidence",
)
async def search(
    request: Request,
    response: Response,
    user_id: ReadUser,
    q: SearchQuery,
    k: Annotated[int, Query(ge=1, le=100)] = 10,
    scope: ScopeQuery = "both",
    agent_id: AgentQuery = None,
    valid_at: ValidAt = None,
    known_at: KnownAt = None,
) -> SearchResults:
    _one_time(valid_at, known_at)
    deps = _deps(request)
    timing = ReadTiming(deps.providers.embedder, deps.providers.embedder_for)
    hits = await search_facts(deps.memory, timing.embedder, user_id, q, top_k=k,
                              scope=scope, agent_id=agent_id, valid_at=valid_at,
                              known_at=known_at, embedders=timing.embedders)
    # Notes (docs/notes.md): the user's, for no time; none for a relationship-only read.
    plain = not (valid_at or known_at) and scope not in ("none", "relationship")
    notes = [] if not deps.settings.notes_enabled or not plain else [
        NoteHitBody(note=Note.of(h.note), score=h.score, semantic_rank=h.semantic_rank,
                    lexical_rank=h.lexical_rank)
        for h in await search_notes(deps.memory, timing.embedder, user_id, q, top_k=k)]
    timing.read_done()
    results = SearchResults(results=[
        SearchHitBody(fact=Fact.of(h.fact), score=h.score, semantic_rank=h.semantic_rank,
                      lexical_rank=h.lexical_rank)
        for h in hits
    ], notes=notes)
    response.headers[SERVER_TIMING] = timing.header()
    return results


@router.get(
    "/known-facts",
    response_model=KnownFacts,
    responses={**_TIMED, **AUTH_RESPONSES, **error_responses(503)},
    summary="The read path over HTTP: the system-prompt block of known facts (empty "
            "while the user's memory is off)",
)
async def known_facts_route(
    request: Request, response: Response, user_id: ReadUser, q: OptionalQuery = None,
    scope: ScopeQuery = "both", agent_id: AgentQuery = None,
) -> KnownFacts:
    deps = _deps(request)
    timing = ReadTiming(deps.providers.embedder, deps.providers.embedder_for)
    # A prompt's read: empty while the user's memory is off (the routes above still
    # show the user what is kept, until they forget it). A user with at most
    # read_top_k facts gets them all, with no embeddings call.
    facts, plan = await planned_known_facts(
        deps.memory, timing.embedder, user_id, query=q, top_k=deps.settings.read_top_k,
        scope=scope, agent_id=agent_id, embedders=timing.embedders,
        memory_default=deps.settings.memory_default)
    people = await people_section(deps.memory, user_id,
                                  max_facts=deps.settings.read_people_max_facts,
                                  memory_default=deps.settings.memory_default,
                                  counted=None if plan is None else plan.people)
    # The notes most relevant to the query, in a section of their own (docs/notes.md).
    notes = [] if scope in ("none", "relationship") else await prompt_notes(
        deps.memory, timing.embedder, user_id, q, top_k=deps.settings.read_notes_top_k,
        memory_default=deps.settings.memory_default)
    timing.read_done()
    answer = KnownFacts(block=with_notes(with_people(format_block(facts), people), notes),
                        count=len(facts))
    response.headers[SERVER_TIMING] = timing.header()
    return answer


@router.delete(
    "",
    response_model=Erased,
    responses={**ERASE_RESPONSES, **error_responses(503)},
    summary="Erase everything about the user (right to be forgotten): really deletes",
)
async def erase_user_route(request: Request, user_id: ErasingUser) -> Erased:
    deps = _deps(request)
    # The extensions' first (the chat stand-in's conversations): with a conversation
    # gone no later turn can hand it over again.
    extras = await erase_extras(deps, user_id)
    deleted = await privacy.erase_user(deps.handover, deps.memory, user_id,
                                       queue_name=deps.settings.queue_name)
    await _forget_limits(deps, user_id)
    return Erased(user_id=user_id, deleted={**deleted, **extras})


@router.get(
    "/consent",
    response_model=Consent,
    responses={**AUTH_RESPONSES, **error_responses(503)},
    summary="Whether memfleet remembers the user",
)
async def consent_route(request: Request, user_id: ReadUser) -> Consent:
    deps = _deps(request)
    chosen = await deps.memory.consent(user_id)
    return Consent(enabled=deps.settings.memory_default if chosen is None else chosen,
                   chosen=chosen is not None)


@router.put(
    "/consent",
    response_model=ConsentChanged,
    responses={**CONSENT_RESPONSES, **error_responses(400, 503)},
    summary="Turn memory on or off; off with forget also erases everything held",
)
async def set_consent_route(
    request: Request, user_id: ConsentingUser, body: ConsentBody
) -> ConsentChanged:
    deps = _deps(request)
    extras = await erase_extras(deps, user_id) if body.forget else None
    deleted = await privacy.set_memory(deps.handover, deps.memory, user_id,
                                       enabled=body.enabled, forget=body.forget,
                                       queue_name=deps.settings.queue_name)
    if deleted is not None and extras is not None:
        deleted = {**deleted, **extras}
        await _forget_limits(deps, user_id)
    return ConsentChanged(enabled=body.enabled, chosen=True, deleted=deleted)


@router.get(
    "/export",
    response_model=None,
    response_class=SpooledExport,
    status_code=status.HTTP_200_OK,
    responses={200: {"model": Export, "description": "Everything held about the user, "
                     "as one JSON object."},
               **AUTH_RESPONSES,
               429: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
                     "description": "The user's exports at once are at their bound "
                                    "(MEMFLEET_API_EXPORTS_PER_USER); retry after Retry-After."},
               **error_responses(503)},
    summary="Everything memfleet holds about the user (right of access)",
)
async def export_route(request: Request, user_id: AdminUser) -> SpooledExport:
    # The snapshot is read whole before the answer starts (worker.api.exports): an
    # unreachable database is a 503, and a client that does not read holds no connection.
    return await _deps(request).exports.open(user_id)
