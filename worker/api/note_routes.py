"""The memory API's notes (docs/notes.md): list a user's notes, remove one, and see which
notes a promoted fact came from.

Callers as in worker.api.memory_routes: the user's own token, or a service key with
the ``read`` scope (the lists) or ``admin`` (the removal, which takes one of the
user's manual writes: worker.api.write_rate). Every store call is scoped by the
path's user: another user's note id is a plain 404. Nothing is deleted: a removed
note is superseded as 'removed'; an erase deletes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request, status

from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, ErrorBody, error_responses
from worker.api.memory_models import MAX_FACT_ID
from worker.api.note_models import Note, Notes
from worker.api.service_auth import ReadUser
from worker.api.write_rate import WritingUser

router = APIRouter(prefix="/users/{user_id}", tags=["memory"])

NoteId = Annotated[int, Path(ge=1, le=MAX_FACT_ID)]
FactId = Annotated[int, Path(ge=1, le=MAX_FACT_ID)]
_NOT_FOUND = "no such active note"
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.",
                                 "schema": {"type": "integer"}}}
_WRITE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES, **error_responses(503),
    404: {"model": ErrorBody, "description": "No such active note for this user."},
    429: {"model": ErrorBody, "headers": _RETRY_AFTER,
          "description": "Too many manual writes of this user; retry after Retry-After."},
}


def _deps(request: Request) -> ApiDeps:
    deps: ApiDeps = request.app.state.deps
    return deps


@router.get(
    "/notes",
    response_model=Notes,
    responses={**AUTH_RESPONSES, **error_responses(503)},
    summary="The user's notes beside their facts: the active ones (oldest first), or every "
            "version",
)
async def list_notes(
    request: Request, user_id: ReadUser,
    state: Annotated[Literal["active", "all"], Query(
        description="active: kept now; all: every version, superseded ones too (by id).")
    ] = "active",
) -> Notes:
    # The user's own view: what is kept, whether memory is on or off.
    notes = await _deps(request).memory.notes(user_id, state=state)
    return Notes(notes=[Note.of(n) for n in notes])


@router.delete(
    "/notes/{note_id}",
    response_model=Note,
    responses=_WRITE_RESPONSES,
    summary="Remove a note: superseded as removed, never deleted",
)
async def remove_note(request: Request, user_id: WritingUser, note_id: NoteId) -> Note:
    removed = await _deps(request).memory.remove_note(user_id, note_id)
    if removed is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, detail=_NOT_FOUND)
    return Note.of(removed)


@router.get(
    "/facts/{fact_id}/notes",
    response_model=Notes,
    responses={**AUTH_RESPONSES, **error_responses(503)},
    summary="The notes the promotion job made this fact from (none for any other fact)",
)
async def notes_of_fact(request: Request, user_id: ReadUser, fact_id: FactId) -> Notes:
    notes = await _deps(request).memory.notes_of_fact(user_id, fact_id)
    return Notes(notes=[Note.of(n) for n in notes])
