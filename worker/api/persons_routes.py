"""The people in a user's life over the memory API (docs/persons.md, docs/api.md): list
them with their facts, make one, rename or relabel one, add an alias, merge two, and
move a fact to another person or back to the user.

Callers as in worker.api.memory_routes: the user's own token, or a service key with
the ``read`` scope (the list) or ``admin`` (the writes); each write takes one of the
user's manual writes (worker.api.write_rate). Every store call is scoped by the
path's user: another user's person or fact id is a plain 404. Nothing is deleted: a
rename is a new label version, a move a new version of the fact (the old one ends as
``updated``), a merge a link from one person to the other.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError

from worker.api import portrait_due
from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, ErrorBody, error_responses
from worker.api.memory_models import MAX_FACT_ID, Fact
from worker.api.persons_models import (
    AliasBody,
    FactPersonBody,
    MergeBody,
    Person,
    PersonBody,
    PersonPatch,
    Persons,
    PersonWithFacts,
)
from worker.api.service_auth import ReadUser
from worker.api.write_rate import WritingUser
from worker.persons_rules import bounded_aliases
from worker.read_persons import people_store
from worker.store.base import PersonStore
from worker.store.person_types import PersonLabel, PersonRecord, PersonStatus

router = APIRouter(prefix="/users/{user_id}", tags=["persons"])

PersonId = Annotated[int, Path(ge=1, le=MAX_FACT_ID)]
FactId = Annotated[int, Path(ge=1, le=MAX_FACT_ID)]
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.",
                                 "schema": {"type": "integer"}}}
_WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES, **error_responses(400, 503),
    429: {"model": ErrorBody, "headers": _RETRY_AFTER,
          "description": "Too many manual writes of this user; retry after Retry-After."},
}
_CHANGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_WRITE_RESPONSES,
    404: {"model": ErrorBody, "description": "No such person (or fact) of this user."},
    409: {"model": ErrorBody, "description": "The person was merged into another, or the "
                                             "fact is no longer active."},
}
_NO_PERSON = "no such person"
_NO_FACT_OR_PERSON = "no such fact or person"
_DETAILS: dict[PersonStatus, tuple[int, str]] = {
    "merged": (status.HTTP_409_CONFLICT, "the person was merged into another"),
    "inactive": (status.HTTP_409_CONFLICT, "the fact is no longer active"),
    "same": (status.HTTP_409_CONFLICT, "one person cannot be merged into itself"),
}


def _store(request: Request) -> PersonStore:
    deps: ApiDeps = request.app.state.deps
    store = people_store(deps.memory)
    if store is None:  # a store without persons: none to show or change
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NO_PERSON)
    return store


async def _facts_changed(request: Request, user_id: str) -> None:
    deps: ApiDeps = request.app.state.deps
    await portrait_due.facts_changed(deps, user_id)  # the portrait follows (portrait_due)


def _refused(state: PersonStatus, missing: str = _NO_PERSON) -> HTTPException:
    code, detail = _DETAILS.get(state, (status.HTTP_404_NOT_FOUND, missing))
    return HTTPException(code, detail=detail)


def _person(result: tuple[PersonStatus, PersonRecord | None]) -> Person:
    state, person = result
    if state != "done" or person is None:
        raise _refused(state)
    return Person.of(person)


@router.get(
    "/persons",
    response_model=Persons,
    responses={**AUTH_RESPONSES, **error_responses(503)},
    summary="The people in the user's life, each with the active facts about them",
)
async def list_persons(
    request: Request, user_id: ReadUser,
    include_merged: Annotated[bool, Query(
        description="Also the persons merged into another (their facts are the other's).")
    ] = False,
) -> Persons:
    store = _store(request)
    persons = await store.persons(user_id, include_merged=include_merged)
    facts = await store.person_facts(user_id)
    by_person: dict[int, list[Fact]] = {}
    for fact in facts:
        if fact.person_id is not None:
            by_person.setdefault(fact.person_id, []).append(Fact.of(fact))
    return Persons(user_id=user_id, persons=[
        PersonWithFacts(**Person.of(p).model_dump(), facts=by_person.get(p.id, []))
        for p in persons])


@router.post(
    "/persons",
    response_model=Person,
    status_code=status.HTTP_201_CREATED,
    responses=_WRITE_RESPONSES,
    summary="Make a person of the user's life by hand: a name, a relation, or both",
)
async def create_person(request: Request, user_id: WritingUser, body: PersonBody) -> Person:
    return Person.of(await _store(request).create_person(user_id, body.label()))


@router.patch(
    "/persons/{person_id}",
    response_model=Person,
    responses=_CHANGE_RESPONSES,
    summary="Rename a person, change the relation or the aliases: a new label version "
            "(the old one stays in the person's history)",
)
async def patch_person(
    request: Request, user_id: WritingUser, person_id: PersonId, body: PersonPatch
) -> Person:
    store = _store(request)
    current = await store.person(user_id, person_id)
    if current is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NO_PERSON)
    try:
        label = body.applied(current.label)
    except ValueError as exc:
        raise RequestValidationError([{"type": "value_error", "loc": ("body",),
                                       "msg": str(exc)}]) from None
    return _person(await store.relabel_person(user_id, person_id, label))


@router.post(
    "/persons/{person_id}/aliases",
    response_model=Person,
    responses=_CHANGE_RESPONSES,
    summary="Add another name the person goes by (a new label version)",
)
async def add_alias(
    request: Request, user_id: WritingUser, person_id: PersonId, body: AliasBody
) -> Person:
    store = _store(request)
    current = await store.person(user_id, person_id)
    if current is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NO_PERSON)
    label = PersonLabel(current.display_name, current.relation,
                        bounded_aliases(current.display_name, (*current.aliases, body.alias)))
    return _person(await store.relabel_person(user_id, person_id, label))


@router.post(
    "/persons/{person_id}/merge",
    response_model=Person,
    responses=_CHANGE_RESPONSES,
    summary="Merge this person into another: its facts become the other's (new versions), "
            "and so do its open held additions, its names the other's aliases; it stays, "
            "linked to the other",
)
async def merge_person(
    request: Request, user_id: WritingUser, person_id: PersonId, body: MergeBody
) -> Person:
    kept = _person(await _store(request).merge_persons(user_id, person_id, body.into))
    await _facts_changed(request, user_id)  # the merged person's facts moved
    return kept


@router.put(
    "/facts/{fact_id}/person",
    response_model=Fact,
    responses=_CHANGE_RESPONSES,
    summary="Say who a fact is about: another person, or the user (person_id null). A "
            "correction: a new version in the fact's chain, the old one was never true",
)
async def move_fact(
    request: Request, user_id: WritingUser, fact_id: FactId, body: FactPersonBody
) -> Fact:
    state, fact = await _store(request).move_fact(user_id, fact_id, body.person_id)
    if state not in ("done", "same") or fact is None:
        raise _refused(state, _NO_FACT_OR_PERSON)
    if state == "done":  # "same": about that person already, nothing written
        await _facts_changed(request, user_id)
    return Fact.of(fact)
