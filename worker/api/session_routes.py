"""Where a session's memory stands, over HTTP: its status, and a wait for a hand-over.

- ``GET /users/{u}/sessions/{s}/status``: worker.client's ``memory_status`` (the
  latest hand-over, the latest one a commit finished, older lists waiting) and
  the session's stand-in in the commit events (``session_tag``; null when the
  API has no MEMFLEET_TELEMETRY_ID_KEY, since a per-process random key would
  match no event).
- ``GET .../handovers/{handover_id}/wait?timeout_s=T``: a long poll, what
  ``wait_for_memory`` does; answers as soon as a commit covers the hand-over, or
  with ``covered`` false after T seconds (at most MAX_WAIT_S). Its reads of Redis
  are the process's, shared by every wait (worker.api.wait_poller: one read per
  session per tick, one round trip per shard); it holds no PostgreSQL connection; a
  client that goes away ends it at once, and so does the server's shutdown
  (worker.api.event_stream.EventStreams.closing), with the state as it is. At most
  MEMFLEET_API_WAITS_PER_USER waits of one user's token, MEMFLEET_API_WAITS_PER_KEY
  of one service key (one more: 429) and MEMFLEET_API_WAITS_MAX in all (one more:
  503) are open at once in one API process (worker.api.long_polls).

A service key with the ``handover`` or ``read`` scope, or the user's own token
(worker.api.service_auth.WatchUser). Redis not answering within REDIS_TIMEOUT_S is
a 503 with ``"error": "HandoverUnavailable"`` and Retry-After.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from worker.api.deps import ApiDeps
from worker.api.errors import AUTH_RESPONSES, RETRY_AFTER_HEADER, ErrorBody, handover_unavailable
from worker.api.handover_routes import SessionId
from worker.api.long_polls import LongPollRefused
from worker.api.service_auth import CallerOf, WatchUser
from worker.client.handover import memory_status, session_tag
from worker.errors import HandoverUnavailable

log = logging.getLogger("memfleet.api.sessions")

REDIS_TIMEOUT_S = 1.0  # the Python client's own bound
MAX_WAIT_S = 30.0
DEFAULT_WAIT_S = 10.0

router = APIRouter(prefix="/users/{user_id}/sessions/{session_id}", tags=["handover"])

_RESPONSES: dict[int | str, dict[str, Any]] = {
    **AUTH_RESPONSES,
    503: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "Redis did not answer within 1 s (`error`: HandoverUnavailable); "
                         "retry after Retry-After."},
}
_WAIT_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_RESPONSES,
    429: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "This caller has its share of this API process's waits open "
                         "(MEMFLEET_API_WAITS_PER_USER for a user's token, "
                         "MEMFLEET_API_WAITS_PER_KEY for a service key; `error`: "
                         "TooManyLongPolls); retry after Retry-After."},
    503: {"model": ErrorBody, "headers": RETRY_AFTER_HEADER,
          "description": "Redis did not answer within 1 s (`error`: HandoverUnavailable), "
                         "or this API process has its fill of open waits "
                         "(MEMFLEET_API_WAITS_MAX; `error`: LongPollsFull); retry after "
                         "Retry-After."},
}


class SessionStatus(BaseModel):
    latest: int = Field(description="The session's latest hand-over id (0: none kept).")
    finished: int = Field(description="The latest hand-over id a commit finished (0: none).")
    older_lists: int = Field(description="Older lists of the session no worker has finished.")
    session_tag: str | None = Field(
        description="The session's stand-in in the commit events (16 hex digits); null "
                    "when the API has no MEMFLEET_TELEMETRY_ID_KEY.")


class WaitOutcome(BaseModel):
    covered: bool = Field(description="A commit has stored every message of the hand-over "
                                      "(and of every older list of the session).")
    latest: int
    finished: int
    older_lists: int


@router.get("/status", response_model=SessionStatus, responses=_RESPONSES,
            summary="Where a session's memory stands (a service key with the handover or "
                    "read scope, or the user's token)")
async def session_status(
    request: Request, session_id: SessionId, user_id: WatchUser,
) -> SessionStatus | JSONResponse:
    deps: ApiDeps = request.app.state.deps
    try:
        state = await memory_status(deps.handover, session_id, user_id, timeout_s=REDIS_TIMEOUT_S)
    except HandoverUnavailable as exc:
        log.warning("status: Redis unavailable: %s", type(exc.__cause__).__name__)
        return handover_unavailable()
    id_key = deps.settings.telemetry_id_key
    tag = session_tag(session_id, user_id, id_key.get_secret_value()) if id_key else None
    return SessionStatus(latest=state.latest, finished=state.finished,
                         older_lists=state.older_lists, session_tag=tag)


async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.get("/handovers/{handover_id}/wait", response_model=WaitOutcome,
            responses=_WAIT_RESPONSES,
            summary="Wait until a commit covers a hand-over, at most timeout_s seconds "
                    "(a long poll; the same credentials as the status)")
async def wait_for_handover(
    request: Request, session_id: SessionId, user_id: WatchUser, who: CallerOf,
    handover_id: Annotated[int, Path(ge=0, le=2**63 - 1,
                                     description="The id the hand-over answered with.")],
    timeout_s: Annotated[float, Query(
        gt=0, le=MAX_WAIT_S, description="Seconds to wait at most (30 at most).")
    ] = DEFAULT_WAIT_S,
) -> WaitOutcome | Response:
    deps: ApiDeps = request.app.state.deps
    try:
        slot = deps.waits.admit(who)
    except LongPollRefused as refused:
        return refused.response()
    with slot:  # given back however the wait ends
        return await _wait(request, deps, session_id, user_id, handover_id, timeout_s)


async def _wait(request: Request, deps: ApiDeps, session_id: str, user_id: str,
                handover_id: int, timeout_s: float) -> WaitOutcome | Response:
    waiting = asyncio.ensure_future(deps.poller.wait(user_id, session_id, handover_id,
                                                     timeout_s=timeout_s))
    gone = asyncio.ensure_future(_until_disconnect(request))
    closing = asyncio.ensure_future(deps.streams.closing.wait())
    try:
        await asyncio.wait({waiting, gone, closing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiting, gone, closing):
            task.cancel()
    if gone.done() and not waiting.done():
        return Response(status_code=499)  # nobody reads it; the access log has it
    try:
        covered = waiting.result() if waiting.done() and not waiting.cancelled() else False
        state = await memory_status(deps.handover, session_id, user_id, timeout_s=REDIS_TIMEOUT_S)
    except HandoverUnavailable as exc:
        log.warning("wait: Redis unavailable: %s", type(exc.__cause__).__name__)
        return handover_unavailable()
    return WaitOutcome(covered=covered, latest=state.latest, finished=state.finished,
                       older_lists=state.older_lists)
