"""The user's portrait over HTTP (docs/portrait.md, docs/api.md):

    GET    /users/{u}/portrait           -> 200 with ETag; 304 to If-None-Match that names it
    DELETE /users/{u}/portrait           -> 200: removed, and none made until asked again
    POST   /users/{u}/portrait/refresh   -> 202: asked for again, a refresh queued

The read is the user's own view (``ReadUser``: their token, or a service key with
``read``): it shows the current portrait and why there is none (never made, removed
by the user, memory off). The two writes are the user's manual writes (``WritingUser``:
their token or an ``admin`` key, within the write rate). No route shows another
user's portrait: every statement is scoped by the path's user, which the caller's
credential has been checked against.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request, Response, status
from pydantic import BaseModel

from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, WRITE_RESPONSES, error_responses
from worker.api.portrait_due import user_redis
from worker.api.prompt_routes import matches
from worker.api.service_auth import ReadUser
from worker.api.write_rate import WritingUser
from worker.protocol import portrait_queue
from worker.protocol.portrait_queue import PortraitPace
from worker.store.portraits import Portrait, PortraitStore
from worker.store.types import ConsentGate

router = APIRouter(prefix="/users/{user_id}", tags=["memory"])

PortraitShown = Literal["current", "none", "removed", "off"]


class PortraitText(BaseModel):
    text: str
    version: int
    fact_count: int
    model: str
    created_at: datetime


class PortraitAnswer(BaseModel):
    """``state``: current (``portrait`` is it), none (not made yet: no profile fact, or
    no refresh since), removed (the user removed it; none is made until they ask again),
    off (the user's memory is off)."""

    user_id: str
    state: PortraitShown
    portrait: PortraitText | None


class PortraitRemoved(BaseModel):
    user_id: str
    removed_version: int | None  # the version that ended (None: there was none)


class PortraitAsked(BaseModel):
    user_id: str
    queued: bool  # False: this fleet writes no portraits (MEMFLEET_PORTRAIT_ENABLED)


def _portraits(request: Request) -> PortraitStore:
    deps: ApiDeps = request.app.state.deps
    if not isinstance(deps.memory, PortraitStore):
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE,
                            detail="this store keeps no portraits")
    return deps.memory


def etag_of(answer: PortraitAnswer) -> str:
    """The strong entity tag: the version shown, or the state without one."""
    return f'"{answer.portrait.version}"' if answer.portrait else f'"{answer.state}"'


async def portrait_answer(store: PortraitStore, user_id: str, memory_default: bool
                          ) -> PortraitAnswer:
    state = await store.portrait_state(user_id, ConsentGate(memory_default))
    current: Portrait | None = None
    if state.memory_on and state.current is not None:
        current = await store.current_portrait(user_id)
    if current is not None:
        return PortraitAnswer(user_id=user_id, state="current", portrait=PortraitText(
            text=current.text, version=current.version, fact_count=current.fact_count,
            model=current.model, created_at=current.created_at))
    shown: PortraitShown = ("off" if not state.memory_on else
                            "removed" if not state.wanted else "none")
    return PortraitAnswer(user_id=user_id, state=shown, portrait=None)


_ETAG = {"ETag": {"description": "The portrait's version, or its state without one, quoted.",
                  "schema": {"type": "string"}}}
_NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "The portrait is the one If-None-Match names: no body.",
          "headers": _ETAG}}


@router.get(
    "/portrait",
    response_model=PortraitAnswer,
    responses={200: {"headers": _ETAG}, **_NOT_MODIFIED, **AUTH_RESPONSES,
               **error_responses(503)},
    summary="The user's portrait: a short narrative written from their active profile "
            "facts (none while memory is off, or after the user removed it)",
)
async def get_portrait(request: Request, response: Response, user_id: ReadUser) -> Any:
    deps: ApiDeps = request.app.state.deps
    answer = await portrait_answer(_portraits(request), user_id, deps.settings.memory_default)
    tag = etag_of(answer)
    if matches(request.headers.get("if-none-match"), tag.strip('"')):
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers={"ETag": tag})
    response.headers["ETag"] = tag
    return answer


@router.delete(
    "/portrait",
    response_model=PortraitRemoved,
    responses={**WRITE_RESPONSES, **error_responses(503)},
    summary="Remove the user's portrait: it ends (kept in the history and the export) and "
            "none is made until the user asks for one again",
)
async def remove_portrait(request: Request, user_id: WritingUser) -> PortraitRemoved:
    ended = await _portraits(request).remove_portrait(user_id)
    return PortraitRemoved(user_id=user_id, removed_version=ended)


@router.post(
    "/portrait/refresh",
    response_model=PortraitAsked,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**WRITE_RESPONSES, **error_responses(503)},
    summary="Ask for a portrait again (after removing it), or now: a refresh is queued "
            "(no model call when the facts are those of the current portrait)",
)
async def refresh_portrait(request: Request, user_id: WritingUser) -> PortraitAsked:
    deps: ApiDeps = request.app.state.deps
    await _portraits(request).want_portrait(user_id)
    settings = deps.settings
    if not settings.portrait_enabled:
        return PortraitAsked(user_id=user_id, queued=False)
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    await portrait_queue.note_commit(user_redis(deps, user_id), user_id,
                                     PortraitPace.of_settings(settings), settings.queue_name,
                                     due_ms=now_ms)
    return PortraitAsked(user_id=user_id, queued=True)
